"""What a format's own library reads, partrace reads whole: references the library
accepts and producers' wrong counts are kept as data, not refused.  Each trace here is
shaped like a real one that partrace refused while the format's tools read it."""
from __future__ import annotations

import h5py

from tests.conftest import run_cli

# A VampirTrace 5.x CUDA trace in miniature: the host process puts a buffer to its CUDA
# stream (a child process), whose RMAEnd names remote process 0, OTF's "none" (otfprint
# prints "RMAEnd: initiator 10001, remote 0, ...").  Short format, hex numbers.
VT_MASTER = "1:1,10001\n"
VT_DEFS = ('DV1.c.4"salmon"\nDTR3b9aca00\nDP1NM"Process 0"\nDP10001NM"CUDA[0:1]"PT1\n'
           'DPGf4241M1,10001,NM"CUDA_COMM"\nDFG1NM"CUDA"\nDF1G1NM"cudaMemcpy"\nDF2G1NM"kernel"\n')
VT_EVENTS = ("10\n*1\nE1\n10\n*1\nT1P10001Cf4241T2aL400\n18\n*10001\nE2\n20\n*10001\nL2\n"
             "24\n*10001\nM0Cf4241T2a\n30\n*1\nL1\n30\n*1\n")


def write_vt_cuda(folder):
    folder.mkdir()
    (folder / "vt.otf").write_text(VT_MASTER)
    (folder / "vt.0.def").write_text(VT_DEFS)
    (folder / "vt.1.events").write_text(VT_EVENTS)
    return folder / "vt.otf"


def test_otf_rma_end_with_remote_process_0_is_kept(tmp_path):
    from partrace.model import Kind
    trace = write_vt_cuda(tmp_path / "vt")
    out = tmp_path / "o.h5"
    r = run_cli(["merge", str(trace), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr
    with h5py.File(out, "r") as f:
        ev = {k: f["events"][k][:] for k in ("kind", "location", "peer", "comm", "tag", "ticks")}
    end = ev["kind"] == Kind.RMA_END
    assert end.sum() == 1
    # the record's own fields, as written above: M0Cf4241T2a at time 0x24 on process 0x10001
    assert [int(ev[k][end][0]) for k in ("location", "peer", "comm", "tag", "ticks")] == \
        [0x10001, 0, 0xf4241, 0x2a, 0x24]
    put = ev["kind"] == Kind.RMA_PUT
    assert [int(ev[k][put][0]) for k in ("location", "peer", "tag")] == [1, 0x10001, 0x2a]
    for command in (["dump"], ["comm"], ["profile"], ["info"]):
        r = run_cli([*command, str(trace)])
        assert r.returncode == 0, (command, r.stderr)
    r = run_cli(["dump", str(trace)])
    assert "RMA_END" in r.stdout


# An APEX OTF2 archive in miniature: APEX writes the same event count into every location's
# definition (79), whatever the location's event file holds (0, 8,390, 5 records here); the
# library's readers go by the files.
APEX_COUNT = 79
APEX_EVENTS = (0, 8390, 5)     # Enter/Leave pairs: twice as many records


def write_apex_like(folder):
    import otf2
    from otf2.enums import Paradigm, RegionRole
    with otf2.writer.open(str(folder), timer_resolution=1_000_000_000) as trace:
        d = trace.definitions
        node = d.system_tree_node("node")
        group = d.location_group("process 0", system_tree_parent=node)
        region = d.region("task", region_role=RegionRole.FUNCTION, paradigm=Paradigm.USER)
        locations = []
        for t, pairs in enumerate(APEX_EVENTS):
            loc = d.location(f"thread {t}", group=group)
            writer = trace.event_writer_from_location(loc)
            for i in range(pairs):
                writer.enter(100 * i + t, region)
                writer.leave(100 * i + t + 50, region)
            locations.append(loc)
        for loc in locations:
            # what the wheel would write is the true count: APEX's own count instead
            loc._number_of_events_written = APEX_COUNT
    return folder / "traces.otf2"


def library_events(anchor):
    """(time, location, record type) of every event, as the otf2 package reads them; a
    location as partrace names it: its location group's name, then its own."""
    import otf2
    with otf2.reader.open(str(anchor)) as r:
        counts = {loc.name: loc.number_of_events for loc in r.definitions.locations}
        return counts, [(ev.time, f"{loc.group.name}/{loc.name}", type(ev).__name__)
                        for loc, ev in r.events]


def test_otf2_location_event_counts_other_than_the_files_are_read_by_the_files(tmp_path):
    from partrace.model import Kind
    anchor = write_apex_like(tmp_path / "apex")
    counts, want = library_events(anchor)
    assert set(counts.values()) == {APEX_COUNT}
    assert len(want) == 2 * sum(APEX_EVENTS)
    out = tmp_path / "o.h5"
    r = run_cli(["merge", str(anchor), "-o", str(out), "-q"], nranks=2)
    assert r.returncode == 0, r.stderr
    warned = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(warned) == 1 and warned[0].startswith("partrace: warning: "), r.stderr
    assert "3 of 3 location definitions" in warned[0] and "79" in warned[0], warned[0]
    with h5py.File(out, "r") as f:
        names = dict(zip(f["locations"]["id"][:].tolist(),
                         [n.decode() for n in f["locations"]["name"][:]]))
        kind = f["events"]["kind"][:]
        got = list(zip(f["events"]["time"][:].tolist(),
                       [names[x] for x in f["events"]["location"][:].tolist()],
                       ["Enter" if k == Kind.ENTER else "Leave" if k == Kind.LEAVE else str(k)
                        for k in kind.tolist()]))
        # the definitions' counts are kept as written
        assert f["definitions"]["otf2_locations"]["events"][:].tolist() == \
            [APEX_COUNT] * len(APEX_EVENTS)
    assert sorted(got) == sorted(want)


def test_otf_process_listed_but_not_defined_is_read_as_the_library_reads_it(tmp_path):
    """The OTF library reads the records of every process the master file lists, with or
    without a DP record (OTF_Reader_readEvents skips only processes its process list, made
    from the master file, does not hold): ring8 without process 8's DP line reads record by
    record as otfprint printed the whole trace, process 8 named after its token."""
    import shutil
    import warnings

    from tests.formats.test_otf_reader import DATA, _check_against_otfprint
    trace = tmp_path / "trace"
    shutil.copytree(DATA / "ring8" / "trace", trace)
    defs = trace / "ring8.0.def"
    lines = defs.read_bytes().splitlines(keepends=True)
    assert b'DP8NM"Process 7"\n' in lines
    defs.write_bytes(b"".join(x for x in lines if not x.startswith(b"DP8NM")))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        got, _, _ = _check_against_otfprint(trace, DATA / "ring8/reference/ring8.otfprint.txt")
    assert [str(w.message) for w in said] == [
        f"{trace / 'ring8.otf'}: 1 process(es) it lists have no DP record (first: 8); their "
        "records are read, each process named after its token"]
    loc = got.tables["locations"]
    assert dict(zip(loc["id"].tolist(), loc["name"].tolist()))[8] == "Process 0x8"


def test_otf_records_of_a_process_the_master_file_does_not_list_are_skipped(tmp_path):
    """OTF_Reader_readEvents skips the records of a process its process list (the master
    file's) does not hold.  hybrid16 with thread 0:3 (process 30001) left out of the master
    file reads record by record as otfprint printed the whole trace less that thread's."""
    import shutil
    import warnings

    from tests.formats.test_otf_helpers import _LINE, fields
    from tests.formats.test_otf_reader import DATA, MAP, _check_against_otfprint
    trace = tmp_path / "trace"
    shutil.copytree(DATA / "hybrid16" / "trace", trace)
    master = trace / "hybrid16.otf"
    text = master.read_text()
    assert text.startswith("1:1,10001,20001,30001\n")
    master.write_text(text.replace("1:1,10001,20001,30001\n", "1:1,10001,20001\n", 1))
    gone = str(0x30001)
    kept = []
    for line in (DATA / "hybrid16/reference/hybrid16.otfprint.txt").read_text().splitlines():
        m = _LINE.match(line)
        if not (m and fields(m.group(3))[0][MAP[m.group(2)][2]] == gone):
            kept.append(line)
    dump = tmp_path / "otfprint.txt"
    dump.write_text("\n".join(kept) + "\n")
    assert len(kept) < len((DATA / "hybrid16/reference/hybrid16.otfprint.txt").read_text()
                           .splitlines())
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        _check_against_otfprint(trace, dump)
    said = [str(w.message) for w in said]
    assert said and all("records of processes hybrid16.otf does not list (first: 30001) are "
                        "skipped, as the OTF library skips them" in s for s in said), said

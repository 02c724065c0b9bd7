"""The OTF2 output, read back with the official OTF2 library (the ``otf2`` package's reader)
and compared with the HDF5 merge of the same real fixture, record by record: every
Enter/Leave, message, collective and metric of every location, on 1 and 3 ranks, and the
archives byte-identical across rank counts."""
from __future__ import annotations

import struct
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest

import partrace
from partrace.model import Kind
from tests.conftest import ROOT, run_cli
from tests.support.counters import as_number
from tests.formats.test_contract import FIXTURES, _label

# the test's own rule for which tables are samples: none of these columns (rows of records
# of their own, or parts of another table's records)
REFERENCE_COLUMNS = {"kind", "ref_table", "ref_seq", "event_seq", "call", "marker"}

otf2 = pytest.importorskip("otf2")
pytestmark = pytest.mark.mpi        # each case merges on 3 ranks too

CASES = [pytest.param(path, id=f"{fmt}-{_label(path)}") for fmt, paths in FIXTURES.items()
         for path in paths]
# 3 ranks on each format's last fixture (Chrome's tests take the first): byte
# identity across rank counts is the engine's and each sink's, and every fixture's
# records are checked on 1 rank (the suite's time budget)
ON_3_RANKS = {str(paths[-1]) for paths in FIXTURES.values()}
WORLD = "all locations"
UNDEFINED = 0xFFFFFFFF
OP_NAMES = {n for n in dir(otf2.CollectiveOp) if n.isupper()}


def _files(archive):
    """{name: bytes} of an archive: anchor, global definitions, the files of its folder
    (named without the archive's own name)."""
    stem = archive.with_suffix("")
    out = {".otf2": archive.read_bytes(), ".def": stem.with_suffix(".def").read_bytes()}
    for p in sorted(stem.iterdir()):
        out[f"/{p.name}"] = p.read_bytes()
    return out


_MADE: dict = {}     # str(trace) -> what _made gives (this test process's)


def _made(trace, tmp_path_factory):
    """(the HDF5 merge of ``trace``, [its OTF2 merge on 1 rank (and on 3: ON_3_RANKS)]), each
    made once: the records' checks and the conversion from HDF5 read the same merges."""
    if str(trace) not in _MADE:
        _MADE[str(trace)] = _make(trace, tmp_path_factory)
    return _MADE[str(trace)]


@pytest.fixture(scope="module", params=CASES)
def outputs(request, tmp_path_factory):
    return _made(request.param, tmp_path_factory)


def _make(trace, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("otf2")
    h5 = tmp / "m.h5"
    r = run_cli(["merge", str(trace), "-o", str(h5), "-q"])
    assert r.returncode == 0, r.stderr
    outs = []
    for n in (None, 3) if str(trace) in ON_3_RANKS else (None,):
        (tmp / f"n{n}").mkdir()
        out = tmp / f"n{n}" / "m.otf2"      # the same name: OTF2 files may hold it
        r = run_cli(["merge", str(trace), "-o", str(out), "-q"], nranks=n, timeout=600)
        assert r.returncode == 0, r.stderr
        outs.append(out)
    return h5, outs


def test_same_bytes_on_1_and_3_ranks(outputs):
    h5, (one, *three) = outputs
    a = _files(one)
    tables = partrace.open(h5).definitions.tables
    # OTF2 input: its own locations (its other locations rows stand for location groups)
    n = len(tables["otf2_locations"] if "otf2_locations" in tables else tables["locations"])
    with otf2.reader.open(str(one)) as r:
        kinds = [str(loc.type).split(".")[-1] for loc in r.definitions.locations]
    assert kinds.count("CPU_THREAD") == n and set(kinds) <= {"CPU_THREAD", "METRIC"}
    # the anchor, the global definitions, and an event and a local definition file per
    # location (and metric location)
    assert len(a) == 2 + 2 * len(kinds)
    if not three:
        pytest.skip("3 ranks: each format's last fixture only (ON_3_RANKS)")
    b = _files(three[0])
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], name


# -- what the HDF5 merge says the archive must hold ------------------------------------------

def _value(v):
    """A metric value as compared: a float by its bits (NaN equals NaN), an integer as is."""
    if isinstance(v, (float, np.floating)):
        return ("f", struct.pack("<d", float(v)))
    return ("i", int(v))


def _expected(h5):
    """Per location: the records the events table gives (in order), and per sample table
    the Metric records of its rows (in order); and the sample tables' metric names."""
    t = partrace.open(h5)
    defs = t.definitions.tables
    regions = {int(i): str(n) for i, n in zip(defs["regions"]["id"], defs["regions"]["name"])}
    locs = set(int(i) for i in defs["locations"]["id"])
    counters = {int(i): (str(n), str(t) if "value_type" in defs["counters"] else "uint64")
                for i, n, t in zip(defs["counters"]["id"], defs["counters"]["name"],
                                   defs["counters"]["value_type"] if "value_type" in
                                   defs["counters"] else defs["counters"]["name"])} \
        if "counters" in defs else {}
    comms = {}
    if "communicators" in defs and "communicator_members" in defs:
        mem = defs["communicator_members"]
        for i, n in zip(defs["communicators"]["id"], defs["communicators"]["name"]):
            members = [int(x) for c, x in zip(mem["comm"], mem["location"]) if int(c) == int(i)]
            if members and set(members) <= locs:
                comms[int(i)] = (str(n), members)
    colls = {int(i): str(n).upper().removeprefix("MPI_")
             for i, n in zip(defs["collectives"]["id"], defs["collectives"]["name"])} \
        if "collectives" in defs else {}
    ev = t.columns("events")
    n = len(ev["time"])
    get = lambda c: ev[c] if c in ev else np.zeros(n, np.int64)  # noqa: E731
    events, samples = defaultdict(list), defaultdict(list)
    open_regions = defaultdict(list)    # per location (profile's rule: a LEAVE closes the
    for i in range(n):                  # innermost open region; one of no region names it)
        loc, tm, k = int(ev["location"][i]), int(ev["time"][i]), int(ev["kind"][i])
        comm = int(get("comm")[i])
        cname, members = comms.get(comm, (WORLD, None))
        region = regions.get(int(get("region")[i]))
        if k == Kind.ENTER:
            open_regions[loc].append(region)
        elif k == Kind.LEAVE:
            top = open_regions[loc].pop() if open_regions[loc] else None
            region = region if region is not None else top
        if k in (Kind.ENTER, Kind.LEAVE) and region is not None:
            events[loc].append(("Enter" if k == Kind.ENTER else "Leave", tm, region))
        elif k in (Kind.SEND, Kind.RECV) and int(get("peer")[i]) in locs:
            peer = int(get("peer")[i])
            if members is not None and peer not in members:
                cname = WORLD
            events[loc].append(("MpiSend" if k == Kind.SEND else "MpiRecv", tm, cname, peer,
                                int(get("tag")[i]) & 0xFFFFFFFF, int(get("size")[i])))
        elif k in (Kind.COLLECTIVE, Kind.COLLECTIVE_BEGIN, Kind.COLLECTIVE_END):
            if k != Kind.COLLECTIVE_END:
                events[loc].append(("Begin", tm))
            if k != Kind.COLLECTIVE_BEGIN:
                root = int(get("root")[i])
                root = root if root in locs and (members is None or root in members) else None
                op = colls.get(int(get("collop")[i]))
                events[loc].append(("End", tm, op if op in OP_NAMES else None, cname, root,
                                    int(get("size")[i]), int(get("received")[i])))
        elif k == Kind.COUNTER and int(get("counter")[i]) in counters:
            name, typ = counters[int(get("counter")[i])]
            samples[(loc, name)].append((tm, _value(as_number(int(get("value")[i]), typ))))
    names = set()
    for name in t.tables:
        if name == "events":
            continue
        tab = t.columns(name)
        if set(tab) & REFERENCE_COLUMNS:
            continue
        cols = [c for c in tab if c not in ("time", "location", "seq", "offset", "sample_type",
                                            "sample_size", "stats_type", "model_size", "flag")
                and not c.endswith("_id") and tab[c].dtype.kind in "iuf" and tab[c].ndim == 1]
        if not cols:
            continue
        names |= {f"{name}.{c}" for c in cols}
        for i in range(len(tab["time"])):
            for c in cols:
                samples[(int(tab["location"][i]), f"{name}.{c}")].append(
                    (int(tab["time"][i]), _value(tab[c][i])))
    return events, samples, names


def _metric_locations(defs) -> dict[int, int]:
    """Each metric location's location: their ids follow the largest location id, in
    location id order."""
    threads = sorted(loc._ref for loc in defs.locations if str(loc.type).endswith("CPU_THREAD"))
    return {loc._ref: threads[loc._ref - threads[-1] - 1] for loc in defs.locations
            if str(loc.type).endswith("METRIC")}


def _read(archive):
    """Per location: the records from events but Metric records (in file order); per
    (location, metric member) the (time, value) of each Metric record's member, from the
    location and its metric location; each location's record count as defined.  Checks
    Score-P's shape: a metric location holds Metric records only; a Metric record of the
    first class on a thread stands before a record of its time (Pipit takes its values as
    that record's)."""
    events, samples, counts = defaultdict(list), defaultdict(list), {}
    records = defaultdict(int)
    with otf2.reader.open(str(archive)) as r:
        for loc in r.definitions.locations:
            counts[loc._ref] = loc.number_of_events
            records[loc._ref] = 0
        first = min((c._ref for c in r.definitions.metric_classes), default=None)
        thread_of = _metric_locations(r.definitions)
        pending = {}
        for loc, ev in r.events:
            lid = loc._ref
            records[lid] += 1
            kind = type(ev).__name__
            on_metric_location = str(loc.type).endswith("METRIC")
            assert kind == "Metric" or not on_metric_location, (lid, kind)
            if lid in pending:
                assert kind != "Metric" and ev.time == pending.pop(lid), lid
            if kind == "Metric" and not on_metric_location:
                assert ev.metric._ref == first, lid
                pending[lid] = ev.time
            if on_metric_location:
                lid = thread_of[lid]
            if kind in ("Enter", "Leave"):
                events[lid].append((kind, ev.time, ev.region.name))
            elif kind in ("MpiSend", "MpiRecv"):
                peer = ev.communicator.group.members[ev.receiver if kind == "MpiSend" else ev.sender]
                events[lid].append((kind, ev.time, ev.communicator.name, peer._ref, ev.msg_tag,
                                    ev.msg_length))
            elif kind == "MpiCollectiveBegin":
                events[lid].append(("Begin", ev.time))
            elif kind == "MpiCollectiveEnd":
                root = None if ev.root == UNDEFINED else ev.communicator.group.members[ev.root]._ref
                events[lid].append(("End", ev.time, str(ev.collective_op).split(".")[-1], ev.communicator.name,
                                    root, ev.size_sent, ev.size_received))
            elif kind == "Metric":
                assert len(ev.values) == len(ev.metric.members)
                for m, v in zip(ev.metric.members, ev.values):
                    samples[(lid, m.name)].append((ev.time, _value(v)))
            else:
                raise AssertionError(f"unexpected record {kind} on location {lid}")
        assert not pending, pending
    assert records == counts
    return events, samples, counts


def test_every_record_equals_the_hdf5_merge(outputs, capfd):
    h5, archives = outputs
    if partrace.open(h5).definitions.format == "otf2":
        pytest.skip("OTF2 input is written back as it is, not mapped from the common columns "
                    "(formats/otf2/replay.py): tests/formats/test_otf2_input.py's round trip "
                    "tests check it")
    want_events, want_samples, _ = _expected(h5)
    for archive in archives:
        events, samples, counts = _read(archive)
        # the library reports what it finds wrong on stderr (a missing file, a bad chunk)
        assert "[OTF2]" not in capfd.readouterr().err
        assert set(events) == set(want_events)
        for loc, want in want_events.items():
            got = events[loc]
            assert len(got) == len(want), loc
            # an operation the OTF2 enum has no name for is written by its kind; not compared
            got = [g[:2] + (None,) + g[3:] if g[0] == "End" and w[2] is None else g
                   for g, w in zip(got, want)]
            assert got == want, loc
        # every sample of every member (on the location or its metric location: the reader
        # merges them by time, equal times in either order)
        assert samples.keys() == want_samples.keys()
        for key, want in want_samples.items():
            assert sorted(samples[key]) == sorted(want), key
    assert sum(len(v) for v in want_events.values()) + sum(len(v) for v in want_samples.values())


def test_definitions(outputs):
    """Locations keep their ids and names under their parent's location group (or their own),
    regions their names, MPI regions the MPI paradigm."""
    h5, (one, *_) = outputs
    if partrace.open(h5).definitions.format == "otf2":
        pytest.skip("OTF2 input is written back as it is, not mapped from the common columns "
                    "(formats/otf2/replay.py): tests/formats/test_otf2_input.py's round trip "
                    "tests check it")
    defs = partrace.open(h5).definitions.tables
    locs = defs["locations"]
    name = {int(i): str(n) for i, n in zip(locs["id"], locs["name"])}
    parent = {int(i): int(p) for i, p in zip(locs["id"], locs["parent"])}
    regs = defs["regions"]
    groups = next((defs[t] for t in ("region_groups", "function_groups") if t in defs), None)
    mpi_groups = {int(i) for i, n in zip(groups["id"], groups["name"])
                  if str(n).strip().lower() == "mpi"} if groups is not None else set()
    with otf2.reader.open(str(one)) as r:
        d = r.definitions
        got = {loc._ref: (loc.name, loc.group.name) for loc in d.locations}
        want = {i: (n, name[parent[i]] if parent[i] in name else n) for i, n in name.items()}
        # a location's metric location (where it has Metric records off the thread): in its
        # location group, named after it
        thread_of = _metric_locations(d)
        assert {thread_of[i]: v for i, v in got.items() if i in thread_of} == \
            {i: (f"{n} metrics", g) for i, (n, g) in want.items() if i in thread_of.values()}
        assert {i: v for i, v in got.items() if i not in thread_of} == want
        # a group under the node of its location's parent, else under the root
        group_of = {i: parent[i] if parent[i] in name else i for i in name}
        for loc in d.locations:
            if loc._ref in thread_of:
                continue
            g = group_of[loc._ref]
            node = loc.group.system_tree_parent
            up = parent[g]
            assert node.name == (name[up] if up in name else "partrace trace"), loc.name
            if up not in name:
                assert node.parent is None
        regions = [(x.name, str(x.paradigm).split(".")[-1]) for x in d.regions]
    want = [(str(n), "MPI" if int(g) in mpi_groups else "USER")
            for _, n, g in sorted(zip(np.asarray(regs["id"]).tolist(), regs["name"], regs["group"]))]
    assert [(n, p if p == "MPI" else "USER") for n, p in regions] == want


# -- the CLI --------------------------------------------------------------------------------

@pytest.mark.parametrize("trace", [FIXTURES["otf"][1], FIXTURES["dumpi"][1], FIXTURES["ovni"][1],
                                   FIXTURES["ross"][2]], ids=["otf", "dumpi", "ovni", "ross"])
def test_convert_from_hdf5_gives_the_same_bytes(trace, tmp_path, tmp_path_factory):
    """partrace's HDF5 merge (the fifth input) converted to OTF2 equals the direct merge."""
    h5, (direct, *_) = _made(trace, tmp_path_factory)      # the merges the records' tests read
    # the same archive name in another folder (OTF2 files may hold the name)
    converted = tmp_path / "c" / direct.name
    converted.parent.mkdir()
    r = run_cli(["convert", str(h5), "-o", str(converted), "-q"])
    assert r.returncode == 0, r.stderr
    assert _files(converted) == _files(direct)


def test_budgeted_merge_on_3_ranks_equals_one_window(tmp_path):
    """A generated DUMPI trace under a 1 MiB budget: many windows on 3 ranks, same files."""
    import re
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_dumpi.py"), str(tmp_path),
                        "--ranks", "4", "--calls", "3000"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    trace = tmp_path / "synth.meta"
    outs, windows = [], []
    for n, extra in ((None, []), (3, ["--memory", "1M"])):
        (tmp_path / f"n{n}").mkdir()
        out = tmp_path / f"n{n}" / "o.otf2"
        r = run_cli(["merge", str(trace), "-o", str(out), *extra], nranks=n, timeout=600)
        assert r.returncode == 0, r.stderr
        windows.append(int(re.search(r"(\d+) window\(s\)", r.stderr).group(1)))
        outs.append(_files(out))
    assert windows[0] == 1 and windows[1] > 1
    assert outs[0] == outs[1]
    with otf2.reader.open(str(tmp_path / "nNone" / "o.otf2")) as rd:
        assert sum(1 for _ in rd.events) > 10000


def test_to_otf2_and_existing_outputs(tmp_path):
    trace = FIXTURES["ross"][1]
    out = tmp_path / "x.otf2"
    r = run_cli(["merge", str(trace), "-o", str(out), "--to", "otf2", "-q"])
    assert r.returncode == 0, r.stderr
    with otf2.reader.open(str(out)) as rd:
        assert sum(1 for _ in rd.events) > 1000
    r = run_cli(["merge", str(trace), "-o", str(out), "-q"])
    assert r.returncode == 2 and "exists" in r.stderr
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "y.bin"), "--to", "otf2", "-q"])
    assert r.returncode == 2 and "NAME.otf2" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x", "x.def", "x.otf2"]
    # --overwrite replaces the whole archive (its folder too) with another trace's
    before = _files(out)
    other = FIXTURES["dumpi"][0]
    r = run_cli(["merge", str(other), "-o", str(out), "-q", "--overwrite"])
    assert r.returncode == 0, r.stderr
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    r = run_cli(["merge", str(other), "-o", str(fresh / "x.otf2"), "-q"])
    assert r.returncode == 0, r.stderr
    assert _files(out) == _files(fresh / "x.otf2") != before
    # a folder of the archive's name holding anything else is never replaced
    (tmp_path / "x" / "notes.txt").write_text("mine")
    r = run_cli(["merge", str(other), "-o", str(out), "-q", "--overwrite"])
    assert r.returncode == 2 and "not a partrace output" in r.stderr, r.stderr
    assert (tmp_path / "x" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("nranks", [None, 3])
def test_damaged_input_leaves_no_output(tmp_path, nranks):
    """A truncated DUMPI file: exit 2 naming it, and nothing left beside the output name."""
    from tests.support.damage import truncated_dumpi_leaves_nothing
    truncated_dumpi_leaves_nothing(tmp_path, FIXTURES["dumpi"][0], "x.otf2", nranks)


def test_unwritable_folder_exits_2_with_nothing_written(tmp_path):
    r = run_cli(["merge", str(FIXTURES["dumpi"][0]), "-o", str(tmp_path / "no" / "x.otf2"), "-q"])
    assert r.returncode == 2 and "does not exist" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []
    out_dir = tmp_path / "ro"
    out_dir.mkdir()
    out_dir.chmod(0o555)
    try:
        probe = out_dir / "probe"
        try:
            probe.mkdir()
        except PermissionError:
            pass
        else:
            probe.rmdir()
            pytest.skip("running as a user whom permissions do not stop (root)")
        r = run_cli(["merge", str(FIXTURES["dumpi"][0]), "-o", str(out_dir / "x.otf2"), "-q"])
        assert r.returncode == 2, r.stderr
        assert list(out_dir.iterdir()) == []
    finally:
        out_dir.chmod(0o755)


def test_missing_otf2_package_is_one_clear_line(tmp_path):
    """Without the otf2 package the sink says what to install (exit 2), nothing written."""
    code = ("import sys; sys.modules['_otf2'] = None; sys.argv[0] = 'partrace'; "
            "from partrace.cli import entry; entry()")
    out = tmp_path / "x.otf2"
    r = subprocess.run([sys.executable, "-c", code, "merge", str(FIXTURES["dumpi"][0]), "-o",
                        str(out), "-q"], capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install" in lines[0] and "otf2" in lines[0], r.stderr
    assert list(tmp_path.iterdir()) == []


# -- windows: the bytes do not depend on how the merge is cut ---------------------------------

def _cut(tables, windows: int) -> dict:
    """Per table, the row bounds of ``windows`` windows cut at the same (time, location,
    seq) keys in every table (as the engine cuts them for a destination-mode sink)."""
    cols = {c: np.concatenate([np.asarray(t[c], dtype=np.int64) for t in tables.values()])
            for c in ("time", "location", "seq")}
    order = np.lexsort((cols["seq"], cols["location"], cols["time"]))
    picks = order[(np.arange(1, windows) * len(order)) // windows]
    bounds = {}
    for name, t in tables.items():
        tm, loc, seq = (np.asarray(t[c], dtype=np.int64) for c in ("time", "location", "seq"))
        b = [0]
        for p in picks:
            ct, cl, cs = cols["time"][p], cols["location"][p], cols["seq"][p]
            before = (tm < ct) | ((tm == ct) & ((loc < cl) | ((loc == cl) & (seq < cs))))
            b.append(int(before.sum()))
        bounds[name] = b + [len(t)]
    return bounds


def _write_windows(defs, schema, tables, out, windows: int, memory=None) -> dict:
    from partrace.engine.mpi import serial
    from partrace.output.otf2_sink import OTF2Sink
    comm, sink = serial(), OTF2Sink(out)
    sink.memory = memory
    out.parent.mkdir()
    sink.prepare(comm, defs, schema)
    cuts = _cut(tables, windows)
    for w in range(windows):
        sink.write(comm, {name: t.rows(cuts[name][w], cuts[name][w + 1])
                          for name, t in tables.items()})
    sink.commit(comm)
    return _files(out)


@pytest.mark.parametrize("trace", ["otf/hybrid16/trace/hybrid16.otf",
                                   "ross/pi-np1-seq-allmodes/stats"])
def test_sink_output_is_the_same_for_any_windows(trace, tmp_path, monkeypatch):
    """Every table cut at the same keys into 1, 3 or 17 windows: the same files; with 17,
    the records are read back at commit in 4 KiB pieces: groups of locations, and every
    location whose records exceed a piece window by window in slices of rows."""
    from partrace.output import otf2_sink
    from partrace.engine.mpi import serial
    from partrace.engine.pipeline import run
    from partrace.output.memory import MemorySink
    from tests.conftest import DATA
    sink = MemorySink()
    run(serial(), DATA / trace, sink)
    want = _write_windows(sink.defs, sink.schema, sink.tables, tmp_path / "one" / "x.otf2", 1)
    assert sum(len(v) for k, v in want.items() if k.endswith(".evt")) > 10000
    # some location's event files (its own and its metric location's) alone exceed a piece
    # (its spilled records are larger still)
    with otf2.reader.open(str(tmp_path / "one" / "x.otf2")) as r:
        thread_of = _metric_locations(r.definitions)
    size = defaultdict(int)
    for k, v in want.items():
        if k.endswith(".evt"):
            lid = int(k[1:-4])
            size[thread_of.get(lid, lid)] += len(v)
    assert max(size.values()) > 4096
    for windows in (3, 17):
        if windows == 17:
            monkeypatch.setattr(otf2_sink, "MIN_PIECE", 4096)
        got = _write_windows(sink.defs, sink.schema, sink.tables,
                             tmp_path / f"w{windows}" / "x.otf2", windows,
                             memory=1 << 16 if windows == 17 else None)
        assert got == want


def _profile_table(text: str) -> list[str]:
    """A profile's table (what it says of unmatched leaves left out)."""
    return [ln for ln in text.splitlines() if not ln.startswith("not counted")]


def test_leave_of_no_region_and_names_not_utf8(tmp_path):
    """OTF's Leave of no function ("leave the innermost open region", as VampirTrace writes
    it) is a Leave of its location's innermost open region, also 11 regions deep; one with
    none open is not written, and one warning says how many; names in KOI8-R and Latin-1
    are written with their bytes as \\xNN (one warning).  The same files on 1 and 3 ranks,
    and partrace's profile of the archive is the trace's."""
    from tests.support import otf_leave
    trace = otf_leave.write(tmp_path / "trace")
    outs = []
    for n in (None, 3):
        out = tmp_path / f"n{n}" / "x.otf2"
        out.parent.mkdir()
        r = run_cli(["merge", str(trace), "-o", str(out), "-q"], nranks=n)
        assert r.returncode == 0, r.stderr
        warned = [ln for ln in r.stderr.splitlines() if "warning" in ln]
        assert len(warned) == 2, r.stderr
        assert f"{otf_leave.LOST} LEAVE event(s) naming no region" in warned[1]
        assert f"{otf_leave.NOT_UTF8} name(s) not valid UTF-8" in warned[0]
        outs.append(_files(out))
    assert outs[0] == outs[1]
    out = tmp_path / "nNone" / "x.otf2"
    events, samples, _ = _read(out)
    assert not samples
    assert events == {p: [(k, t, otf_leave.written(nm)) for k, t, nm in recs]
                      for p, recs in otf_leave.RECORDS.items()}
    with otf2.reader.open(str(out)) as rd:
        names = {loc._ref: loc.name for loc in rd.definitions.locations}
    assert names[2] == otf_leave.written(otf_leave.THREAD)
    src, back = (run_cli(["profile", str(p)]) for p in (trace, out))
    assert src.returncode == back.returncode == 0, src.stderr + back.stderr
    assert _profile_table(back.stdout) == _profile_table(src.stdout)
    assert f"{otf_leave.LOST} leave(s) with no open region" in src.stdout


def test_leave_of_no_region_for_any_windows(tmp_path):
    """The open regions of each location carry over from window to window (the trace cut
    into 1, 3 or 9 windows: the same files)."""
    from partrace.engine.mpi import serial
    from partrace.engine.pipeline import run
    from partrace.output.memory import MemorySink
    from tests.support import otf_leave
    sink = MemorySink()
    run(serial(), otf_leave.write(tmp_path / "trace"), sink)
    said = (f"{otf_leave.NOT_UTF8} name(s) not valid UTF-8", f"{otf_leave.LOST} LEAVE event")
    files = {}
    for windows in (1, 3, 9):
        with pytest.warns(UserWarning) as warned:
            files[windows] = _write_windows(sink.defs, sink.schema, sink.tables,
                                            tmp_path / f"w{windows}" / "x.otf2", windows)
        assert [any(s in str(w.message) for w in warned) for s in said] == [True, True]
    assert files[3] == files[1] and files[9] == files[1]
    with otf2.reader.open(str(tmp_path / "w1" / "x.otf2")) as rd:
        leaves = sum(type(ev).__name__ == "Leave" for _, ev in rd.events)
    assert leaves == sum(k == "Leave" for recs in otf_leave.RECORDS.values() for k, _, _ in recs)


def test_close_innermost_kernel():
    """The kernel's rule on rows an OTF reader cannot give: an ENTER of no defined region is
    open too (its LEAVE of no region stays unwritten); a LEAVE naming a defined region keeps
    it and closes the innermost; a full stack stops the walk at its row."""
    from partrace.formats.otf2 import events as E
    E_, L_ = int(Kind.ENTER), int(Kind.LEAVE)
    # location 0: ENTER 5, ENTER (undefined), LEAVE (none), LEAVE (none) -> 5, LEAVE (none)
    # location 1: ENTER 2, LEAVE 7 (defined: kept), LEAVE (none): nothing open
    loc = np.array([0, 0, 1, 0, 1, 0, 1, 0], np.int64)
    kind = np.array([E_, E_, E_, L_, L_, L_, L_, L_], np.int64)
    region = np.array([5, 0, 2, 0, 7, 0, 0, 0], np.int64)
    known = np.array([1, 0, 1, 0, 1, 0, 0, 0], bool)
    op = np.where(known, np.where(kind == E_, E.ENTER, E.LEAVE), E.NONE).astype(np.uint8)
    ref = np.where(known, region, 0)
    depth, stack = np.zeros(2, np.int64), np.zeros((2, 4), np.int32)
    done, lost = E.close_innermost(loc, kind, region, known, op, ref, depth, stack, 0)
    assert (done, lost) == (len(loc), 2)
    assert op.tolist() == [E.ENTER, E.NONE, E.ENTER, E.NONE, E.LEAVE, E.LEAVE, E.NONE, E.NONE]
    assert ref[[4, 5]].tolist() == [7, 5] and depth.tolist() == [0, 0]
    # a stack of 1: the second ENTER of a location stops the walk there, state kept
    depth, stack = np.zeros(2, np.int64), np.zeros((2, 1), np.int32)
    done, lost = E.close_innermost(loc, kind, region, known, op, ref, depth, stack, 0)
    assert (done, lost) == (1, 0) and depth.tolist() == [1, 0] and stack[0, 0] == 5


def test_many_locations_on_one_rank_under_a_small_budget(tmp_path):
    """One event writer is open at a time (the library holds a 256 KiB chunk per open
    writer): 26 locations on one rank fit an 8M budget, and give the bytes of 2 ranks."""
    trace = FIXTURES["ross"][0]
    outs = []
    for n in (None, 2):
        out = tmp_path / f"n{n}" / "x.otf2"
        out.parent.mkdir()
        r = run_cli(["merge", str(trace), "-o", str(out), "-q", "--memory", "8M"], nranks=n)
        assert r.returncode == 0, r.stderr
        outs.append(_files(out))
    assert outs[0] == outs[1]
    with otf2.reader.open(str(tmp_path / "nNone" / "x.otf2")) as rd:
        # 26 locations and their metric locations (the samples)
        kinds = [str(loc.type).split(".")[-1] for loc in rd.definitions.locations]
        assert kinds.count("CPU_THREAD") == 26 and len(kinds) <= 52
        counted = sum(loc.number_of_events for loc in rd.definitions.locations)
        assert sum(1 for _ in rd.events) == counted > 300

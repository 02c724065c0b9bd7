"""Location names that tell locations apart: where the format gives a location a group,
the name users see carries it and ``locations/parent`` points at a row for the group.

Score-P names every rank's thread "Master thread"; the rank is its location group
("MPI Rank 17"), which Vampir and Pipit show.  The archive here has that shape, written
with the otf2 package (the official library's Python API)."""
from __future__ import annotations

import json

import h5py
import pytest

from tests.conftest import run_cli

RANKS = 4


def write_scorep_like(folder):
    import otf2
    from otf2.enums import LocationGroupType, LocationType, Paradigm, RegionRole
    with otf2.writer.open(str(folder), timer_resolution=1_000_000_000) as trace:
        d = trace.definitions
        node = d.system_tree_node("machine")
        region = d.region("main", region_role=RegionRole.FUNCTION, paradigm=Paradigm.USER)
        for r in range(RANKS):
            group = d.location_group(f"MPI Rank {r}", system_tree_parent=node,
                                     location_group_type=LocationGroupType.PROCESS)
            loc = d.location("Master thread", type=LocationType.CPU_THREAD, group=group)
            w = trace.event_writer_from_location(loc)
            w.enter(1000 + r, region)
            w.leave(2000 + r, region)
    return folder / "traces.otf2"


def library_names(anchor) -> list[tuple[str, str]]:
    """(group name, location name) of each location, in ref order, as the library reads them."""
    import otf2
    with otf2.reader.open(str(anchor)) as r:
        return [(loc.group.name, loc.name) for loc in r.definitions.locations]


@pytest.fixture(scope="module")
def scorep(tmp_path_factory):
    return write_scorep_like(tmp_path_factory.mktemp("scorep") / "run")


def test_otf2_location_names_carry_their_location_group(scorep, tmp_path):
    want = [f"{group}/{name}" for group, name in library_names(scorep)]
    assert len(set(name for _, name in library_names(scorep))) == 1     # all "Master thread"
    out = tmp_path / "o.h5"
    r = run_cli(["merge", str(scorep), "-o", str(out), "-q"], nranks=2)
    assert r.returncode == 0, r.stderr
    with h5py.File(out, "r") as f:
        loc = {k: f["locations"][k][:] for k in ("id", "name", "parent")}
        used = sorted(set(f["events"]["location"][:].tolist()))
    name = dict(zip(loc["id"].tolist(), [n.decode() for n in loc["name"]]))
    parent = dict(zip(loc["id"].tolist(), loc["parent"].tolist()))
    assert [name[i] for i in used] == want
    assert [name[parent[i]] for i in used] == [g for g, _ in library_names(scorep)]
    assert len(set(name.values())) == len(name)


def test_otf2_group_names_reach_dump_chrome_and_perfetto(scorep, tmp_path):
    want = [f"{group}/{name}" for group, name in library_names(scorep)]
    r = run_cli(["dump", str(scorep)])
    assert r.returncode == 0, r.stderr
    for n in want:
        assert n in r.stdout, n
    out = tmp_path / "o.json"
    r = run_cli(["merge", str(scorep), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr
    meta = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("ph") == "M"]
    threads = {e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    procs = {e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert set(want) <= threads and {g for g, _ in library_names(scorep)} <= procs
    pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    out = tmp_path / "o.pftrace"
    r = run_cli(["merge", str(scorep), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr
    trace = pb.Trace()
    trace.ParseFromString(out.read_bytes())
    tracks = {p.track_descriptor.name for p in trace.packet if p.HasField("track_descriptor")}
    assert set(want) <= tracks


# VampirTrace names each process's CUDA stream alike ("CUDA[0:1]"), a child (PT) of its
# host process: two MPI processes, one stream each.  Short format, hex tokens.
VT_MASTER = "1:1,10001\n2:2,10002\n"
VT_DEFS = ('DV1.c.4"salmon"\nDTR3b9aca00\nDP1NM"Process 0"\nDP2NM"Process 1"\n'
           'DP10001NM"CUDA[0:1]"PT1\nDP10002NM"CUDA[0:1]"PT2\nDFG1NM"CUDA"\nDF1G1NM"kernel"\n')
VT_STREAMS = {1: "10\n*1\nE1\n11\n*10001\nE1\n20\n*10001\nL1\n21\n*1\nL1\n21\n*1\n",
              2: "12\n*2\nE1\n13\n*10002\nE1\n22\n*10002\nL1\n23\n*2\nL1\n23\n*2\n"}


def test_otf_child_process_names_carry_their_parent(tmp_path):
    folder = tmp_path / "vt"
    folder.mkdir()
    (folder / "vt.otf").write_text(VT_MASTER)
    (folder / "vt.0.def").write_text(VT_DEFS)
    for s, text in VT_STREAMS.items():
        (folder / f"vt.{s}.events").write_text(text)
    out = tmp_path / "o.h5"
    r = run_cli(["merge", str(folder / "vt.otf"), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr
    with h5py.File(out, "r") as f:
        loc = {k: f["locations"][k][:].tolist() for k in ("id", "name", "parent")}
    # the DP records above: token, name, parent
    assert list(zip(loc["id"], [n.decode() for n in loc["name"]], loc["parent"])) == [
        (1, "Process 0", 0), (2, "Process 1", 0),
        (0x10001, "Process 0/CUDA[0:1]", 1), (0x10002, "Process 1/CUDA[0:1]", 2)]
    # the OTF output keeps the source's own definition records
    back = tmp_path / "back.otf"
    r = run_cli(["merge", str(folder / "vt.otf"), "-o", str(back), "-q"])
    assert r.returncode == 0, r.stderr
    assert 'DP10001NM"CUDA[0:1]"PT1' in (tmp_path / "back.0.def").read_text()


def test_names_alike_get_their_parents_then_their_id():
    from partrace.formats.names import told_apart, under_parents
    # unique names stay as the source wrote them
    assert told_apart([1, 2, 3], ["P", "Q", "t"], [0, 0, 1]) == ["P", "Q", "t"]
    assert told_apart([1, 2, 3, 4], ["P", "Q", "t", "t"], [0, 0, 1, 2]) == \
        ["P", "Q", "P/t", "Q/t"]
    assert told_apart([1, 2, 3], ["P", "t", "t"], [0, 1, 1], "process") == \
        ["P", "P/t (process 2)", "P/t (process 3)"]
    # a name that already starts with its parent's (ovni's loom/pid/tid) is not prefixed again
    assert under_parents([1, 2], ["loom", "loom/7"], [0, 1]) == ["loom", "loom/7"]

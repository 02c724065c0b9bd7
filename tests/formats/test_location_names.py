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

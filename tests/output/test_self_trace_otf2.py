"""The OTF2 self-trace (output/self_trace_otf2.py), read back with the otf2 package's own
reader: a location per rank, a region per phase kind and MPI call, Enter / Leave nested,
each phase's account as attributes of its Enter."""
from __future__ import annotations

import pytest

from partrace.engine import accounts
from tests.conftest import run_cli
from tests.engine.test_accounts import FakeComm

otf2 = pytest.importorskip("otf2")


def _report(rank: int) -> dict:
    account = accounts.begin(rank, keep_slices=True)
    accounts.phase("plan")
    FakeComm(rank, 2).bcast(b"plan")
    for w in range(2):
        accounts.phase("exchange", w)
        FakeComm(rank, 2).alltoallv([5, 5], [5, 5])
        accounts.phase_in_window("merge")
        accounts.phase("write", w)
    accounts.phase("commit")
    accounts.end()
    report = account.report()
    report["host"] = "node-a" if rank == 0 else "node-b"
    return report


def test_otf2_self_trace_has_a_location_per_rank_with_its_phases_and_calls(tmp_path):
    from partrace.output.self_trace import write_self_trace
    reports = [_report(0), _report(1)]
    path = tmp_path / "run.otf2"
    write_self_trace(path, reports)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "run.def", "run.otf2"]
    with otf2.reader.open(str(path)) as trace:
        locations = sorted(f"{loc.group.name}/{loc.name}"
                           for loc in trace.definitions.locations)
        assert locations == ["rank 0/main thread", "rank 1/main thread"]
        hosts = {g.name: g.system_tree_parent.name for g in trace.definitions.location_groups}
        assert hosts == {"rank 0": "node-a", "rank 1": "node-b"}
        stacks = {name: [] for name in locations}
        seen = {name: [] for name in locations}
        for loc, event in trace.events:
            where = f"{loc.group.name}/{loc.name}"
            stack = stacks[where]
            if isinstance(event, otf2.events.Enter):
                stack.append(event.region.name)
                seen[where].append((len(stack), event.region.name, {
                    a.name: v for a, v in (event.attributes or {}).items()}))
            else:
                assert isinstance(event, otf2.events.Leave) and stack.pop() == event.region.name
    for rank, name in enumerate(locations):
        assert stacks[name] == []
        phases = [(region, args) for depth, region, args in seen[name] if depth == 1]
        assert [region for region, _ in phases] == ["start-up", "plan", "exchange", "merge",
                                                    "write", "exchange", "merge", "write",
                                                    "commit"]
        assert dict(phases)["plan"] == reports[rank]["phases"]["plan"]
        calls = [region for depth, region, _ in seen[name] if depth == 2]
        assert calls == ["bcast", "alltoallv", "alltoallv"]


def test_an_existing_otf2_archive_is_never_written_over(synth_trace, tmp_path):
    (tmp_path / "run").mkdir()          # a folder of the user's, named as the archive's
    r = run_cli(["merge", str(synth_trace()), "--format", "synth", "-o", str(tmp_path / "o.h5"),
                 "--self-trace", str(tmp_path / "run.otf2")])
    assert r.returncode == 2 and "exists (an OTF2 archive is never written over)" in r.stderr
    assert not (tmp_path / "o.h5").exists() and list((tmp_path / "run").iterdir()) == []

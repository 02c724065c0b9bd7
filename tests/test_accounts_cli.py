"""Every rank's account of a merge (engine/accounts.py) as the user gets it: the closing
summary line and ``--stats FILE.json``, on 1 and 3 ranks under mpiexec, in several
windows.  What is checked is the structure of the accounts, never a timing: every rank
and phase present, totals that are the sums of their parts, bytes sent = bytes received."""
from __future__ import annotations

import json
import re

import pytest

from partrace.engine.accounts import FIELDS, WINDOW_PHASES
from tests.conftest import run_cli

pytestmark = pytest.mark.mpi

PHASES = ["start-up", "plan", "decode", "cuts", "exchange", "merge", "write", "commit"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A merge on 1 and on 3 ranks with --stats, in several windows (a 1M budget), and
    --self-trace: Chrome JSON on 1 rank, Perfetto on 3.  Kernels run as Python (as on any
    input this small), so no rank makes one: no ``kernels`` phase."""
    tmp = tmp_path_factory.mktemp("accounts")
    trace = tmp / "synth.json"
    trace.write_text('{"synth": {"locations": 7, "events": 2000, "units": 5, "seed": 3}}')
    out = {}
    for n in (1, 3):
        stats = tmp / f"stats-{n}.json"
        trace_of_run = tmp / ("self.json" if n == 1 else "self.pftrace")
        r = run_cli(["merge", str(trace), "--format", "synth", "-o", str(tmp / f"o{n}.h5"),
                     "--memory", "1M", "--progress", "none", "--stats", str(stats),
                     "--self-trace", str(trace_of_run)], nranks=n,
                    env={"PARTRACE_JIT": "python"})
        assert r.returncode == 0, r.stderr
        out[n] = r, json.loads(stats.read_text())
    out["pftrace"], out["chrome"] = tmp / "self.pftrace", tmp / "self.json"
    return out


def _windows(stderr: str) -> int:
    return int(re.search(r"(\d+) window\(s\)", stderr)[1])


@pytest.mark.parametrize("n", [1, 3])
def test_stats_hold_every_rank_every_phase_and_every_window(runs, n):
    r, doc = runs[n]
    windows = _windows(r.stderr)
    assert windows > 1
    assert doc["ranks_count"] == n and [rank["rank"] for rank in doc["ranks"]] == list(range(n))
    for rank in doc["ranks"]:
        assert list(rank["phases"]) == PHASES
        assert rank["busy_s"] > 0 and rank["peak_rss_bytes"] > 0 and rank["files_opened"] > 0
        for field in FIELDS:
            parts = [p[field] for p in rank["phases"].values()]
            whole = max(parts) if field == "peak_rss_bytes" else sum(parts)
            assert rank[field] == pytest.approx(whole), field
        assert [w["window"] for w in rank["windows"]] == list(range(windows))
        for kind in WINDOW_PHASES:
            assert all(kind in w["phases"] for w in rank["windows"])
            for field in ("wall_s", "busy_s", "sent_bytes", "recv_bytes", "mpi_calls"):
                assert rank["phases"][kind][field] == pytest.approx(
                    sum(w["phases"][kind][field] for w in rank["windows"])), (kind, field)


@pytest.mark.parametrize("n", [1, 3])
def test_bytes_and_messages_sent_are_those_received(runs, n):
    _, doc = runs[n]
    ranks = doc["ranks"]
    for phase in PHASES:
        for what in ("bytes", "messages"):
            sent = sum(r["phases"][phase][f"sent_{what}"] for r in ranks)
            assert sent == sum(r["phases"][phase][f"recv_{what}"] for r in ranks), (phase, what)
    if n == 1:      # one rank talks to nobody
        assert all(r["sent_bytes"] == r["recv_bytes"] == 0 for r in ranks)
    else:           # the rows of each window went between the ranks, in MPI calls
        for r in ranks:
            assert r["phases"]["exchange"]["sent_bytes"] > 0
            assert r["phases"]["exchange"]["recv_bytes"] > 0
            assert r["mpi_calls"] > 0 and r["mpi_wait_s"] > 0


@pytest.mark.parametrize("n", [1, 3])
def test_summary_line_gives_min_mean_max_and_the_slowest_rank(runs, n):
    r, doc = runs[n]
    line = [t for t in r.stderr.splitlines() if t.startswith("partrace: per rank:")]
    assert len(line) == 1, r.stderr
    got = re.search(r"busy ([\d.]+) / ([\d.]+) / ([\d.]+) s, waiting in MPI "
                    r"([\d.]+) / ([\d.]+) / ([\d.]+) s .*slowest rank (\d+)", line[0])
    busy = doc["summary"]["busy_s"]
    assert [float(x) for x in got.groups()[:3]] == pytest.approx(
        [busy["min"], busy["mean"], busy["max"]], abs=0.006)
    assert busy["min"] <= busy["mean"] <= busy["max"]
    slowest = int(got[7])
    assert slowest == doc["summary"]["slowest_rank"]
    working = [r["wall_s"] - r["mpi_wait_s"] for r in doc["ranks"]]
    assert working[slowest] == max(working)
    assert 0 < doc["summary"]["busy_balance"] <= 1


@pytest.mark.parametrize("n", [1, 3])
def test_the_summary_and_stats_say_which_hdf5_write_path_ran(runs, n):
    """This venv's h5py has no MPI: one rank writes the file, or the serial join on rank 0
    (what rank 0 indexed and carried is counted, and the bytes each rank wrote into the
    file after its windows and filled in from its part add up to the chunks rank 0
    indexed; tests/output/test_hdf5_collective.py: the other)."""
    r, doc = runs[n]
    said = doc["summary"]["output"]
    line = [t for t in r.stderr.splitlines() if t.startswith("partrace: per rank:")][0]
    assert line.endswith(f"; {said['summary']}")
    if n == 1:
        assert said["path"] == "one rank"
    else:
        assert said["path"] == "serial join"
        assert said["placed_chunks"] + said["through_rank0_bytes"] > 0     # joined somehow
        assert sum(rank["output"]["filled_bytes"] + rank["output"]["direct_bytes"]
                   for rank in doc["ranks"]) == said["placed_bytes"]
        assert doc["ranks"][0]["output"]["filled_bytes"] == 0
        assert doc["ranks"][0]["output"]["direct_bytes"] == 0
        assert re.search(r"HDF5 serial join: rank 0 indexed [\d,]+ chunks \([\d,.]+ (MB|bytes)\) "
                         r"that the other ranks wrote, and carried [\d,.]+ (MB|bytes) of "
                         r"chunks ranks share", line), line


def test_quiet_runs_keep_the_stats_but_print_no_summary(synth_trace, tmp_path):
    stats = tmp_path / "s.json"
    r = run_cli(["merge", str(synth_trace()), "--format", "synth", "-o", str(tmp_path / "o.h5"),
                 "-q", "--stats", str(stats)])
    assert r.returncode == 0 and r.stderr == ""
    assert [rank["rank"] for rank in json.loads(stats.read_text())["ranks"]] == [0]


@pytest.mark.parametrize("option, name, why", [
    ("--stats", "s.txt", "expected a name ending in .json"),
    ("--stats", "nowhere/s.json", "no such folder"),
    ("--self-trace", "t.otf", "expected a name ending in .pftrace or .json or .otf2")])
def test_a_bad_report_path_is_refused_before_the_run(synth_trace, tmp_path, option, name, why):
    r = run_cli(["merge", str(synth_trace()), "--format", "synth", "-o", str(tmp_path / "o.h5"),
                 option, str(tmp_path / name)])
    assert r.returncode == 2 and why in r.stderr
    assert not (tmp_path / "o.h5").exists()


def test_a_report_that_cannot_be_written_is_one_error_line_and_the_output_stays(
        synth_trace, tmp_path):
    (tmp_path / "s.json").mkdir()       # a folder where the stats file should go
    out = tmp_path / "o.h5"
    r = run_cli(["merge", str(synth_trace()), "--format", "synth", "-o", str(out),
                 "--progress", "none", "--stats", str(tmp_path / "s.json")], nranks=2)
    assert r.returncode == 2
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and str(tmp_path / "s.json") in errors[0], r.stderr
    assert out.exists() and r.stderr.startswith("partrace: error: ")
    assert not (tmp_path / "s.json.partial").exists()


def _phase(name: str) -> str:
    """A slice's phase: 'exchange 3' is window 3's exchange."""
    return name.split(" ")[0]


def test_self_trace_in_perfetto_has_a_track_per_rank_with_its_phases_and_mpi_calls(runs):
    pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    begin, end = (pb.TrackEvent.Type.Value(t) for t in ("TYPE_SLICE_BEGIN", "TYPE_SLICE_END"))
    assert pb.TrackEvent.DESCRIPTOR.fields_by_name["name"].number == 23
    assert [pb.DebugAnnotation.DESCRIPTOR.fields_by_name[f].number
            for f in ("name", "uint_value", "double_value")] == [10, 3, 5]
    trace = pb.Trace()
    trace.ParseFromString(runs["pftrace"].read_bytes())
    tracks = {p.track_descriptor.uuid: p.track_descriptor.name for p in trace.packet
              if p.HasField("track_descriptor")}
    assert sorted(tracks.values()) == ["rank 0", "rank 1", "rank 2"]
    windows = _windows(runs[3][0].stderr)
    ranks = runs[3][1]["ranks"]
    for uuid, name in tracks.items():
        events = [p for p in trace.packet
                  if p.HasField("track_event") and p.track_event.track_uuid == uuid]
        assert {p.trusted_packet_sequence_id for p in events} == {uuid}
        stack, phases, calls = [], [], set()
        for p in events:        # every slice ends, inside the one around it
            if p.track_event.type == begin:
                (calls.add if stack else phases.append)(p.track_event.name)
                stack.append(p.timestamp)
            else:
                assert p.track_event.type == end and stack and stack.pop() <= p.timestamp
        assert stack == []
        assert list(dict.fromkeys(map(_phase, phases))) == PHASES, name
        assert {f"write {w}" for w in range(windows)} <= set(phases)
        assert {"allgather", "alltoallv", "wait_for_all"} <= calls, name
        assert not calls & set(PHASES)
        plan = next(p.track_event for p in events if p.track_event.name == "plan")
        args = {a.name: getattr(a, a.WhichOneof("value")) for a in plan.debug_annotations}
        assert args == ranks[int(name.split()[1])]["phases"]["plan"]    # the phase's account


def test_self_trace_in_chrome_json_has_a_thread_per_rank_with_its_phases(runs):
    doc = json.loads(runs["chrome"].read_text())
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {0: "rank 0"}
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert all(e["tid"] == 0 and e["dur"] >= 0 for e in slices)
    phases = [e["name"] for e in slices if e["cat"] == "phase"]
    assert list(dict.fromkeys(map(_phase, phases))) == PHASES
    decode = next(e for e in slices if e["name"] == "decode")
    assert decode["args"] == runs[1][1]["ranks"][0]["phases"]["decode"]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in slices if e["cat"] == "phase"]
    calls = [e for e in slices if e["cat"] == "mpi"]    # mpiexec -n 1: MPI, with one rank
    assert calls and all(any(a <= e["ts"] and e["ts"] + e["dur"] <= b + 1e-3 for a, b in spans)
                         for e in calls)


def test_compiled_kernels_are_made_in_a_phase_of_their_own(synth_trace, tmp_path):
    """Kernels compiled (PARTRACE_JIT=numba): loading them (or compiling, in a cold cache) is
    the ``kernels`` phase on every rank, cut out of the phases that first called them,
    which resume after it; the phases' slices still follow each other end to end over the
    rank's whole run.  PARTRACE_WARM=1: the check of the kernels' cache imports numba in
    the start-up (synth has no samples to warm on: nothing is compiled there), and that
    import is the first ``kernels`` slice, within the start-up."""
    stats, chrome = tmp_path / "s.json", tmp_path / "self.json"
    r = run_cli(["merge", str(synth_trace()), "--format", "synth", "-o", str(tmp_path / "o.h5"),
                 "--memory", "1M", "-q", "--stats", str(stats), "--self-trace", str(chrome)],
                nranks=2, env={"PARTRACE_JIT": "numba", "PARTRACE_WARM": "1"})
    assert r.returncode == 0, r.stderr
    ranks = json.loads(stats.read_text())["ranks"]
    slices = [e for e in json.loads(chrome.read_text())["traceEvents"]
              if e["ph"] == "X" and e["cat"] == "phase"]
    for rank in ranks:
        assert set(rank["phases"]) == {*PHASES, "kernels"}
        assert rank["phases"]["kernels"]["busy_s"] > 0
        for field in FIELDS:
            parts = [p[field] for p in rank["phases"].values()]
            whole = max(parts) if field == "peak_rss_bytes" else sum(parts)
            assert rank[field] == pytest.approx(whole), field
        assert all(set(w["phases"]) <= set(WINDOW_PHASES) for w in rank["windows"])
        mine = sorted((e for e in slices if e["tid"] == rank["rank"]), key=lambda e: e["ts"])
        assert all(a["ts"] + a["dur"] == pytest.approx(b["ts"], abs=0.01)
                   for a, b in zip(mine, mine[1:]))      # end to end (microseconds)
        assert sum(e["dur"] for e in mine) / 1e6 == pytest.approx(rank["wall_s"])
        names = [e["name"] for e in mine]
        started = names[:names.index("plan")]     # the import (rank 0: and its check) cut in
        assert started[0] == started[-1] == "start-up" and "kernels" in started
        assert set(started) == {"start-up", "kernels"}
        cut = [i for i, name in enumerate(names) if name == "kernels"]
        assert cut and all(0 < i < len(names) - 1 for i in cut)
        for i in cut:       # the phase before goes on after (through consecutive makes)
            before = next(n for n in reversed(names[:i]) if n != "kernels")
            after = next(n for n in names[i:] if n != "kernels")
            assert before == after, (before, after)
        kernels = [e for e in mine if e["name"] == "kernels"]
        assert sum(e["args"]["busy_s"] for e in kernels) == pytest.approx(
            rank["phases"]["kernels"]["busy_s"])


def test_the_account_is_kept_per_call_not_per_row(tmp_path):
    """Ten times the events, the same units and one window: the same MPI calls and
    messages in every phase on every rank; only the bytes of the rows grow.  Kernels
    compiled in both (by size the smaller would run them as Python: no kernels phase)."""
    docs = []
    for events in (1000, 10000):
        trace = tmp_path / f"synth-{events}.json"
        trace.write_text('{"synth": {"locations": 7, "events": %d, "units": 5, "seed": 3}}'
                         % events)
        stats = tmp_path / f"s{events}.json"
        r = run_cli(["merge", str(trace), "--format", "synth", "-o", str(tmp_path / f"{events}.h5"),
                     "-q", "--stats", str(stats)], nranks=3, env={"PARTRACE_JIT": "numba"})
        assert r.returncode == 0, r.stderr
        docs.append(json.loads(stats.read_text()))
    small, large = ([{name: (p["mpi_calls"], p["sent_messages"]) for name, p in r["phases"].items()}
                     for r in doc["ranks"]] for doc in docs)
    assert small == large
    rows_sent = [sum(r["phases"]["exchange"]["sent_bytes"] for r in doc["ranks"]) for doc in docs]
    assert rows_sent[1] > 5 * rows_sent[0]

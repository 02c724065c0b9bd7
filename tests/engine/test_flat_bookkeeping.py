"""What a rank does per window stays O(runs + P): a run is searched only at the cut keys inside
its key range, cut samples grow with the pieces and meet on rank 0 alone, and the output is
the same at 1, 2, 3 and 8 ranks with many windows and spilled runs."""
import numpy as np
import pytest

from partrace.engine.mpi import serial
from partrace.engine.order import sort_by_key
from partrace.engine.runs import Run, SpilledRun, sampled_rows
from partrace.engine.windows import (AFTER_ALL, BEFORE_ALL, _cuts_from, _spans_between,
                                     _weighted_samples, choose_cuts, samples_per_rank)
from partrace.model import Table
from tests.conftest import run_cli
from tests.support.compare import assert_same_content


def _runs(tmp_path, rng, count=12):
    """Sorted runs of random keys over overlapping and disjoint time ranges, every third
    one spilled."""
    runs = []
    for k in range(count):
        n = int(rng.integers(0, 400))
        lo = int(rng.integers(0, 2000))
        t = Table({"time": rng.integers(lo, lo + int(rng.integers(1, 800)), n),
                   "location": rng.integers(1, 4, n), "seq": rng.integers(0, 5, n)})
        t = sort_by_key(t)
        if k % 3 == 2 and n:
            folder = tmp_path / f"run{k}"
            folder.mkdir()
            runs.append(SpilledRun(folder, t))
        else:
            runs.append(Run(dict(t.columns)))
    return runs


def _brute(runs, bounds):
    def at(run, b):
        return 0 if b is BEFORE_ALL else run.n if b is AFTER_ALL else run.lower_bound(b)
    pos = [[at(run, b) for b in bounds] for run in runs]
    return [[(run, p[i], p[i + 1]) for run, p in zip(runs, pos) if p[i + 1] > p[i]]
            for i in range(len(bounds) - 1)]


def test_spans_found_from_key_ranges_equal_every_run_searched(tmp_path):
    rng = np.random.default_rng(5)
    runs = _runs(tmp_path, rng)
    for trial in range(60):
        keys = sorted((int(rng.integers(-50, 3000)), int(rng.integers(0, 5)),
                       int(rng.integers(0, 6))) for _ in range(int(rng.integers(0, 9))))
        if trial % 4 == 0 and keys:
            keys.insert(0, keys[0])                         # a repeated cut key
        first = [BEFORE_ALL] if trial % 2 else []
        last = [AFTER_ALL] if trial % 3 else []
        bounds = first + keys + last
        if len(bounds) < 2:
            continue
        got = _spans_between(runs, bounds)
        want = _brute(runs, bounds)
        assert [[(id(r), a, b) for r, a, b in d] for d in got] == \
            [[(id(r), a, b) for r, a, b in d] for d in want], trial


def test_a_run_outside_the_bounds_is_not_searched(tmp_path):
    rng = np.random.default_rng(1)
    runs = _runs(tmp_path, rng)
    searched = []
    for run in runs:
        real = run.lower_bound
        run_searches = []
        searched.append(run_searches)
        try:
            run.lower_bound = lambda key, real=real, log=run_searches: log.append(key) or real(key)
        except AttributeError:      # a Run has slots: the spilled runs are counted
            pass
    bounds = [BEFORE_ALL, (10**9, 0, 0), AFTER_ALL]    # one cut after every key
    spans = _spans_between(runs, bounds)
    assert sum(b - a for _, a, b in spans[0]) == sum(r.n for r in runs)
    assert spans[1] == [] and all(not s for s in searched)


def test_cut_samples_grow_with_the_pieces_and_balance_them(tmp_path):
    assert samples_per_rank(1, 1) == 4096 and samples_per_rank(8, 8) == 4096 // 8
    assert samples_per_rank(64 * 8, 8) == 64 * 256     # 64 windows: 256 samples a piece
    # what rank 0 receives grows with the pieces, not the ranks: one window on 256 ranks
    assert samples_per_rank(256, 256) * 256 == 256 * 256 < 4096 * 256
    assert samples_per_rank(3 * 256, 256) * 256 == 3 * 256 * 256
    rng = np.random.default_rng(2)
    t = sort_by_key(Table({"time": rng.integers(0, 10**6, 200_000),
                           "location": rng.integers(1, 9, 200_000),
                           "seq": np.arange(200_000)}))
    runs = [Run(dict(t.columns))]
    pieces = 400
    cuts = choose_cuts(serial(), runs, pieces)
    assert len(cuts) == pieces - 1 and cuts == sorted(cuts)
    sizes = np.diff([0] + [runs[0].lower_bound(c) for c in cuts] + [runs[0].n])
    assert sizes.max() < 1.2 * len(t) / pieces and sizes.min() > 0.8 * len(t) / pieces


def test_cuts_equal_the_sorted_samples_rule():
    """Cut j is the first sample whose cumulative weight reaches j/pieces of the total."""
    rng = np.random.default_rng(3)
    for trial in range(30):
        n = int(rng.integers(1, 300))
        everyone = []
        for _ in range(int(rng.integers(1, 4))):
            m = int(rng.integers(0, n + 1))
            everyone.append(tuple(rng.integers(0, 50, m) for _ in range(3))
                            + (rng.integers(1, 9, m),))
        pieces = int(rng.integers(2, 20))
        samples = sorted(((int(t), int(l), int(s)), int(w)) for part in everyone
                         for t, l, s, w in zip(*part))
        if not samples:
            assert _cuts_from(everyone, pieces) == []
            continue
        total, acc, want, j = sum(w for _, w in samples), 0, [], 1
        for key, w in samples:
            acc += w
            while j < pieces and acc >= total * j / pieces:
                want.append(key)
                j += 1
        while len(want) < pieces - 1:
            want.append(want[-1])
        assert _cuts_from(everyone, pieces) == want, trial


def _lockstep_runs(count: int, n: int) -> list[Run]:
    """Runs that keep step: every run's k-th row at time 100 k (plus its own small offset),
    as the ranks of a bulk-synchronous code or the threads of one loop."""
    runs = []
    for r in range(count):
        t = np.arange(n, dtype=np.int64) * 100 + r
        runs.append(Run(dict(sort_by_key(Table({"time": t, "location": np.full(n, r + 1),
                                                "seq": np.arange(n)})).columns)))
    return runs


@pytest.mark.parametrize("pieces", [8, 10, 32])
def test_runs_that_keep_step_are_cut_into_even_pieces(pieces):
    """Each run sampled at rows of its own phase, a sample standing for the rows around it:
    at the same rows of every run, each standing for those after it, these pieces differed
    from the mean by up to a quarter."""
    runs = _lockstep_runs(64, 40_000)
    cuts = choose_cuts(serial(), runs, pieces)
    ends = [sum(run.lower_bound(c) for run in runs) for c in cuts]
    sizes = np.diff([0] + ends + [sum(run.n for run in runs)])
    assert np.abs(sizes / sizes.mean() - 1).max() < 0.01


def test_a_run_s_samples_stand_for_all_its_rows_once(tmp_path):
    rng = np.random.default_rng(8)
    for n, stride, phase in ((1, 5, 0.9), (7, 3, 0.0), (7, 3, 0.99), (100, 7, 0.5),
                             (100, 200, 0.3), (12_345, 4096, 0.61)):
        idx, weights = sampled_rows(n, stride, phase)
        assert weights.sum() == n and (weights > 0).all() and len(idx) == len(weights)
        assert idx[0] == min(int(phase * min(stride, n)), n - 1)
        assert (np.diff(idx) == stride).all() and idx[-1] < n
    t = sort_by_key(Table({"time": rng.integers(0, 10**6, 50_000),
                           "location": rng.integers(1, 9, 50_000), "seq": np.arange(50_000)}))
    spilled = SpilledRun(tmp_path, t)
    for stride, phase in ((4096, 0.0), (3 * 4096, 0.7), (40_000, 0.2), (10**6, 0.5)):
        *keys, weights = spilled.sample_arrays(stride, phase)
        assert weights.sum() == 50_000 and (weights > 0).all()
        # the keys are index keys: rows that are multiples of the index's stride
        rows = [spilled.lower_bound((int(a), int(b), int(c))) for a, b, c in zip(*keys)]
        assert all(r % SpilledRun.STRIDE == 0 for r in rows)


def test_weighted_samples_of_no_rows():
    assert all(len(a) == 0 for a in _weighted_samples([], 10))


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".h5", ".otf"])
def test_same_output_at_1_2_3_and_8_ranks_with_many_windows(synth_trace, tmp_path, suffix):
    trace = synth_trace(locations=9, events=6000, units=5)
    outputs = []
    for n in (None, 2, 3, 8):
        out = tmp_path / f"n{n}" / f"out{suffix}"
        out.parent.mkdir()
        r = run_cli(["merge", str(trace), "-o", str(out), "--format", "synth", "--memory", "1M",
                     "--tmpdir", str(tmp_path)], nranks=n, timeout=600)
        assert r.returncode == 0, r.stderr
        assert int(r.stderr.split(" window(s)")[0].rsplit(" ", 1)[1]) > 1, r.stderr
        outputs.append(out)
    for out in outputs[1:]:
        if suffix == ".h5":
            assert_same_content(outputs[0], out)
        else:
            want = {p.name: p.read_bytes() for p in outputs[0].parent.iterdir()}
            assert {p.name: p.read_bytes() for p in out.parent.iterdir()} == want


NOTICE_TREE = r"""
import sys, time
from partrace.engine import mpi, stop
comm = mpi.world()
sent = []
real = comm._send_notice
comm._send_notice = lambda dest: sent.append(dest) or real(dest)
if comm.rank == int(sys.argv[1]):
    stop.signum = 15            # as the handler notes a SIGTERM
deadline = time.monotonic() + 60
while stop.signum is None and not comm._heard and time.monotonic() < deadline:
    comm._exchange_notices()    # what poll() does between chunks
    time.sleep(0.001)
heard = bool(comm._heard) or stop.signum is not None
try:
    comm.check()
    said = "no stop"
except mpi.Terminated as exc:
    said = f"stopped {exc.rank} {heard} {len(sent)}"
with open(f"{sys.argv[2]}/rank{comm.rank}", "w") as fh:    # one file a rank: lines of
    fh.write(said)                                          # several ranks would interleave
"""


@pytest.mark.mpi
@pytest.mark.parametrize("victim", [0, 4])
def test_a_stop_notice_reaches_every_rank_through_a_tree(tmp_path, victim):
    """One rank signalled: every rank hears of it before the check, at most 3 messages a
    rank (not P - 1), and all stop together naming the signalled rank."""
    import subprocess
    import sys

    from tests.conftest import ROOT, mpiexec
    script = tmp_path / "tree.py"
    script.write_text(NOTICE_TREE)
    r = subprocess.run([mpiexec(), "-n", "7", sys.executable, str(script), str(victim),
                        str(tmp_path)],
                       capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    for rank in range(7):
        line = (tmp_path / f"rank{rank}").read_text()
        what, who, heard, sent = line.split()
        assert (what, who, heard) == ("stopped", str(victim), "True"), line
        assert int(sent) <= 3, line

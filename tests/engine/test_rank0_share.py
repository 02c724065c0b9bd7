"""Rank 0's share of a window's rows: the window cut again for it (windows.py
``window_cuts``), the share from what the last window cost rank 0 (rank0_share.py), and
the output the same whatever the shares."""
from __future__ import annotations

import json

import numpy as np
import pytest

from partrace.engine import rank0_share
from partrace.engine.mpi import serial
from partrace.engine.order import sort_by_key
from partrace.engine.runs import Run
from partrace.engine.windows import (KEPT_PER_PIECE, choose_cuts_kept, samples_per_rank,
                                     window_cuts)
from partrace.model import Table
from tests.conftest import run_cli
from tests.support.compare import assert_same_content


def _one_run(n: int = 120_000, seed: int = 4) -> Run:
    rng = np.random.default_rng(seed)
    t = sort_by_key(Table({"time": rng.integers(0, 10**6, n),
                           "location": rng.integers(1, 9, n), "seq": np.arange(n)}))
    return Run(dict(t.columns))


def _pieces(run: Run, cuts) -> np.ndarray:
    return np.diff([0] + [run.lower_bound(c) for c in cuts] + [run.n])


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5, 1.0])
def test_a_window_cut_again_gives_rank_0_its_share_within_the_window(share):
    run, size, windows = _one_run(), 4, 5
    cuts, kept = choose_cuts_kept(serial(), [run], windows * size)
    even = run.n / (windows * size)
    for w in range(windows):
        inner = window_cuts(kept, w, size, windows, share)
        again = list(cuts)
        again[w * size:(w + 1) * size - 1] = inner
        assert again == sorted(again)
        sizes = _pieces(run, again)
        # the window keeps its rows; within it rank 0 has its share, the others the rest
        window = slice(w * size, (w + 1) * size)
        assert sizes[window].sum() == _pieces(run, cuts)[window].sum()
        # within the kept samples' spacing at each end (a 64th of a piece) and the
        # samples' own (a 256th)
        assert abs(sizes[w * size] - share * even) < 0.05 * even
        rest = (size - share) / (size - 1) * even
        assert np.all(np.abs(sizes[w * size + 1:(w + 1) * size] - rest) < 0.05 * even)


def test_rank_0_keeps_fewer_samples_than_it_cut_with():
    run, size, windows = _one_run(n=400_000, seed=5), 4, 3
    pieces = windows * size
    cuts, kept = choose_cuts_kept(serial(), [run], pieces)
    sampled = samples_per_rank(pieces, 1)
    t, loc, seq, _, at = kept
    assert len(t) <= KEPT_PER_PIECE * pieces + len(cuts) + 1 < sampled
    # the first cuts are among the kept samples, where ``at`` says
    assert list(zip(t[at].tolist(), loc[at].tolist(), seq[at].tolist())) == cuts


def test_an_even_share_cuts_the_window_as_the_first_cuts_did():
    run, size, windows = _one_run(seed=9), 3, 4
    cuts, kept = choose_cuts_kept(serial(), [run], windows * size)
    for w in range(windows):
        inner = window_cuts(kept, w, size, windows, 1.0)
        first = cuts[w * size:(w + 1) * size - 1]
        # the same cuts, up to the kept samples' spacing (a 64th of a piece) at each end
        spacing = run.n / (windows * size * KEPT_PER_PIECE)
        assert np.all(np.abs(_pieces(run, inner) - _pieces(run, first)) <= 2 * spacing + 1)


class _Ranks:
    """Every rank's own CPU over each window, told to a share as the ranks' ``spent``."""

    def __init__(self, size: int, monkeypatch, share):
        self.cpu = 0.0
        self.share = share
        monkeypatch.setattr(rank0_share, "_own_cpu", lambda: self.cpu)

    def window(self, seconds: list[float]) -> float:
        """A window in which the ranks spent ``seconds``."""
        self.share.begin()
        self.cpu += seconds[0]
        assert self.share.spent() == pytest.approx(seconds[0])
        return self.share.after(seconds)


def test_rank_0_s_share_gives_back_its_work_for_all(monkeypatch):
    share = rank0_share.Rank0Share(size=5)
    ranks = _Ranks(5, monkeypatch, share)
    # before rank 0 has measured a window like the others', a guess: each other rank takes
    # 3% of an even piece more (1 - 4 x 0.03)
    assert share.share == pytest.approx(1 - 4 * rank0_share.GIVE) == pytest.approx(0.88)
    # the first window is not like the others (rank 0 makes the file, places nothing):
    # whatever it cost, the second window keeps the guess
    assert ranks.window([2.5, 2.0, 2.0, 2.0, 2.0]) == pytest.approx(0.88)
    # 1 s placing chunks and its 0.88 piece's rows (2 s an even piece; the others' 1.03
    # pieces 2.06 s): 1 - 1 x 4 / (5 x 2) = 0.6
    assert ranks.window([2.76, 2.06, 2.06, 2.06, 2.06]) == pytest.approx(0.6)
    # at 0.6 its rows 1.2 s and the placing 1 s, the others' 1.1 pieces 2.2 s: 1 s beyond
    # its rows again, the same share
    assert ranks.window([2.2] * 5) == pytest.approx(0.6)
    assert share.shares == [pytest.approx(0.88), pytest.approx(0.88), pytest.approx(0.6)]


def test_with_many_ranks_the_guess_gives_all_of_rank_0_s_rows_away():
    assert rank0_share.Rank0Share(size=2).share == pytest.approx(0.97)
    assert rank0_share.Rank0Share(size=32).share == pytest.approx(0.07)
    assert rank0_share.Rank0Share(size=35).share == 0.0
    assert rank0_share.Rank0Share(size=256).share == 0.0
    assert rank0_share.Rank0Share(size=256, fixed=0.5).share == 0.5


def test_a_slower_rank_0_gets_fewer_rows_whatever_makes_it_slow(monkeypatch):
    """Work the sink does not report (no serial seconds) still shows in rank 0's CPU."""
    share = rank0_share.Rank0Share(size=3)
    ranks = _Ranks(3, monkeypatch, share)
    assert ranks.window([1.0, 1.0, 1.0]) == pytest.approx(0.94)
    # others 1 s for an even piece (1.03 s for their 1.03 pieces); rank 0 0.5 s beyond
    # its 0.94 piece: 1 - 0.5 x 2 / (3 x 1) = 2/3
    assert ranks.window([1.44, 1.03, 1.03]) == pytest.approx(2 / 3)
    # far beyond (over 2.5 s a window in the mean of two): no rows at all
    assert ranks.window([12.0, 7 / 6, 7 / 6]) == 0.0


def test_rank_0_s_share_follows_the_mean_window_not_the_last(monkeypatch):
    """A window that went worse on rank 0 is not paid back in the next: its extra is the
    mean of the windows', where the others waited for it already."""
    share = rank0_share.Rank0Share(size=2)
    ranks = _Ranks(2, monkeypatch, share)
    ranks.window([9.0, 2.0])                        # the first: left out
    # at the guess of 0.97, 0.2 s faster than its rows (2 s an even piece; the other's
    # 1.03 piece 2.06 s): 1 + 0.2 x 1 / (2 x 2) = 1.05
    assert ranks.window([1.74, 2.06]) == pytest.approx(1.05)
    # at 1.05: 2.1 s of rows on rank 0 against 1.9 s of the other's 0.95 piece (even: 2 s);
    # then 0.6 s slower than its rows in one window: the mean of -0.2 and +0.6, 0.2 s
    # beyond: 1 - 0.2 / 4 = 0.95
    assert ranks.window([2.7, 1.9]) == pytest.approx(0.95)
    assert ranks.window([0.0, 40.0]) <= rank0_share.MOST


def test_a_fixed_share_outside_0_to_1_is_refused(monkeypatch):
    monkeypatch.setenv(rank0_share.ENV, "1.5")
    with pytest.raises(Exception, match="PARTRACE_RANK0_SHARE"):
        rank0_share.forced()
    monkeypatch.setenv(rank0_share.ENV, "0.25")
    assert rank0_share.forced() == 0.25


@pytest.mark.mpi
@pytest.mark.parametrize("share", ["0", "0.3"])
def test_same_output_whatever_rank_0_s_share(synth_trace, tmp_path, share):
    """Rank 0 with no rows, or fewer, in every window: the same file as one rank's, and
    each window's share in the account."""
    trace = synth_trace(locations=9, events=6000, units=5)
    outs = []
    for n, env in ((None, {}), (3, {rank0_share.ENV: share})):
        out = tmp_path / f"n{n}" / "out.h5"
        out.parent.mkdir()
        stats = tmp_path / f"n{n}.json"
        r = run_cli(["merge", str(trace), "-o", str(out), "--format", "synth", "--memory", "1M",
                     "--tmpdir", str(tmp_path), "--stats", str(stats)], nranks=n, timeout=600,
                    env=env)
        assert r.returncode == 0, r.stderr
        outs.append(out)
    assert_same_content(outs[0], outs[1])
    windows = json.loads(stats.read_text())["ranks"][0]["windows"]
    assert len(windows) > 2
    assert [w["rank0_share"] for w in windows] == [float(share)] * len(windows)


@pytest.mark.mpi
def test_a_bad_fixed_share_stops_every_rank(synth_trace, tmp_path):
    trace = synth_trace(locations=4, events=2000, units=3)
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "out.h5"), "--format", "synth",
                 "--memory", "1M", "--tmpdir", str(tmp_path)], nranks=2, timeout=300,
                env={rank0_share.ENV: "half"})
    assert r.returncode == 2
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "PARTRACE_RANK0_SHARE" in lines[0], r.stderr
    assert not (tmp_path / "out.h5").exists()

"""Locations dealt to ranks by the bytes of their rows, not by their count.

A destination-mode sink (OTF's streams, OTF2's, Perfetto's and Chrome's locations) has
each location written by one rank, in contiguous blocks of the id order.  Dealt by count,
a rank given the busy threads of an ovni trace wrote twice what the other did; the engine
now weighs every location's rows from samples of each rank's runs and the sinks deal by
those weights."""
from types import SimpleNamespace

import numpy as np

from partrace.engine.mpi import serial
from partrace.engine.order import sort_by_key
from partrace.dealing import contiguous_owners
from partrace.engine.runs import Run, SpilledRun
from partrace.engine.windows import location_bytes
from partrace.model import Table
from partrace.output.owned import LocationOwnedSink, weights_of


def _loads(owner, weights, ranks):
    return np.bincount(owner, weights=weights, minlength=ranks)


def _best_max(w, ranks: int) -> int:
    """The smallest possible heaviest rank of a contiguous split (dynamic programming)."""
    n = len(w)
    pre = np.concatenate([[0], np.cumsum(w)])
    best = np.full((ranks + 1, n + 1), np.inf)
    best[0][0] = 0
    for r in range(1, ranks + 1):
        for j in range(n + 1):
            best[r][j] = min(max(best[r - 1][i], pre[j] - pre[i]) for i in range(j + 1))
    return int(best[ranks][n])


def test_contiguous_owners_balance_by_weight_in_order():
    assert contiguous_owners([], 3).tolist() == []
    assert contiguous_owners([5, 5, 5, 5], 2).tolist() == [0, 0, 1, 1]
    assert contiguous_owners([0, 0, 0], 1).tolist() == [0, 0, 0]
    # near-equal weights, two a rank: never three on one (the middle-byte rule's slip)
    assert np.bincount(contiguous_owners([100, 101, 99, 100, 102, 98], 3)).tolist() == [2, 2, 2]
    rng = np.random.default_rng(4)
    for ranks in (2, 3, 8, 33):
        w = rng.integers(1, 1000, 500)
        w[:40] *= 20        # the heavy ones together at the start (ovni's busy threads)
        owner = contiguous_owners(w, ranks)
        assert np.all(np.diff(owner) >= 0) and owner[-1] == ranks - 1
        loads = _loads(owner, w, ranks)
        assert loads.max() <= w.sum() / ranks + w.max(), (ranks, loads)
        by_count = (np.arange(len(w)) * ranks) // len(w)
        assert loads.max() < _loads(by_count, w, ranks).max()
    for trial in range(60):     # the heaviest rank is the lightest any contiguous split gives
        w = rng.integers(1, 50, int(rng.integers(1, 12)))
        ranks = int(rng.integers(1, 6))
        owner = contiguous_owners(w, ranks)
        assert np.all(np.diff(owner) >= 0) and owner.max() < ranks
        assert _loads(owner, w, ranks).max() == _best_max(w, ranks), (trial, w, ranks)


def _table(rng, n, locations):
    return sort_by_key(Table({"time": rng.integers(0, 10**6, n),
                              "location": rng.choice(locations, n).astype(np.int64),
                              "seq": np.arange(n, dtype=np.int64)}))


def test_location_bytes_weighs_every_row(tmp_path):
    """One rank (the sums of many ranks meet the same way): a run of one location is
    weighed exactly, spilled or not; a run of many by its samples; every row counts once."""
    rng = np.random.default_rng(8)
    single = [_table(rng, n, [loc]) for n, loc in ((50_000, 7), (3, 9), (120_000, 2**40))]
    mixed = _table(rng, 200_000, [1, 2, 3])
    runs = {"events": [Run(dict(single[0].columns)), SpilledRun(tmp_path, single[2]),
                       Run(dict(mixed.columns))],
            "other": [Run(dict(single[1].columns))]}
    ids, weights = location_bytes(serial(), runs, {"events": 40, "other": 16})
    got = dict(zip(ids.tolist(), weights.tolist()))
    assert got[7] == 50_000 * 40 and got[9] == 3 * 16 and got[2**40] == 120_000 * 40
    assert sum(got[k] for k in (1, 2, 3)) == 200_000 * 40
    for k in (1, 2, 3):
        # ~2,200 samples of the mixed run, 91 rows each: a third of them one location's,
        # give or take 22 (binomial), 3% of its rows: within four of those
        share = np.count_nonzero(mixed["location"] == k) * 40
        assert abs(got[k] - share) < 0.12 * share
    assert weights_of(np.array([2, 7, 2**40, 11]), (ids, weights)).tolist() == [
        got[2], got[7], got[2**40], 0]


def test_location_owned_sinks_deal_by_the_weights():
    ids = np.arange(10, 110, dtype=np.int64)
    bytes_ = np.where(ids < 20, 1000, 10).astype(np.int64)    # ten heavy locations first
    sink = SimpleNamespace(location_bytes=(ids, bytes_))
    LocationOwnedSink.own(sink, SimpleNamespace(size=2), ids)
    assert sink.owner.tolist() == contiguous_owners(bytes_, 2).tolist()
    loads = _loads(sink.owner, bytes_, 2)
    assert loads.max() < 1.1 * loads.mean()
    sink = SimpleNamespace(location_bytes=None)     # one rank: no weights, by count
    LocationOwnedSink.own(sink, SimpleNamespace(size=2), ids)
    assert np.bincount(sink.owner).tolist() == [50, 50]

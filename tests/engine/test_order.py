"""The global order on one rank: sorting, splitting and planning."""
import numpy as np

from partrace.engine.mpi import serial
from partrace.engine.order import (HEAP_MAX_RUNS, LONG_RUN, _location_major, key_order,
                                   lower_bound, merge_runs, run_starts, sort_by_key, time_order)
from partrace.engine.runs import Run
from partrace.engine.windows import choose_cuts, time_window
from partrace.engine.plan import assign
from partrace.formats.base import Unit
from partrace.model import Table, column


def table(times, locs, seqs):
    return Table({"time": np.asarray(times, np.int64), "location": np.asarray(locs, np.int64),
                  "seq": np.asarray(seqs, np.int64)})


def test_key_order_breaks_ties_by_location_then_seq():
    t = table([5, 5, 5, 1, 5], [2, 1, 1, 9, 2], [1, 1, 0, 0, 0])
    got = sort_by_key(t)
    assert list(zip(got["time"], got["location"], got["seq"])) == [
        (1, 9, 0), (5, 1, 0), (5, 1, 1), (5, 2, 0), (5, 2, 1)]


def test_sorted_input_is_recognised_and_kept():
    t = table([1, 2, 2, 3], [1, 1, 2, 1], [0, 1, 0, 2])
    assert np.array_equal(key_order(t), np.arange(4))


def test_lower_bound_on_composite_keys():
    t = sort_by_key(table([1, 2, 2, 2, 3], [1, 1, 2, 2, 1], [0, 1, 0, 1, 2]))

    def _lower_bound(t, key):
        return lower_bound(t["time"], t["location"], t["seq"], key)
    assert _lower_bound(t, (2, 2, 1)) == 3
    assert _lower_bound(t, (2, 2, 5)) == 4
    assert _lower_bound(t, (2, 0, 0)) == 1
    assert _lower_bound(t, (0, 0, 0)) == 0
    assert _lower_bound(t, (9, 0, 0)) == 5


def test_windows_of_sorted_runs_give_the_global_order():
    rng = np.random.default_rng(1)
    n = 5000
    t = table(rng.integers(0, 50, n), rng.integers(1, 6, n), np.arange(n))
    schema = [column("time"), column("location"), column("seq")]
    runs = [Run(dict(sort_by_key(t.take(slice(a, a + 700))).columns)) for a in range(0, n, 700)]
    windows = 4
    cuts = choose_cuts(serial(), runs, windows)
    assert len(cuts) == windows - 1
    parts = [time_window(serial(), runs, cuts, w, schema) for w in range(windows)]
    assert all(len(p) > n / windows / 2 for p in parts)      # roughly balanced
    got = Table.concat(parts, schema)
    perm = np.lexsort((t["seq"], t["location"], t["time"]))
    for c in ("time", "location", "seq"):
        assert np.array_equal(got[c], t[c][perm])


def test_plan_balances_bytes_and_is_deterministic():
    units = [Unit(f"{i:03d}", size) for i, size in enumerate([100, 90, 10, 10, 5, 80, 1])]
    a = assign(units, 3)
    assert a == assign(list(reversed(units)), 3)
    loads = sorted(sum(u.size for u in share) for share in a)
    assert loads == [96, 100, 100] or max(loads) - min(loads) <= 100
    assert sorted(u.key for share in a for u in share) == [u.key for u in units]
    assert assign(units[:2], 4)[2:] == [[], []]


def _sorted_runs(rng, n, runs):
    """Random keys with many ties, cut into `runs` pieces each sorted by key."""
    t = table(rng.integers(0, 6, n), rng.integers(1, 4, n), rng.integers(0, 3, n))
    cuts = np.sort(rng.integers(0, n + 1, runs - 1))
    pieces = [sort_by_key(t.take(slice(a, b))) for a, b in zip(np.r_[0, cuts], np.r_[cuts, n])]
    return Table.concat(pieces, [column("time"), column("location"), column("seq")])


def test_merge_of_sorted_runs_equals_lexsort_with_ties():
    rng = np.random.default_rng(7)
    for trial in range(300):
        n = int(rng.integers(0, 400))
        t = _sorted_runs(rng, n, int(rng.integers(1, 12)))
        want = np.lexsort((t["seq"], t["location"], t["time"]))    # stable: equal keys keep order
        starts = run_starts(t["time"], t["location"], t["seq"])
        assert np.array_equal(merge_runs(t["time"], t["location"], t["seq"], starts), want)
        assert np.array_equal(key_order(t), want)


def _time_order_equals_lexsort(t, loc, seq, runs=None):
    t, seq = np.asarray(t, np.int64), np.asarray(seq, np.int64)
    want = np.lexsort((seq, loc, t))
    assert np.array_equal(time_order(t, loc, seq, runs), want)


def test_time_order_equals_lexsort_over_any_time_span(jit_mode):
    """Times and rows share one 64-bit word when the window's time span leaves room for
    the row bits (else a stable argsort): both ways give lexsort's order, ties included."""
    rng = np.random.default_rng(11)
    for trial in range(300):
        n = int(rng.integers(2, 200))
        spread = int(rng.choice([3, 60, 10**6, 2**40, 2**62]))
        t = rng.integers(-spread, spread, n)
        if trial % 5 == 0:      # far apart clusters of equal times
            t = rng.integers(0, 2, n) * 2**62 + rng.integers(0, 3, n)
        loc = rng.integers(1, 4, n).astype(np.int32 if trial % 2 else np.int64)
        _time_order_equals_lexsort(t, loc, rng.integers(0, 3, n))
    for n in (2, 3, 17, 40):    # spans at the word's edge: the last that fits, the first not
        room = 64 - max((n - 1).bit_length(), 1)
        for span in (2**room - 1, 2**room):
            t = rng.permutation(np.resize(np.array([-2**62, -2**62 + span]), n))
            _time_order_equals_lexsort(t, np.ones(n, np.int64), rng.integers(0, 2, n))
    t = rng.permutation(np.repeat(np.arange(5), 100))      # groups beyond SMALL_TIE rows
    _time_order_equals_lexsort(t, rng.integers(1, 3, 500), rng.integers(0, 2, 500))


def test_time_order_of_long_runs_equals_lexsort(jit_mode):
    """Rows in a few long ascending runs of the key (a window of OTF streams, each in time
    order): the sort that merges runs gives lexsort's order too, equal times across the
    runs and within them (groups of few and of many rows) included."""
    rng = np.random.default_rng(13)
    for _ in range(20):
        k = int(rng.integers(HEAP_MAX_RUNS + 1, 12))     # more runs than the heap merges
        parts = []
        for _ in range(k):
            m = int(rng.integers(LONG_RUN, 3 * LONG_RUN))
            spread = int(rng.choice([5, 300, 2**40]))
            parts.append(sort_by_key(table(rng.integers(0, spread, m), rng.integers(1, 6, m),
                                           rng.integers(0, 4, m))))
        t = Table.concat(parts, [column("time"), column("location"), column("seq")])
        starts = run_starts(t["time"], t["location"], t["seq"])
        assert len(t) >= (len(starts) - 1) * LONG_RUN       # long runs: the runs' sort
        _time_order_equals_lexsort(t["time"], t["location"], t["seq"], len(starts) - 1)
        assert np.array_equal(key_order(t), np.lexsort((t["seq"], t["location"], t["time"])))


def test_run_starts_cut_where_the_key_goes_down():
    t = table([1, 2, 2, 2, 1, 1, 5, 5], [1, 1, 1, 2, 3, 3, 2, 1], [0, 4, 4, 0, 1, 0, 0, 0])
    assert run_starts(t["time"], t["location"], t["seq"]).tolist() == [0, 4, 5, 7, 8]


def test_known_run_offsets_give_the_same_order():
    rng = np.random.default_rng(3)
    parts = [sort_by_key(table(rng.integers(0, 40, m), rng.integers(1, 5, m), np.arange(m)))
             for m in (0, 50, 1, 300, 70)]
    t = Table.concat(parts, [column("time"), column("location"), column("seq")])
    starts = np.cumsum([0] + [len(p) for p in parts])
    got = sort_by_key(t, starts)
    want = t.take(np.lexsort((t["seq"], t["location"], t["time"])))
    for c in ("time", "location", "seq"):
        assert np.array_equal(got[c], want[c])


def test_random_rows_fall_back_to_lexsort():
    rng = np.random.default_rng(5)
    t = table(rng.integers(0, 1000, 5000), rng.integers(1, 9, 5000), np.arange(5000))
    assert np.array_equal(key_order(t), np.lexsort((t["seq"], t["location"], t["time"])))


def test_contiguous_shares_are_consecutive_balanced_and_fixed():
    from partrace.engine.plan import assign_contiguous
    units = [Unit(f"u{i:03d}", s) for i, s in enumerate([5, 1, 1, 1, 8, 0, 3, 3, 3, 3, 2, 6])]
    for n in (1, 2, 3, 5, 20):
        shares = assign_contiguous(list(reversed(units)), n)
        assert len(shares) == n and [u for s in shares for u in s] == units   # key order, all
        loads = [sum(max(u.size, 1) for u in s) for s in shares]
        if n <= 3:      # no rank holds more than its share plus one unit
            assert max(loads) <= sum(loads) / n + 8
    assert assign_contiguous([], 3) == [[], [], []]


def test_time_order_of_rows_in_location_order_equals_lexsort(jit_mode):
    """Rows laid out location by location, each in (time, seq) order (one-location runs in
    location order): the stable sort on time alone is the key order, ties included; rows
    that only look so (a location out of order, a time or seq going back inside one) take
    the tie-sorting way and come out the same."""
    rng = np.random.default_rng(12)
    for trial in range(200):
        n = int(rng.integers(2, 300))
        loc = np.sort(rng.integers(1, 6, n)).astype(np.int32 if trial % 2 else np.int64)
        t = rng.integers(0, 20 if trial % 3 else 2**62, n)
        seq = np.zeros(n, np.int64)
        for lc in np.unique(loc):       # each location's rows in (time, seq) order
            at = np.flatnonzero(loc == lc)
            t[at] = np.sort(t[at])
            seq[at] = np.arange(len(at))
        assert _location_major(t, loc, seq)
        _time_order_equals_lexsort(t, loc, seq)
        if n > 2:
            k = int(rng.integers(1, n))
            swapped = np.arange(n)
            swapped[[k - 1, k]] = k, k - 1
            for tt, ll, ss in ((t, loc[::-1].copy(), seq), (t[swapped], loc, seq[swapped])):
                _time_order_equals_lexsort(tt, ll, ss)
    one = np.ones(3, np.int32)
    assert not _location_major(np.array([5, 4, 6]), one, np.arange(3))     # time goes back
    assert not _location_major(np.array([5, 5, 6]), one, np.array([1, 0, 2]))  # seq goes back
    assert not _location_major(np.array([1, 2, 3]), np.array([2, 1, 3]), np.zeros(3, np.int64))

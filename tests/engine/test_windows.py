"""Merged windows: the order by time then ties, columns built on read, where windows start."""
import pickle

import numpy as np
import pytest

from partrace.engine.merged import MergedTable
from partrace.engine.mpi import serial
from partrace.engine.order import SMALL_TIE, merge_order, sort_by_key, time_order
from partrace.engine.runs import Run
from partrace.engine.windows import (choose_cuts, choose_shared_cuts, key_order, next_window_keys,
                                     time_window)
from partrace.model import STR, Column, Table, column


def _lexsort(t):
    return np.lexsort((t["seq"], t["location"], t["time"]))


def test_time_order_equals_lexsort_for_small_and_large_groups_of_equal_time():
    rng = np.random.default_rng(11)
    for trial in range(200):
        n = int(rng.integers(0, 3000))
        spread = int(rng.choice([1, 3, 40, 400, 10**6]))   # one big tie group .. no ties
        t = {"time": rng.integers(0, spread, n), "location": rng.integers(1, 4, n),
             "seq": rng.integers(0, 3, n)}                  # repeated whole keys too
        got = time_order(t["time"], t["location"], t["seq"])
        assert np.array_equal(got, _lexsort(t)), (trial, spread)


def test_groups_on_both_sides_of_the_small_tie_limit():
    sizes = [1, SMALL_TIE - 1, SMALL_TIE, SMALL_TIE + 1, 3 * SMALL_TIE, 2]
    time = np.repeat(np.arange(len(sizes))[::-1], sizes)
    rng = np.random.default_rng(2)
    n = len(time)
    t = {"time": time, "location": rng.integers(1, 5, n), "seq": rng.integers(0, 9, n)}
    assert np.array_equal(time_order(t["time"], t["location"], t["seq"]), _lexsort(t))


def test_many_sorted_runs_merge_like_lexsort():
    rng = np.random.default_rng(4)
    parts = [sort_by_key(Table({"time": rng.integers(0, 500, m), "location": rng.integers(1, 9, m),
                                "seq": np.arange(m)})) for m in rng.integers(0, 200, 40)]
    t = Table.concat(parts, [column("time"), column("location"), column("seq")])
    starts = np.cumsum([0] + [len(p) for p in parts])
    assert np.array_equal(merge_order(t, starts), _lexsort(t))


def _runs(rng, n, schema, size=300):
    t = Table({"time": rng.integers(0, 200, n), "location": rng.integers(1, 6, n),
               "seq": np.arange(n), "payload": rng.integers(0, 255, (n, 3)).astype(np.uint8),
               "text": np.array([f"r{i}" for i in range(n)], dtype=object)})
    runs = [Run(dict(sort_by_key(t.take(slice(a, a + size))).columns)) for a in range(0, n, size)]
    return t, runs


SCHEMA = [column("time"), column("location"), column("seq"), Column("payload", ("u1", 3), "bytes"),
          Column("text", STR, "text")]


def test_a_merged_window_builds_every_column_on_read_in_key_order():
    rng = np.random.default_rng(9)
    t, runs = _runs(rng, 2000, SCHEMA)
    cuts = choose_cuts(serial(), runs, 3)
    parts = [time_window(serial(), runs, cuts, w, SCHEMA) for w in range(3)]
    assert all(isinstance(p, MergedTable) for p in parts)
    perm = _lexsort(t)
    for name in t.names:
        once = np.concatenate([p.column_once(name) for p in parts])
        kept = Table.concat(parts, SCHEMA)[name]
        want = t[name][perm]
        assert np.array_equal(once, want) and np.array_equal(kept, want), name
    first = time_window(serial(), runs, cuts, 0, SCHEMA)
    assert first.column_once("seq") is not first.column_once("seq")    # built each time, not kept
    assert first["seq"] is first["seq"]                                  # kept once read
    assert first.take(np.arange(2)).names == t.names
    back = pickle.loads(pickle.dumps(first))               # as gathered by another rank
    assert type(back) is Table and np.array_equal(back["payload"], first["payload"])


def test_one_sorted_run_is_written_from_its_own_memory():
    rng = np.random.default_rng(3)
    t, runs = _runs(rng, 500, SCHEMA, size=500)
    window = time_window(serial(), runs, [], 0, SCHEMA)
    assert np.shares_memory(window.column_once("payload"), runs[0].columns["payload"])


def test_next_window_keys_bound_the_rows_of_later_windows():
    rng = np.random.default_rng(5)
    t, runs = _runs(rng, 3000, SCHEMA)
    windows = 4
    cuts = {"events": choose_cuts(serial(), runs, windows), "empty": []}
    parts = [time_window(serial(), runs, cuts["events"], w, SCHEMA) for w in range(windows)]
    keys = [list(zip(p["time"].tolist(), p["location"].tolist(), p["seq"].tolist())) for p in parts]
    for w in range(windows):
        nxt = next_window_keys(cuts, w, windows, 1)
        assert nxt["empty"] is None
        if w == windows - 1:
            assert nxt["events"] is None
            continue
        assert all(k < nxt["events"] for k in keys[w])
        assert all(k >= nxt["events"] for later in keys[w + 1:] for k in later)


def test_shared_cuts_split_all_tables_together_by_bytes():
    rng = np.random.default_rng(11)
    dense, dense_runs = _runs(rng, 6000, SCHEMA)
    sparse, sparse_runs = _runs(rng, 60, SCHEMA, size=60)
    runs, row = {"dense": dense_runs, "sparse": sparse_runs}, {"dense": 8, "sparse": 800}
    pieces = 4
    cuts = choose_shared_cuts(serial(), runs, row, pieces)
    assert len(cuts) == pieces - 1 and cuts == sorted(cuts)
    # bytes of both tables below each cut, counted from the rows themselves
    keys = {n: list(zip(t["time"].tolist(), t["location"].tolist(), t["seq"].tolist()))
            for n, t in (("dense", dense), ("sparse", sparse))}
    total = sum(len(keys[n]) * row[n] for n in keys)
    for j, cut in enumerate(cuts, 1):
        below = sum(sum(k < cut for k in keys[n]) * row[n] for n in keys)
        assert abs(below - total * j / pieces) < 0.05 * total, (j, below, total)


def test_spans_of_one_location_each_are_merged_location_by_location():
    """Runs of one location each (ovni threads, DUMPI ranks), listed out of location order
    as a rank receives them: the window takes them by location (time sort, no tie pass)
    and its rows are the key order of all rows, ties on time across locations included."""
    from partrace.engine.windows import _by_location, _merged_spans
    rng = np.random.default_rng(21)
    tables, runs = [], []
    for loc in (4, 2, 5, 1, 3, 2):      # location 2 in two runs, in their time order
        n = int(rng.integers(1, 400))
        first = 0 if not any(t["location"][0] == loc for t in tables) else 1000
        t = Table({"time": np.sort(rng.integers(first, first + 60, n)),
                   "location": np.broadcast_to(np.int32(loc), (n,)),
                   "seq": np.arange(n) + first})
        tables.append(t)
        runs.append(Run(dict(t.columns)))
    spans = [(r, 0, len(t)) for r, t in zip(runs, tables)]
    located = [int(r.columns["location"].value) for r, _, _ in _by_location(spans)]
    assert located == [1, 2, 2, 3, 4, 5]
    assert _by_location(spans)[1][0] is runs[1] and _by_location(spans)[2][0] is runs[5]
    everything = Table.concat(tables, [column("time"), column("location"), column("seq")])
    want = everything.take(_lexsort(everything))
    got = _merged_spans(spans, [column("time"), column("location"), column("seq")])
    for name in ("time", "location", "seq"):
        assert np.array_equal(got[name], want[name]), name
    mixed = spans + [(Run({"time": np.arange(3), "location": np.array([1, 2, 3], np.int32),
                           "seq": np.zeros(3, np.int64)}), 0, 3)]
    assert _by_location(mixed) == mixed        # a run of several locations: left as it is


@pytest.mark.parametrize("size", [2, 255, 256, 257, 1 << 16, (1 << 16) + 1])
def test_destinations_sorted_narrow_in_the_same_stable_order(size):
    from partrace.engine.windows import _narrowest
    dest = np.random.default_rng(size).integers(0, size, 50_000).astype(np.int64)
    narrow = _narrowest(dest, size)
    assert narrow.dtype.itemsize <= (1 if size <= 256 else 2 if size <= 1 << 16 else 8)
    assert np.array_equal(np.argsort(narrow, kind="stable"), np.argsort(dest, kind="stable"))


@pytest.mark.parametrize("span", [3, 1000, 10**12])
def test_key_order_is_lexsort_s(span):
    """Rank 0 orders the samples by key with one sort of the times and the tied groups
    sorted on their own: the very order of a lexsort of the three columns, with many equal
    times (span 3), few, or none; equal whole keys keep their places, as lexsort's do."""
    rng = np.random.default_rng(span)
    n = 20_000
    t = rng.integers(0, span, n)
    loc = rng.integers(0, 5, n)
    seq = rng.integers(0, 4, n)
    assert np.array_equal(key_order(t, loc, seq), np.lexsort((seq, loc, t)))
    assert np.array_equal(key_order(t[:1], loc[:1], seq[:1]), [0])


@pytest.mark.parametrize("loc_span, seq_span", [(5, 4), (1 << 40, 1 << 20), (1 << 62, 1 << 62),
                                                (1, 1 << 63), (1 << 63, 1)])
def test_key_order_of_mostly_tied_times_is_lexsort_s(loc_span, seq_span):
    """Mostly equal times (ROSS's rounds) are ordered by one sort of all three keys, location
    and seq as one where they fit in 64 bits together (from their least values, which may be
    negative), else three: still the order of np.lexsort."""
    rng = np.random.default_rng(loc_span % 1000 + seq_span % 997)
    n = 20_000
    t = rng.integers(0, 10, n)
    loc = rng.integers(-(loc_span // 2), loc_span - loc_span // 2, n, dtype=np.int64)
    seq = rng.integers(-(seq_span // 2), seq_span - seq_span // 2, n, dtype=np.int64)
    loc[1::2], seq[1::2] = loc[::2], seq[::2]      # equal whole keys too (keep their places)
    assert np.array_equal(key_order(t, loc, seq), np.lexsort((seq, loc, t)))

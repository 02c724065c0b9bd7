"""Chunk owners (output/chunk_owners.py): every chunk written whole, once, by one rank.

The ranks of a run are played here in one process: each window, every rank cuts
its slices (``_cut``), the heads go where ``alltoall`` would send them, and every
rank writes its assembled chunks (``_finish``).  Against random windows (slices
of any length, empty ones, windows that end inside a chunk, tables that end
early) each row must be written once, with its value, at its place, in whole
chunks only (the dataset's last may be short), each chunk by one rank.
"""
from __future__ import annotations

import numpy as np
import pytest

from partrace.model import Table
from partrace.output.chunk_owners import OwnedWriter, Slices, solo_rank


def _play(counts: list[list[int]], step: int, later_windows: int | None = None):
    """Run windows ``counts[w][r]`` rows (values = their global row number, in two
    columns) through one OwnedWriter per rank; ``later_windows``: the window after
    which the engine says no rows come (None: never said, rows flushed at the end).
    Returns (puts per rank as (column, row, values), writers, total rows)."""
    size = len(counts[0])
    puts = [[] for _ in range(size)]
    writers = [OwnedWriter(lambda name, col, v, row, r=r: puts[r].append((col, row, v.copy())))
               for r in range(size)]
    first = 0
    for w, window in enumerate(counts):
        later = True if later_windows is None else w < later_windows
        ends = first + np.cumsum(window)
        starts = ends - np.asarray(window)
        plans = []
        for r, writer in enumerate(writers):
            rows = np.arange(starts[r], ends[r], dtype=np.int64)
            table = Table({"a": rows, "b": rows * 7})
            plans.append({"t": (writer.slices("t", first, window, step, later), table,
                                ["a", "b"], later)})
        cut = [writer._cut(r, size, plans[r]) for r, writer in enumerate(writers)]
        for r, writer in enumerate(writers):
            got = [cut[q][0][r] for q in range(size)]
            writer._finish(plans[r], cut[r][1], got)
        first = int(ends[-1])
    for writer in writers:
        writer.flush()
    return puts, writers, first


def _check(puts, writers, total: int, step: int) -> None:
    seen = np.zeros(total, np.int64)
    owner = {}
    for r, mine in enumerate(puts):
        for col, row, values in mine:
            n = len(values)
            assert row % step == 0, (r, row)
            assert n % step == 0 or row + n == total, (r, row, n)     # whole chunks only
            want = np.arange(row, row + n)
            assert np.array_equal(values, want if col == "a" else want * 7)
            if col == "a":
                seen[row:row + n] += 1
                for c in range(row // step, -(-(row + n) // step)):
                    assert owner.setdefault(c, r) == r, f"chunk {c} written by two ranks"
    assert (seen == 1).all(), np.flatnonzero(seen != 1)[:10]
    spans = sorted(s for w in writers for s in w.written("t"))
    assert [a for a, _ in spans[1:]] == [b for _, b in spans[:-1]]     # they tile the rows
    assert (spans[0][0], spans[-1][1]) == (0, total) if total else spans == []


@pytest.mark.parametrize("seed", range(40))
def test_random_windows_write_every_chunk_whole_once(seed):
    rng = np.random.default_rng(seed)
    size, windows, step = rng.integers(1, 6), rng.integers(1, 6), int(rng.integers(1, 9))
    counts = [list(rng.integers(0, 3 * step, size) * rng.integers(0, 2, size))
              for _ in range(windows)]
    told = int(rng.integers(0, windows + 1)) if seed % 2 else None
    if told is not None:        # the engine says no rows after window ``told``
        for w in range(told + 1, windows):
            counts[w] = [0] * size
    puts, writers, total = _play(counts, step, told)
    _check(puts, writers, total, step)


def test_slices_inside_one_chunk_go_to_its_owner():
    """Three ranks' slices of 2 rows in chunks of 8: rank 0 owns the chunk and,
    the window ending inside it, carries it until the next window completes it."""
    sl = Slices.of(0, [2, 2, 2], 8)
    assert [sl.head(r) for r in range(3)] == [(0, None), (2, 0), (2, 0)]
    assert sl.next_carry(later=True) == (0, 0)
    nxt = Slices.of(6, [0, 5, 3], 8, 0, 0)
    assert nxt.head(1) == (2, 0)        # rows 6, 7 complete rank 0's chunk
    assert nxt.own(1) == ((8, 8), (8, 8), (8, 11))
    puts, writers, total = _play([[2, 2, 2], [0, 5, 3]], 8, later_windows=1)
    _check(puts, writers, total, 8)
    assert [row for _, row, _ in puts[0]] == [0, 0]         # columns a and b, once
    assert [row for _, row, _ in puts[1]] == [8, 8]


def test_aligned_slices_send_nothing():
    """Slices that start and end on chunk boundaries are written where they are."""
    sl = Slices.of(0, [16, 8, 24], 8)
    assert [sl.head(r) for r in range(3)] == [(0, None)] * 3
    assert sl.own(2) == ((24, 24), (24, 48), (48, 48))
    assert sl.next_carry(later=True) == (None, None)


@pytest.mark.parametrize("counts", [[3, 0, 2, 1], [0, 0, 0, 5], [6, 0, 0, 0], [2, 2, 2, 2]])
def test_a_table_ending_in_one_chunk_is_written_by_its_solo_rank(counts):
    """All of a table's rows in one window and one chunk (a small table): every slice goes
    to the table's solo rank, one of ranks 1..P-1 named by the table, not rank 0 (which
    would otherwise assemble every small table, beside its header and join)."""
    solo = solo_rank("t", len(counts))
    assert 0 < solo < len(counts) and solo == solo_rank("t", len(counts))
    sl = Slices.of(0, counts, 8, name="t", later=False)
    assert sl.solo == solo
    assert [sl.head(r) for r in range(4)] == [(0, None) if r == solo or not n else (n, solo)
                                             for r, n in enumerate(counts)]
    puts, writers, total = _play([counts], 8, later_windows=0)
    _check(puts, writers, total, 8)
    assert [r for r, mine in enumerate(puts) if mine] == [solo]
    assert writers[solo].written("t") == [(0, sum(counts))]
    # rows that come later, or more than a chunk, or a run of one rank: the first row's rank
    assert Slices.of(0, counts, 8, name="t", later=True).solo is None
    assert Slices.of(0, [5, 5, 5, 5], 8, name="t", later=False).solo is None
    assert Slices.of(0, [5], 8, name="t", later=False).solo is None
    assert Slices.of(3, counts, 8, name="t", later=False).solo is None

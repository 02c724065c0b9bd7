"""The global order, one window at a time.

Every rank offers weighted samples of its sorted runs; all ranks pick the
same cut keys from them.  In time mode the key space is cut into W x P
pieces: window w is pieces w*P .. w*P+P-1 and rank r receives piece w*P+r,
so rank r's rows of window w follow rank r-1's and precede rank r+1's.  In
destination mode the key space is cut into W windows and each window's rows
go to the rank the sink names (as spans where a span's rows go to one rank).
W is chosen so that one window fits the memory budget; with W = 1 this is the
classic sample sort.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from ..model import KEY_COLUMNS, Column, Table
from . import accounts
from .exchange import exchange_spans, exchange_tables
from .gather import merged_column, ordered_column, run_of, span_of
from .merged import MergedTable, ordered
from .mpi import Comm
from .order import Key, merge_order, run_starts
from .narrow import Constant, tail
from .runs import Run, run_phase

# Samples a rank offers for the cut keys: SAMPLES_PER_PIECE for each piece of this rank's
# (a window's share), so that every piece is cut from as many samples whatever the window
# and rank counts, and a P-th of SAMPLES_AT_LEAST if that is more.  They meet on rank 0
# alone, which sorts them (numpy) and broadcasts the cuts: rank 0 receives and sorts
# samples in proportion to the pieces, not to the ranks (4,096 a rank put 131,072 keys a
# table through its sort at 32 ranks, and a million at 256).  A cut lands within one
# sample's rows of its share: with the rows spread evenly, 1/256 of a piece.
SAMPLES_AT_LEAST = 4096
SAMPLES_PER_PIECE = 256
# Samples rank 0 keeps of a table's, a piece, to cut a window again for rank 0's share
# (window_cuts): a cut then lands within 1/KEPT_PER_PIECE of a piece of its goal, and rank 0
# holds a quarter of the samples it sorted for the first cuts, for the run.
KEPT_PER_PIECE = 64
# Samples of a rank weighing its locations' bytes (location_bytes): summed per location
# before they are sent, so rank 0 receives one number per location, whatever their count.
SAMPLES_PER_RANK = 4096
BEFORE_ALL = None       # stands for the key before every key
AFTER_ALL = ...         # stands for the key after every key


def samples_per_rank(pieces: int, ranks: int) -> int:
    return max(-(-SAMPLES_AT_LEAST // ranks), SAMPLES_PER_PIECE * -(-pieces // ranks))


def _weighted_samples(runs: list[Run], count: int, weight: int = 1, rank: int = 0,
                      size: int = 1) -> tuple[np.ndarray, ...]:
    """About ``count`` keys of the runs (time, location, seq), each with the rows it stands
    for (times ``weight``: a table's row bytes).  Each run of all ranks' is sampled at a
    phase of its own (runs.py ``sampled_rows``: runs that keep step would else be cut
    alike): rank ``rank``'s k-th at ``run_phase(k x size + rank)``."""
    total = sum(r.n for r in runs)
    stride = max(1, math.ceil(total / count))
    parts = [run.sample_arrays(stride, run_phase(k * size + rank))
             for k, run in enumerate(r for r in runs if r.n)]
    if not parts:
        return tuple(np.zeros(0, np.int64) for _ in range(4))
    t, loc, seq, w = (np.concatenate(a) for a in zip(*parts))
    return t, loc, seq, w.astype(np.int64) * weight


def choose_cuts(comm: Comm, runs: list[Run], pieces: int) -> list[Key]:
    """pieces-1 keys cutting all ranks' rows into pieces of nearly equal size."""
    return choose_cuts_kept(comm, runs, pieces, keep=False)[0]


def choose_cuts_kept(comm: Comm, runs: list[Run], pieces: int,
                     keep: bool = True) -> tuple[list[Key], tuple | None]:
    """:func:`choose_cuts`, and on rank 0 (``keep``) the samples it cut, kept to cut a
    window again (:func:`window_cuts`; None elsewhere, or without samples)."""
    if pieces <= 1:
        return [], None
    everyone = comm.gather(_weighted_samples(runs, samples_per_rank(pieces, comm.size),
                                              rank=comm.rank, size=comm.size))
    cuts, kept = _cut_samples(everyone, pieces, keep) if comm.rank == 0 else (None, None)
    return comm.bcast(cuts), kept


def window_cuts(kept: tuple, w: int, size: int, windows: int, share0: float) -> list[Key]:
    """The size-1 cuts inside window w (the first cuts' own in between) when rank 0 takes
    ``share0`` of an even share of its rows and the other ranks the rest, evenly: cut r at
    the first kept sample whose cumulative weight reaches (w + c_r) / windows of the total,
    c_r the part of the window of ranks 0..r-1, and never past the window's bounds as the
    first cuts set them (so the windows keep their rows whatever the shares)."""
    t, loc, seq, acc, at = kept
    first = share0 / size
    before = first + (1.0 - first) / (size - 1) * np.arange(size - 1)
    goal = (w + before) / windows * float(acc[-1])
    idx = np.searchsorted(acc, goal, side="left")
    lo = at[w * size - 1] if w > 0 else 0
    hi = at[(w + 1) * size - 1] if (w + 1) * size - 1 < len(at) else len(acc) - 1
    idx = np.clip(idx, lo, hi)
    return list(zip(t[idx].tolist(), loc[idx].tolist(), seq[idx].tolist()))


def choose_shared_cuts(comm: Comm, runs: dict[str, list[Run]], row_bytes: dict[str, int],
                       pieces: int) -> list[Key]:
    """pieces-1 keys cutting the rows of all tables together into pieces of
    nearly equal bytes.  A sink that writes several tables into one file
    (OTF) needs every table's window to end at the same key, or a sparse
    table would hold the others' rows back until its own window ends."""
    if pieces <= 1:
        return []
    count = samples_per_rank(pieces, comm.size)
    tables = [_weighted_samples(runs[name], count, row_bytes[name], comm.rank, comm.size)
              for name in runs]
    mine = tuple(np.concatenate(a) for a in zip(*tables)) if tables else ()
    return _cuts_on_rank0(comm, mine, pieces)


def location_bytes(comm: Comm, runs: dict[str, list[Run]], row_bytes: dict[str, int]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Every location's rows of all tables in bytes, as (location ids sorted, bytes), the
    same on every rank: each rank weighs the samples of its runs (exact for a run of one
    location), rank 0 adds the ranks' sums up.  For a sink that deals locations to
    ranks: by these, not by count, so a rank is not given the heavy ones (ovni's busy
    threads, a master rank) together."""
    count = SAMPLES_PER_RANK
    parts = [_weighted_samples(runs[name], count, row_bytes[name]) for name in runs]
    loc = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    weight = np.concatenate([p[3] for p in parts]) if parts else np.zeros(0, np.int64)
    everyone = comm.gather(_summed(loc, weight))
    total = None
    if comm.rank == 0:
        total = _summed(np.concatenate([ids for ids, _ in everyone]),
                        np.concatenate([b for _, b in everyone]))
    return comm.bcast(total)


def _summed(ids: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ids (sorted) and the sum of the weights of each."""
    unique, where = np.unique(ids, return_inverse=True)
    return unique, np.bincount(where, weights=weights, minlength=len(unique)).astype(np.int64)


def _cuts_on_rank0(comm: Comm, mine: tuple, pieces: int) -> list[Key]:
    everyone = comm.gather(mine)
    cuts = _cuts_from(everyone, pieces) if comm.rank == 0 else None
    return comm.bcast(cuts)


def _cuts_from(everyone: list[tuple], pieces: int) -> list[Key]:
    """Cut j at the first sample (in key order) whose cumulative weight reaches j/pieces of
    the total; the last sample's key when the samples run out."""
    return _cut_samples(everyone, pieces, keep=False)[0]


def _cut_samples(everyone: list[tuple], pieces: int,
                 keep: bool) -> tuple[list[Key], tuple | None]:
    """:func:`_cuts_from`, and (``keep``) some of the samples in key order with their
    cumulative weights and the positions the cuts took among them (None: not kept, or no
    samples)."""
    everyone = [s for s in everyone if s and len(s[0])]
    if not everyone:
        return [], None
    t, loc, seq, w = (np.concatenate(a) for a in zip(*everyone))
    order = key_order(t, loc, seq)
    weights = np.cumsum(w[order])
    acc = weights * pieces      # exact: no float in the comparison
    goal = np.arange(1, pieces, dtype=np.int64) * (acc[-1] // pieces)
    idx = np.minimum(np.searchsorted(acc, goal, side="left"), len(order) - 1)
    at = order[idx]
    cuts = list(zip(t[at].tolist(), loc[at].tolist(), seq[at].tolist()))
    if not keep:
        return cuts, None
    t, loc, seq = t[order], loc[order], seq[order]
    # kept: the cuts' own samples, and one in every ``stride`` (the last of its stretch,
    # so that its cumulative weight covers the stretch)
    n = len(order)
    stride = -(-n // (KEPT_PER_PIECE * pieces))
    keep = np.unique(np.concatenate([np.arange(stride - 1, n, stride), idx, [n - 1]]))
    kept = (t[keep], loc[keep], seq[keep], weights[keep], np.searchsorted(keep, idx))
    return cuts, kept


def key_order(t: np.ndarray, loc: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """The order of keys (time, location, seq) that ``np.lexsort((seq, loc, t))`` gives:
    one stable sort of the times, then only the groups of equal times put in (location,
    seq) order.  Rank 0 sorts every rank's samples alone, P x more at P ranks; a lexsort
    of the three columns sorts all three (about 3x one sort at 0.5 M samples)."""
    order = np.argsort(t, kind="stable")
    ts = t[order]
    tied = np.flatnonzero(ts[1:] == ts[:-1])
    if len(tied) * 4 > len(t):      # mostly ties (ROSS's GVT rounds): sorting the groups
        return _all_three_order(t, loc, seq)    # apart costs 4x one sort of everything
    if len(tied):       # whole groups of equal times, in time order: sorted among themselves
        rows = np.union1d(tied, tied + 1)
        sub = order[rows]
        order[rows] = sub[np.lexsort((seq[sub], loc[sub], t[sub]))]
    return order


def _all_three_order(t: np.ndarray, loc: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """np.lexsort((seq, loc, t)), with location and seq as one key where both fit in 64
    bits together (a lexsort's time grows with its keys: 2 are 0.6 of 3 here)."""
    lo = [int(c.min()) for c in (loc, seq)]
    bits = [(int(c.max()) - b).bit_length() for c, b in zip((loc, seq), lo)]
    if sum(bits) > 64 or bits[1] == 64:
        return np.lexsort((seq, loc, t))
    both = ((loc - lo[0]).astype(np.uint64) << np.uint64(bits[1])) | \
        (seq - lo[1]).astype(np.uint64)
    return np.lexsort((both, t))


def _cut(cuts: list[Key], j: int):
    """Cut j-1 / j boundary: j <= 0 is the very start, j > len(cuts) the very end."""
    if j <= 0:
        return BEFORE_ALL
    if j > len(cuts):
        return AFTER_ALL
    return cuts[j - 1]


def _comparable(bound):
    """A bound as a tuple that compares with keys (the two ends as infinities)."""
    if bound is BEFORE_ALL:
        return (-math.inf,)
    if bound is AFTER_ALL:
        return (math.inf,)
    return tuple(bound)


def _spans_between(runs: list[Run], bounds: list) -> list[list[tuple[Run, int, int]]]:
    """Per interval between consecutive bounds (= destination), the (run, first, end)
    row ranges of the runs in it (runs without rows there left out).

    A run is searched only at the bounds inside its key range (kept beside it): a bound at
    or before its first key is its row 0, one after its last key its end.  A window of P
    destinations so costs each rank O(runs x log P) comparisons and one search per bound
    that falls inside a run, not runs x (P + 1) searches (three file reads each when the
    run is spilled)."""
    keys = [_comparable(b) for b in bounds]
    out = [[] for _ in range(len(bounds) - 1)]
    for run in runs:
        if run.key_range is None:
            continue
        first, last = run.key_range
        inside = bisect.bisect_right(keys, first)          # keys[:inside] <= first: row 0
        after = bisect.bisect_right(keys, last, lo=inside)  # keys[after:] > last: the end
        found = [run.lower_bound(bounds[j]) for j in range(inside, after)]

        def row(j: int) -> int:
            return 0 if j < inside else run.n if j >= after else found[j - inside]
        for i in range(max(inside - 1, 0), min(after, len(bounds) - 1)):
            a, b = row(i), row(i + 1)
            if b > a:
                out[i].append((run, a, b))
    return out


def _row_shape(run, name: str) -> tuple:
    return tail(run.columns[name]) if isinstance(run, Run) else run.tail(name)


def _gather_column(spans, col: Column) -> np.ndarray:
    """One column of the spans' rows, in span order, as the schema's dtype (one span
    of an array held as it is: a view of it).  Each span is widened straight into
    the output: no per-span copies to concatenate."""
    if not spans:
        return np.empty(0, col.numpy_dtype())
    dtype = col.element_dtype()
    if len(spans) == 1 and isinstance(spans[0][0], Run):
        run, a, b = spans[0]
        values = run.columns[col.name]
        if isinstance(values, np.ndarray) and values.dtype == dtype:
            return values[a:b]
    n = sum(b - a for _, a, b in spans)
    out = np.empty((n,) + _row_shape(spans[0][0], col.name), dtype)
    at = 0
    for run, a, b in spans:
        run.put(col.name, a, b, out[at:at + b - a])
        at += b - a
    return out


def _by_location(spans: list) -> list:
    """The spans by their location when each one's run holds a single location (ovni's
    threads, DUMPI's ranks: a Constant), else as they are.  Laid out location by location,
    a window's rows take the time sort without its tie pass (order.time_order): spans come
    in the ranks' order, and units are spread over the ranks by size, not by location
    (DUMPI at 2 ranks: 0.1 s a rank).  Keys are unique: the order is the same either way."""
    where = []
    for k, (run, _a, _b) in enumerate(spans):
        form = run.columns.get("location") if isinstance(run, Run) else None
        if not isinstance(form, Constant):
            return spans
        where.append((int(form.value), k))
    return [spans[k] for _, k in sorted(where)]


def _span_starts(spans) -> np.ndarray:
    """Offsets of the spans in their concatenation, and its length (sorted runs)."""
    return np.cumsum([0] + [b - a for _, a, b in spans], dtype=np.int64)


class SpanRows(MergedTable):
    """Rows of the spans in span order, each column gathered when read."""

    __slots__ = ("spans", "schema")

    def __init__(self, spans, schema: list[Column]):
        cols = {c.name: c for c in schema}
        super().__init__(sum(b - a for _, a, b in spans), list(cols),
                         lambda name: _gather_column(spans, cols[name]))
        self.spans, self.schema = spans, schema


def _merged_spans(spans, schema: list[Column], order: np.ndarray | None = None) -> MergedTable:
    """The spans' rows in key order (``order``: a permutation of them to use instead),
    each column put in that order when read, in one pass from the runs' narrow forms
    (engine/gather.py)."""
    cols = {c.name: c for c in schema}
    n = sum(b - a for _, a, b in spans)
    if order is None:
        spans = _by_location(spans)
        keys = Table({k: _gather_column(spans, cols[k]) for k in KEY_COLUMNS})
        order = merge_order(keys, _span_starts(spans))
        del keys
        if order is None:
            return SpanRows(spans, schema)
        rows = None     # a merge keeps each span's rows in their order: their spans suffice
    else:
        rows = order    # any permutation: each row's place in the spans is kept too
    source = span_of(spans, order)      # each row's span: one byte a row, not the order's 8
    del order

    def build(name: str) -> np.ndarray:
        return ordered_column(spans, name, cols[name].numpy_dtype(), source, rows)
    return MergedTable(n, list(cols), build)


def exchange_columns(comm: Comm, column, counts: np.ndarray, schema: list[Column]) -> Table:
    """Send contiguous row blocks (counts[r] rows to rank r) of the columns ``column(col)``
    makes, one column at a time (each is dropped once sent); returns the received rows."""
    return Table({c.name: comm.alltoallv(column(c), counts) for c in schema})


def _sorted_lazily(table: Table, schema: list[Column]) -> Table:
    """The table in key order, each column put in that order when read.  The rows
    are runs sorted by key (each rank's sorted spans, as received): a column is
    gathered run by run by each row's run (one byte a row), not taken by the order."""
    names = [c.name for c in schema]
    starts = run_starts(table["time"], table["location"], table["seq"])
    order = merge_order(table, starts)
    if order is None:
        return ordered(len(table), names, table.column_once, None)
    source = run_of(np.diff(starts), order)
    del order
    return MergedTable(len(table), names,
                       lambda name: merged_column(table.column_once(name), source, starts))


def time_window(comm: Comm, runs: list[Run], cuts: list[Key], w: int,
                schema: list[Column]) -> Table:
    """Rank r's rows of window w in time mode, sorted by key (columns built on read)."""
    return time_windows(comm, {"": runs}, {"": cuts}, w, {"": schema})[""]


def time_windows(comm: Comm, runs: dict[str, list[Run]], cuts: dict[str, list[Key]], w: int,
                 schemas: dict[str, list[Column]]) -> dict[str, Table]:
    """``time_window`` of every table (``runs``, ``cuts`` and ``schemas`` per table), the
    tables exchanged together: the ranks meet once a window, not once a table."""
    p = comm.size
    spans_to = {}
    for name in schemas:
        bounds = [_cut(cuts[name], w * p + r) for r in range(p + 1)]
        spans_to[name] = _spans_between(runs[name], bounds)
    if p > 1:       # the spans travel in the runs' narrow forms, rebuilt as runs here
        spans = exchange_tables(comm, spans_to, schemas)
    else:
        spans = {name: to[0] for name, to in spans_to.items()}
    # the order from the keys alone; every column is taken in it when read
    accounts.phase_in_window("merge")
    return {name: _merged_spans(spans[name], schemas[name]) for name in schemas}


def window_rows(runs: list[Run], cuts: list[Key], w: int, schema: list[Column]) -> Table:
    """This rank's rows of window w in destination mode (not exchanged yet; each
    column gathered when read)."""
    spans = _spans_between(runs, [_cut(cuts, w), _cut(cuts, w + 1)])[0]
    return SpanRows(spans, schema)


# A window's spans cut where the destination changes travel as spans (narrow, no copy
# on the sender, merged on the receiver as a time window is) while they are at most
# SPLIT_PER_SPAN times the spans (plus one per rank) or average SPLIT_ROWS rows: each costs
# a few calls per column, a row sent by destination costs one gather and one scatter
SPLIT_PER_SPAN = 2
SPLIT_ROWS = 2048


def _spans_by_destination(spans, dest: np.ndarray, size: int) -> list[list] | None:
    """Per rank, the pieces (run, first, end) of the spans whose rows all go there (rows of
    the spans' concatenation; ``dest`` per row), or None when the destination changes so
    often within the spans that sending rows is cheaper."""
    starts = _span_starts(spans)
    n = int(starts[-1])
    changes = np.flatnonzero(dest[1:] != dest[:-1]) + 1
    # the pieces are at least the changes + 1 (the cuts hold 0, n and every change): rows
    # whose destination alternates are sent as rows without merging the span starts in
    if _rows_cheaper(len(changes) + 1, len(spans), size, n):
        return None
    cuts = _sorted_union(starts, changes)
    pieces = len(cuts) - 1
    if _rows_cheaper(pieces, len(spans), size, n):
        return None
    out: list[list] = [[] for _ in range(size)]
    span = np.searchsorted(starts, cuts[:-1], side="right") - 1
    for a, b, k, d in zip(cuts[:-1].tolist(), cuts[1:].tolist(), span.tolist(),
                          dest[cuts[:-1]].tolist()):
        run, first, _ = spans[k]
        first += a - int(starts[k])
        out[d].append((run, first, first + b - a))
    return out


def _rows_cheaper(pieces: int, spans: int, size: int, n: int) -> bool:
    """Whether n rows in ``pieces`` of one destination each travel better as rows."""
    return pieces > SPLIT_PER_SPAN * spans + size and pieces * SPLIT_ROWS > n


def _sorted_union(few: np.ndarray, many: np.ndarray) -> np.ndarray:
    """np.union1d of two ascending arrays, ``many`` without repeats, in O(len(many)): the
    few inserted where they belong, not the two sorted again (a window's destination
    changes can be millions)."""
    few = np.unique(few)
    at = np.searchsorted(many, few)
    new = at >= len(many)
    new[~new] = many[at[~new]] != few[~new]
    return np.insert(many, at[new], few[new])


def _narrowest(ranks: np.ndarray, size: int) -> np.ndarray:
    """``ranks`` (each below ``size``) as the narrowest unsigned integers that hold them:
    numpy's stable sort of 8- and 16-bit integers is a radix sort, O(n), where int64's is
    a merge sort (5 M rows to 2 ranks: about a quarter of the time)."""
    kind = np.uint8 if size <= 1 << 8 else np.uint16 if size <= 1 << 16 else None
    return ranks if kind is None else ranks.astype(kind, copy=False)


def by_destination(comm: Comm, rows: Table, dest: np.ndarray, schema: list[Column]) -> Table:
    """Send every row to rank dest[i]; each rank's rows come back sorted by key."""
    spans = rows.spans if isinstance(rows, SpanRows) else None
    pieces = None
    if comm.size > 1 and spans is not None:
        pieces = _spans_by_destination(spans, dest, comm.size)
    # every rank takes the same path (a rank without spans: the rows' own)
    if comm.size > 1 and comm.allreduce_sum(int(pieces is None)) == 0:
        # as a time window: the pieces in the runs' narrow forms
        spans = exchange_spans(comm, pieces, schema)
        accounts.phase_in_window("merge")
        return _merged_spans(spans, schema)
    if comm.size > 1:
        perm = np.argsort(_narrowest(dest, comm.size), kind="stable")
        counts = np.bincount(dest, minlength=comm.size).astype(np.int64)
        if spans is not None:   # each column gathered and put in destination order when sent
            rows = _merged_spans(spans, schema, perm)
            del perm
            send = rows.column_once
        else:
            mine = rows
            send = lambda name: np.take(mine[name], perm, axis=0)  # noqa: E731
        rows = exchange_columns(comm, lambda c: send(c.name), counts, schema)
    elif spans is not None:
        accounts.phase_in_window("merge")
        return _merged_spans(spans, schema)
    accounts.phase_in_window("merge")
    return _sorted_lazily(rows, schema)


def next_window_keys(cuts: dict[str, list[Key]], w: int, windows: int, pieces_per_window: int
                     ) -> dict[str, Key | None]:
    """Per table, the key every row of windows after w is >= (None: no rows after w)."""
    j = (w + 1) * pieces_per_window - 1
    return {name: c[j] if w + 1 < windows and j < len(c) else None for name, c in cuts.items()}


def window_count(comm: Comm, local_bytes: int, window_bytes: int) -> int:
    """Windows needed so that one window's rows on a rank take about ``window_bytes``."""
    total = comm.allreduce_sum(int(local_bytes))
    per_window = max(1, window_bytes) * comm.size
    return max(1, math.ceil(total / per_window))

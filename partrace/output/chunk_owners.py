"""Every HDF5 chunk written whole, once, by one rank: slices moved to chunk owners.

In time mode rank r receives rows [s_r, e_r) of each window of the global
order.  Those slices end anywhere, so a chunk of C rows (a dataset's chunk
length) at a slice's edge would hold rows of two ranks, or of two windows, and
someone would have to read it back, complete it and compress it again.

Instead each chunk has one *owner*: the rank holding its first row, or, for a
chunk a window ends inside, the rank that began it.  A rank's slice has at
most one chunk owned by another rank (the one its first row falls in: every
later chunk of the slice begins inside it), so each rank sends at most one
*head* per table and window, all tables and columns in one exchange.  An owner
writes whole chunks only: the chunks inside its slice straight from it, and
its *assembled* chunks (the one its slice ends inside, completed by the heads
of the slices after it, and the one it began in an earlier window) from the
pieces.  The rows of a chunk the window ends inside are *carried* by its owner
until a later window completes it or the table ends.

So at any rank count no chunk is compressed twice and the join copies stored
bytes only.  The geometry (:class:`Slices`) is numbers only, the same on every
rank; :class:`OwnedWriter` moves and writes the columns.

One exception to "the rank of the first row": a table whose rows end in the
window's one chunk (a small table, all its rows in one window) would so be
assembled by rank 0 every time, beside rank 0's serial work (the header, the
join).  Its chunk goes to the table's *solo* rank instead (named by the table,
never rank 0 when there are others), to which every slice is a head.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Slices:
    """One table's window: the ranks' slices [starts[r], ends[r]) of the global
    order, ``step`` rows per chunk, the chunk begun before the window (its first
    row ``carry_at`` and owner; both None when the window starts a chunk), and the
    ``solo`` rank that writes the window's one chunk of a table ending in it (None:
    chunks go to the rank of their first row)."""
    starts: np.ndarray
    ends: np.ndarray
    step: int
    carry_at: int | None = None
    carry_owner: int | None = None
    solo: int | None = None

    @staticmethod
    def of(first: int, counts, step: int, carry_at=None, carry_owner=None,
           name: str | None = None, later: bool = True) -> "Slices":
        """``name`` and ``later`` (rows of the table come in later windows) given: a
        table whose rows end in this window's one chunk, begun here, is written by
        the table's solo rank (:func:`solo_rank`)."""
        counts = np.asarray(counts, np.int64)
        ends = first + np.cumsum(counts)
        end = int(ends[-1]) if len(ends) else first
        solo = None
        if (name is not None and not later and len(counts) > 1 and carry_at is None
                and first % step == 0 and first < end <= first + step):
            solo = solo_rank(name, len(counts))
        return Slices(ends - counts, ends, step, carry_at, carry_owner, solo)

    @property
    def first(self) -> int:
        return int(self.starts[0])

    @property
    def end(self) -> int:
        return int(self.ends[-1])

    def owner(self, chunk: int) -> int:
        """The rank that writes chunk number ``chunk`` (which has rows in this window)."""
        if self.solo is not None:
            return self.solo
        row = chunk * self.step
        if row < self.first:
            return self.carry_owner
        return int(np.searchsorted(self.ends, row, side="right"))

    def head(self, rank: int) -> tuple[int, int | None]:
        """(rows at the start of ``rank``'s slice that another rank owns, that rank)."""
        s, e = int(self.starts[rank]), int(self.ends[rank])
        if s == e:
            return 0, None
        chunk = s // self.step
        who = self.owner(chunk)
        if who == rank:
            return 0, None
        return min(e, (chunk + 1) * self.step) - s, who

    def own(self, rank: int) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
        """``rank``'s rows it writes itself, as global (first, end) ranges: those in the
        chunk it carries, the whole chunks inside its slice, the chunk its slice ends in."""
        s, e = int(self.starts[rank]), int(self.ends[rank])
        if rank == self.solo:       # its rows, wherever in the chunk, are a piece of it
            return (s, s), (s, s), (s, e)
        s += self.head(rank)[0]
        step = self.step
        carried = s
        if rank == self.carry_owner and self.carry_at is not None and s < self.carry_at + step:
            carried = min(e, self.carry_at + step)
        tail = max(carried, e - e % step)
        return (s, carried), (carried, tail), (tail, e)

    def next_carry(self, later: bool) -> tuple[int | None, int | None]:
        """(first row, owner) of the chunk this window ends inside, while rows come later."""
        end = self.end
        if not later or end % self.step == 0:
            return None, None
        if end == self.first:       # no rows this window: the carried chunk stays
            return self.carry_at, self.carry_owner
        return end - end % self.step, self.owner((end - 1) // self.step)


def solo_rank(name: str, size: int) -> int:
    """The rank that writes table ``name``'s chunk when its rows end in one chunk of one
    window: one of ranks 1..size-1 by the name's CRC (the same on every rank and run;
    tables spread over the ranks), rank 0 alone only in a run of one."""
    return 1 + zlib.crc32(name.encode()) % (size - 1) if size > 1 else 0


class OwnedWriter:
    """One rank's side: ``write(comm, windows)`` per window, ``flush()`` at the end.

    ``put(name, column, values, row)`` writes whole chunks of a column at a global row
    (the sink's own writer: compression, zero chunks, pending threads)."""

    def __init__(self, put):
        self.put = put
        # per table: (first row, {column: values}) of the chunk this rank carries
        self.carried: dict[str, tuple[int, dict]] = {}
        # per table: (first row, owner) of the chunk the last window ended inside
        self.open: dict[str, tuple[int | None, int | None]] = {}
        # per table: the (first, end) row ranges this rank wrote
        self.spans: dict[str, list[tuple[int, int]]] = {}

    def slices(self, name: str, first: int, counts, step: int, later: bool = True) -> Slices:
        at, who = self.open.get(name, (None, None))
        return Slices.of(first, counts, step, at, who, name, later)

    def write(self, comm, plan, then) -> None:
        """One window, collective: one exchange of heads.  ``plan()`` gives the window's
        tables written here, per table (its Slices, this rank's table, its columns (names),
        whether rows come later); ``then(those)`` is the rest of the window's local work
        (the sink's other tables).  Each runs inside the guard of the work beside it, so
        that a window meets the other ranks at two checks (before and after the exchange),
        not four: each check waits for the slowest rank, and imbalances that would cancel
        within the window add up across checks."""
        heads, pieces, windows = [], {}, {}
        with comm.guard():      # a failed write fails every rank alike, before the exchange
            windows = plan()
            heads, pieces = self._cut(comm.rank, comm.size, windows)
        comm.check()
        got = comm.alltoall(heads) if comm.size > 1 else []
        with comm.guard():
            self._finish(windows, pieces, got)
            then(windows)
        comm.check()

    def _cut(self, rank: int, size: int, windows: dict) -> tuple[list[dict], dict]:
        """Write the whole chunks inside this rank's slices; return the heads for
        their owners (per rank: {table: ({column: values}, first row)}) and, per
        table, the pieces of the chunks this rank assembles."""
        heads: list[dict] = [{} for _ in range(size)]
        pieces: dict[str, list] = {}    # per table: (global row, {column: values})
        for name, (sl, table, columns, later) in windows.items():
            n, to = sl.head(rank)
            carried, inside, tail = sl.own(rank)
            s = int(sl.starts[rank])
            mine = pieces.setdefault(name, [])
            if name in self.carried:
                mine.append(self.carried.pop(name))
            edges = [r for r in (carried, tail) if r[1] > r[0]]
            kept: dict[int, dict] = {a: {} for a, _ in edges}
            for col in columns:     # one column of the window built at a time
                values = table.column_once(col)
                if n:
                    heads[to].setdefault(name, ({}, s))[0][col] = values[:n].copy()
                if inside[1] > inside[0]:
                    self.put(name, col, values[inside[0] - s:inside[1] - s], inside[0])
                for a, b in edges:      # copies: small, and kept past this window
                    kept[a][col] = values[a - s:b - s].copy()
            if inside[1] > inside[0]:
                self._wrote(name, inside)
            mine += list(kept.items())
        return heads, pieces

    def _finish(self, windows: dict, pieces: dict, got: list[dict]) -> None:
        """Write the assembled chunks from this rank's pieces and the heads it got."""
        for sent in got:
            for name, (cols, s) in sent.items():
                pieces[name].append((s, cols))
        for name, (sl, _, columns, later) in windows.items():
            self._assemble(name, sl, pieces[name], columns, later)
            self.open[name] = sl.next_carry(later)

    def _assemble(self, name, sl: Slices, pieces, columns, later: bool) -> None:
        """Write the whole chunks made of ``pieces`` (small: edges of slices), carry the
        one the window ends inside."""
        step = sl.step
        by_chunk: dict[int, list] = {}
        for at, cols in sorted(pieces, key=lambda p: p[0]):
            by_chunk.setdefault(at // step, []).append((at, cols))
        for chunk, parts in sorted(by_chunk.items()):
            first = chunk * step
            if parts[0][0] != first:
                raise AssertionError(f"{name}: chunk at row {first} starts at {parts[0][0]}")
            values = {c: np.concatenate([p[1][c] for p in parts]) for c in columns}
            rows = len(values[columns[0]]) if columns else 0
            if rows < step and later:
                if first + rows != sl.end:
                    raise AssertionError(f"{name}: chunk at row {first} incomplete mid-window")
                self.carried[name] = (first, values)
                continue
            self._wrote(name, (first, first + rows))
            for c in columns:
                self.put(name, c, values[c], first)

    def flush(self) -> None:
        """Write the chunks still carried (each ends its table: no later rows came)."""
        for name, (first, values) in self.carried.items():
            rows = len(next(iter(values.values()))) if values else 0
            self._wrote(name, (first, first + rows))
            for c, v in values.items():
                self.put(name, c, v, first)
        self.carried.clear()

    def _wrote(self, name: str, span: tuple[int, int]) -> None:
        self.spans.setdefault(name, []).append(span)

    def written(self, name: str) -> list[tuple[int, int]]:
        """The (first, end) row ranges this rank wrote of table ``name``, in order,
        adjacent ones joined."""
        out: list[tuple[int, int]] = []
        for a, b in sorted(self.spans.get(name, [])):
            if out and out[-1][1] == a:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
        return out

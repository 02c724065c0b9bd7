"""Walking one chunk of a rank file's calls: the scan kernel's output arrays, grown to fit,
held as a Walk (per call, array elements, strings, statuses, perf counters), and the
columns every table of the chunk shares (its location, its threads).  Below the decoder
and the tables it builds (events.py, comms.py)."""
from __future__ import annotations

import numpy as np

from ...errors import LimitError, TraceError
from ...model import column
from ..base import repeated
from . import scan
from .functable import FUNCTIONS
from .layout import RankFile
from .tables import THREAD


# most calls per chunk: a chunk's event columns (~1.5 MB each) and walk arrays stay
# within the caches and are reused from the allocator's free memory chunk after chunk
# (no fresh pages to fault in); 4x this took ~15% more CPU decoding and ~120 MB more
# peak memory merging the scale-1 suite trace (156 MB) at one rank
CHUNK_CALLS = 1 << 16
LOCATION = column("location")       # every table's location column (one rank: one value)


def locations(location: int, n: int) -> np.ndarray:
    """A chunk's location column: its rank's location on every row, as a view of one value."""
    return repeated(location, n, LOCATION)


def threads(w: "Walk", n: int, spread) -> np.ndarray:
    """A ``thread`` column of ``n`` rows from the chunk's calls: ``spread(w.thread)`` (the
    calls' threads repeated or indexed), or, when the chunk has one thread (the common case:
    sst-dumpi traces one thread per rank), a view of that one value (no pass at all)."""
    one = w.one_thread
    return spread(w.thread) if one is None else repeated(one, n, THREAD)


def _walk_arrays(nc: int, ne: int, ns: int, nt: int, npf: int):
    """The walk's output arrays (scan.walk), by group: per call, array elements, strings,
    statuses, perf values.  Indices and status fields in their tables' dtypes.  Not
    zeroed: the walk writes every element up to its counts (vals: the slots of each
    call's function, the only ones read), so neither a memset nor a fault of an unused
    slot's (or unused capacity's) pages."""
    def z(shape, dt=np.int64):
        return np.empty(shape, dt)
    i32, u8 = np.int32, np.uint8
    return [(z(nc), z(nc, np.int16), z(nc, u8), z(nc, np.uint16), z((4, nc)), z(nc, u8),
             z((scan.MAXARGS, nc))),
            (z(ne), z(ne), z(ne, i32), z(ne, i32), z(ne)),
            (z(ns), z(ns), z(ns, i32), z(ns, i32), z(ns), z(ns)),
            (z(nt), z(nt), z(nt, i32), z(nt, i32), z(nt, i32), z(nt, u8), z(nt, u8), z(nt, i32)),
            (z(npf), z(npf, i32), z(npf, np.uint64), z(npf, np.uint64))]


def _grown(group: tuple, used: int) -> tuple:
    """A group with twice the room (last axis), its ``used`` elements copied."""
    cap = max(2 * group[0].shape[-1], used + 1024)
    out = tuple(np.empty(a.shape[:-1] + (cap,), a.dtype) for a in group)
    for a, b in zip(group, out):
        b[..., :used] = a[..., :used]
    return out


def _cut(group: tuple, n: int) -> tuple:
    """The first ``n`` elements (per call: columns) of each array of a group, as views."""
    return tuple(a[..., :n] for a in group)


class Walk:
    """Raw result of walking (part of) one rank's stream (numpy arrays only).

    At most ``limit`` calls from byte ``pos`` (default: the whole stream);
    ``end`` is where the next chunk starts.  Call indices are chunk-local.
    ``vals[slot, call]``: scalar arguments (slot-major); ``e`` (call, slot, i0, i1, value),
    ``s`` (call, slot, i0, i1, start, length), ``t`` (call, slot, index, bytes, source,
    cancelled, error, tag), ``p`` (call, index, entry, exit): see scan.walk.
    """

    def __init__(self, data, rf: RankFile, pos: int | None = None, limit: int | None = None,
                 room: tuple[int, ...] | None = None):
        buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8)
        start, count, ops = scan.table_for(rf.version)
        offs = np.array([rf.cpu_offset, rf.wall_offset], np.int64)
        pos = rf.stream_start if pos is None else pos
        limit = np.iinfo(np.int64).max if limit is None else limit
        table = (offs, start, count, ops)
        # one pass: arrays with ``room`` (calls, elements, strings, statuses, perf values;
        # default: every call the bytes can hold, a record has 3 bytes at least), grown when
        # the walk finds one full (it stops at that record); views of the used part are kept
        nc = int(min(limit, max(rf.stream_end - pos, 0) // 3 + 1))
        room = (nc, nc, 16, nc // 2 + 16, 16) if room is None else (min(room[0], nc), *room[1:])
        arrays = _walk_arrays(*(max(int(r), 1) for r in room))
        n = np.zeros(5, np.int64)
        while True:
            err, pos, n = scan.walk(buf, pos, rf.stream_end, limit, table, n, *arrays)
            if err < scan.E_FULL:
                break
            g = err - scan.E_FULL
            arrays[g] = _grown(arrays[g], int(n[g]))
        self._check(err, pos, rf, buf)
        # libundumpi stops at an end-of-stream label, wherever it is: so does the walk (the
        # survey says what is left unread)
        self.early_end = int(pos) if err == scan.E_EOS else None
        self.end = rf.stream_end if err == scan.E_EOS else int(pos)
        nc, ne, ns, nt, npf = (int(x) for x in n)
        calls, self.e, self.s, self.t, self.p = (_cut(g, k) for g, k in
                                                 zip(arrays, (nc, ne, ns, nt, npf)))
        self.off, self.func, self.mask, self.thread, self.times, self.perfn, self.vals = calls
        self.buf = buf
        self._groups = self._efunc = self._counts = None
        self._one_thread = False

    @staticmethod
    def _check(err, at, rf, buf):
        if err == scan.E_UNKNOWN:
            fid = (int(buf[at]) << 8) | int(buf[at + 1])
            raise TraceError.at_byte(rf.path, at, f"unknown DUMPI function id {fid} "
                                     f"(expected a call label 0-289, 291 or 292)")
        if err == scan.E_TRUNC:
            raise TraceError.at_byte(rf.path, at, f"call record runs past the end of the call "
                                     f"stream at byte {rf.stream_end} (truncated or corrupt)")
        if err == scan.E_BIG:
            raise LimitError(f"{rf.path}: byte {at}: an argument of this call record holds more "
                             f"than {scan.INDEX_MAX} elements, more than partrace's int32 "
                             f"element index columns hold")

    def enter_leave(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(wall enter, wall leave, cpu enter, cpu leave) ns; wall falls back to cpu, then 0
        (the walk wrote them so: rows of ``times``, no copies)."""
        t = self.times
        return t[2], t[3], t[0], t[1]

    @property
    def one_thread(self) -> int | None:
        """The thread of every call of the chunk, when they share one; else None."""
        if self._one_thread is False:
            t = self.thread
            one = len(t) and t.min() == t.max()
            self._one_thread = int(t[0]) if one else None
        return self._one_thread

    @property
    def counts(self) -> np.ndarray:
        """Calls of each function in the chunk (one bincount, shared by its readers)."""
        if self._counts is None:
            self._counts = np.bincount(self.func, minlength=len(FUNCTIONS))
        return self._counts

    def present(self) -> list[int]:
        """The functions with calls in the chunk, ascending."""
        return np.flatnonzero(self.counts).tolist()

    def calls_of(self, fid: int) -> np.ndarray:
        """Chunk-local indices of the calls of ``fid``, ascending (one sort per chunk
        instead of a scan of all calls per function)."""
        if self._groups is None:
            order = np.argsort(self.func, kind="stable")
            self._groups = (order, np.cumsum(self.counts))
        order, ends = self._groups
        return order[(ends[fid - 1] if fid else 0):ends[fid]]

    @property
    def efunc(self) -> np.ndarray:
        """The function of each array element's call."""
        if self._efunc is None:
            self._efunc = self.func[self.e[0]]
        return self._efunc


def slot_arrays(w: Walk, call: int, k: int, nested: bool = False) -> list:
    """One call's array argument as a list (a list of lists for ranges)."""
    sel = (w.e[0] == call) & (w.e[1] == k)
    if not nested:
        return [int(x) for x in w.e[4][sel]]
    out: list[list[int]] = []
    for i0, x in zip(w.e[2][sel], w.e[4][sel]):
        while len(out) <= i0:
            out.append([])
        out[i0].append(int(x))
    return out

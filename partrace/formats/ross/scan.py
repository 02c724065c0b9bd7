"""Passes over a ROSS file's record headers: region bounds, then facts per region.

ROSS files carry no markers, so a record boundary can only be found by hopping
from byte 0.  The ranks hop the files once (headers only; listing.py: each rank a
stretch) and cut them into fixed-size byte regions; a region's unit decodes the
records that START in it.
The rank that owns a region surveys it (:func:`survey_region`): ids, model
data sizes, and records per raw key, the last so that a location's seq can run
on across regions (the engine passes each rank the sum over earlier regions).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import TraceError
from . import layouts as L
from .files import check_regular
from .hop import ERROR_TEXT, OK, hop_range
from .kernels import lp_facts, u32s, words


def u32_at(buf: np.ndarray, offs: np.ndarray, add: int = 0) -> np.ndarray:
    """Little-endian u32 at each byte offset + ``add`` (one compiled gather)."""
    out = np.empty(len(offs), np.int64)
    u32s(buf, words(buf), np.ascontiguousarray(offs, np.int64), np.int64(add), out)
    return out


# Byte offsets in a record of: its raw key when that is one u32 id (KP samples have two),
# the destination LP (event records: a second key), the PE and KP ids (records that name
# their LP's PE), the model data size.
KEY_AT = {L.PE: 24, L.LP: 32, L.LP_V1: 32, L.MODEL_GVT: 32, L.MODEL_RT: 32, L.VT_MODEL: 0,
          L.EVTRACE: 0}
DEST_AT = {L.EVTRACE: 4}
PE_KP_AT = {L.LP: (24, 28), L.LP_V1: (24, 28), L.MODEL_GVT: (24, 28), L.MODEL_RT: (24, 28),
            L.VT_MODEL: (16, 8)}
SIZE_AT = {L.VT_MODEL: 40, L.EVTRACE: 20, L.MODEL_GVT: 44, L.MODEL_RT: 44}


def raw_keys(buf: np.ndarray, starts: np.ndarray, code: int) -> np.ndarray:
    """Per-record key of the record's location in raw ids (scan and decode agree)."""
    if code == L.KP:
        return (u32_at(buf, starts, 24) << 32) | u32_at(buf, starts, 28)
    if code == L.EVTRACE:   # one SEND row on the source LP, one RECV row on the destination LP
        return np.stack([u32_at(buf, starts, KEY_AT[code]),
                         u32_at(buf, starts, DEST_AT[code])], 1).ravel()
    return u32_at(buf, starts, KEY_AT.get(code, 0))      # VT model: lp_id (low half)


def ids(buf: np.ndarray, starts: np.ndarray, code: int):
    """(pe, kp, lp) id arrays a record carries (None where it has none)."""
    if code == L.PE:
        return u32_at(buf, starts, KEY_AT[code]), None, None
    if code == L.KP:
        return u32_at(buf, starts, 24), u32_at(buf, starts, 28), None
    if code in PE_KP_AT:
        pe_at, kp_at = PE_KP_AT[code]
        return (u32_at(buf, starts, pe_at), u32_at(buf, starts, kp_at),
                u32_at(buf, starts, KEY_AT[code]))
    return None, None, np.concatenate([u32_at(buf, starts, KEY_AT[L.EVTRACE]),
                                       u32_at(buf, starts, DEST_AT[L.EVTRACE])])


def model_sizes(buf: np.ndarray, starts: np.ndarray, code: int) -> np.ndarray | None:
    off = SIZE_AT.get(code)
    return None if off is None else u32_at(buf, starts, off)


def open_bytes(path: Path) -> np.ndarray:
    """The file as a read-only uint8 array (empty files cannot be memory-mapped).
    Checked to be a regular file first: opening a FIFO would block."""
    if check_regular(path) == 0:
        return np.empty(0, np.uint8)
    try:
        return np.memmap(path, np.uint8, "r").view(np.ndarray)
    except OSError as exc:                  # unreadable (permissions, I/O error)
        raise TraceError(path, None, f"cannot read: {exc.strerror or exc}") from exc


def release(buf: np.ndarray, upto: int) -> None:
    """Drop the mapped pages before byte `upto` from this process's resident set.

    They stay in the page cache; without this a scan over a whole file keeps
    every page it touched resident, which counts against the memory budget
    (and against a batch system's RSS limit).
    """
    import mmap
    m = buf
    while m is not None and not isinstance(m, mmap.mmap):
        m = getattr(m, "base", None)
    n = upto - upto % mmap.PAGESIZE
    if m is not None and n > 0:
        m.madvise(mmap.MADV_DONTNEED, 0, n)


def hop_checked(path: Path, buf: np.ndarray, pos: int, end: int, family: int):
    starts, codes, nxt, err, epos, val = hop_range(buf, pos, end, family)
    if err != OK:
        raise TraceError.at_byte(path, epos, ERROR_TEXT[err].format(v=val))
    return starts, codes, nxt


def hop_region(path: Path, buf: np.ndarray, start: int, end: int, kind: str, hop=None):
    """(starts, codes) of the records in a region whose bounds an earlier hop found: ``hop``
    if this process made that hop (kept by the reader), else a new hop; a TraceError if
    they no longer end at ``end``."""
    if hop is not None:
        if len(buf) < end:      # the kept offsets would point past the file
            raise TraceError.at_byte(path, len(buf), f"expected a record ending at byte {end} "
                                     "(file changed since it was scanned?)")
        return hop
    starts, codes, nxt = hop_checked(path, buf, start, end, L.FAMILY[kind])
    if nxt != end:
        raise TraceError.at_byte(path, nxt, f"expected a record boundary at byte {end} "
                                 "(file changed since it was scanned?)")
    return starts, codes


def _lookup(keys: np.ndarray, counts: np.ndarray, q: np.ndarray) -> np.ndarray:
    """counts of each q in (sorted keys, counts); 0 where absent."""
    if len(keys) == 0:
        return np.zeros(len(q), np.int64)
    i = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
    return np.where(keys[i] == q, counts[i], 0)


def small_keys(keys: np.ndarray) -> bool:
    """Keys dense enough to count with bincount instead of sorting (LP ids, sizes)."""
    return bool(len(keys)) and keys.min() >= 0 and keys.max() < 4 * len(keys) + 4096


def key_counts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(keys, return_counts=True), by counting when the keys are small."""
    if not small_keys(keys):
        return np.unique(keys, return_counts=True)
    c = np.bincount(keys)
    u = np.flatnonzero(c)
    return u, c[u]


def first_index(keys: np.ndarray) -> np.ndarray:
    """np.unique(keys, return_index=True)[1]: the first row of each key, by key."""
    if not small_keys(keys):
        return np.unique(keys, return_index=True)[1]
    first = np.full(int(keys.max()) + 1, -1, np.int64)
    first[keys[::-1]] = np.arange(len(keys) - 1, -1, -1)     # the last write wins
    return first[first >= 0]


def first_rows(m: np.ndarray) -> np.ndarray:
    """One row of (lp, pe, kp) per lp, sorted by lp (the least, should an LP
    ever appear on two PEs: independent of the order of the rows)."""
    m = np.asarray(m, np.int64).reshape(-1, 3)
    if not len(m):
        return m
    m = m[np.lexsort(((m[:, 1] << 32) | m[:, 2], m[:, 0]))]     # ids are u32
    return m[np.r_[True, m[1:, 0] != m[:-1, 0]]]


def add_counts(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]):
    """Sum of two (sorted keys, counts) pairs."""
    if not len(a[0]) or not len(b[0]):
        return (a if len(a[0]) else b)
    if np.array_equal(a[0], b[0]):     # the usual case: every region samples every LP
        return a[0], a[1] + b[1]
    keys = np.concatenate([a[0], b[0]])
    weights = np.concatenate([a[1], b[1]])
    if small_keys(keys):        # LP ids: count densely, no sort (float sums are exact < 2**53)
        total = np.bincount(keys, weights=weights)
        u = np.flatnonzero(total)
        return u, total[u].astype(np.int64)
    u, inv = np.unique(keys, return_inverse=True)
    return u, np.bincount(inv, weights=weights).astype(np.int64)


def add_keyed(a: dict, b: dict) -> dict:
    """{code: (keys, counts)} + {code: (keys, counts)}."""
    out = dict(a)
    for code, kc in b.items():
        out[code] = add_counts(out[code], kc) if code in out else kc
    return out


def _union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sorted unique ids of two sorted unique arrays."""
    if not len(a) or np.array_equal(a, b):
        return b
    if not len(b):
        return a
    lo, hi = min(a[0], b[0]), max(a[-1], b[-1])
    if lo >= 0 and hi < 4 * (len(a) + len(b)) + 4096:    # LP ids: a mask
        seen = np.zeros(int(hi) + 1, bool)
        seen[a] = seen[b] = True
        return np.flatnonzero(seen)
    return merge_unique(a, b)


def merge_unique(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.union1d of two sorted unique arrays, by merging them (a stable sort of two
    sorted runs is one linear merge; np.union1d hashes and sorts again)."""
    both = np.concatenate([a, b])
    both.sort(kind="stable")
    return both[np.r_[True, both[1:] != both[:-1]]]


def first_pairs(lp: np.ndarray, size: np.ndarray, starts: np.ndarray):
    """(the distinct (LP << 32 | size) as uint64, sorted; the first of ``starts`` (ascending)
    of each): np.unique(pairs, return_index=True), without sorting every record when the LP
    ids are small: each LP's first record, and the few whose size differs from it."""
    pairs = (lp.astype(np.uint64) << np.uint64(32)) | size.astype(np.uint64)
    if not small_keys(lp):
        u, first = np.unique(pairs, return_index=True)
        return u, starts[first]
    at = np.full(int(lp.max()) + 1, -1, np.int64)
    at[lp[::-1]] = np.arange(len(lp) - 1, -1, -1)         # the last write wins: the first row
    heads = at[at >= 0]
    odd = np.flatnonzero(size != size[at[lp]])
    rows = np.concatenate([heads, odd])                   # each pair's first row comes first
    u, first = np.unique(pairs[rows], return_index=True)
    return u, starts[rows[first]]


def _first_pairs(a, b):
    """Union of two (sorted distinct pairs, first offsets), keeping the least offset."""
    if a is None or b is None:
        return a if b is None else b
    if np.array_equal(a[0], b[0]):      # the usual case: the same LPs, one size each
        return a[0], np.minimum(a[1], b[1])
    pairs, offs = np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]])
    order = np.lexsort((offs, pairs))
    pairs, offs = pairs[order], offs[order]
    keep = np.r_[True, pairs[1:] != pairs[:-1]]
    return pairs[keep], offs[keep]


def check_one_size_per_lp(path: Path, code: int, pairs: np.ndarray, offs: np.ndarray) -> None:
    """ROSS gives all model data of one LP the same size; a record that differs from the
    first size seen for its LP has a corrupt size field (or swallowed the records after it)."""
    lp = (pairs >> np.uint64(32)).astype(np.int64)
    first_of_lp = np.r_[True, lp[1:] != lp[:-1]]
    if first_of_lp.all():
        return
    # per LP the size met first in the file is taken as right; the first record of any
    # other size is the error, the earliest of them is reported
    order = np.lexsort((offs, lp))
    lp_s, off_s, size_s = lp[order], offs[order], (pairs[order] & np.uint64(0xFFFFFFFF))
    later = np.r_[False, lp_s[1:] == lp_s[:-1]]
    i = int(np.flatnonzero(later)[np.argmin(off_s[later])])
    j = i - 1
    while later[j]:
        j -= 1
    field = {L.EVTRACE: "model_data_sz", L.VT_MODEL: "sample_size"}.get(code, "model_size")
    raise TraceError.at_byte(path, int(off_s[i]), f"{field} {int(size_s[i])} for LP "
                             f"{int(lp_s[i])}, but its record at byte {int(off_s[j])} has "
                             f"{int(size_s[j])} (expected one size per LP: ROSS writes its "
                             "model type's size)")


def _add_dicts(a: dict, b: dict) -> dict:
    return {k: a.get(k, 0) + b.get(k, 0) for k in sorted(a.keys() | b.keys())}


@dataclass
class FileFacts:
    """What the records of one file (or of some of its regions) tell."""

    kind: str
    size: int
    counts: dict = field(default_factory=dict)     # code -> records
    sizes: dict = field(default_factory=dict)      # code -> {model data size: records}
    # ids that occur, sorted and unique (PE and KP samples; LP ids of all records)
    pe_ids: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    kp_keys: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # L.kp_key(pe, kp)
    lp_ids: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    lp_map: np.ndarray = field(default_factory=lambda: np.empty((0, 3), np.int64))
    keys: dict = field(default_factory=dict)       # code -> (sorted raw keys, records each)
    # code -> (distinct (LP << 32 | model data size) as uint64, first byte offset of each)
    size_pairs: dict = field(default_factory=dict)

    def __add__(self, other: "FileFacts") -> "FileFacts":
        """Facts of both parts (order-free, so any grouping gives the same)."""
        return FileFacts(
            self.kind, self.size,
            {c: self.counts.get(c, 0) + other.counts.get(c, 0)
             for c in sorted(self.counts.keys() | other.counts.keys())},
            {c: _add_dicts(self.sizes.get(c, {}), other.sizes.get(c, {}))
             for c in sorted(self.sizes.keys() | other.sizes.keys())},
            _union(self.pe_ids, other.pe_ids), _union(self.kp_keys, other.kp_keys),
            _union(self.lp_ids, other.lp_ids),
            self.lp_map if np.array_equal(self.lp_map, other.lp_map)
            else first_rows(np.concatenate([self.lp_map, other.lp_map])),
            add_keyed(self.keys, other.keys),
            {c: _first_pairs(self.size_pairs.get(c), other.size_pairs.get(c))
             for c in sorted(self.size_pairs.keys() | other.size_pairs.keys())})


def survey_region(path: Path, kind: str, start: int, end: int, hop=None) -> FileFacts:
    """Facts of the records starting in [start, end) (a region's bounds); ``hop``: the
    (starts, codes) of those records if this process has hopped them already."""
    buf = open_bytes(path)
    fs = FileFacts(kind, len(buf))
    starts, codes = hop_region(path, buf, start, end, kind, hop)
    maps = []
    present = key_counts(codes.astype(np.int64))[0].tolist()
    for code in present:
        sel = starts if len(present) == 1 else starts[codes == code]
        fs.keys[code], lp_map, ms, pairs = code_facts(buf, sel, code)
        if pairs is not None:
            fs.size_pairs[code] = pairs
        fs.counts[code] = len(sel)
        # The ids that occur (sorted sets: O(distinct ids), whatever their values).  The raw
        # keys are already those of PE and KP samples, and the LP ids of all other records;
        # the PE / KP an LP lives on come from lp_map (read_definitions).
        seen = fs.keys[code][0]
        if code == L.PE:
            fs.pe_ids = _union(fs.pe_ids, seen)
        elif code == L.KP:
            fs.kp_keys = _union(fs.kp_keys, seen)
            fs.pe_ids = _union(fs.pe_ids, np.unique(seen >> 32))
        else:
            fs.lp_ids = _union(fs.lp_ids, seen)
        if lp_map is not None:
            maps.append(lp_map)
        if ms is not None:
            u, n = key_counts(ms)
            fs.sizes[code] = dict(zip(u.tolist(), n.tolist()))
    if maps:     # one map (LP samples only) is already one row per lp, by lp
        fs.lp_map = maps[0] if len(maps) == 1 else first_rows(np.concatenate(maps))
    return fs



def code_facts(buf: np.ndarray, sel: np.ndarray, code: int, dense: bool = True):
    """Facts of the records ``sel`` (ascending starts) of one type: (their raw keys and
    records each, (lp, pe, kp) of each LP's first record or None, the model data size of
    each record or None, (distinct (LP << 32 | size), first start of each) or None).

    Ids that are dense (as ROSS's are) are counted in one compiled pass over the headers
    (:func:`kernels.lp_facts`); else (or ``dense`` False) by sorting, as the reference."""
    if dense and code in KEY_AT and len(sel):
        counted = _count_dense(buf, np.ascontiguousarray(sel, np.int64), code)
        if counted is not None:
            return _dense_facts(buf, sel, code, *counted)
    keys = raw_keys(buf, sel, code)
    lp_map = None
    if code not in (L.PE, L.KP, L.EVTRACE):             # records that name their LP's PE
        pe, kp, lp = ids(buf, sel, code)
        first = first_index(lp)                           # ROSS LPs never migrate
        lp_map = np.stack([lp[first], pe[first], kp[first]], 1)
    ms = model_sizes(buf, sel, code)
    pairs = None
    if ms is not None:
        # the LP whose model type sets the size: ROSS writes the destination LP's ev_sz in
        # event records, the LP's own mstat_sz / sample_struct_sz in model records
        # (st-event-trace.c, st-model-data.c, analysis-lp.c); both read already as keys
        pairs = first_pairs(keys[1::2] if code == L.EVTRACE else keys, ms, sel)
    return key_counts(keys), lp_map, ms, pairs


def _count_dense(buf, sel, code):
    """(count, first, pfirst, odd, sizes) of :func:`kernels.lp_facts` over all of ``sel``;
    None if an id is too large to count densely (more than 4 x the keys + 4096)."""
    limit = 4 * len(sel) * (2 if code in DEST_AT else 1) + 4096
    size_at = SIZE_AT.get(code, -1)
    sizes = np.empty(len(sel) if size_at >= 0 else 0, np.int64)
    cap, count, first, pfirst, psize = 0, *(np.zeros(0, np.int64),) * 4
    odd, nodd = np.zeros(16, np.int64), np.zeros(1, np.int64)
    if sys.byteorder == "little" and len(buf) >= 4 and not (sel & 3).any():
        buf = buf[:len(buf) // 4 * 4].view(np.uint32)       # ROSS's own records: word reads
    i = 0
    while True:
        i, need = lp_facts(buf, sel, i, KEY_AT[code], DEST_AT.get(code, -1), size_at, count,
                           first, pfirst, psize, sizes, odd, nodd)
        if need == -1:
            return count, first, pfirst, odd[:nodd[0]], sizes
        if need == -2:
            odd = np.concatenate([odd, np.zeros_like(odd)])
            continue
        if need >= limit:
            return None
        cap = min(limit, max(2 * cap, need + 1, 1024))
        count, first, pfirst, psize = (np.concatenate([a, np.full(cap - len(a), fill, np.int64)])
                                       for a, fill in ((count, 0), (first, -1), (pfirst, -1),
                                                       (psize, -1)))


def _dense_facts(buf, sel, code, count, first, pfirst, odd, ms):
    """:func:`code_facts`'s answer from the dense counts of :func:`kernels.lp_facts`."""
    u = np.flatnonzero(count)
    lp_map = None
    if code in PE_KP_AT:        # every key is an LP with a first record
        at = sel[first[u]]
        pe_at, kp_at = PE_KP_AT[code]
        lp_map = np.stack([u, u32_at(buf, at, pe_at), u32_at(buf, at, kp_at)], 1)
    pairs = None
    if code in SIZE_AT:
        heads = np.flatnonzero(pfirst >= 0)       # each size-LP's first record, by LP
        rows = np.concatenate([pfirst[heads], odd])
        lp = np.concatenate([heads, u32_at(buf, sel[odd], DEST_AT.get(code, KEY_AT[code]))])
        both = (lp.astype(np.uint64) << np.uint64(32)) | ms[rows].astype(np.uint64)
        if len(odd):        # as first_pairs: each pair's first row comes first in rows
            both, at = np.unique(both, return_index=True)
            rows = rows[at]
        pairs = both, sel[rows]
    return (u, count[u]), lp_map, (ms if code in SIZE_AT else None), pairs

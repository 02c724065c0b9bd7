"""One pass over a ROSS file's record headers: region boundaries, seq prefixes, ids.

ROSS files carry no markers, so a record boundary can only be found by hopping
from byte 0.  The scan (one rank, once per file, reads every header) cuts the
file into fixed-size byte regions; a region's unit decodes the records that
START in it.  For each region it records the first record start and, per
table, how many records each location had before the region, so any rank can
number its records (seq) without reading earlier regions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import TraceError
from . import layouts as L
from .hop import ERROR_TEXT, OK, hop_range
from .kernels import u32s


def u32_at(buf: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """Little-endian u32 at each byte offset (vectorised gather)."""
    out = np.empty(len(offs), np.int64)
    u32s(buf, np.ascontiguousarray(offs, np.int64), out)
    return out


def raw_keys(buf: np.ndarray, starts: np.ndarray, code: int) -> np.ndarray:
    """Per-record key of the record's location in raw ids (scan and decode agree)."""
    if code == L.PE:
        return u32_at(buf, starts + 24)
    if code == L.KP:
        return (u32_at(buf, starts + 24) << 32) | u32_at(buf, starts + 28)
    if code in (L.LP, L.MODEL_GVT, L.MODEL_RT):
        return u32_at(buf, starts + 32)
    if code == L.EVTRACE:   # one SEND row on the source LP, one RECV row on the destination LP
        return np.stack([u32_at(buf, starts), u32_at(buf, starts + 4)], 1).ravel()
    return u32_at(buf, starts)          # VT model lp_id (low half)


def ids(buf: np.ndarray, starts: np.ndarray, code: int):
    """(pe, kp, lp) id arrays a record carries (None where it has none)."""
    if code == L.PE:
        return u32_at(buf, starts + 24), None, None
    if code == L.KP:
        return u32_at(buf, starts + 24), u32_at(buf, starts + 28), None
    if code in (L.LP, L.MODEL_GVT, L.MODEL_RT):
        return u32_at(buf, starts + 24), u32_at(buf, starts + 28), u32_at(buf, starts + 32)
    if code == L.VT_MODEL:
        return u32_at(buf, starts + 16), u32_at(buf, starts + 8), u32_at(buf, starts)
    return None, None, np.concatenate([u32_at(buf, starts), u32_at(buf, starts + 4)])


def model_sizes(buf: np.ndarray, starts: np.ndarray, code: int) -> np.ndarray | None:
    off = {L.VT_MODEL: 40, L.EVTRACE: 20, L.MODEL_GVT: 44, L.MODEL_RT: 44}.get(code)
    return None if off is None else u32_at(buf, starts + off)


def open_bytes(path: Path) -> np.ndarray:
    """The file as a read-only uint8 array (empty files cannot be memory-mapped)."""
    if path.stat().st_size == 0:
        return np.empty(0, np.uint8)
    return np.memmap(path, np.uint8, "r").view(np.ndarray)


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
    """Rows of (lp, pe, kp) with the first occurrence of each lp, sorted by lp."""
    return m[np.unique(m[:, 0], return_index=True)[1]]


@dataclass
class FileScan:
    path: Path
    kind: str
    size: int
    regions: list = field(default_factory=list)    # (index, start, end, {code: (keys, prefix)})
    counts: dict = field(default_factory=dict)     # code -> records
    sizes: dict = field(default_factory=dict)      # code -> set of model data sizes
    max_pe: int = -1
    max_kp: int = -1
    max_lp: int = -1
    lp_map: np.ndarray = None                      # (n, 3) unique rows lp, pe, kp


def scan_file(path: Path, kind: str, region_size: int) -> FileScan:
    buf = open_bytes(path)
    fs = FileScan(path, kind, len(buf))
    family = L.FAMILY[kind]
    running: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    maps = []
    pos = 0
    nreg = -(-len(buf) // region_size)
    for k in range(nreg):
        end = min((k + 1) * region_size, len(buf))
        starts, codes, nxt = hop_checked(path, buf, pos, end, family)
        prefix = {}
        for code in key_counts(codes.astype(np.int64))[0].tolist():
            sel = starts[codes == code]
            u, c = key_counts(raw_keys(buf, sel, code))
            rk, rc = running.get(code, (np.empty(0, np.int64), np.empty(0, np.int64)))
            prefix[code] = (u, _lookup(rk, rc, u))
            allk = np.concatenate([rk, u])                    # union of two sorted sets
            allk.sort(kind="stable")
            allk = allk[np.r_[True, allk[1:] != allk[:-1]]] if len(allk) else allk
            running[code] = (allk, _lookup(rk, rc, allk) + _lookup(u, c, allk))
            fs.counts[code] = fs.counts.get(code, 0) + len(sel)
            pe, kp, lp = ids(buf, sel, code)
            for arr, attr in ((pe, "max_pe"), (kp, "max_kp"), (lp, "max_lp")):
                if arr is not None and len(arr):
                    setattr(fs, attr, max(getattr(fs, attr), int(arr.max())))
            if pe is not None and lp is not None:
                first = first_index(lp)                           # ROSS LPs never migrate
                maps.append(np.stack([lp[first], pe[first], kp[first]], 1))
            ms = model_sizes(buf, sel, code)
            if ms is not None:
                fs.sizes.setdefault(code, set()).update(key_counts(ms)[0].tolist())
        if len(starts):
            fs.regions.append((k, pos, nxt, prefix))
        pos = nxt
        release(buf, pos)
    fs.lp_map = first_rows(np.concatenate(maps)) if maps else np.empty((0, 3), np.int64)
    return fs

"""Compressing chunks here, HDF5's way, and storing them with ``write_direct_chunk``.

A dataset keeps the filters it declares (integers: scale-offset, shuffle,
deflate; others: shuffle, deflate), and each chunk's filter mask says which of
them it went through: plain h5py, pandas or h5dump decode the chunks written
here as any others.  Doing it here instead of through HDF5's pipeline saves
work HDF5 cannot know to skip:

* a chunk of integers spanning fewer than 64 values is packed by scale-offset
  (``encode``; HDF5's own encoding) and deflated, skipping shuffle; any other
  goes shuffle + deflate, skipping scale-offset.

* shuffled columns of small numbers end in byte planes that are all one value
  (the high bytes of an int64 of small ids: 0, or 0xFF for negative ones).
  zlib goes over those at ~600 MB/s, as long as over the rest (on the DUMPI
  suite trace they are half the bytes).  Here the planes before them are
  deflated, then a deflate block of that run (computed once per length and
  byte, and cached) ends the stream, and the checksum is extended by formula.
* deflate is zlib-ng's (the ``zlib-ng`` package) where installed, at the level
  the dataset declares: the layout's level 1 is zlib-ng's deflate_quick, 40-60%
  less CPU than its level 2 (the default before) for ~1.1-2.2x the bytes on the
  suite traces (``--compress gzip`` declares level 2); zlib's where it is not
  (the same kind of stream to every reader, slower).
* bytes deflate cannot shrink (random ones: ROSS model data, the low byte planes
  of a sorted time column) are told by a small probe, per byte plane of shuffled
  rows, and go as stored blocks (still deflate), not through the encoder: on the
  ovni and ROSS suite traces 0.82x and 0.49x the CPU of judging whole chunks,
  for the same bytes.
* where a rank has cores to spare (``default_threads``) the compression runs on
  a pool of threads (zlib, numpy's copies and the kernels release the GIL) while
  the writes stay on the calling thread (HDF5 is not thread-safe), consecutive
  chunks of a dataset ~1 MiB to a job (``BATCH_BYTES``).

A chunk's stored bytes depend only on its rows (``encode`` is a function of
them): the same whatever the rank count or the windows; the one-file join copies
stored chunks raw.  A chunk two writes share is read back from its stored bytes
(``read_back``) and stored again at once (``_rewrite``): see there for the two
HDF5 behaviours that make this necessary.  Chunks of all-zero rows are not
stored (the fill value reads back).
"""
from __future__ import annotations

import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from h5py import h5z

from ...errors import UsageError
from ...kernels.reduce import min_max

try:    # zlib-ng: faster than zlib at the same level
    from zlib_ng import zlib_ng as FAST_DEFLATE
except ImportError:     # pragma: no cover - the zlib-ng wheel is a dependency
    FAST_DEFLATE = None

ADLER = 65521
PENDING_BYTES = 16 << 20    # rows held by chunks still compressing (per writer)
MIN_RUN = 4096          # shorter constant tails are left to deflate (a flush costs 5 bytes)
_pool: ThreadPoolExecutor | None = None
_threads = 0


def _lib(level: int):
    """(deflate module, its level) for a dataset's declared deflate ``level``:
    zlib-ng's same level where installed (its level 1, deflate_quick, is the
    layout's default: about half the CPU of its level 2 for ~1.1-2.2x the bytes on
    the suite traces), else zlib's."""
    if FAST_DEFLATE is not None:
        return FAST_DEFLATE, level
    return zlib, level


def _forget_pool_in_child() -> None:
    """A forked child inherits the pool object but none of its threads: work submitted
    to it would wait forever.  The child makes its own pool when it needs one."""
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def set_threads(n: int) -> None:
    """Threads that compress chunks besides the calling thread (0: none, it compresses)."""
    global _pool, _threads
    if n != _threads and _pool is not None:
        _pool.shutdown()
        _pool = None
    _threads = max(0, int(n))


THREADS_ENV = "PARTRACE_H5_THREADS"     # compressing threads per rank, if set (0: none)
MIN_SHARE = 3       # cores per rank from which chunks compress on a pool


def default_threads(ranks: int) -> int:
    """Threads that compress this rank's chunks: ``PARTRACE_H5_THREADS`` if set, else
    from this rank's share of the cores (ranks sharing one node assumed): none below
    MIN_SHARE (the calling thread compresses), the share from it.  With one spare core
    (1 rank on 2 cores, 65,536-row chunks) one thread took the ovni suite merge to
    0.93x the wall time for 1.10x the CPU (system time 0.24 -> 0.40 s; 3 interleaved
    pairs, idle), so it stays off there: CPU per core is what a cluster pays."""
    chosen = os.environ.get(THREADS_ENV, "").strip()
    if chosen:
        if not chosen.isdigit():
            raise UsageError(f"{THREADS_ENV}={chosen}: a number of threads (0: none)")
        return int(chosen)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:      # not Linux
        cores = os.cpu_count() or 1
    share = cores // max(1, ranks)
    if share < MIN_SHARE:
        return 0
    return 1 if share == MIN_SHARE else share


class Codec(NamedTuple):
    """How a dataset's chunks are stored here: shuffle, deflate level, and the filter
    mask bits that skip its scale-offset and shuffle filters for one chunk (0: the
    dataset has no such filter)."""
    shuffle: bool
    level: int
    skip_scale: int = 0
    skip_shuffle: int = 0


def codec(ds) -> Codec | None:
    """The Codec of a chunked dataset compressed by deflate last, after shuffle and
    (integers) lossless scale-offset; None for any other pipeline (lzf ...: h5py
    writes those itself)."""
    if ds.chunks is None or ds.compression != "gzip" or ds.fletcher32:
        return None
    scaled = ds.scaleoffset is not None
    if scaled and (ds.scaleoffset != 0 or ds.dtype.kind not in "iu"):
        return None         # lossy (floats), or a fixed bit count
    plist = ds.id.get_create_plist()
    ids = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    if ids[-1] != h5z.FILTER_DEFLATE:
        return None
    return Codec(bool(ds.shuffle), int(ds.compression_opts),
                 1 << ids.index(h5z.FILTER_SCALEOFFSET) if scaled else 0,
                 1 << ids.index(h5z.FILTER_SHUFFLE) if ds.shuffle else 0)


WORDS = {2: np.uint16, 4: np.uint32, 8: np.uint64}     # element sizes shuffled by the kernel


def shuffled(chunk: np.ndarray, keep: int | None = None) -> np.ndarray:
    """The chunk's bytes in HDF5 shuffle order (byte j of every element, j = 0, 1, ...),
    the first ``keep`` planes of them."""
    size = chunk.dtype.itemsize
    flat = np.ascontiguousarray(chunk).reshape(-1)
    keep = size if keep is None else keep
    if size in WORDS:
        from .shuffle import planes     # numba: imported by a write, not by a reader
        out = np.empty(keep * len(flat), np.uint8)
        planes(flat.view(WORDS[size]), keep, out)
        return out
    raw = flat.view(np.uint8)
    if size == 1:
        return raw
    return np.ascontiguousarray(raw.reshape(-1, size).T[:keep]).reshape(-1)


def _constant_planes(lo: int, hi: int, size: int) -> tuple[int, int]:
    """(how many of the top byte planes hold one same byte in every element, that
    byte), from the smallest and largest element read as unsigned: the top bytes
    that lo and hi share are shared by everything between them."""
    same = size - ((lo ^ hi).bit_length() + 7) // 8
    byte = (lo >> (8 * (size - 1))) & 0xFF
    k = 0
    while k < same and (lo >> (8 * (size - 1 - k))) & 0xFF == byte:
        k += 1
    return k, byte


@lru_cache(maxsize=256)
def _run_block(byte: int, length: int, level: int) -> bytes:
    """Raw deflate of ``length`` bytes ``byte``, final block set: it starts with a
    literal and refers to nothing before it, so it ends any byte-aligned stream."""
    lib, lib_level = _lib(level)
    co = lib.compressobj(lib_level, zlib.DEFLATED, -15)
    return co.compress(bytes([byte]) * length) + co.flush()


@lru_cache(maxsize=16)
def _header(level: int) -> bytes:
    lib, lib_level = _lib(level)
    return lib.compress(b"", lib_level)[:2]


PROBE = 4096            # bytes deflated first to tell rows deflate cannot shrink
PROBE_SLICES = 8        # taken from this many places spread over the chunk
PLANE_PROBE = 1024      # the same for one byte plane of shuffled rows, from
PLANE_SLICES = 2        # this many places: 1 KiB judged as the whole plane on the
                        # suite traces (512 B took a 20%-compressible plane for random)
STORED_FROM = 0.95      # the probe's deflated/raw from which bytes go as stored blocks
STORED_MAX = 65535      # bytes of one stored block


def _incompressible(head: np.ndarray, lib, lib_level: int, probe: int = PROBE,
                    slices: int = PROBE_SLICES) -> bool:
    """True when a probe of ``head`` (slices spread over it) does not shrink: random
    bytes (ROSS model data, the low byte planes of timestamps) cost deflate ~8x the
    CPU of compressible ones for nothing; they go as stored blocks instead (a copy
    and a checksum), still deflate to every reader.  A function of the bytes alone."""
    n = len(head)
    if n < 4 * probe:
        return False
    step = probe // slices
    sample = np.concatenate([head[i * n // slices:][:step] for i in range(slices)])
    return len(lib.compress(sample, lib_level)) >= STORED_FROM * len(sample)


def _segments(head: np.ndarray, planes: int, level: int, lib, lib_level: int
              ) -> list[tuple[int, int, bool]]:
    """(first byte, end, deflate it) of runs of ``head``'s byte planes that deflate
    alike: the low planes of a sorted time column are random, its high ones are not,
    and deflate's fixed-code encoder (level 1) spends most of its time on the random
    ones to emit more bytes than it read.  Level 2 (``--compress gzip``) deflates all."""
    if not len(head):
        return []
    if level != 1:
        return [(0, len(head), True)]
    if planes <= 1:
        return [(0, len(head), not _incompressible(head, lib, lib_level))]
    size = len(head) // planes
    out: list[tuple[int, int, bool]] = []
    for j in range(planes):
        squeeze = not _incompressible(head[j * size:(j + 1) * size], lib, lib_level,
                                      PLANE_PROBE, PLANE_SLICES)
        if out and out[-1][2] == squeeze:
            out[-1] = (out[-1][0], (j + 1) * size, squeeze)
        else:
            out.append((j * size, (j + 1) * size, squeeze))
    return out


def _stored_blocks(data: np.ndarray, final: bool) -> list:
    """``data`` as raw deflate stored blocks (byte-aligned: they follow a flushed block),
    the last one final if ``final``."""
    out = []
    view = memoryview(data)
    for at in range(0, len(data), STORED_MAX):
        piece = view[at:at + STORED_MAX]
        last = final and at + STORED_MAX >= len(data)
        n = len(piece)
        out += [bytes((last, n & 0xFF, n >> 8, ~n & 0xFF, (~n >> 8) & 0xFF)), piece]
    return out


def deflate(head: np.ndarray, byte: int, run: int, level: int, planes: int = 1) -> bytes:
    """zlib stream of ``head`` (bytes: ``planes`` byte planes of equal length) then
    ``run`` bytes ``byte``: what HDF5's deflate filter reads.  Planes deflate cannot
    shrink go as stored blocks; the run is not deflated: a cached block of it ends
    the stream."""
    lib, lib_level = _lib(level)
    segments = _segments(head, planes, level, lib, lib_level)
    if not run and len(segments) == 1:      # one kind of bytes throughout: one call
        return lib.compress(head, lib_level if segments[0][2] else 0)
    out = [_header(level)]
    for i, (a, b, squeeze) in enumerate(segments):
        final = not run and i == len(segments) - 1
        if squeeze:
            co = lib.compressobj(lib_level, zlib.DEFLATED, -15)
            out += [co.compress(head[a:b]), co.flush(zlib.Z_FINISH if final else zlib.Z_SYNC_FLUSH)]
        else:
            out += _stored_blocks(head[a:b], final)
    if run:
        out.append(_run_block(byte, run, level))
    adler = zlib.adler32(head)
    if run:
        a, b = adler & 0xFFFF, adler >> 16       # extended over ``run`` bytes ``byte``
        b = (b + run * a + byte * (run * (run + 1) // 2)) % ADLER
        a = (a + run * byte) % ADLER
        adler = (b << 16) | a
    out.append(adler.to_bytes(4, "big"))
    return b"".join(out)


def compress(chunk: np.ndarray, shuffle: bool, level: int,
             bounds: tuple[int, int] | None = None) -> bytes | None:
    """A whole chunk (every row of it, zeros past the dataset's end) through shuffle
    and deflate, or None when every byte of it is zero (not stored: the fill value).
    ``bounds``: the smallest and largest element read as unsigned, if known (or any
    wider pair: only their shared top bytes are used)."""
    flat = np.ascontiguousarray(chunk).reshape(-1)
    size = flat.dtype.itemsize
    unit = size if shuffle and size in WORDS else 1     # bytes per shuffled word
    words = flat.view(WORDS[unit] if unit > 1 else np.uint8)
    lo, hi = bounds if bounds is not None and unit == size else map(int, min_max(words))
    if hi == 0:
        return None
    if shuffle and size > 1 and unit == 1:     # an element size with no kernel: rare
        lib, lib_level = _lib(level)
        return lib.compress(shuffled(flat), lib_level)
    k, byte = _constant_planes(lo, hi, unit)
    if k * len(words) < MIN_RUN:
        k = 0
    head = shuffled(flat, unit - k) if unit > 1 else (words if k == 0 else words[:0])
    return deflate(head, byte, k * len(words), level, unit - k)


# Scale-offset (HDF5's built-in filter, lossless for integers): each element less
# the chunk's smallest, in as few bits as its range needs, end to end.  Ids, ranks,
# communicators, tags ... of a chunk span a few values: packed, they are 1/64-1/8 of
# the rows' bytes before deflate (DUMPI's suite trace: 22.2 -> 15 MB written, ovni
# 147 -> 138 MB) and deflate has that much less to read.  Wider ranges pack worse
# than shuffle + deflate does (repeating values deflate well; their bits, packed,
# no longer line up with bytes), so those chunks go that way: each chunk's filter
# mask says which of the two it took.
PACK_BITS = 6           # ranges of at most 2**6 - 1 values go scale-offset
SCALE_HEADER = 21       # HDF5's: bits (4 bytes), 8, the minimum (8 bytes), 8 zeros


def _scale_offset(words: np.ndarray, lo: int, hi: int, size: int) -> np.ndarray | None:
    """The scale-offset filter's output for elements ``words`` (unsigned views) whose
    signed or unsigned range is lo..hi, or None when it needs more than PACK_BITS bits.
    The code with every bit set stands for the fill value (0) in HDF5's decoder; no
    element gets it (bits are chosen so that hi - lo < 2**bits - 1)."""
    bits = (hi - lo + 1).bit_length()
    if bits > PACK_BITS:
        return None
    from .shuffle import pack_bits      # numba: imported by a write, not by a reader
    out = np.zeros(SCALE_HEADER + len(words) * bits // 8 + 1, np.uint8)
    out[:4] = np.frombuffer(bits.to_bytes(4, "little"), np.uint8)
    out[4] = 8
    out[5:13] = np.frombuffer((lo & (1 << 64) - 1).to_bytes(8, "little"), np.uint8)
    pack_bits(words, np.uint64(lo & (1 << 8 * size) - 1), bits, out[SCALE_HEADER:])
    return out


def encode(chunk: np.ndarray, how: Codec) -> tuple[bytes, int] | None:
    """A whole chunk as stored and its filter mask (scale-offset + deflate for a small
    range of integers where the dataset has scale-offset, shuffle + deflate otherwise),
    or None when every byte of it is zero (not stored: the fill value)."""
    if not how.skip_scale:
        data = compress(chunk, how.shuffle, how.level)
        return None if data is None else (data, 0)
    flat = np.ascontiguousarray(chunk).reshape(-1)
    size = flat.dtype.itemsize
    lo, hi = map(int, min_max(flat))
    if lo == hi == 0:
        return None
    words = flat.view(WORDS[size] if size > 1 else np.uint8)
    packed = _scale_offset(words, lo, hi, size)
    if packed is not None:
        return deflate(packed, 0, 0, how.level), how.skip_shuffle
    width = (1 << 8 * size) - 1
    # as unsigned: the same order unless the signs differ (then no top byte is shared)
    bounds = (lo & width, hi & width) if (lo < 0) == (hi < 0) else (0, width)
    return compress(flat, how.shuffle, how.level, bounds), how.skip_scale


def _executor() -> ThreadPoolExecutor | None:
    global _pool
    if _threads < 1:
        return None
    if _pool is None:
        _pool = ThreadPoolExecutor(_threads, thread_name_prefix="partrace-h5")
    return _pool


# rows of chunks compressed by one pool job: one future per 16384-row chunk cost the
# ovni suite merge (9,886 chunks) ~5% of its CPU in futex waits and thread wake-ups;
# 1 MiB jobs took 4-9% off its CPU (two paired A/B runs, 3 pairs each, loaded
# machine).  Chunks of a few rows (PARTRACE_H5_CHUNK_ROWS) go to the pool in batches.
BATCH_BYTES = 1 << 20


def _encode_all(chunks, how: Codec):
    return [encode(c, how) for c in chunks]


class Pending:
    """Chunks being compressed on the pool, stored (on this thread) later: a writer's
    next column, or the engine's next window, is built meanwhile.  Bounded by the
    bytes of rows it holds; ``drain()`` before reading a chunk back or closing.
    Consecutive chunks of one dataset go to the pool together, ~BATCH_BYTES a job."""

    def __init__(self, limit: int = PENDING_BYTES):
        self.limit = limit
        self.jobs: list = []        # (key, dataset, how, chunks' first rows, future, chunks)
        self.held = 0
        self.batch = None           # (key, dataset, how, rows, chunks) not yet submitted
        self.batch_bytes = 0

    def add(self, ds, row: int, chunk: np.ndarray, how: Codec, key: str = "") -> None:
        """``key``: the dataset's name (one writer, one file), for ``drain(key)``."""
        pool = _executor()
        if pool is None:
            return _store(ds, row, encode(chunk, how), chunk, how)
        b = self.batch
        if b is not None and (b[1] is not ds or b[2] != how):
            self._submit()
            b = None
        if b is None:
            self.batch = b = (key, ds, how, [], [])
        b[3].append(row)
        b[4].append(chunk)
        self.held += chunk.nbytes
        self.batch_bytes += chunk.nbytes
        if self.batch_bytes >= BATCH_BYTES:
            self._submit()
        while self.held > self.limit and (self.jobs or self.batch):
            if not self.jobs:
                self._submit()
            self._store(self.jobs.pop(0))

    def _submit(self) -> None:
        if self.batch is None:
            return
        key, ds, how, rows, chunks = self.batch
        self.batch, self.batch_bytes = None, 0
        self.jobs.append((key, ds, how, rows, _executor().submit(_encode_all, chunks, how),
                          chunks))

    def _store(self, job) -> None:
        _, ds, how, rows, future, chunks = job
        for row, stored, chunk in zip(rows, future.result(), chunks):
            self.held -= chunk.nbytes
            _store(ds, row, stored, chunk, how)

    def drain(self, key: str | None = None) -> None:
        """Store every pending chunk (of dataset ``key`` only, if given), in order."""
        if self.batch is not None and (key is None or self.batch[0] == key):
            self._submit()
        if key is None:
            while self.jobs:
                self._store(self.jobs.pop(0))
            return
        if any(j[0] == key for j in self.jobs):
            mine = [j for j in self.jobs if j[0] == key]
            self.jobs = [j for j in self.jobs if j[0] != key]
            for job in mine:
                self._store(job)


def _store(ds, row: int, stored: tuple[bytes, int] | None, chunk: np.ndarray,
           how: Codec) -> None:
    tail = (0,) * (chunk.ndim - 1)
    if stored is None:
        old_mask = _stored_mask(ds, row, tail)
        if old_mask is not None:        # zeros over stored rows
            _rewrite(ds, row, _zeros(chunk, how), old_mask)
        return      # else zeros: the fill value reads back, nothing stored
    ds.id.write_direct_chunk((row,) + tail, *stored)


def write(ds, values: np.ndarray, start: int, how: Codec,
          pending: Pending | None = None) -> None:
    """Rows ``start..`` of ``ds`` (long enough already) from ``values``, chunk by chunk.

    A chunk the rows cover whole is compressed from them; one they cover in part
    (shared with rows written before or after, by this rank or another) is read
    back, completed and stored again.  Chunks of zeros are not stored.  With
    ``pending``, chunks may still be compressing when this returns."""
    n = len(values)
    if not n:
        return
    values = np.asarray(values, dtype=ds.dtype)     # as stored: no conversion by HDF5 now
    step, size, tail = ds.chunks[0], ds.shape[0], ds.chunks[1:]
    own = pending is None
    pending = Pending() if own else pending
    key = ds.name
    end = start + n
    for c in range(start // step, (end - 1) // step + 1):
        a, b = c * step, min((c + 1) * step, size)
        lo, hi = max(a, start), min(b, end)
        piece = values[lo - start:hi - start]
        whole = lo == a and hi == b
        if whole and b - a == step:
            chunk = piece
        elif not piece.any():
            continue        # nothing new in it: zeros, or what is stored stays
        else:
            chunk = np.zeros((step,) + tail, values.dtype)
            old_mask = None
            if not whole:
                pending.drain(key)      # its earlier rows may be on their way
                old_mask = _stored_mask(ds, a, (0,) * len(tail))
                if old_mask is not None:
                    chunk[:b - a] = read_back(ds, a, how, old_mask)[:b - a]
            chunk[lo - a:hi - a] = piece
            if old_mask is not None:    # completed here, at once: its old mask is known
                _rewrite(ds, a, encode(chunk, how) or _zeros(chunk, how), old_mask)
                continue
        pending.add(ds, a, chunk, how, key)
    if own:
        pending.drain()


def put(ds, row: int, stored: tuple[bytes, int] | None) -> None:
    """Store a whole chunk encoded elsewhere (:func:`encode`'s result, None = zeros)
    at ``row``, over whatever the file holds there."""
    tail = (0,) * (len(ds.chunks) - 1)
    old_mask = _stored_mask(ds, row, tail)
    if old_mask is None:
        if stored is not None:
            ds.id.write_direct_chunk((row,) + tail, *stored)
        return
    if stored is None:      # zeros over stored rows
        stored = _zeros(np.zeros(ds.chunks, ds.dtype), codec(ds))
    _rewrite(ds, row, stored, old_mask)


def read_back(ds, row: int, how: Codec, mask: int) -> np.ndarray:
    """The whole stored chunk at ``row`` (chunk shape) whose filter mask in the chunk
    index is ``mask``, decoded here from its stored bytes.

    HDF5 (2.0) keeps the chunk written last by ``write_direct_chunk`` in its lookup
    cache with the filter mask the chunk had before: reading it back through HDF5 in
    the same open would undo filters it never went through.  Only a chunk that went
    through every filter of a scale-offset dataset (HDF5's own pipeline wrote it, not
    this module) is read through HDF5."""
    at = (row,) + (0,) * (len(ds.chunks) - 1)
    shape = ds.chunks
    scaled = how.skip_scale and not mask & how.skip_scale
    shuffled_ = how.shuffle and not mask & how.skip_shuffle
    if scaled and shuffled_:
        return ds[row:row + shape[0]] if row + shape[0] <= ds.shape[0] else np.concatenate(
            [ds[row:], np.zeros((row + shape[0] - ds.shape[0],) + shape[1:], ds.dtype)])
    raw = np.frombuffer(zlib.decompress(ds.id.read_direct_chunk(at)[1]), np.uint8)
    dtype = np.dtype(ds.dtype)
    n = int(np.prod(shape))
    if scaled:          # scale-offset then deflate
        bits = int.from_bytes(raw[:4].tobytes(), "little")
        if not 0 < bits <= PACK_BITS or len(raw) < SCALE_HEADER + n * bits // 8 + 1:
            raise ValueError(f"{ds.name}: chunk at row {row} is not this module's scale-offset")
        base = np.uint64(int.from_bytes(raw[5:13].tobytes(), "little"))
        from .shuffle import unpack_bits
        codes = np.empty(n, np.uint64)
        unpack_bits(raw[SCALE_HEADER:], bits, codes)
        words = (codes + base).astype(WORDS[dtype.itemsize] if dtype.itemsize > 1 else np.uint8)
        words[codes == (1 << bits) - 1] = 0         # the fill value's code
        return words.view(dtype).reshape(shape)
    if shuffled_ and dtype.itemsize > 1:        # shuffle then deflate
        raw = raw.reshape(dtype.itemsize, n).T
    return np.ascontiguousarray(raw).view(dtype).reshape(shape)


def _rewrite(ds, row: int, stored: tuple[bytes, int], old_mask: int) -> None:
    """Store a chunk over one already stored with filter mask ``old_mask``.  HDF5 keeps
    an overwritten chunk's old mask in its index when the new bytes have the same
    length: a mask that changes goes first with one byte more (after a deflate
    stream's end: no reader reads it), then as it is, each a new length."""
    at = (row,) + (0,) * (len(ds.chunks) - 1)
    data, mask = stored
    if mask != old_mask:
        ds.id.write_direct_chunk(at, data + b"\0", mask)
    ds.id.write_direct_chunk(at, data, mask)


def _stored_mask(ds, row: int, tail: tuple) -> int | None:
    """The chunk index's filter mask of the chunk at ``row`` (None: not stored)."""
    info = ds.id.get_chunk_info_by_coord((row,) + tail)
    return None if info.byte_offset is None else info.filter_mask


def _zeros(chunk: np.ndarray, how: Codec) -> tuple[bytes, int]:
    """A chunk of zeros as stored, through shuffle + deflate (over stored rows only:
    else zeros are not stored)."""
    lib, lib_level = _lib(how.level)
    return lib.compress(bytes(chunk.nbytes), lib_level), how.skip_scale

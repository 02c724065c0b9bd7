"""Chunks compressed by partrace (formats/hdf5/chunks.py) are what HDF5's own shuffle +
deflate pipeline reads back, take no more bytes than it, and depend only on their rows
(written at once or in pieces, on threads or not: the same stored bytes)."""
from __future__ import annotations

import zlib

import h5py
import numpy as np
import pytest

import partrace
from partrace.formats.hdf5 import chunks, shuffle
from partrace.kernels import jit
from partrace.formats.hdf5.values import write_values
from tests.conftest import DATA

DUMPI = DATA / "dumpi" / "p2p-4rank"


def _columns():
    """Real columns (a DUMPI fixture's events), and arrays with the byte patterns the
    codec treats apart: high planes of zeros, of 0xFF (small negatives), none."""
    ev = partrace.open(DUMPI).columns("events")
    rng = np.random.default_rng(3)
    out = {f"dumpi {k}": np.asarray(v) for k, v in ev.items() if np.asarray(v).dtype != object}
    n = 40_000
    out.update({
        "small ids": rng.integers(0, 300, n).astype(np.int64),
        "small negatives": rng.integers(-300, -1, n).astype(np.int64),
        "mixed signs": rng.integers(-5, 5, n).astype(np.int32),
        "wide": rng.integers(0, 1 << 62, n).astype(np.int64),
        "floats": rng.random(n),
        "bytes": rng.integers(0, 4, n).astype(np.uint8),
        "one value": np.full(n, 7, np.uint16),
        "pairs": rng.integers(0, 9, (n, 3)).astype(np.int64),
    })
    return out


COLUMNS = _columns()


def _dataset(f, name, values, step, shuffle=True, level=1):
    step = min(step, len(values))
    return f.create_dataset(name, shape=values.shape, chunks=(step,) + values.shape[1:],
                            dtype=values.dtype, compression="gzip", compression_opts=level,
                            shuffle=shuffle and values.dtype.itemsize > 1)


def _stored(ds) -> dict:
    return {ds.id.get_chunk_info(i).chunk_offset: ds.id.read_direct_chunk(
        ds.id.get_chunk_info(i).chunk_offset)[1] for i in range(ds.id.get_num_chunks())}


SLACK = 32     # bytes per chunk: a flush and a block of its own for a constant run


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_hdf5_reads_them_back_and_they_are_no_larger(name, level, tmp_path):
    """Per column, the same shuffled bytes as HDF5's own pipeline (zlib level 1) once
    inflated.  At level 2 (``--compress gzip``) at most a few bytes per chunk over
    it (one value throughout); level 1 (the default, zlib-ng's fastest encoder) trades
    bytes for CPU: no more than a stored copy of the rows."""
    values = COLUMNS[name]
    with h5py.File(tmp_path / "c.h5", "w", libver="v110") as f:
        for step in (64, 16384):
            ours, theirs = _dataset(f, f"ours{step}", values, step, level=level), _dataset(
                f, f"h5py{step}", values, step)
            assert chunks.codec(ours)[:3] == (ours.shuffle, level, 0)
            write_values(ours, None, values, 0)
            theirs[:] = values          # HDF5's own filter pipeline
            assert np.array_equal(ours[:], values), (name, step)
            mine, ref = _stored(ours), _stored(theirs)
            assert set(mine) <= set(ref)     # ours leaves out chunks of zeros only
            for at in set(ref) - set(mine):
                assert not values[at[0]:at[0] + step].any()
            for at, data in mine.items():    # same bytes once inflated: HDF5's shuffle order
                assert zlib.decompress(data) == zlib.decompress(ref[at]), (name, step, at)
            if level == 1:      # stored blocks cost 5 bytes per 64 KiB, plus the zlib frame
                for at, data in mine.items():
                    assert len(data) <= values[:step].nbytes * 1.01 + SLACK, (name, step, at)
            else:
                assert sum(map(len, mine.values())) <= sum(map(len, ref.values())) + SLACK * len(
                    mine), (name, step)


def test_random_rows_go_stored_and_read_back(tmp_path):
    """Rows deflate cannot shrink (random bytes, as ROSS model data) skip the encoder:
    stored blocks, a few bytes over the rows, which HDF5 and zlib read back; a
    chunk whose random low planes sit beside compressible high ones is deflated."""
    rng = np.random.default_rng(5)
    noise = rng.integers(0, 256, (16384, 8)).astype(np.uint8)
    with h5py.File(tmp_path / "r.h5", "w", libver="v110") as f:
        ds = _dataset(f, "noise", noise, 16384, shuffle=False)
        write_values(ds, None, noise, 0)
        assert np.array_equal(ds[:], noise)
        data = _stored(ds)[(0, 0)]
        assert len(data) <= noise.nbytes + 64
        assert zlib.decompress(data) == noise.tobytes()
    assert chunks._incompressible(noise.reshape(-1), *chunks._lib(1))
    times = np.cumsum(rng.integers(0, 1000, 16384)).astype(np.int64)    # low planes random
    assert not chunks._incompressible(chunks.shuffled(times), *chunks._lib(1))
    data = chunks.compress(times, True, 1)
    assert len(data) < times.nbytes / 2
    assert zlib.decompress(data) == chunks.shuffled(times).tobytes()


def test_random_planes_go_stored_beside_deflated_ones(tmp_path):
    """A sorted time column at level 1: its random low byte plane goes as stored
    blocks (its bytes appear verbatim in the stream), its high planes deflated, and the
    stream is no larger than deflating every plane; HDF5 reads it back.  At level 2
    (``--compress gzip``) every plane is deflated."""
    rng = np.random.default_rng(7)
    times = np.cumsum(rng.integers(0, 4000, 16384)).astype(np.int64)
    planes = chunks.shuffled(times)
    low, high = planes[:16384].tobytes(), planes[2 * 16384:3 * 16384].tobytes()
    data = chunks.compress(times, True, 1)
    assert zlib.decompress(data) == planes.tobytes()
    assert low in data and high not in data
    lib = chunks._lib(1)[0]
    assert len(data) <= len(lib.compress(planes, 1)) + SLACK
    assert low not in chunks.compress(times, True, 2)
    with h5py.File(tmp_path / "t.h5", "w", libver="v110") as f:
        ds = _dataset(f, "time", times, 16384)
        write_values(ds, None, times, 0)
        assert np.array_equal(ds[:], times)


def test_constant_high_planes_cost_no_deflate_and_fewer_bytes():
    """int64 ids below 2**16: six of the eight planes are zeros; -1 .. -300: 0xFF.
    Over every column, whole 16384-row chunks at level 2: fewer bytes than zlib's level 1
    on the shuffled rows, and than the same encoder on them (level 1: a few bytes more at most)."""
    ours = theirs = 0
    for values in COLUMNS.values():
        for a in range(0, len(values), 16384):
            chunk = np.zeros((16384,) + values.shape[1:], values.dtype)
            chunk[:len(values) - a] = values[a:a + 16384]
            data = chunks.compress(chunk, chunk.dtype.itemsize > 1, 2)
            if data is not None:
                ours += len(data)
                theirs += len(zlib.compress(chunks.shuffled(chunk), 2))
    assert ours < theirs
    for values in (COLUMNS["small ids"], COLUMNS["small negatives"]):
        chunk = values[:16384]
        for level in (1, 2):
            data = chunks.compress(chunk, True, level)
            assert zlib.decompress(data) == chunks.shuffled(chunk).tobytes()
            alone = len(chunks._lib(level)[0].compress(chunks.shuffled(chunk), level))
            # level 1 (deflate_quick) codes a run nearly free too: the gain there is CPU
            assert len(data) < alone if level == 2 else len(data) <= alone + SLACK
    assert chunks.compress(np.zeros(16384, np.int64), True, 1) is None


@pytest.mark.parametrize("threads,limit", [(0, None), (3, 1 << 16), (3, chunks.PENDING_BYTES)])
def test_stored_bytes_do_not_depend_on_how_rows_were_split(threads, limit, tmp_path):
    """Rows written in random pieces (partial chunks completed later, as windows and
    the one-file join do) store every chunk as writing them at once does, also
    through a queue of chunks still compressing (a small queue, or one holding
    batches of chunks not yet sent to the pool when a piece completes a chunk)."""
    rng = np.random.default_rng(11)
    chunks.set_threads(threads)
    try:
        with h5py.File(tmp_path / "s.h5", "w", libver="v110") as f:
            for name in ("dumpi time", "small negatives", "pairs", "bytes", "dumpi peer"):
                values = COLUMNS[name]
                step = 1024
                once, pieces = _dataset(f, f"{name}/once", values, step), _dataset(
                    f, f"{name}/pieces", values, step)
                write_values(once, None, values, 0)
                cuts = np.sort(rng.choice(np.arange(1, len(values)), 40, replace=False))
                order = rng.permutation(41)
                bounds = np.concatenate([[0], cuts, [len(values)]])
                # with threads, one writer's queue across the pieces (as the sink's):
                # a piece completing a chunk still compressing waits for it
                pending = chunks.Pending(limit=limit) if threads else None
                for i in order:
                    a, b = int(bounds[i]), int(bounds[i + 1])
                    write_values(pieces, None, values[a:b], a, pending)
                if pending is not None:
                    pending.drain()
                assert np.array_equal(pieces[:], values)
                assert _stored(once) == _stored(pieces), name
    finally:
        chunks.set_threads(0)


WORD = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@pytest.mark.parametrize("dtype,lo,hi", [
    (np.int8, -100, -70), (np.uint8, 3, 60), (np.int16, 1, 2), (np.int32, -5, 20),
    (np.uint32, 7, 7), (np.int64, 1000, 1040), (np.int64, -2 ** 40, -2 ** 40 + 62),
    (np.uint64, 2 ** 63, 2 ** 63 + 9)])
@pytest.mark.parametrize("mode", ["numba", "python"])
def test_scale_offset_is_hdf5s_own_encoding(dtype, lo, hi, mode, tmp_path):
    """A chunk of a small range with no zero packs to the bytes HDF5's own scale-offset
    filter writes (header, minimum, bits end to end), at every integer width and sign,
    compiled and in small mode (the packing kernel's numpy twin)."""
    rng = np.random.default_rng(hi - lo)
    if dtype == np.uint64:      # beyond int64: offsets from lo
        offsets = rng.integers(0, hi - lo, 4096, endpoint=True).astype(np.uint64)
        values = (np.uint64(lo) + offsets).astype(dtype)
    else:
        values = rng.integers(lo, hi, 4096, endpoint=True).astype(dtype)
    values[values == 0] = hi       # HDF5 leaves the fill value (0) out of the range
    with h5py.File(tmp_path / "s.h5", "w") as f:
        ref = f.create_dataset("ref", data=values, chunks=(4096,), scaleoffset=0)
        theirs = ref.id.read_direct_chunk((0,))[1]
    size = values.dtype.itemsize
    with jit.Scope(mode=mode):
        mine = chunks._scale_offset(values.view(WORD[size]), int(values.min()),
                                    int(values.max()), size)
    assert bytes(mine) == theirs


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 4099, shuffle.TWIN_BLOCK + 13])
def test_chunk_kernels_numpy_twins_equal_the_compiled_kernels(n):
    """Small mode runs the shuffle and bit-packing kernels' numpy twins: byte for byte what
    the compiled kernels give, at every word size and packed width, across the twins'
    blocks; unpacking undoes packing."""
    rng = np.random.default_rng(n)
    for size, word in WORD.items():
        words = rng.integers(0, np.iinfo(word).max, n, dtype=word, endpoint=True)
        for keep in range(1, size + 1):
            if size > 1:
                got = [np.full(keep * n, 7, np.uint8) for _ in range(2)]
                shuffle.planes(words, keep, got[0])
                shuffle._planes_numpy(words, keep, got[1])
                assert np.array_equal(*got), (size, keep)
        for bits in range(1, chunks.PACK_BITS + 1):
            base = int(words[0]) if n else 0
            packed = [np.zeros(n * bits // 8 + 1, np.uint8) for _ in range(2)]
            shuffle.pack_bits(words, np.uint64(base), bits, packed[0])
            shuffle._pack_bits_numpy(words, np.uint64(base), bits, packed[1])
            assert np.array_equal(*packed), (size, bits)
            codes = [np.full(n, 99, np.uint64) for _ in range(2)]
            shuffle.unpack_bits(packed[0], bits, codes[0])
            shuffle._unpack_bits_numpy(packed[0], bits, codes[1])
            assert np.array_equal(*codes), (size, bits)
            want = (words.astype(np.uint64) - np.uint64(base)) & np.uint64((1 << bits) - 1)
            assert np.array_equal(codes[1], want), (size, bits)


SCALED = ["small ids", "small negatives", "mixed signs", "wide", "bytes", "one value", "pairs",
          "dumpi peer", "dumpi time", "dumpi comm", "dumpi tag"]


def _layout_dataset(f, name, values, step, compression=None):
    from partrace.formats.hdf5.layout import filters
    from partrace.model import Column
    col = Column(name.replace(" ", "_"), values.dtype.str)
    step = min(step, len(values))
    return f.create_dataset(name, shape=values.shape, chunks=(step,) + values.shape[1:],
                            dtype=values.dtype, **filters(col, compression))


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_layout_integers_take_scale_offset_or_shuffle_per_chunk(compression, tmp_path):
    """The layout's integer datasets declare scale-offset, shuffle and deflate; each chunk
    takes scale-offset (a range of at most 2**PACK_BITS - 1 values) or shuffle, its filter
    mask says which, and HDF5 reads every value back, zeros among them; floats keep
    shuffle + deflate alone."""
    rng = np.random.default_rng(13)
    columns = {k: COLUMNS[k] for k in SCALED if k in COLUMNS}
    with_zeros = rng.integers(0, 5, 40_000).astype(np.int64) * 1000     # 0 and far values
    columns["zeros and a range"] = with_zeros
    with h5py.File(tmp_path / "l.h5", "w", libver="v110") as f:
        floats = _layout_dataset(f, "floats", COLUMNS["floats"], 4096, compression)
        assert floats.scaleoffset is None and chunks.codec(floats).skip_scale == 0
        for name, values in columns.items():
            ds = _layout_dataset(f, name, values, 4096, compression)
            assert ds.scaleoffset == 0 and chunks.codec(ds).skip_scale == 1
            write_values(ds, None, values, 0)
    # read in a new open, as every reader does (HDF5 caches the mask a directly written
    # chunk had before: see chunks.write)
    with h5py.File(tmp_path / "l.h5", "r") as f:
        for name, values in columns.items():
            ds = f[name]
            how = chunks.codec(ds)
            assert np.array_equal(ds[:], values), name
            step = ds.chunks[0]
            for i in range(ds.id.get_num_chunks()):
                info = ds.id.get_chunk_info(i)
                a = info.chunk_offset[0]
                part = values[a:a + step].reshape(-1)
                if len(values) - a < step:      # the last chunk, zeros past the end
                    part = np.append(part, 0)
                small = int(part.max()) - int(part.min()) + 1 < (1 << chunks.PACK_BITS)
                assert info.filter_mask == (how.skip_shuffle if small else how.skip_scale), (
                    name, a)


@pytest.mark.parametrize("threads", [0, 3])
def test_scale_offset_chunks_written_in_pieces_read_back(threads, tmp_path):
    """Rows written in pieces, in any order (windows, the one-file join): a chunk two
    pieces share is read back from its stored bytes by the mask in the chunk index
    (HDF5 would use a stale one for the chunk written last), completed and stored as
    writing all rows at once does, byte for byte, also where completing it changes its
    filters ("flips": packed while half written, shuffled once whole); the file reads
    back whole."""
    rng = np.random.default_rng(17)
    chunks.set_threads(threads)
    step = 1024
    flips = np.where(np.arange(40_000) % step < step // 2, np.arange(40_000) % 3,
                     np.arange(40_000) * 1009).astype(np.int64)
    columns = {**{k: COLUMNS[k] for k in ("small ids", "mixed signs", "dumpi peer", "wide",
                                          "pairs", "bytes")}, "flips": flips}
    try:
        with h5py.File(tmp_path / "p.h5", "w", libver="v110") as f:
            for name, values in columns.items():
                once, pieces = (_layout_dataset(f, f"{name}/{k}", values, step)
                                for k in ("once", "pieces"))
                write_values(once, None, values, 0)
                how = chunks.codec(pieces)
                cuts = np.sort(rng.choice(np.arange(1, len(values)), 30, replace=False))
                if name == "flips":     # half chunks first
                    halves = np.arange(step // 2, len(values), step)
                    cuts = np.unique(np.concatenate([cuts, halves]))
                bounds = np.concatenate([[0], cuts, [len(values)]])
                pending = chunks.Pending(limit=1 << 16) if threads else None
                so_far = np.zeros_like(values)      # what the file holds, zeros elsewhere
                for i in rng.permutation(len(bounds) - 1):
                    a, b = int(bounds[i]), int(bounds[i + 1])
                    write_values(pieces, None, values[a:b], a, pending)
                    so_far[a:b] = values[a:b]
                    if pending is not None:
                        pending.drain()
                    for c in range(a // step, (b - 1) // step + 1):    # in this same open
                        mask = chunks._stored_mask(pieces, c * step, (0,) * (values.ndim - 1))
                        if mask is not None:
                            got = chunks.read_back(pieces, c * step, how, mask)
                            want = so_far[c * step:(c + 1) * step]
                            assert np.array_equal(got[:len(want)], want), (name, c)
                            assert not got[len(want):].any()
                assert _stored(once) == _stored(pieces), name
        with h5py.File(tmp_path / "p.h5", "r") as f:
            for name, values in columns.items():
                assert np.array_equal(f[f"{name}/pieces"][:], values), name
    finally:
        chunks.set_threads(0)


def test_a_chunk_rewritten_with_another_mask_keeps_it(tmp_path):
    """HDF5 keeps an overwritten chunk's old filter mask when the new bytes have the same
    length (its index is not updated); _rewrite makes the index say the new mask, and
    the chunk reads back right in a new open."""
    with h5py.File(tmp_path / "m.h5", "w", libver="v110") as f:
        ds = _layout_dataset(f, "x", np.zeros(640, np.int32), 64)
        how = chunks.codec(ds)
        packed = chunks.encode(np.arange(64, dtype=np.int32) % 5, how)
        wide = chunks.encode(np.arange(64, dtype=np.int32) * 1000, how)
        assert packed[1] == how.skip_shuffle and wide[1] == how.skip_scale
        same = (packed[0][:len(wide[0])].ljust(len(wide[0]), b"\0"), packed[1])
        ds.id.write_direct_chunk((0,), *same)      # bytes of that length, the other mask
        ds.id.write_direct_chunk((0,), *wide)
        assert chunks._stored_mask(ds, 0, ()) == how.skip_shuffle     # HDF5 kept the old one
        ds.id.write_direct_chunk((0,), *same)
        chunks._rewrite(ds, 0, wide, how.skip_shuffle)
        assert chunks._stored_mask(ds, 0, ()) == how.skip_scale
    with h5py.File(tmp_path / "m.h5", "r") as f:
        assert np.array_equal(f["x"][:64], np.arange(64, dtype=np.int32) * 1000)


def test_compressing_threads_by_share_of_cores_or_as_told(monkeypatch):
    """A pool only where a rank has MIN_SHARE cores or more (as many threads as its
    cores); PARTRACE_H5_THREADS decides when set (1: one thread besides the caller), and
    a value that is not a count is refused with its name."""
    from partrace.errors import UsageError
    monkeypatch.delenv(chunks.THREADS_ENV, raising=False)
    monkeypatch.setattr(chunks.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert [chunks.default_threads(r) for r in (1, 2, 3, 4, 5, 8)] == [8, 4, 0, 0, 0, 0]
    monkeypatch.setenv(chunks.THREADS_ENV, "2")
    assert chunks.default_threads(4) == 2
    monkeypatch.setenv(chunks.THREADS_ENV, "0")
    assert chunks.default_threads(1) == 0
    monkeypatch.setenv(chunks.THREADS_ENV, "many")
    with pytest.raises(UsageError, match="PARTRACE_H5_THREADS=many"):
        chunks.default_threads(1)

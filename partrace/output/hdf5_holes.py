"""A chunk's place in the one HDF5 file set by rank 0, its bytes written by their own rank.

Serial HDF5 lets one process make the final file's chunk index, but that process need
not carry the chunks' bytes.  Rank 0 stores each chunk of another rank's part with
``write_direct_chunk`` of a *placeholder*: a view of a buffer of zeros, of the chunk's
stored size and with its filter mask.  HDF5 allocates the chunk's bytes in the file,
indexes them and hands the buffer to the file driver unchanged.  The file is open
through h5py's ``fileobj`` driver on a ``HoleFile``, which knows the placeholder's
memory: a write from it is not written (the file gets a hole there) and its place is
noted instead.  Each rank then writes its own chunks' bytes into those places: after
each window those it kept in memory (hdf5_direct.py), and once rank 0 has closed the
file those its part holds (``fill``; ``copy_file_range``, the kernel's copy, where the
file system has it), all ranks at once.

So rank 0's join is metadata, a call per chunk, and no rank's chunk passes through
another; the file's bytes are the ones a join copying every chunk through rank 0 would
write (the same calls, in the same order, allocate the same places).  Every write the
driver skips is checked against the chunk it was made for (``holes_since``): an HDF5
that copied the buffer before writing it would leave none, and the join stops there
with an error instead of an output with chunks of zeros.  (h5py's fileobj driver has
handed the file object a view of HDF5's own buffer since h5py 2.9; partrace needs 3.8.)
"""
from __future__ import annotations

import ctypes
import errno
import io
import os
import time
from pathlib import Path

import numpy as np

from ..errors import WriteFailed

COPY_BYTES = 4 << 20    # one read and write where copy_file_range is missing


class HoleFile(io.RawIOBase):
    """A file for h5py's ``fileobj`` driver that leaves a hole where a placeholder is
    written (``placeholder(n)``) and notes its offset and size.

    The driver seeks before every read and write; the position is kept here and each
    read or write is one ``pread``/``pwrite`` at it, so a hole costs no system call.
    The end of the file it reports covers the holes (the file itself is only made that
    long when HDF5 truncates it to its end at close)."""

    def __init__(self, path: Path, most: int):
        super().__init__()
        self._fd = os.open(path, os.O_RDWR)
        self._pos = 0
        self._end = os.fstat(self._fd).st_size     # the logical end: holes included
        self._zeros = np.zeros(max(1, most), np.uint8)     # untouched pages: not memory
        self._lo = self._zeros.ctypes.data
        self._hi = self._lo + self._zeros.nbytes
        self._holes: list[tuple[int, int]] = []
        self.written_bytes = 0      # what went to the file: metadata, the shared chunks

    def placeholder(self, nbytes: int) -> np.ndarray:
        """The buffer to hand HDF5 for a chunk of ``nbytes`` stored bytes (a larger one
        made if need be: HDF5 writes a direct chunk before its call returns)."""
        if nbytes > self._zeros.nbytes:
            self._zeros = np.zeros(max(nbytes, 2 * self._zeros.nbytes), np.uint8)
            self._lo = self._zeros.ctypes.data
            self._hi = self._lo + self._zeros.nbytes
        return self._zeros[:nbytes]

    def holes_since(self, first: int, sizes: np.ndarray) -> np.ndarray:
        """The offsets of the holes left from the ``first``-th on, checked to be one per
        entry of ``sizes`` (the chunks placed since, in order) and of its size."""
        got = np.array(self._holes[first:], np.int64).reshape(-1, 2)
        if len(got) != len(sizes) or not np.array_equal(got[:, 1], sizes):
            raise RuntimeError(
                f"HDF5 wrote {len(got)} placeholder chunks where {len(sizes)} were placed: "
                f"this h5py or HDF5 copies a chunk's buffer before writing it, so the join "
                f"cannot leave their bytes to their ranks")
        return got[:, 0]

    @property
    def hole_count(self) -> int:
        return len(self._holes)

    # -- what the fileobj driver calls ---------------------------------------------
    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        # the driver seeks before every read and write: SEEK_SET first, without a look-up
        self._pos = pos if whence == os.SEEK_SET else pos + (
            self._pos if whence == os.SEEK_CUR else self._end)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer) -> int:
        got = os.preadv(self._fd, [buffer], self._pos)
        self._pos += got
        return got

    def write(self, buffer) -> int:
        view = memoryview(buffer)
        nbytes = view.nbytes
        try:    # where the bytes are: ctypes' view costs a fifth of numpy's (per chunk)
            at = ctypes.addressof(ctypes.c_char.from_buffer(view)) if nbytes else 0
        except TypeError:   # a read-only buffer: never a placeholder
            at = 0
        if self._lo <= at < self._hi:
            self._holes.append((self._pos, nbytes))
        else:
            nbytes = os.pwrite(self._fd, view, self._pos)
            self.written_bytes += nbytes
        self._pos += nbytes
        if self._pos > self._end:
            self._end = self._pos
        return nbytes

    def truncate(self, size: int | None = None) -> int:
        size = self._pos if size is None else size
        os.ftruncate(self._fd, size)
        self._end = size
        return size

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


def place_chunks(final, holes: HoleFile, keys: list[str], chunks: list[np.ndarray],
                 targets: dict) -> tuple[list[np.ndarray], float]:
    """Rank 0: each rank's chunks (``chunks[k]``: rows of dataset index, first row, filter
    mask, stored size) placed in ``final``, open on ``holes``, as holes of their stored
    sizes, in order: per rank, the offsets of its chunks in the file, and the CPU seconds
    of the first chunk of each dataset looked up here (a cost per dataset, not per
    chunk).  ``targets``: per dataset index, its write_direct_chunk and coordinate tail,
    looked up in ``final`` once (``keys``: the datasets' paths)."""
    out, first_seconds = [], 0.0
    for rows in chunks:
        first = holes.hole_count
        for d, row, mask, size in rows.tolist():
            target = targets.get(d)
            if target is None:
                began = time.thread_time()
                ds = final[keys[d]]
                target = targets[d] = (ds.id.write_direct_chunk, (0,) * (ds.ndim - 1))
                target[0]((row,) + target[1], holes.placeholder(size), mask)
                first_seconds += time.thread_time() - began
                continue
            target[0]((row,) + target[1], holes.placeholder(size), mask)
        out.append(holes.holes_since(first, rows[:, 3]))
    return out, first_seconds


def runs(places: np.ndarray) -> np.ndarray:
    """(source offset, target offset, bytes) of ``places``' rows (the same fields, one per
    chunk) merged where a chunk follows the one before it in both files."""
    if len(places) < 2:
        return places
    src, dst, n = places[:, 0], places[:, 1], places[:, 2]
    joined = (src[1:] == src[:-1] + n[:-1]) & (dst[1:] == dst[:-1] + n[:-1])
    starts = np.flatnonzero(np.r_[True, ~joined])
    sizes = np.add.reduceat(n, starts)
    return np.column_stack([src[starts], dst[starts], sizes])


def fill(part: Path, final: Path, places: np.ndarray) -> int:
    """Copy the chunks at ``places`` (source offset in ``part``, target offset in
    ``final``, stored bytes) into ``final``'s holes; returns the bytes copied.  A part
    that ends inside a chunk is an error naming it and the byte where it ends."""
    if not len(places):
        return 0
    src = os.open(part, os.O_RDONLY)
    try:
        dst = os.open(final, os.O_WRONLY)
        try:
            for a, b, n in runs(places).tolist():
                _copy(src, dst, a, b, n, part)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return int(places[:, 2].sum())


_kernel_copy = hasattr(os, "copy_file_range")


def _short(part: Path, at: int) -> WriteFailed:
    """A part cut short: named by its own name too, as an error shows a path inside the
    hidden staging folder as the output it becomes."""
    return WriteFailed(f"{part}: {Path(part).name}, a rank's part of it in the staging "
                       f"folder, ends at byte {at}, inside a stored chunk")


def _copy(src: int, dst: int, at: int, to: int, nbytes: int, name: Path) -> None:
    """``nbytes`` of ``src`` at ``at`` into ``dst`` at ``to``: by copy_file_range where
    the file systems allow it, else read and written in COPY_BYTES pieces."""
    global _kernel_copy
    done = 0
    while done < nbytes and _kernel_copy:
        try:
            got = os.copy_file_range(src, dst, nbytes - done, at + done, to + done)
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP,
                               errno.ENOTSUP):
                raise
            _kernel_copy = False        # across file systems, or not in this kernel
            break
        if got == 0:
            raise _short(name, at + done)
        done += got
    buffer = None
    while done < nbytes:
        buffer = buffer if buffer is not None else memoryview(bytearray(COPY_BYTES))
        piece = buffer[:min(COPY_BYTES, nbytes - done)]
        got = os.preadv(src, [piece], at + done)
        if got == 0:
            raise _short(name, at + done)
        wrote = os.pwrite(dst, piece[:got], to + done)
        done += wrote

"""The HDF5 sink's single layout at several ranks: the ranks' files joined into one.

Rank 0 writes its slice of each window straight into the output file; rank r > 0 writes
its slice into a staging part whose datasets have the output's shape, chunks and
filters, at the *global* row index (a part allocates only the chunks it touches).  Every
chunk of a numeric table has one owner that writes it whole (chunk_owners.py), so at
commit rank 0 copies every chunk of the parts as its stored bytes (no decoding).  A text
column's bytes are written at their global byte offset: the byte chunks where one rank's
text ends and the next one's begins are made whole and encoded once by one of their
writers, in parallel, and rank 0 stores them.  Each rank then deletes its part (they never
leave the hidden staging folder).  Each rank lists the chunks its own part holds whole
(a walk of its chunk index, in parallel) and sends rank 0 the list: rank 0 opens no part
as HDF5 for them, only reads each chunk's bytes at the address its writer named, so its
work grows with the chunks it copies, not with ranks x datasets.  What rank 0 carried
for the others (the shared chunks it gathered, the stored bytes it copied) and how long
the join took go to the accounts (``written``).
"""
from __future__ import annotations

import os

import h5py
import numpy as np

from ..engine.mpi import Comm
from ..formats.hdf5 import chunks as hdf5_chunks
from ..formats.hdf5 import text as hdf5_text
from .hdf5_layouts import HDF5Layout

PARTS_DIR = "parts"     # inside the hidden staging folder
JOIN_CACHE_BYTES = 16 << 20     # the final file's chunk cache while joining
JOIN_ROUND_BYTES = 64 << 20     # shared chunks gathered on rank 0 at once (before encoding)
READ_BYTES = 4 << 20    # one read of a part's adjacent stored chunks, at most


class SingleFileLayout(HDF5Layout):
    folder = PARTS_DIR

    def __init__(self, sink):
        super().__init__(sink)
        self.gathered_bytes = 0     # rank 0: shared chunks received, as encoded

    def written(self) -> dict:
        """On rank 0, the bytes of other ranks' chunks it carried into the output."""
        sink = self.sink
        through = self.gathered_bytes + sum(c["stored_bytes"] for c in sink.join_counts.values())
        return dict(path="serial join", through_rank0_bytes=through,
                    join_seconds=round(sink.commit_seconds, 6),
                    summary=f"HDF5 serial join: {_amount(through)} of other ranks' chunks "
                            f"through rank 0 in {sink.commit_seconds:.2f} s")

    def file_name(self, rank: int) -> str:
        return f"{PARTS_DIR}/rank-{rank:05d}.h5" if rank > 0 else self.sink.final.name

    def finish(self, comm: Comm) -> list[str]:
        sink = self.sink
        if sink._owned_tables:
            sink.owned_spans = comm.allgather({name: sink._owner.written(name)
                                               for name in sink._owned_tables})
        self._join_parts(comm)
        return super().finish(comm)

    def _intervals(self, key, size: int) -> list[list[tuple[int, int]]]:
        """Per rank, the global row (byte) ranges it wrote of table (text column)
        ``key``, adjacent ones joined."""
        if key in self.sink._owned_tables:
            return [self.sink.owned_spans[r][key] for r in range(size)]
        out: list[list[tuple[int, int]]] = [[] for _ in range(size)]
        at = 0
        for window in self.sink.blocks:
            for r in range(size):
                n = window[r].get(key, 0)
                if n:
                    if out[r] and out[r][-1][1] == at:
                        out[r][-1] = (out[r][-1][0], at + n)
                    else:
                        out[r].append((at, at + n))
                    at += n
        return out

    def _join_parts(self, comm: Comm) -> None:
        """Every rank: the rows of the parts into the final file (collective).

        A chunk whose rows came from two or more ranks (a text column's: its bytes
        are cut where each rank's rows end; a numeric chunk has one owner) is made
        whole once, from the files that hold its rows, by one rank: rank 0 where it
        holds some of them, else the last of its writers; rank 0 stores the bytes
        (it alone writes the final file).  Then rank 0 copies every chunk a part
        holds whole as its stored bytes."""
        own = whole = None
        with comm.guard():
            with h5py.File(self.sink.staging.path(self.file_name(comm.rank)), "r") as f:
                own = self._join_plan(f, comm.size)
                if comm.rank:
                    whole = _whole_of_part(f, own[0], comm.rank)
        comm.check()
        datasets, jobs = own
        whole = comm.gather(whole)      # rank 0: per rank, the chunks its part holds whole
        files: dict[int, h5py.File] = {}
        final = None
        try:
            with comm.guard():
                if comm.rank == 0:
                    final = h5py.File(self.sink.staging.path(self.sink.final.name), "a",
                                      rdcc_nbytes=JOIN_CACHE_BYTES)
                    files[0] = final
            comm.check()
            self._join_shared(comm, datasets, jobs, files, final)
            with comm.guard():
                if comm.rank == 0:
                    self._copy_whole(whole, datasets, final)
            comm.check()
        finally:
            for r, f in files.items():
                if r:
                    f.close()
            if final is not None:
                final.close()
        with comm.guard():
            if comm.rank:   # each its own, in parallel: freeing a part's pages is not free
                os.unlink(self.sink.staging.path(self.file_name(comm.rank)))
        comm.check()

    def _join_plan(self, f: h5py.File, size: int):
        """(datasets: (table, path, per-rank spans, bytes per chunk), jobs: the
        shared chunks as (dataset index, first row, [(rank, a, b)], encoding rank)),
        the same on every rank: from the window counts and this rank's file."""
        datasets, jobs = [], []
        for name, columns in self.sink.schema.items():
            ranges = self._intervals(name, size)
            if not any(ranges[1:]):
                continue
            for col in columns:
                pieces = [(col.name, ranges)]
                if col.is_object:
                    pieces = [(f"{col.name}/{hdf5_text.ENDS}", ranges),
                              (f"{col.name}/{hdf5_text.DATA}",
                               self._intervals((name, col.name), size))]
                for path, spans in pieces:
                    ds = f[name][path]
                    if ds.chunks is None:
                        # no element at all (a text column whose every value is
                        # empty): stored without chunks, so nothing to join
                        continue
                    step, rows = ds.chunks[0], ds.shape[0]
                    for row, parts in shared_chunks(spans, step, rows):
                        writers = sorted({r for r, _, _ in parts})
                        jobs.append((len(datasets), row, parts,
                                     0 if writers[0] == 0 else writers[-1]))
                    chunk_bytes = ds.dtype.itemsize * int(np.prod(ds.chunks))
                    datasets.append((name, path, spans, chunk_bytes))
        return datasets, jobs

    def _file_of(self, files: dict, rank: int) -> h5py.File:
        if rank not in files:
            files[rank] = h5py.File(self.sink.staging.path(self.file_name(rank)), "r",
                                    rdcc_nbytes=0)
        return files[rank]

    def _join_shared(self, comm: Comm, datasets, jobs, files, final) -> None:
        """The shared chunks, in rounds: each rank assembles and encodes its own,
        rank 0 gathers and stores them.  A round holds at most ~JOIN_ROUND_BYTES
        of chunks over all ranks, so rank 0's memory does not grow with ranks."""
        if not jobs:
            return
        mine = [j for j in jobs if j[3] == comm.rank]
        most = int(np.bincount([j[3] for j in jobs], minlength=comm.size).max())
        largest = max(d[3] for d in datasets)
        per_round = max(1, JOIN_ROUND_BYTES // (comm.size * largest))
        targets: dict[int, h5py.Dataset] = {}      # rank 0: each dataset looked up once
        for first in range(0, most, per_round):
            made = []
            with comm.guard():
                for d, row, parts, _ in mine[first:first + per_round]:
                    name, path = datasets[d][:2]
                    made.append((d, row, self._whole_chunk(files, name, path, row, parts)))
            comm.check()
            everyone = comm.gather(made)
            with comm.guard():
                if comm.rank == 0:
                    for d, row, made in (m for ms in everyone for m in ms):
                        if d not in targets:
                            name, path = datasets[d][:2]
                            targets[d] = final[name][path]
                        ds = targets[d]
                        if isinstance(made, np.ndarray):
                            ds[row:row + len(made)] = made
                            self.gathered_bytes += made.nbytes
                        else:
                            hdf5_chunks.put(ds, row, made)
                            self.gathered_bytes += len(made[0]) if made else 0
            comm.check()
        for d, _, parts, _ in jobs:
            key = "text" if "/" in datasets[d][1] else "numbers"
            self.sink.join_counts[key]["value_items"] += sum(b - a for _, a, b in parts)

    def _whole_chunk(self, files, name: str, path: str, row: int, parts):
        """The chunk at ``row`` of ``name/path`` assembled from its writers' files and
        encoded as the file stores it (``put``'s argument)."""
        src = self._file_of(files, parts[0][0])[name][path]
        step = src.chunks[0]
        chunk = np.zeros((step,) + src.chunks[1:], src.dtype)
        for r, a, b in parts:
            chunk[a - row:b - row] = self._file_of(files, r)[name][path][a:b]
        how = hdf5_chunks.codec(src)
        if how is None:         # a pipeline h5py runs (lzf ...): rank 0 writes the values
            return chunk[:min(step, src.shape[0] - row)]
        return hdf5_chunks.encode(chunk, how)

    def _copy_whole(self, whole: list, datasets, final) -> None:
        """Rank 0: the chunks each part holds whole (``whole[r]``: rank r's list, from
        :func:`_whole_of_part`), as stored bytes, one part file after the other."""
        targets: dict[int, h5py.Dataset] = {}
        space = memoryview(bytearray(READ_BYTES))      # every part's reads, one after another
        for r, chunks in enumerate(whole):
            if r == 0 or not len(chunks):
                continue
            part = self.sink.staging.path(self.file_name(r))
            fd = os.open(part, os.O_RDONLY)
            try:
                ds = chunks[:, 0]
                for first, end in zip(*_groups(ds)):
                    d = int(ds[first])
                    if d not in targets:
                        name, path = datasets[d][:2]
                        targets[d] = final[name][path]
                    tally = self.sink.join_counts["text" if "/" in datasets[d][1] else "numbers"]
                    done = put_chunks(fd, targets[d], chunks[first:end, 1:], space, part)
                    for k, v in done.items():
                        tally[k] += v
            finally:
                os.close(fd)


def _whole_of_part(f: h5py.File, datasets, rank: int) -> np.ndarray:
    """(dataset index, row, filter mask, file offset, stored size) of each chunk that
    ``rank``'s part ``f`` holds whole, dataset by dataset (``datasets``: _join_plan's)."""
    found = [np.zeros((0, 5), np.int64)]
    for d, (name, path, spans, _) in enumerate(datasets):
        if spans[rank]:
            chunks = whole_chunks(f[name][path], spans[rank])
            found.append(np.column_stack([np.full(len(chunks), d, np.int64), chunks]))
    return np.concatenate(found)


def _groups(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of the runs of equal values."""
    starts = np.r_[0, np.flatnonzero(values[1:] != values[:-1]) + 1]
    return starts, np.r_[starts[1:], len(values)]


def _amount(nbytes: int) -> str:
    return f"{nbytes / 1e6:,.1f} MB" if nbytes >= 100_000 else f"{nbytes:,} bytes"


def copy_rows(src, dst, ranges: list[tuple[int, int]]) -> dict[str, int]:
    """Copy the chunks of ``src`` that lie wholly inside row ``ranges`` into ``dst``
    (same shape, chunks and filters) as their stored bytes (:func:`whole_chunks`, then
    :func:`put_chunks`; ``src``'s file must be flushed).  The chunks at a range's ends,
    shared with other ranks, are not copied (:func:`shared_chunks`).  Returns the chunks
    copied and their stored bytes."""
    chunks = whole_chunks(src, ranges)
    fd = os.open(src.file.filename, os.O_RDONLY)
    try:
        return put_chunks(fd, dst, chunks, name=src.file.filename)
    finally:
        os.close(fd)


def whole_chunks(src, ranges: list[tuple[int, int]]) -> np.ndarray:
    """(first row, filter mask, offset in the file, stored size) of each chunk of ``src``
    stored wholly inside row ``ranges``, in row order: where another process reads the
    chunk's bytes from (a chunk never written is all zero, the fill value, as in the
    final file: not listed)."""
    step = src.chunks[0]
    stored = sorted(_stored_chunks(src))
    base = src.file.userblock_size     # chunk addresses are relative to it
    table = np.array([(c[0], mask, base + address, size) for c, mask, address, size in stored],
                     np.int64).reshape(-1, 4)
    picked = []
    for a, b in ranges:
        first, last = -(-a // step), min(b, src.shape[0]) // step   # whole chunks
        if b == src.shape[0] and b % step:
            last += 1   # the dataset's last, partial chunk is whole if the range ends it
        if first < last:
            lo, hi = np.searchsorted(table[:, 0], (first * step, last * step))
            picked.append(table[lo:hi])
    return np.concatenate(picked) if picked else table[:0]


def put_chunks(fd: int, dst, chunks: np.ndarray, space: memoryview | None = None,
               name: str = "") -> dict[str, int]:
    """Write ``chunks`` (:func:`whole_chunks`' rows, of the file open as ``fd``) into
    ``dst`` as their stored bytes: read at the chunk's offset -> write_direct_chunk, no
    decompression (~3x less CPU than read_direct_chunk).  Chunks that follow one another
    in the file are read together, into ``space`` (a buffer the caller reuses, so no
    chunk allocates memory of its own), and each is written from its slice.  Returns
    the chunks and bytes; a file shorter than a chunk's end is an error naming ``name``."""
    space = memoryview(bytearray(READ_BYTES)) if space is None else space
    write = dst.id.write_direct_chunk       # looked up once, not per chunk
    tail = (0,) * (dst.ndim - 1)    # a chunk holds whole rows: only its first row varies
    rows = chunks.tolist()
    for first, end, at, nbytes in _reads(rows, len(space)):
        buf = space if nbytes <= len(space) else memoryview(bytearray(nbytes))
        got = os.preadv(fd, [buf[:nbytes]], at)
        if got != nbytes:
            raise OSError(f"{name or fd}: byte {at + got}: the file ends inside a stored chunk")
        for row, mask, offset, size in rows[first:end]:
            write((row,) + tail, buf[offset - at:offset - at + size], mask)
    return dict(chunks=len(chunks), stored_bytes=int(chunks[:, 3].sum()) if len(chunks) else 0)


def _reads(rows: list, most: int):
    """(first, end, offset, bytes) of each read covering ``rows`` (row, mask, offset,
    size): a run of chunks stored one after the other, cut before it passes ``most``
    bytes (a single chunk larger than that is read alone)."""
    first = 0
    while first < len(rows):
        at = rows[first][2]
        stop, end = at + rows[first][3], first + 1
        while end < len(rows) and rows[end][2] == stop and stop + rows[end][3] - at <= most:
            stop += rows[end][3]
            end += 1
        yield first, end, at, stop - at
        first = end


def shared_chunks(spans: list[list[tuple[int, int]]], step: int, size: int):
    """The chunks of a ``size``-row dataset (``step`` rows each) that hold rows of more
    than one rank, given each rank's row ``spans``: ``[(first row, [(rank, a, b),
    ...])]`` in row order, the pieces in row order.  Only a span's ends can fall
    inside such a chunk (a chunk inside one span is that rank's alone), so the
    work is per span, never per chunk or row."""
    pieces: dict[int, set] = {}
    for r, mine in enumerate(spans):
        for a, b in mine:
            if a % step:            # starts inside a chunk another rank began
                c = a - a % step
                pieces.setdefault(c, set()).add((r, a, min(b, c + step)))
            if b % step and b != size:      # ends inside one another rank completes
                c = (b - 1) - (b - 1) % step
                pieces.setdefault(c, set()).add((r, max(a, c), b))
    out = []
    for c in sorted(pieces):
        parts = sorted(pieces[c], key=lambda p: p[1])
        if [p[1] for p in parts[1:]] != [p[2] for p in parts[:-1]] or parts[0][1] != c or (
                parts[-1][2] != min(c + step, size)):
            raise AssertionError(f"chunk at row {c}: pieces {parts} do not tile it")
        out.append((c, parts))
    return out


def _stored_chunks(ds) -> list[tuple[tuple, int, int, int]]:
    """(coordinates, filter mask, file address, size) of each chunk ``ds`` stores: one
    walk of the chunk index (H5Dchunk_iter) where h5py has it (HDF5 >= 1.14)."""
    if not hasattr(ds.id, "chunk_iter"):
        return _stored_chunks_by_lookup(ds)
    found = []
    ds.id.chunk_iter(lambda c: found.append((c.chunk_offset, c.filter_mask,
                                             c.byte_offset, c.size)))
    return found


def _stored_chunks_by_lookup(ds) -> list[tuple[tuple, int, int, int]]:
    """_stored_chunks for older HDF5: a lookup in the chunk index per chunk."""
    found = []
    step, tail = ds.chunks[0], (0,) * (ds.ndim - 1)
    for row in range(0, ds.shape[0], step):
        c = ds.id.get_chunk_info_by_coord((row,) + tail)
        if c.byte_offset is not None:
            found.append(((row,) + tail, c.filter_mask, c.byte_offset, c.size))
    return found

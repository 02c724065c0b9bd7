"""Writing merged rows to one HDF5 file from many ranks (h5py need not have MPI).

Layouts (``layout=``):

* ``"single"`` (default): one self-contained file at the output path, whatever
  the rank count.  Rank 0 writes its slice of each window straight into the
  final file; rank r > 0 writes its slice into a staging part whose datasets
  have the final file's shape, chunks and filters, at the *global* row index
  (a part allocates only the chunks it touches).  Each rank compresses its own
  chunks (formats/hdf5/chunks.py: on a pool of threads, while the engine builds
  the next column or window), so the costly part runs in parallel.  Every chunk of a
  numeric table has one owner that writes it whole (output/chunk_owners.py:
  the rows at a slice's edge go to the rank that owns their chunk, once per
  window), so at commit rank 0 copies every chunk of the parts as its stored
  bytes (no decoding).  Text columns are data/ends pairs of plain numbers
  (formats/hdf5/text.py): a rank writes its rows' bytes at their global byte
  offset (known from one allgather of byte counts per window), so their chunks
  copy raw too and no rank's text passes through rank 0 as values; the byte
  chunks where one rank's text ends and the next one's begins are made whole
  and encoded once by one of their writers, in parallel, and rank 0 stores
  them.  The parts are then deleted (they never leave the hidden staging folder).
* ``"parts"``: rank r keeps ``OUT.parts/rank-<r>.h5`` and rank 0 writes ``OUT``
  whose datasets are HDF5 virtual datasets over the parts (relative paths: move
  ``OUT`` and ``OUT.parts`` together).  No copy at commit; ``OUT`` alone is
  unreadable (partrace says which part is missing).
Where h5py has MPI and the job more than one rank, the ``single`` layout is written
collectively instead: every rank writes its rows into the one file through HDF5's
mpio driver, and nothing is joined (hdf5_collective.py; PARTRACE_H5_COLLECTIVE=0
keeps the join).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import h5py
import numpy as np

from ..engine import accounts
from ..engine.mpi import Comm
from ..engine.sink import Sink
from ..errors import UsageError
from ..model import Definitions, Schema, Table
from ..formats.hdf5 import chunks as hdf5_chunks
from ..formats.hdf5 import layout as hdf5
from ..formats.hdf5 import text as hdf5_text
from . import hdf5_collective
from .chunk_owners import OwnedWriter
from ..engine.leftovers import run_name
from .staging import Staging

LAYOUTS = ("single", "parts")
PARTS_DIR = "parts"     # inside the hidden staging folder
JOIN_CACHE_BYTES = 16 << 20     # the final file's chunk cache while joining
JOIN_ROUND_BYTES = 64 << 20     # shared chunks gathered on rank 0 at once (before encoding)


class HDF5Sink(Sink):
    mode = "time"
    windows = True      # write() appends window after window
    columnwise = True   # write() reads each column of a window once (Table.column_once)
    wants_next_keys = True  # the engine sets next_keys before each write: None per table = no later rows

    def __init__(self, path, source: str = "", overwrite: bool = False,
                 compression: str | None = None, layout: str | None = None):
        layout = layout or "single"
        if layout not in LAYOUTS:
            raise UsageError(f"--layout {layout}: HDF5 layouts are {', '.join(LAYOUTS)}")
        self.final = Path(path)
        self.source = source
        self.overwrite = overwrite
        self.compression = compression
        self.layout = layout
        self.parts_name = self.final.name + ".parts"
        self.staging: Staging | None = None
        self._file: h5py.File | None = None
        self._pending: hdf5_chunks.Pending | None = None   # chunks still compressing
        # per window, per rank: rows per table (key: table name), bytes per text
        # column (key: (table, column)), and ("not utf-8", table, column): True
        self.blocks: list[list[dict]] = []
        self.rows: dict = {}                           # rows (bytes) written so far, all ranks
        self.commit_seconds = 0.0                      # rank 0: joining the parts
        # rank 0, joining: per "text"/"numbers", chunks copied raw, their stored
        # bytes, and elements (text: bytes) of shared edge chunks copied as values
        self.join_counts = {k: dict(chunks=0, stored_bytes=0, value_items=0)
                            for k in ("text", "numbers")}
        self.gathered_bytes = 0     # rank 0, joining: shared chunks received, as encoded
        self.collective: hdf5_collective.CollectiveFile | None = None  # every rank writes

    @property
    def _split(self) -> bool:
        return self._parallel and self.collective is None

    # -- collective steps --------------------------------------------------
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        self.defs, self.schema = defs, schema
        self._parallel = comm.parallel
        collective = False
        with comm.guard():      # a bad PARTRACE_H5_COLLECTIVE fails every rank alike
            collective = self.layout == "single" and hdf5_collective.chosen(comm)
        comm.check()
        longest = 0
        with comm.guard():      # a bad PARTRACE_H5_CHUNK_ROWS fails every rank alike
            longest = hdf5.long_chunk_rows()
        comm.check()
        self.chunk_rows = comm.bcast(longest)   # rank 0's: every part's chunks must match
        hdf5_chunks.set_threads(hdf5_chunks.default_threads(comm.size))
        # rows held by chunks compressing while the engine builds the next column or
        # window: a small share of the budget (None: no budget given)
        self._pending = hdf5_chunks.Pending(min(hdf5_chunks.PENDING_BYTES,
                                                (self.memory or 1 << 40) // 16))
        self.text_keys = [(name, c.name) for name, cols in schema.items() for c in cols
                          if c.is_object]
        self.rows = dict.fromkeys([*schema, *self.text_keys], 0)
        # tables each of whose chunks one rank writes whole (chunk_owners.py): all but
        # those with text (its bytes' chunks do not follow rows) and the parts layout's
        self._owned_tables = set() if self._split and self.layout == "parts" else {
            name for name, cols in schema.items() if not any(c.is_object for c in cols)}
        self._steps: dict[str, int] = {}       # their rows per chunk
        self._owner = OwnedWriter(self._put_owned)
        run_id = comm.bcast(run_name())
        self.staging = Staging(self.final, run_id)
        if collective:
            self.collective = hdf5_collective.CollectiveFile(
                self.staging.path(self.final.name), defs, self.source, schema, self.compression)
        with comm.guard():
            if comm.rank == 0:
                self.staging.check_free([self.final, self.final.parent / self.parts_name],
                                        self.overwrite)
                self.staging.create()
                if self._parallel:  # (the collective path may still fall back to a join)
                    name = self.parts_name if self.layout == "parts" else PARTS_DIR
                    self.staging.path(name).mkdir()
        comm.check()

    def _file_name(self, rank: int) -> str:
        if self._split and self.layout == "parts":
            return f"{self.parts_name}/rank-{rank:05d}.h5"
        if self._split and rank > 0:
            return f"{PARTS_DIR}/rank-{rank:05d}.h5"
        return self.final.name

    def _shapes(self, counts: dict) -> dict:
        """Per table and text column, (rows or bytes per chunk, final size or None),
        the same on every rank: fitted and fixed when the first window is the only
        one (the engine says no table has later rows), else the largest chunks and
        resizable datasets."""
        later = self.next_keys
        only = later is not None and all(k is None for k in later.values())
        out = {name: (hdf5.chunk_rows(counts[name], self.chunk_rows), counts[name]) if only
               else (self.chunk_rows, None) for name in self.schema}
        for key in self.text_keys:
            out[key] = ((hdf5_text.data_chunk(counts[key]), counts[key]) if only
                        else (hdf5_text.CHUNK_BYTES, None))
        return out

    def _open(self, comm: Comm, counts: dict) -> None:
        # no chunk cache: whole chunks go straight to the file instead of
        # being copied through a 1 MiB cache per dataset (2-4x faster)
        f = h5py.File(self.staging.path(self._file_name(comm.rank)), "w", rdcc_nbytes=0,
                      libver=hdf5.LIBVER)
        if self._file_name(comm.rank) == self.final.name:
            hdf5.write_header(f, self.defs, self.source, self.schema)
        else:
            f.attrs["layout"] = hdf5.LAYOUT + "-shard"
        shapes = self._shapes(counts)
        for name, columns in self.schema.items():
            if self._split and self.layout == "parts":     # sizes differ per part
                shapes[name] = (hdf5.chunk_rows(counts[name], self.chunk_rows), None)
                for c in columns:
                    if c.is_object:
                        shapes[name, c.name] = (hdf5_text.data_chunk(counts[name, c.name]), None)
            chunk, rows = shapes[name]
            text = {c.name: (shapes[name, c.name][1], shapes[name, c.name][0])
                    for c in columns if c.is_object}
            group = hdf5.create_table(f, name, columns, chunk, self.compression, rows, text)
            if name in self._owned_tables and columns and group[columns[0].name].chunks:
                self._steps[name] = group[columns[0].name].chunks[0]
        self._file = f

    def _encode_text(self, tables: dict[str, Table]) -> dict:
        """Per (table, text column): (bytes, per-row lengths, not UTF-8), this rank's."""
        out = {}
        for name, col in self.text_keys:
            if name in tables:
                spec = next(c for c in self.schema[name] if c.name == col)
                out[name, col] = hdf5_text.encode(spec, tables[name].column_once(col))
        return out

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        """Append one window: every rank its slice of the global order."""
        encoded = {}
        with comm.guard():      # a value that cannot be encoded fails every rank, no hang
            encoded = self._encode_text(tables)
        comm.check()
        mine = {name: len(t) for name, t in tables.items()}
        for key, (data, _, bad) in encoded.items():
            mine[key] = len(data)
            if bad:
                mine[("not utf-8",) + key] = True
        everyone = comm.allgather(mine)
        self.blocks.append(everyone)
        if self.collective is not None and not self.collective.opened and (
                not hdf5_collective.one_window(self.next_keys)):
            self.collective = None      # the serial join, on every rank alike
        if self.collective is not None:
            if not self.collective.opened:
                self.collective.open(comm, self._shapes(
                    {k: sum(e.get(k, 0) for e in everyone) for k in self.rows}))
            self.collective.write(comm, tables, encoded, everyone, self.rows)
            for key in self.rows:
                self.rows[key] += sum(e.get(key, 0) for e in everyone)
            return
        owned = {}
        with comm.guard():
            if self._file is None:
                self._open(comm, {k: sum(e.get(k, 0) for e in everyone) for k in self.rows})
            owned = self._owned_windows(tables, everyone)
        comm.check()
        self._owner.write(comm, owned)
        with comm.guard():
            parts = self._split and self.layout == "parts"
            for name, table in tables.items():
                if name in owned:
                    continue
                text = {}
                for col in (c.name for c in self.schema[name] if c.is_object):
                    data, lengths, _ = encoded[name, col]
                    base, _, end = self._span((name, col), everyone, comm.rank)
                    if parts:   # bytes appended to this part; ends say the global offsets
                        at = self._file[name][col][hdf5_text.DATA].shape[0]
                        text[col] = (data, lengths, base, at, at + len(data))
                    else:
                        text[col] = (data, lengths, base, base, end)
                    if any(e.get(("not utf-8", name, col)) for e in everyone) and (
                            self._file_name(comm.rank) == self.final.name):
                        hdf5_text.mark_not_utf8(self._file[name][col])
                if parts:
                    at = int(self._file[name].attrs["rows"])
                    hdf5.write_rows(self._file[name], table, self.schema[name], at,
                                    at + len(table), text, self._pending)
                    continue
                start, _, end = self._span(name, everyone, comm.rank)
                hdf5.write_rows(self._file[name], table, self.schema[name], start, end, text,
                                self._pending)
        comm.check()
        for key in self.rows:
            self.rows[key] += sum(e.get(key, 0) for e in everyone)

    def _owned_windows(self, tables: dict[str, Table], everyone: list[dict]) -> dict:
        """The tables written in whole chunks by their owners (chunk_owners.py): each
        one's (slices, this rank's rows, column names, rows come later), its datasets
        grown to the window's end on every rank (every part has the final shape)."""
        out = {}
        for name, table in tables.items():
            step = self._steps.get(name)
            if step is None:
                continue
            counts = [e.get(name, 0) for e in everyone]
            end = self.rows[name] + sum(counts)
            group = self._file[name]
            for col in self.schema[name]:
                if group[col.name].shape[0] < end:
                    group[col.name].resize(end, axis=0)
            group.attrs["rows"] = max(end, int(group.attrs["rows"]))
            later = self.next_keys is None or self.next_keys.get(name) is not None
            out[name] = (self._owner.slices(name, self.rows[name], counts, step), table,
                         [c.name for c in self.schema[name]], later)
        return out

    def _put_owned(self, name: str, column: str, values: np.ndarray, row: int) -> None:
        col = next(c for c in self.schema[name] if c.name == column)
        hdf5.write_values(self._file[name][column], col, values, row, self._pending)

    def _span(self, key, everyone: list[dict], rank: int) -> tuple[int, int, int]:
        """Global (first row or byte of ``rank``'s share, its end, the window's end)."""
        start = self.rows[key] + sum(e.get(key, 0) for e in everyone[:rank])
        return (start, start + everyone[rank].get(key, 0),
                self.rows[key] + sum(e.get(key, 0) for e in everyone))

    def _close(self) -> None:
        if self._file is not None:
            try:
                if self._pending is not None:
                    self._pending.drain()
            finally:
                self._file.close()
            self._file = None

    def _intervals(self, key, size: int) -> list[list[tuple[int, int]]]:
        """Per rank, the global row (byte) ranges it wrote of table (text column)
        ``key``, adjacent ones joined."""
        if key in self._owned_tables:
            return [self.owned_spans[r][key] for r in range(size)]
        out: list[list[tuple[int, int]]] = [[] for _ in range(size)]
        at = 0
        for window in self.blocks:
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
        own = None
        with comm.guard():
            with h5py.File(self.staging.path(self._file_name(comm.rank)), "r") as f:
                own = self._join_plan(f, comm.size)
        comm.check()
        datasets, jobs = own
        files: dict[int, h5py.File] = {}
        final = None
        try:
            with comm.guard():
                if comm.rank == 0:
                    final = h5py.File(self.staging.path(self.final.name), "a",
                                      rdcc_nbytes=JOIN_CACHE_BYTES)
                    files[0] = final
            comm.check()
            self._join_shared(comm, datasets, jobs, files, final)
            with comm.guard():
                if comm.rank == 0:
                    self._copy_whole(comm.size, datasets, files, final)
            comm.check()
        finally:
            for r, f in files.items():
                if r:
                    f.close()
            if final is not None:
                final.close()
        with comm.guard():
            if comm.rank == 0:
                for r in range(1, comm.size):
                    os.unlink(self.staging.path(self._file_name(r)))
        comm.check()

    def _join_plan(self, f: h5py.File, size: int):
        """(datasets: (table, path, per-rank spans, bytes per chunk), jobs: the
        shared chunks as (dataset index, first row, [(rank, a, b)], encoding rank)),
        the same on every rank: from the window counts and this rank's file."""
        datasets, jobs = [], []
        for name, columns in self.schema.items():
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
            files[rank] = h5py.File(self.staging.path(self._file_name(rank)), "r",
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
                        name, path = datasets[d][:2]
                        ds = final[name][path]
                        if isinstance(made, np.ndarray):
                            ds[row:row + len(made)] = made
                            self.gathered_bytes += made.nbytes
                        else:
                            hdf5_chunks.put(ds, row, made)
                            self.gathered_bytes += len(made[0]) if made else 0
            comm.check()
        for d, _, parts, _ in jobs:
            key = "text" if "/" in datasets[d][1] else "numbers"
            self.join_counts[key]["value_items"] += sum(b - a for _, a, b in parts)

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

    def _copy_whole(self, size: int, datasets, files, final) -> None:
        """Rank 0: the chunks each part holds whole, as stored bytes."""
        for name, path, spans, _ in datasets:
            tally = self.join_counts["text" if "/" in path else "numbers"]
            for r in range(1, size):
                if spans[r]:
                    for k, v in copy_rows(self._file_of(files, r)[name][path], final[name][path],
                                          spans[r]).items():
                        tally[k] += v

    def _write_index(self, comm: Comm) -> None:
        """Rank 0 (layout "parts"): the top file, of virtual datasets over the parts."""
        shard = [f"./{self.parts_name}/rank-{r:05d}.h5" for r in range(comm.size)]

        def blocks_of(key):
            blocks, done = [], [0] * comm.size
            for window in self.blocks:
                for r in range(comm.size):
                    n = window[r].get(key, 0)
                    blocks.append((shard[r], done[r], n))
                    done[r] += n
            return blocks, dict(zip(shard, done))

        with h5py.File(self.staging.path(self.final.name), "w", libver=hdf5.LIBVER) as f:
            hdf5.write_header(f, self.defs, self.source, self.schema)
            for name, columns in self.schema.items():
                text = {}
                for col in (c.name for c in columns if c.is_object):
                    bad = any(w.get(("not utf-8", name, col)) for win in self.blocks for w in win)
                    text[col] = (*blocks_of((name, col)), bad)
                hdf5.link_shards(f, name, columns, *blocks_of(name), text)

    def commit(self, comm: Comm) -> None:
        if not self.blocks:     # no window at all: still an (empty) file
            self.write(comm, {name: Table.empty(cols) for name, cols in self.schema.items()})
        if self.collective is not None:
            self.collective.finish(comm, self.rows)
        with comm.guard():
            self._owner.flush()     # chunks that end a table held for rows that never came
            self._close()
        comm.check()
        if self._split and self._owned_tables:
            self.owned_spans = comm.allgather({name: self._owner.written(name)
                                               for name in self._owned_tables})
        if self._split:
            began = time.perf_counter()
            if self.layout == "parts":
                with comm.guard():
                    if comm.rank == 0:
                        self._write_index(comm)
                comm.check()
            else:
                self._join_parts(comm)
            self.commit_seconds = time.perf_counter() - began
        accounts.note_output(**self._write_path(comm))
        with comm.guard():
            if comm.rank == 0:
                names = [self.final.name]
                if self.layout == "parts" and self.staging.path(self.parts_name).exists():
                    names.insert(0, self.parts_name)
                elif (self.final.parent / self.parts_name).exists() and self.overwrite:
                    # an old run's parts would otherwise sit beside the new file
                    import shutil
                    shutil.rmtree(self.final.parent / self.parts_name)
                self.staging.publish(names)
        comm.check()

    def _write_path(self, comm: Comm) -> dict:
        """Which path wrote the file, for the closing summary and --stats: on rank 0
        after a join, the bytes of other ranks' chunks it carried."""
        if self.collective is not None:
            return dict(path="collective", summary="HDF5 written collectively (mpio)")
        if not self._split:
            return dict(path="one rank", summary="HDF5 written by one rank")
        if self.layout == "parts":
            return dict(path="parts", summary="HDF5 parts: no join")
        through = self.gathered_bytes + sum(c["stored_bytes"] for c in self.join_counts.values())
        return dict(path="serial join", through_rank0_bytes=through,
                    join_seconds=round(self.commit_seconds, 6),
                    summary=f"HDF5 serial join: {_amount(through)} of other ranks' chunks "
                            f"through rank 0 in {self.commit_seconds:.2f} s")

    def discard(self, comm: Comm) -> None:
        try:
            self._close()
        except Exception:  # noqa: BLE001 - the file is being thrown away
            self._file = None
        if self.collective is not None:     # collective: every rank discards
            try:
                self.collective.close()
            except Exception:  # noqa: BLE001 - the file is being thrown away
                pass
        comm.barrier()
        if comm.rank == 0 and self.staging is not None:
            self.staging.discard()


def _amount(nbytes: int) -> str:
    return f"{nbytes / 1e6:,.1f} MB" if nbytes >= 100_000 else f"{nbytes:,} bytes"


def copy_rows(src, dst, ranges: list[tuple[int, int]]) -> dict[str, int]:
    """Copy the chunks of ``src`` that lie wholly inside row ``ranges`` into ``dst``
    (same shape, chunks and filters) as their stored bytes: read from ``src``'s file
    at the chunk's address -> write_direct_chunk, no decompression, ~3x less CPU than
    read_direct_chunk per chunk (``src``'s file must be flushed).  The chunks at a
    range's ends, shared with other ranks, are not copied (:func:`shared_chunks`).
    Returns the chunks copied and their stored bytes."""
    step = src.chunks[0]
    counts = dict(chunks=0, stored_bytes=0)
    stored = sorted(_stored_chunks(src))
    rows = np.array([c[0][0] for c in stored], np.int64)
    base = src.file.userblock_size     # chunk addresses are relative to it
    fd = os.open(src.file.filename, os.O_RDONLY)
    try:
        for a, b in ranges:
            first, last = -(-a // step), min(b, src.shape[0]) // step   # whole chunks
            if b == src.shape[0] and b % step:
                last += 1   # the dataset's last, partial chunk is whole if the range ends it
            if first >= last:
                continue
            # a chunk never written is all zero (the fill value), as in the final file
            lo, hi = np.searchsorted(rows, (first * step, last * step))
            for coord, mask, address, size in stored[lo:hi]:
                dst.id.write_direct_chunk(coord, os.pread(fd, size, base + address), mask)
                counts["chunks"] += 1
                counts["stored_bytes"] += size
    finally:
        os.close(fd)
    return counts


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

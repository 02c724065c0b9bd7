"""The HDF5 sink's single layout at several ranks: the ranks' files joined into one.

Rank 0 writes its slice of each window straight into the output file; rank r > 0 writes
its slice into a staging part whose datasets have the output's shape, chunks and
filters, at the *global* row index (a part allocates only the chunks it touches).  Every
chunk of a numeric table has one owner that writes it whole (chunk_owners.py).  Rank 0
alone can write the output's HDF5 (serial h5py), but only its chunk index needs to be
written there: it places another rank's chunk leaving a hole of its stored size
(hdf5_holes.py), and the chunk's rank writes its bytes into it.

- Window by window, the whole chunks a rank r > 0 owns never reach its part: kept
  (hdf5_direct.py), placed by rank 0 in the file it has open during the next window
  (in the step where the others write theirs; the engine gives rank 0 fewer of its rows
  for it: ``serial_seconds``), written by their rank at the places rank 0 sends back at
  that window's end.  The last window's are placed at commit, while the others list
  what their parts hold.
- At commit, the rest: a text column's bytes are written at their global byte offset,
  and the byte chunks where one rank's text ends and the next one's begins are made
  whole and encoded once by one of their writers other than rank 0 (turn by turn, in
  parallel; rank 0 sends its rows of them, read from the file it writes), and rank 0
  stores them.  Each rank lists the chunks its own part holds whole (a walk of its
  chunk index, in parallel) and sends rank 0 the list; rank 0 places them, closes the
  file and sends each rank their places; each rank copies its chunks' bytes from its
  part into them, all at once, then deletes its part (they never leave the hidden
  staging folder).

Rank 0's join is a call per chunk and the shared chunks' bytes; it opens no part.  What
rank 0 indexed and carried for the others, the bytes each rank wrote or filled in and
how long it took go to the accounts (``written``).
"""
from __future__ import annotations

import os
import time

import h5py
import numpy as np

from ..engine.mpi import Comm
from ..formats.hdf5 import chunks as hdf5_chunks
from ..formats.hdf5 import text as hdf5_text
from ..formats.hdf5 import layout as hdf5
from . import hdf5_direct
from .hdf5_direct import ChunkLog, LoggedDataset, write_logged
from .hdf5_chunk_map import shared_chunks, whole_chunks
from .hdf5_holes import HoleFile, fill, place_chunks
from .hdf5_layouts import HDF5Layout

PARTS_DIR = "parts"     # inside the hidden staging folder
JOIN_CACHE_BYTES = 16 << 20     # the final file's chunk cache while joining
JOIN_ROUND_BYTES = 64 << 20     # shared chunks gathered on rank 0 at once (before encoding)


class SingleFileLayout(HDF5Layout):
    folder = PARTS_DIR

    def __init__(self, sink):
        super().__init__(sink)
        self.gathered_bytes = 0     # rank 0: shared chunks received, as encoded
        self.filled_bytes = 0       # rank r > 0: its own chunks' bytes, into their holes
        self.place_seconds = 0.0    # rank 0: placing the parts' chunks (thread CPU),
        self.first_place_seconds = 0.0      # of it the first chunk of each dataset,
        self.placed_datasets = 0            # of these datasets
        self.placed_numbers: dict[str, int] = {}    # rank 0: per table, its numbers' chunks
        self.direct_bytes = 0       # rank r > 0: its owned chunks' bytes, straight into the output
        self.window_place_seconds = 0.0     # rank 0: of place_seconds, during the windows
        self._rank = 0
        # rank r > 0: its owned chunks of the window (hdf5_direct.py), within its bound
        self._log = ChunkLog(min(hdf5_direct.LOG_BYTES, (sink.memory or 1 << 40) // 16))
        self._logged: dict = {}     # rank r > 0: per (table, column), the dataset standing in
        self._holes: HoleFile | None = None     # rank 0: the output's file while windows write
        self._targets: dict = {}    # rank 0: per owned dataset, its write_direct_chunk there
        self._keys: list | None = None      # the owned datasets, indexed alike on every rank
        # a window's logged chunks are placed during the next one (while the other ranks
        # write theirs) and written once their places come back, at that window's end
        # (their bytes wait in the log till then)
        self._pending: list | None = None   # rank 0: per rank, the chunks to place
        self._offsets: list | None = None   # rank 0: per rank, the places of the last ones

    def written(self) -> dict:
        """On rank 0, the chunks it indexed for the other ranks and the bytes of theirs it
        carried (shared chunks only); on every rank, its own chunks' bytes it filled in."""
        sink = self.sink
        placed = sum(c["chunks"] for c in sink.join_counts.values())
        stored = sum(c["stored_bytes"] for c in sink.join_counts.values())
        return dict(path="serial join", through_rank0_bytes=self.gathered_bytes,
                    placed_chunks=placed, placed_bytes=stored, filled_bytes=self.filled_bytes,
                    direct_bytes=self.direct_bytes,
                    window_place_seconds=round(self.window_place_seconds, 6),
                    place_seconds=round(self.place_seconds, 6),
                    placed_datasets=self.placed_datasets,
                    first_place_seconds=round(self.first_place_seconds, 6),
                    join_seconds=round(sink.commit_seconds, 6),
                    # per table: its rows, rows per chunk, chunks of numbers placed (a
                    # model of a longer trace grows them by the chunk rule)
                    tables={name: [sink.table_rows.get(name, 0) if sink.table_rows else 0,
                                   sink.chunk_rows[name], n]
                            for name, n in sorted(self.placed_numbers.items())},
                    summary=f"HDF5 serial join: rank 0 indexed {placed:,} chunks "
                            f"({_amount(stored)}) that the other ranks wrote, and carried "
                            f"{_amount(self.gathered_bytes)} of chunks ranks share, "
                            f"in {sink.commit_seconds:.2f} s")

    def file_name(self, rank: int) -> str:
        return f"{PARTS_DIR}/rank-{rank:05d}.h5" if rank > 0 else self.sink.final.name

    def open_file(self, rank: int) -> h5py.File:
        """A part; on rank 0 the output, through a HoleFile: the windows place the other
        ranks' owned chunks in it as holes (hdf5_direct.py)."""
        self._rank = rank
        if rank:
            return super().open_file(rank)
        path = self.sink.staging.path(self.file_name(0))
        open(path, "wb").close()        # a HoleFile opens a file that exists
        self._holes = HoleFile(path, 1 << 20)
        try:
            return h5py.File(self._holes, "w", rdcc_nbytes=0, libver=hdf5.LIBVER)
        except BaseException:
            self._close_holes()
            raise

    def owned_target(self, name: str, column: str, ds, how):
        """On a rank r > 0, an owned table's dataset as the chunk writer sees it: its
        chunks logged for the output, not stored in the part (where this module encodes
        them: a pipeline h5py runs writes the part's values, which the join copies)."""
        if not self._rank or how is None:
            return ds
        logged = self._logged.get((name, column))
        if logged is None or logged._ds is not ds:
            index = self._owned_keys().index((name, column))
            logged = self._logged[name, column] = LoggedDataset(ds, index, self._log)
        return logged

    def _owned_keys(self) -> list[tuple[str, str]]:
        if self._keys is None:
            self._keys = [(name, c.name) for name in sorted(self.sink._owned_tables)
                          for c in self.sink.schema[name]]
        return self._keys

    @property
    def serial_seconds(self) -> float:
        """Rank 0's CPU seconds so far placing the other ranks' chunks during the windows:
        work for all the ranks, which the engine weighs against rank 0's share of rows."""
        return self.window_place_seconds

    def write_window(self, comm: Comm, tables: dict, encoded: dict, everyone: list[dict]) -> None:
        """Rank 0 places the chunks the ranks logged in the last window, while they write
        this one's (:meth:`before_chunks`); at its end each rank gets their places and
        writes them, and rank 0 gets this window's lists."""
        self._offsets = None
        super().write_window(comm, tables, encoded, everyone)
        self._write_placed(comm, self._offsets, self._log.release())
        meta = None
        with comm.guard():
            meta = self._log.take()
        comm.check()
        logs = comm.gather(meta)
        if comm.rank == 0:
            self._pending = logs

    def before_chunks(self, comm: Comm) -> None:
        """Rank 0: the last window's logged chunks placed in the same step as every rank
        writes this window's whole chunks (the owners' first, chunk_owners.py), not in a
        step of its own: a rank meets the others at the step's end, so rank 0's smaller
        share of rows (``serial_seconds``) leaves it the time to place them only there."""
        if comm.rank == 0:
            self._offsets = self._place(self._pending, comm.size, self.sink._file,
                                        self._holes, self._targets, True)
        self._pending = None

    def _logs_to_place(self, comm: Comm) -> list | None:
        """Collective, at commit: on rank 0, per rank, the chunks it logged
        (hdf5_direct.py) since rank 0 last placed them: the last window's and any stored
        after it."""
        meta = None
        with comm.guard():
            meta = self._log.take()
        comm.check()
        logs = comm.gather(meta)
        if comm.rank == 0 and self._pending is not None:    # the last window's first
            logs = [np.concatenate([p, m]) for p, m in zip(self._pending, logs)]
            self._pending = None
        return logs

    def _place(self, logs: list | None, size: int, final, holes, targets: dict,
               windowed: bool) -> list:
        """Rank 0: every rank's logged chunks (``logs``, None: none) placed in ``final``;
        per rank of ``size``, the offsets of its chunks there."""
        offsets = [np.zeros(0, np.int64)] * size
        if not logs or not any(len(m) for m in logs[1:]):
            return offsets
        began = time.thread_time()
        known = len(targets)
        paths = [f"{n}/{c}" for n, c in self._owned_keys()]
        offsets[1:], first = place_chunks(final, holes, paths, logs[1:], targets)
        spent = time.thread_time() - began
        self.place_seconds += spent
        self.first_place_seconds += first
        self.placed_datasets += len(targets) - known
        if windowed:
            self.window_place_seconds += spent
        self._count_logged(logs[1:])
        return offsets

    def _write_placed(self, comm: Comm, offsets: list | None, data: list) -> None:
        """Collective: each rank r > 0 writes ``data``, its chunks, at the places rank 0
        sends it (``offsets``, given on rank 0)."""
        mine = comm.scatter(offsets)
        with comm.guard():
            if comm.rank:
                self.direct_bytes += write_logged(
                    self.sink.staging.path(self.sink.final.name), mine, data)
        comm.check()

    def _count_logged(self, logs: list[np.ndarray]) -> None:
        """Rank 0: the logged chunks it placed, in the join's counts."""
        counts = self.sink.join_counts["numbers"]
        tables = [name for name, _ in self._owned_keys()]
        for meta in logs:
            counts["chunks"] += len(meta)
            counts["stored_bytes"] += int(meta[:, 3].sum())
            self._count_numbers(tables, meta[:, 0])

    def _count_numbers(self, tables: list[str], placed: np.ndarray) -> None:
        """Rank 0: chunks of numbers placed, ``placed`` their dataset indexes into
        ``tables`` (each dataset's table), added to their tables' counts."""
        for d, n in zip(*np.unique(placed, return_counts=True)):
            self.placed_numbers[tables[d]] = self.placed_numbers.get(tables[d], 0) + int(n)

    def _close_holes(self) -> None:
        if self._holes is not None:
            holes, self._holes = self._holes, None
            holes.close()

    def release(self) -> None:
        self._close_holes()

    def finish(self, comm: Comm) -> list[str]:
        sink = self.sink
        self._close_holes()     # the sink closed the file on it
        self._targets = {}
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
        whole once, from the files that hold its rows, by one of its writers other
        than rank 0 (``_encoder``); rank 0 stores the bytes (it alone writes the final
        file's HDF5).  Then rank 0 places every chunk a
        part holds whole, leaving a hole for its bytes (hdf5_holes.py), closes the
        file, and each rank copies its own chunks into their holes."""
        logs = self._logs_to_place(comm)
        own = whole = offsets = None
        files: dict[int, h5py.File] = {}
        final = holes = None
        places = None       # rank 0: per rank, where its whole chunks go
        path = self.sink.staging.path(self.sink.final.name)
        try:
            # one step: each rank reads its file's plan and lists the chunks its part
            # holds whole while rank 0 places the logged chunks (the others wait for
            # no step of rank 0's alone)
            with comm.guard():
                with h5py.File(self.sink.staging.path(self.file_name(comm.rank)), "r") as f:
                    own = self._join_plan(f, comm.size)
                    if comm.rank:
                        whole = _whole_of_part(f, own[0], comm.rank)
                if comm.rank == 0:      # the output, read above, now opened to be written
                    holes = HoleFile(path, 1 << 20)     # a placeholder grows as needed
                    final = h5py.File(holes, "r+", rdcc_nbytes=JOIN_CACHE_BYTES)
                    files[0] = final
                    offsets = self._place(logs, comm.size, final, holes, {}, False)
            comm.check()
            self._write_placed(comm, offsets, self._log.release())
            datasets, jobs = own
            whole = comm.gather(whole)      # rank 0: per rank, the chunks its part holds whole
            self._join_shared(comm, datasets, jobs, files, final)
            with comm.guard():
                if comm.rank == 0:
                    began = time.thread_time()
                    places = self._place_whole(whole, datasets, final, holes)
                    self.place_seconds += time.thread_time() - began
                    del files[0]
                    done, final = final, None
                    done.close()        # the index written, the holes left for the ranks
                    holes.close()
            comm.check()
        finally:
            for r, f in files.items():
                if r:
                    f.close()
            if final is not None:
                final.close()
            if holes is not None:
                holes.close()
        mine = comm.scatter(places)
        with comm.guard():
            if comm.rank:   # each its own, in parallel: its chunks' bytes, then its part gone
                part = self.sink.staging.path(self.file_name(comm.rank))
                self.filled_bytes = fill(part, path, mine)
                os.unlink(part)     # freeing a part's pages is not free
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
                    ds = f[f"{name}/{path}"]
                    if ds.chunks is None:
                        # no element at all (a text column whose every value is
                        # empty): stored without chunks, so nothing to join
                        continue
                    step, rows = ds.chunks[0], ds.shape[0]
                    for row, parts in shared_chunks(spans, step, rows):
                        jobs.append((len(datasets), row, parts, _encoder(parts, len(jobs))))
                    chunk_bytes = ds.dtype.itemsize * int(np.prod(ds.chunks))
                    datasets.append((name, path, spans, chunk_bytes))
        return datasets, jobs

    def _file_of(self, files: dict, rank: int) -> h5py.File:
        if rank not in files:
            files[rank] = h5py.File(self.sink.staging.path(self.file_name(rank)), "r",
                                    rdcc_nbytes=0)
        return files[rank]

    def _join_shared(self, comm: Comm, datasets, jobs, files, final) -> None:
        """The shared chunks, in rounds: rank 0 sends each encoder its rows of the
        round's chunks, each rank assembles and encodes its own, rank 0 gathers and
        stores them.  A round holds at most ~JOIN_ROUND_BYTES of chunks over all
        ranks, so rank 0's memory does not grow with ranks."""
        if not jobs:
            return
        by_rank: list[list] = [[] for _ in range(comm.size)]
        for job in jobs:
            by_rank[job[3]].append(job)
        most = max(len(j) for j in by_rank)
        largest = max(d[3] for d in datasets)
        per_round = max(1, JOIN_ROUND_BYTES // (comm.size * largest))
        targets: dict[int, h5py.Dataset] = {}      # rank 0: each dataset looked up once
        for first in range(0, most, per_round):
            given = None        # rank 0: per rank, its rows of that rank's chunks
            with comm.guard():
                if comm.rank == 0:
                    given = [self._rows_of_rank0(final, targets, datasets,
                                                 by_rank[r][first:first + per_round])
                             for r in range(comm.size)]
            comm.check()
            given = comm.scatter(given)
            made = []
            with comm.guard():
                for d, row, parts, _ in by_rank[comm.rank][first:first + per_round]:
                    made.append((d, row, self._whole_chunk(files, datasets, d, row, parts,
                                                           given)))
            comm.check()
            everyone = comm.gather(made)
            with comm.guard():
                if comm.rank == 0:
                    for d, row, made in (m for ms in everyone for m in ms):
                        ds = _target(final, targets, datasets, d)
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

    def _rows_of_rank0(self, final, targets, datasets, jobs) -> dict:
        """Rank 0: its rows of the shared chunks ``jobs`` (another rank's), read from the
        file it writes (no other rank may open it), by (dataset index, first row)."""
        return {(d, a): _target(final, targets, datasets, d)[a:b]
                for d, _, parts, _ in jobs for r, a, b in parts if r == 0}

    def _whole_chunk(self, files, datasets, d: int, row: int, parts, rank0_rows: dict):
        """The chunk at ``row`` of dataset ``d`` (``datasets``: _join_plan's) assembled
        from its writers' parts and rank 0's rows (``rank0_rows``: _rows_of_rank0's, sent
        by rank 0), and encoded as the file stores it (``put``'s argument)."""
        key = "/".join(datasets[d][:2])
        read = {r: self._file_of(files, r)[key] for r, _, _ in parts if r}
        # the encoder is a writer: its own part; rank 0 encodes a chunk only it wrote
        src = next(iter(read.values())) if read else self._file_of(files, 0)[key]
        step = src.chunks[0]
        chunk = np.zeros((step,) + src.chunks[1:], src.dtype)
        for r, a, b in parts:
            chunk[a - row:b - row] = read[r][a:b] if r in read else rank0_rows[d, a]
        how = hdf5_chunks.codec(src)
        if how is None:         # a pipeline h5py runs (lzf ...): rank 0 writes the values
            return chunk[:min(step, src.shape[0] - row)]
        return hdf5_chunks.encode(chunk, how)

    def _place_whole(self, whole: list, datasets, final, holes: HoleFile) -> list:
        """Rank 0: the chunks each part holds whole (``whole[r]``: rank r's list, from
        :func:`_whole_of_part`) placed in ``final``, holes left for their bytes; per
        rank, (offset in its part, offset in the final file, stored bytes) of each.
        The first chunk of each dataset (its look-up, its chunk index loaded) is timed
        apart (``first_place_seconds``): a cost per dataset, not per chunk."""
        targets: dict[int, tuple] = {}      # place_chunks's, per dataset
        paths = [f"{name}/{path}" for name, path, *_ in datasets]
        offsets, first = place_chunks(final, holes, paths,
                                      [chunks[:, [0, 1, 2, 4]] for chunks in whole[1:]],
                                      targets)
        self.first_place_seconds += first
        self.placed_datasets += len(targets)
        text = np.array(["/" in d[1] for d in datasets], bool)
        places = [np.zeros((0, 3), np.int64)]
        for chunks, at in zip(whole[1:], offsets):
            sizes = chunks[:, 4]
            places.append(np.column_stack([chunks[:, 3], at, sizes]))
            in_text = text[chunks[:, 0]]
            self._count_numbers([d[0] for d in datasets], chunks[~in_text, 0])
            for kind, picked in (("text", in_text), ("numbers", ~in_text)):
                self.sink.join_counts[kind]["chunks"] += int(picked.sum())
                self.sink.join_counts[kind]["stored_bytes"] += int(sizes[picked].sum())
        return places


def _encoder(parts, k: int) -> int:
    """The rank that assembles and encodes the ``k``-th shared chunk (its ``parts``, by
    rank): one of its writers other than rank 0, in turn.  Rank 0 has the final file's
    duties, and a chunk of a small table can hold rows of every rank: each encoder opens
    the parts of its chunk's writers, so no one rank opens them all for every chunk."""
    writers = sorted({r for r, _, _ in parts if r})
    return writers[k % len(writers)] if writers else 0


def _target(final: h5py.File, targets: dict, datasets, d: int) -> h5py.Dataset:
    """Rank 0: dataset ``d`` of the final file (``datasets``: _join_plan's), looked up once."""
    if d not in targets:
        name, path = datasets[d][:2]
        targets[d] = final[f"{name}/{path}"]
    return targets[d]


def _whole_of_part(f: h5py.File, datasets, rank: int) -> np.ndarray:
    """(dataset index, row, filter mask, file offset, stored size) of each chunk that
    ``rank``'s part ``f`` holds whole, dataset by dataset (``datasets``: _join_plan's)."""
    found = [np.zeros((0, 5), np.int64)]
    for d, (name, path, spans, _) in enumerate(datasets):
        if spans[rank]:
            chunks = whole_chunks(f[f"{name}/{path}"], spans[rank])
            found.append(np.column_stack([np.full(len(chunks), d, np.int64), chunks]))
    return np.concatenate(found)


def _amount(nbytes: int) -> str:
    return f"{nbytes / 1e6:,.1f} MB" if nbytes >= 100_000 else f"{nbytes:,} bytes"

"""Sorted runs: each decoded chunk, sorted by key, kept in memory or spilled to disk.

A rank's decoded rows are a list of runs per table.  While the rank's runs
fit in its in-memory share of the budget they stay as numpy arrays; after
that each new run is written to the spill folder (one raw file per column)
and read back a window at a time, so a rank's memory does not grow with the
trace.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ..errors import WriteFailed
from ..model import Column, Table
from . import stop
from .leftovers import remove_dead
from .narrow import (Constant, Offsets, Shifted, Stairs, Steps, Words, narrowed_columns, piece,
                     put, widen_into)
from .order import Key, lower_bound, sort_by_key

_live_spills: set[Path] = set()     # spill folders of this process not yet removed
# (folder, prefix) of every rank's spill folders of this process's runs
_run_spills: set[tuple[Path, str]] = set()


def discard_spills() -> None:
    """Remove this process's spill folders (a run killed before its cleanup ran)."""
    for folder in list(_live_spills):
        shutil.rmtree(folder, ignore_errors=True)
        _live_spills.discard(folder)


def discard_run_spills() -> None:
    """Remove the spill folders of this run that this process can see, every rank's:
    the last resort of a rank that must leave before the others cleaned up."""
    discard_spills()
    for root, prefix in list(_run_spills):
        try:
            for folder in root.glob(prefix + "*"):
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            pass


stop.on_stop(discard_spills)
stop.on_stop(discard_run_spills, hard_only=True)

OBJECT_ROW_BYTES = 48   # estimate for a str/bytes cell (pointer + small object)


def row_bytes(columns: list[Column]) -> int:
    """Bytes of one row as a window gathers it (every column at its schema's width)."""
    total = 0
    for c in columns:
        total += OBJECT_ROW_BYTES if c.is_object else c.numpy_dtype().itemsize
    return max(total, 1)


def held_bytes(columns: dict) -> int:
    """Bytes a run's column forms hold (an object column: OBJECT_ROW_BYTES a cell)."""
    return sum(len(v) * OBJECT_ROW_BYTES if v.dtype == object else int(v.nbytes)
               for v in columns.values())


def _own(values):
    """``values`` holding only its own bytes: a view of a larger array (a reader's
    block of columns, a chunk's buffer) is copied, or a run would keep the whole
    block alive (12x the column, uncounted, on OTF: its value column)."""
    if isinstance(values, np.ndarray) and values.base is not None:
        base = values
        while isinstance(base.base, np.ndarray):
            base = base.base
        if base.nbytes > values.nbytes or base.base is not None:    # or a foreign buffer
            return values.copy()
    return values


def narrow_columns(columns: dict[str, np.ndarray]) -> dict:
    """Each column at its narrowest form (see partrace.engine.narrow)."""
    return narrowed_columns(columns)


class Run:
    """One sorted run of one table, in memory: ``columns`` maps each name to an array
    or a narrow form of one; a slice ``columns[name][a:b]`` is the original values."""

    __slots__ = ("columns", "n", "_range")

    def __init__(self, columns: dict[str, np.ndarray]):
        self.columns = narrow_columns(columns)
        self.n = len(columns["time"])
        self._range = _key_range(self.columns, self.n)

    @classmethod
    def of_forms(cls, forms: dict, n: int) -> "Run":
        """A run of ``n`` rows whose columns are already narrow forms (received from
        another rank as its run held them): kept as they are, not narrowed again."""
        run = cls.__new__(cls)
        run.columns, run.n, run._range = forms, n, False     # found when first asked
        return run

    @property
    def key_range(self) -> tuple[Key, Key] | None:
        """The run's first and last key (None: no rows)."""
        if self._range is False:
            self._range = _key_range(self.columns, self.n)
        return self._range

    def rows(self, a: int, b: int) -> Table:
        return Table({k: v[a:b] for k, v in self.columns.items()})

    def sample_arrays(self, stride: int, phase: float = 0.0) -> tuple[np.ndarray, ...]:
        """Every stride-th key (time, location, seq as int64 arrays) from ``phase`` (a
        fraction of a stride) on, and the rows each stands for (``sampled_rows``)."""
        idx, weights = sampled_rows(self.n, stride, phase)
        keys = (np.asarray(self.columns[c][idx], np.int64) for c in ("time", "location", "seq"))
        return (*keys, weights)

    def samples(self, stride: int, phase: float = 0.0) -> list[tuple[tuple[int, int, int], int]]:
        """Every stride-th key with the number of rows it stands for."""
        return _as_tuples(self.sample_arrays(stride, phase))

    def lower_bound(self, key) -> int:
        return lower_bound(self.columns["time"], self.columns["location"], self.columns["seq"], key)

    def put(self, col: str, a: int, b: int, dest: np.ndarray) -> None:
        put(self.columns[col], a, b, dest)

    def piece(self, col: str, a: int, b: int):
        """Rows a..b of a column in the form the run holds them (see narrow.piece)."""
        return piece(self.columns[col], a, b)


def sampled_rows(n: int, stride: int, phase: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``n`` to sample, every ``stride``-th from ``phase`` x stride (within
    the rows), and the rows each stands for: those nearer to it than to its neighbours (the
    first also those before it, the last those after it), ``n`` in all.

    Why a phase and rows around a sample: the cuts add up the weights of every run's samples
    before a key.  Where the runs keep step (the ranks of a bulk-synchronous code, the
    threads of a loop), samples taken at the same rows of every run, each standing for
    the rows after it, count each run's straddling stretch whole, all runs alike, and
    the pieces of a window came out far from even (tests/engine/test_flat_bookkeeping.py).
    A sample standing for the rows around it errs by half a stride either way, and runs
    sampled at different phases (``run_phase``) err apart."""
    if n <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    stride = max(1, int(stride))
    first = min(int(phase * min(stride, n)), n - 1)
    idx = np.arange(first, n, stride, dtype=np.int64)
    return idx, _rows_around(idx, stride, n)


def _rows_around(rows: np.ndarray, stride: int, n: int) -> np.ndarray:
    """The rows of ``n`` each of ``rows`` (sampled ``stride`` apart) stands for: from
    half a stride before it to half a stride before the next (the first from row 0, the
    last to the end)."""
    edges = np.empty(len(rows) + 1, np.int64)
    edges[0], edges[-1] = 0, n
    edges[1:-1] = rows[1:] - stride // 2
    return np.diff(edges)


def run_phase(k: int) -> float:
    """The sampling phase of the k-th run of a rank's (k over all ranks: see windows.py):
    the fractional parts of multiples of the golden ratio, spread evenly whatever k's count."""
    return (k * 0.6180339887498949) % 1.0


def _as_tuples(arrays) -> list[tuple[tuple[int, int, int], int]]:
    t, loc, seq, weight = (a.tolist() for a in arrays)
    return list(zip(zip(t, loc, seq), weight))


def _key_range(columns: dict, n: int) -> tuple[Key, Key] | None:
    """The first and the last key of sorted rows (None: no rows), kept beside a run so that
    a window searches only the runs its cut keys fall in."""
    if not n:
        return None
    ends = np.array([0, n - 1])
    t, loc, seq = (np.asarray(columns[c][ends]).tolist() for c in ("time", "location", "seq"))
    return (t[0], loc[0], seq[0]), (t[1], loc[1], seq[1])


class SpilledRun:
    """A sorted run on disk: one raw file per column, read by explicit reads.

    Explicit reads (not memory maps) keep the file pages out of the process's
    resident memory.  A column held narrow is written narrow (an ``Offsets``
    column: its offsets, the base kept here) and a constant or counting one
    (``Steps``) is not written at all.  Every STRIDE-th key stays in memory as a sparse index,
    so a search reads one block of keys.
    """

    STRIDE = 4096

    def __init__(self, folder: Path, table):
        columns = narrow_columns(table.columns if isinstance(table, Table) else table)
        self.folder, self.n = folder, len(columns["time"])
        self.layout = {}        # column -> (dtype on disk, row shape, base of Offsets or None)
        self.kept = {}          # str/bytes cells (small side tables) and Constant columns
        self.written = 0
        for col, values in columns.items():
            if isinstance(values, (Shifted, Stairs)):   # spilled as its offsets
                values = piece(values, 0, len(values))
            if isinstance(values, (Constant, Steps)) or values.dtype == object:
                self.kept[col] = values
                continue
            if isinstance(values, Words):       # spilled as its rows
                values = values[0:len(values)]
            base = values.base if isinstance(values, Offsets) else None
            raw = values.offsets if base is not None else np.ascontiguousarray(values)
            _write_raw(folder / f"{col}.bin", raw)
            self.layout[col] = (raw.dtype, raw.shape[1:], base)
            self.written += raw.nbytes
        idx = np.arange(0, self.n, self.STRIDE)
        self.index = tuple(np.asarray(columns[c][idx]) for c in ("time", "location", "seq"))
        self.key_range = _key_range(columns, self.n)

    def _raw(self, col: str, a: int, b: int) -> np.ndarray:
        dtype, tail, _ = self.layout[col]
        if b <= a:      # no rows (a gather asks a span's form so): no file opened
            return np.empty((0,) + tuple(tail), dtype)
        row = dtype.itemsize * int(np.prod(tail, dtype=np.int64))
        with open(self.folder / f"{col}.bin", "rb") as fh:
            fh.seek(a * row)
            data = fh.read(max(b - a, 0) * row)
        return np.frombuffer(data, dtype=dtype).reshape((-1,) + tail)

    def _read(self, col: str, a: int, b: int) -> np.ndarray:
        if col in self.kept:
            return self.kept[col][a:b]
        base = self.layout[col][2]
        raw = self._raw(col, a, b)
        return raw.copy() if base is None else np.add(raw, base, dtype=base.dtype)

    def put(self, col: str, a: int, b: int, dest: np.ndarray) -> None:
        """Rows a..b of a column, widened into ``dest``."""
        if col in self.kept:
            put(self.kept[col], a, b, dest)
            return
        base = self.layout[col][2]
        raw = self._raw(col, a, b)
        if base is None:
            np.copyto(dest, raw, casting="unsafe")
        else:
            widen_into(raw, base, dest)

    def piece(self, col: str, a: int, b: int):
        """Rows a..b of a column in the form it was spilled in, read back narrow."""
        if col in self.kept:
            return piece(self.kept[col], a, b)
        base = self.layout[col][2]
        raw = self._raw(col, a, b)
        return raw if base is None else Offsets(base, raw)

    @property
    def names(self) -> list[str]:
        return list(self.layout) + [c for c in self.kept if c not in self.layout]

    def column(self, col: str, a: int, b: int) -> np.ndarray:
        return self._read(col, a, b)

    def tail(self, col: str) -> tuple:
        """The shape of one row of a column (a sub-array column's elements)."""
        if col in self.kept:
            return tuple(self.kept[col].shape[1:])
        return tuple(self.layout[col][1])

    def held(self) -> int:
        """Bytes this run keeps in memory: its kept columns and sparse index."""
        return held_bytes(self.kept) + sum(int(k.nbytes) for k in self.index)

    def rows(self, a: int, b: int) -> Table:
        return Table({c: self._read(c, a, b) for c in self.names})

    def sample_arrays(self, stride: int, phase: float = 0.0) -> tuple[np.ndarray, ...]:
        """Keys of the sparse index (no reads), at least ``stride`` rows apart, as
        ``Run.sample_arrays`` gives them (the phase among the index's keys)."""
        step = max(1, stride // self.STRIDE)
        at, _ = sampled_rows(len(self.index[0]), step, phase)
        keys = (np.asarray(k[at], np.int64) for k in self.index)
        return (*keys, _rows_around(at * self.STRIDE, step * self.STRIDE, self.n))

    def samples(self, stride: int, phase: float = 0.0) -> list[tuple[tuple[int, int, int], int]]:
        return _as_tuples(self.sample_arrays(stride, phase))

    def lower_bound(self, key) -> int:
        j = lower_bound(*self.index, key)           # first sampled row >= key
        if j == 0:
            return 0
        a = (j - 1) * self.STRIDE + 1               # sampled row j-1 is < key
        b = min(j * self.STRIDE, self.n)
        block = [self._read(c, a, b) for c in ("time", "location", "seq")]
        return a + lower_bound(*block, key)


def _write_raw(path: Path, values: np.ndarray) -> None:
    """Write an array's bytes; a failure (a full disk above all) names the file."""
    try:
        with open(path, "wb") as fh:
            fh.write(values.reshape(-1).view(np.uint8).data)
    except OSError as exc:
        raise WriteFailed.of(path, exc, "(spilling decoded rows: point --tmpdir at a "
                                        "larger file system, or raise --memory)") from exc


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux), else None."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class RunStore:
    """The sorted runs of every table on this rank, within a memory budget.

    A run stays in memory while the runs' bytes fit ``keep_fraction`` of the
    budget and, with ``resident_fraction``, while the whole process (libraries,
    decoder state, allocator slack) stays resident within that share of it.
    """

    def __init__(self, schema: dict[str, list[Column]], memory_bytes: int,
                 spill_root: str | os.PathLike | None = None, tag: str = "", run_id: str = "",
                 keep_fraction: float = 0.5, resident_fraction: float | None = None):
        self.schema = schema
        # the rest of the budget is for decoding, windows, exchange, output
        self.keep_bytes = int(memory_bytes * keep_fraction)
        self.resident_limit = (None if resident_fraction is None
                               else int(memory_bytes * resident_fraction))
        self.in_memory = 0      # bytes the runs really hold in memory (narrow forms)
        self.spill_root = spill_root
        self.tag = f"{run_id}-{tag}" if run_id else tag
        if run_id:      # every rank's spill folder of this run: partrace-spill-<run_id>-*
            root = Path(spill_root if spill_root is not None else tempfile.gettempdir())
            _run_spills.add((root, f"partrace-spill-{run_id}-"))
            remove_dead(root, "partrace-spill-")    # a killed run's, of this host
        self.spill_dir: Path | None = None
        self.runs: dict[str, list[Run]] = {name: [] for name in schema}
        self.rows: dict[str, int] = {name: 0 for name in schema}
        self.spilled_bytes = 0

    def add(self, name: str, table: Table) -> None:
        if not len(table):
            return
        columns = {c: _own(v) for c, v in narrow_columns(sort_by_key(table).columns).items()}
        del table
        self.rows[name] += len(columns["time"])
        size = held_bytes(columns)
        if self.in_memory + size <= self.keep_bytes and self._resident_fits():
            self.in_memory += size
            self.runs[name].append(Run(columns))
        else:
            run = self._spill(name, columns)
            self.in_memory += run.held()
            self.runs[name].append(run)
            self.spilled_bytes += run.written

    def _resident_fits(self) -> bool:
        """The process, this run included (it is in memory already), is within its share."""
        if self.resident_limit is None:
            return True
        now = resident_bytes()
        return now is None or now <= self.resident_limit

    def _spill(self, name: str, columns: dict) -> SpilledRun:
        if self.spill_dir is None:
            self.spill_dir = Path(tempfile.mkdtemp(prefix=f"partrace-spill-{self.tag}-",
                                                   dir=self.spill_root))
            _live_spills.add(self.spill_dir)
        d = self.spill_dir / f"{name.replace('/', '__')}-{len(self.runs[name]):06d}"
        try:
            d.mkdir()
        except OSError as exc:
            raise WriteFailed.of(d, exc, "(spill folder)") from exc
        return SpilledRun(d, columns)

    def total_bytes(self) -> int:
        """Bytes of every row as windows gather them (wide, whatever the runs hold):
        what the window count is computed from."""
        return sum(self.rows[n] * row_bytes(self.schema[n]) for n in self.schema)

    def close(self) -> None:
        self.runs = {name: [] for name in self.schema}
        if self.spill_dir is not None:
            shutil.rmtree(self.spill_dir, ignore_errors=True)
            _live_spills.discard(self.spill_dir)
            self.spill_dir = None

"""The Python API: the same readers and engine as the CLI, as numpy or pandas.

>>> import partrace
>>> t = partrace.open("trace.otf")          # any trace, or a partrace .h5 file
>>> ev = t.columns("events")                 # {"time": ndarray, "location": ..., ...}
>>> df = t.to_pandas("events")               # kind as a categorical of names
>>> df = t.to_pandas("events", names=True)   # + location_name, region_name, peer_name
>>> t.profile(); t.comm_matrix(); t.message_histogram()   # answers as DataFrames, with names
>>> df = t.to_pandas("events", columns=["time", "kind"], time=(0, 10**9), locations=[1, 2])
>>> partrace.merge("trace.otf", "out.h5")    # what `partrace merge` does
"""
from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import numpy as np

from .errors import PartraceError, UsageError
from .model import Definitions, Kind, Table


def _pandas():
    """pandas, or one clear line on how to get it (a cluster install may lack it)."""
    try:
        import pandas
    except ImportError:
        raise ImportError("partrace: DataFrames need pandas: pip install pandas (or pip "
                          "install -e '.[pandas]'); .columns() and .table() give numpy "
                          "arrays without it") from None
    return pandas


class TraceData:
    """Tables of a trace (decoded on first use) or of a partrace HDF5 file (read lazily)."""

    def __init__(self, path, format: str | None = None, **options):
        from .formats import canonical, detect, get
        self.path = Path(path)
        self.format = canonical(format) if format else detect(path)
        self.options = options
        get(self.format).open(self.path, **options)     # refuses unknown options now, not later
        self._tables: dict[str, Table] | None = None
        self._defs: Definitions | None = None
        self._schema = None

    @property
    def is_hdf5(self) -> bool:
        return self.format == "hdf5"

    def _decode(self) -> None:
        from .engine.pipeline import run
        from .output.memory import MemorySink
        sink = MemorySink()
        with _job(self.path, self.format, _serial()) as job:
            run(job.comm, self.path, sink, format=self.format, reader_options=self.options)
        self._tables, self._defs, self._schema = sink.tables, sink.defs, sink.schema

    @property
    def definitions(self) -> Definitions:
        if self._defs is None:
            if self.is_hdf5:
                from .formats import get
                self._defs = get("hdf5").open(self.path, **self.options).read_definitions()
            else:
                self._decode()
        return self._defs

    @property
    def tables(self) -> list[str]:
        if self.is_hdf5:
            import json

            from .formats.hdf5.files import open_checked
            with open_checked(self.path) as f:
                return json.loads(f.attrs["tables"])
        if self._tables is None:
            self._decode()
        return list(self._tables)

    def table(self, name: str = "events", columns: list[str] | None = None,
              time: tuple[int | None, int | None] | None = None,
              locations=None) -> Table:
        """Rows of one table: all, or those with ``t0 <= time < t1`` (ns; None = open
        end) and ``location`` in ``locations``; only ``columns`` (default all).

        From a partrace HDF5 file only the chunks that hold those rows and
        columns are read (the time window is found by bisection)."""
        if self.is_hdf5:
            from .formats.hdf5.files import open_checked
            from .formats.hdf5.select import read_selection
            with open_checked(self.path) as f:
                if name not in f:
                    raise KeyError(f"{self.path}: no table {name!r}; tables: {', '.join(self.tables)}")
                return read_selection(f[name], columns, time, locations)
        if self._tables is None:
            self._decode()
        if name not in self._tables:
            raise KeyError(f"{self.path}: no table {name!r}; tables: {', '.join(self._tables)}")
        return _select(self._tables[name], columns, time, locations)

    def columns(self, name: str = "events", columns: list[str] | None = None,
                time=None, locations=None) -> dict[str, np.ndarray]:
        """One table as a dict of numpy columns, in global (time, location, seq) order
        (``columns``, ``time``, ``locations``: as for :meth:`table`)."""
        return dict(self.table(name, columns, time, locations).columns)

    def to_pandas(self, name: str = "events", columns: list[str] | None = None,
                  time=None, locations=None, names: bool = False):
        """One table as a pandas DataFrame (``kind`` as a categorical of kind names;
        ``columns``, ``time``, ``locations``: as for :meth:`table`).

        ``names=True`` joins the definitions' names in: a categorical column
        ``location_name`` beside ``location``, ``peer_name`` beside ``peer`` (a location
        too) and ``region_name`` beside ``region``, for the id columns the table has
        (missing where the id is 0 or not defined)."""
        pd = _pandas()
        cols = {}
        for k, v in self.columns(name, columns, time, locations).items():
            cols[k] = list(v) if v.ndim > 1 else v
        df = pd.DataFrame(cols)
        if "kind" in df:
            kinds = {int(k): k.name for k in Kind}
            df["kind"] = pd.Categorical(df["kind"].map(kinds), categories=[k.name for k in Kind])
        if names:
            for col, table in (("location", "locations"), ("peer", "locations"), ("region", "regions")):
                if col in df and table in self.definitions.tables:
                    df.insert(df.columns.get_loc(col) + 1, f"{col}_name",
                              _named(df[col].to_numpy(), self.definitions.tables[table]))
        return df

    # -- answers (partrace.analysis), as pandas DataFrames with names -----------------
    def profile(self, per_location: bool = False):
        """Per region: calls, inclusive_ns, exclusive_ns, min/mean/max over locations,
        imbalance (``per_location``: per location and region), largest exclusive first."""
        pd = _pandas()

        from .analysis import profile
        with _job(self.path, self.format, _serial()) as job:
            res = profile(self.path, comm=job.comm, format=self.format, per_location=per_location,
                          reader_options=self.options)
        columns = (["location", "location_id"] if per_location else []) + \
            ["region", "region_id", "calls", "inclusive_ns", "exclusive_ns"] + \
            ([] if per_location else ["locations", "inclusive_min_ns", "inclusive_mean_ns",
                                      "inclusive_max_ns", "imbalance"])
        df = pd.DataFrame(res["locations"] if per_location else res["regions"], columns=columns)
        return df.sort_values(["exclusive_ns", "region"], ascending=[False, True], ignore_index=True)

    def comm_matrix(self, by: str = "location"):
        """Messages and bytes per sender/receiver pair (``by="process"``: of processes)."""
        pd = _pandas()

        from .analysis import communication
        with _job(self.path, self.format, _serial()) as job:
            pairs = communication(self.path, comm=job.comm, format=self.format, by=by,
                                  reader_options=self.options)["pairs"]
        return pd.DataFrame(pairs.columns, columns=["sender_id", "receiver_id", "sender",
                                                    "receiver", "messages", "bytes"])

    def message_histogram(self):
        """Messages and bytes per size bin [low, high) (powers of two; bin [0, 1) is empty messages)."""
        pd = _pandas()

        from .analysis import communication
        with _job(self.path, self.format, _serial()) as job:
            res = communication(self.path, comm=job.comm, format=self.format,
                                reader_options=self.options)
        return pd.DataFrame(res["histogram"], columns=["low", "high", "messages", "bytes"])

    def collectives(self):
        """Calls and bytes of each collective operation."""
        pd = _pandas()

        from .analysis import communication
        with _job(self.path, self.format, _serial()) as job:
            res = communication(self.path, comm=job.comm, format=self.format,
                                reader_options=self.options)
        return pd.DataFrame(res["collectives"], columns=["collective", "calls", "bytes_sent",
                                                         "bytes_received", "locations"])

    def clocks(self, by: str = "process"):
        """The clock condition per pair of processes (``by="location"``: of locations): the
        messages each way, those received before they were sent, the least delays and the
        offset and drift they imply (docs/clocks.md); the totals and the collectives' check
        in ``.attrs``."""
        pd = _pandas()

        from .analysis.clocks import check
        with _job(self.path, self.format, _serial()) as job:
            res = check(self.path, comm=job.comm, format=self.format, by=by,
                        reader_options=self.options)
        df = pd.DataFrame(res.pop("pairs"), columns=CLOCK_COLUMNS)
        df.attrs.update(res)
        return df

    def __repr__(self) -> str:
        return f"<partrace.TraceData {self.format} {self.path}>"


CLOCK_COLUMNS = ["a", "b", "a_id", "b_id", "messages_ab", "messages_ba", "violations",
                 "largest_violation_ns", "least_delay_ab_ns", "least_delay_ba_ns", "offset_ns",
                 "offset_bound_ns", "offset_min_ns", "offset_max_ns", "drift_ppm",
                 "drift_bound_ppm", "drift_from"]


def _named(ids: np.ndarray, defs_table: Table):
    """A categorical of the name of each id (of a definitions table with id and name columns):
    one code per row, each distinct name stored once; NaN where the id is not defined."""
    pd = _pandas()
    known = np.asarray(defs_table["id"], np.int64)
    order = np.argsort(known, kind="stable")
    known = known[order]
    labels = np.array([str(x) for x in np.asarray(defs_table["name"], object)[order]], object)
    categories, code_of = np.unique(labels, return_inverse=True) if len(labels) else (labels, labels)
    ids = np.asarray(ids, np.int64)
    at = np.minimum(np.searchsorted(known, ids), max(len(known) - 1, 0))
    found = (known[at] == ids) if len(known) else np.zeros(len(ids), bool)
    codes = np.where(found, np.asarray(code_of, np.int64)[at] if len(known) else -1, -1)
    return pd.Categorical.from_codes(codes, categories=categories)


def _select(table: Table, columns, time, locations) -> Table:
    """In-memory twin of the HDF5 selection (a decoded trace)."""
    names = table.names if columns is None else list(columns)
    unknown = [c for c in names if c not in table]
    if unknown:
        raise KeyError(f"no column {unknown[0]!r} (has {', '.join(table.names)})")
    keep = np.ones(len(table), dtype=bool)
    if time is not None:
        t0, t1 = time
        t = table["time"]
        if t0 is not None:
            keep &= t >= t0
        if t1 is not None:
            keep &= t < t1
    if locations is not None:
        keep &= np.isin(table["location"], np.asarray(list(locations)))
    return Table({c: table[c][keep] for c in names})


def open(path: str | os.PathLike, format: str | None = None, **options) -> TraceData:  # noqa: A001
    """Open a trace of any supported format, or a partrace HDF5 output.  ``options`` are the
    format's own (ROSS: ``region_size``, ``model_dtypes``), as ``--reader-option``."""
    return TraceData(path, format, **options)


def merge(trace, output, *, streams: int | None = None, to: str | None = None,
          format: str | None = None, overwrite: bool = False, compression: str | None = None,
          layout: str | None = None, memory: int | str = "2G", tmpdir=None,
          reader_options: dict | None = None, comm=None, sync: str = "none",
          progress: str = "none", stats: str | None = None, self_trace: str | None = None):
    """Merge ``trace`` into ``output`` (.h5, .otf, .otf2, .pftrace, .json), as ``partrace
    merge`` does: the same job (engine/job.py), so the same output, accounts and errors.

    ``compression``: "gzip" or "lzf" for HDF5 columns, "zlib" for OTF files.
    ``layout`` (HDF5): "single" (default: one self-contained file at any rank
    count) or "parts" (virtual datasets over per-rank files in ``OUTPUT.parts/``,
    which must stay beside ``OUTPUT``).

    ``memory``: the budget per rank (bytes, or "512M", "4G" as ``--memory``); ``tmpdir``:
    where rows beyond it are spilled; ``reader_options``: the input format's own options.

    ``sync``: the clock correction, "none", "offsets" or "clc" (docs/clocks.md).
    ``progress``: "none" (default), "bar", "log" or "auto", on rank 0's stderr.
    ``stats`` (FILE.json) and ``self_trace`` (FILE.pftrace, .json or .otf2): every rank's
    account of the run, as ``--stats`` and ``--self-trace`` write it (docs/accounts.md).

    ``comm`` defaults to the world communicator when launched under MPI.  Returns the
    run's figures (:class:`~partrace.engine.pipeline.RunStats`, this rank's).
    """
    from .merging import merge as merge_in
    if isinstance(memory, str):
        memory = _budget(memory)
    with _job(trace, format, comm, account=bool(stats or self_trace),
              keep_slices=bool(self_trace)) as job:
        done = merge_in(job, trace, output, to=to, format=format, overwrite=overwrite,
                        streams=streams, compression=compression, layout=layout, memory=memory,
                        tmpdir=tmpdir, reader_options=reader_options, sync=sync,
                        progress=progress, stats=stats, self_trace=self_trace)
    if done.report_error is not None:   # rank 0's alone, once every rank is done
        raise done.report_error
    return done.stats


def _serial():
    """A trace opened in Python is read by this process alone, whatever the launcher."""
    from .engine.mpi import serial
    return serial()


@contextlib.contextmanager
def _job(trace, format: str | None = None, comm=None, **options):
    """The job a call runs in, as the command line's (engine/job.py): the kernels' mode
    chosen by the input's size, a cold cache warmed before a parallel run, a failure on
    one rank alone ending every rank; errors as :func:`public_errors` words them."""
    from .engine.job import Job

    def warm_up(comm):
        from .warm import before_parallel_run
        before_parallel_run(comm, trace, format)
    with public_errors(), Job(comm, trace=trace, warm_up=warm_up, **options) as job:
        yield job


@contextlib.contextmanager
def public_errors():
    """The engine's failure protocol (RankFailed) is not the caller's business: what reaches
    the caller is the error itself, as :func:`_api_error` words it."""
    from .engine.mpi import RankFailed
    try:
        yield
    except RankFailed as exc:
        raise _api_error(exc.original if exc.original is not None
                         else PartraceError(f"rank {exc.rank}: {exc.message}")) from None
    except PartraceError as exc:
        raise _api_error(exc) from None


# The command line's options, as the keywords of merge() that say the same
_KEYWORDS = {"--overwrite": "overwrite=True", "--to": "to=", "--streams": "streams=",
             "--compress": "compression=", "--layout": "layout=", "--memory": "memory=",
             "--tmpdir": "tmpdir=", "--format": "format=", "--reader-option": "reader_options="}
_OPTION = re.compile(r"--[a-z][a-z-]*")


def _api_error(exc: BaseException) -> BaseException:
    """``exc`` as the API raises it: partrace's errors keep their class and name the
    keyword where the command line would name an option; others (OSError, bugs) as they are."""
    if not isinstance(exc, PartraceError):
        return exc
    text = _OPTION.sub(lambda m: _KEYWORDS.get(m.group(0), m.group(0)), str(exc))
    if text == str(exc):
        return exc
    worded = type(exc).__new__(type(exc))   # its own class and fields (TraceError's path ...)
    worded.__dict__.update(vars(exc))       # without its __init__, whose arguments differ
    worded.args = (text,)
    return worded


def _budget(text: str) -> int:
    """'512M' -> bytes, as --memory takes it; a bad size is a UsageError."""
    from .sizes import parse_size
    try:
        return parse_size(text)
    except ValueError as exc:
        raise UsageError(f"memory: {exc}") from None

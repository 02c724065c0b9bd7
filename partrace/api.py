"""The Python API: the same readers and engine as the CLI, as numpy or pandas.

>>> import partrace
>>> t = partrace.open("trace.otf")          # any trace, or a partrace .h5 file
>>> ev = t.columns("events")                 # {"time": ndarray, "location": ..., ...}
>>> df = t.to_pandas("events")               # kind as a categorical of names
>>> partrace.merge("trace.otf", "out.h5")    # what `partrace merge` does
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .model import Definitions, Kind, Table


class TraceData:
    """Tables of a trace (decoded on first use) or of a partrace HDF5 file (read lazily)."""

    def __init__(self, path, format: str | None = None):
        from .formats import detect
        self.path = Path(path)
        self.format = format or detect(path)
        self._tables: dict[str, Table] | None = None
        self._defs: Definitions | None = None
        self._schema = None

    @property
    def is_hdf5(self) -> bool:
        return self.format == "hdf5"

    def _decode(self) -> None:
        from .engine.mpi import serial
        from .engine.pipeline import run
        from .output.memory import MemorySink
        sink = MemorySink()
        run(serial(), self.path, sink, format=self.format)
        self._tables, self._defs, self._schema = sink.tables, sink.defs, sink.schema

    @property
    def definitions(self) -> Definitions:
        if self._defs is None:
            if self.is_hdf5:
                from .formats import get
                self._defs = get("hdf5").open(self.path).read_definitions()
            else:
                self._decode()
        return self._defs

    @property
    def tables(self) -> list[str]:
        if self.is_hdf5:
            import json

            import h5py
            with h5py.File(self.path, "r") as f:
                return json.loads(f.attrs["tables"])
        if self._tables is None:
            self._decode()
        return list(self._tables)

    def table(self, name: str = "events") -> Table:
        if self.is_hdf5:
            import h5py

            from .output.hdf5 import read_table
            with h5py.File(self.path, "r") as f:
                return read_table(f[name])
        if self._tables is None:
            self._decode()
        return self._tables[name]

    def columns(self, name: str = "events") -> dict[str, np.ndarray]:
        """One table as a dict of numpy columns, in global (time, location, seq) order."""
        return dict(self.table(name).columns)

    def to_pandas(self, name: str = "events"):
        """One table as a pandas DataFrame (``kind`` as a categorical of kind names)."""
        import pandas as pd
        cols = {}
        for k, v in self.columns(name).items():
            cols[k] = list(v) if v.ndim > 1 else v
        df = pd.DataFrame(cols)
        if "kind" in df:
            names = {int(k): k.name for k in Kind}
            df["kind"] = pd.Categorical(df["kind"].map(names), categories=[k.name for k in Kind])
        return df

    # -- answers (partrace.analysis), as pandas DataFrames with names -----------------
    def profile(self, per_location: bool = False):
        """Per region: calls, inclusive_ns, exclusive_ns, min/mean/max over locations,
        imbalance (``per_location``: per location and region), largest exclusive first."""
        import pandas as pd

        from .analysis import profile
        res = profile(self.path, format=self.format, per_location=per_location)
        df = pd.DataFrame(res["locations"] if per_location else res["regions"])
        return df.sort_values(["exclusive_ns", "region"], ascending=[False, True],
                              ignore_index=True) if len(df) else df

    def comm_matrix(self, by: str = "location"):
        """Messages and bytes per sender/receiver pair (``by="process"``: of processes)."""
        import pandas as pd

        from .analysis import communication
        return pd.DataFrame(communication(self.path, format=self.format, by=by)["pairs"],
                            columns=["sender_id", "receiver_id", "sender", "receiver", "messages",
                                     "bytes"])

    def message_histogram(self):
        """Messages and bytes per size bin [low, high) (powers of two; bin [0, 1) is empty messages)."""
        import pandas as pd

        from .analysis import communication
        return pd.DataFrame(communication(self.path, format=self.format)["histogram"],
                            columns=["low", "high", "messages", "bytes"])

    def collectives(self):
        """Calls and bytes of each collective operation."""
        import pandas as pd

        from .analysis import communication
        return pd.DataFrame(communication(self.path, format=self.format)["collectives"],
                            columns=["collective", "calls", "bytes_sent", "bytes_received", "locations"])

    def __repr__(self) -> str:
        return f"<partrace.TraceData {self.format} {self.path}>"


def open(path: str | os.PathLike, format: str | None = None) -> TraceData:  # noqa: A001
    """Open a trace of any supported format, or a partrace HDF5 output."""
    return TraceData(path, format)


def merge(trace, output, *, streams: int | None = None, to: str | None = None,
          format: str | None = None, overwrite: bool = False, compression: str | None = None,
          comm=None):
    """Merge ``trace`` into ``output`` (.h5 or .otf), as ``partrace merge`` does.

    ``compression``: "gzip" or "lzf" for HDF5 columns, "zlib" for OTF files.

    ``comm`` defaults to the world communicator when launched under MPI.
    """
    from .engine.mpi import world
    from .engine.pipeline import run
    from .output import make_sink
    sink = make_sink(output, to=to, source=str(trace), overwrite=overwrite, streams=streams,
                     compression=compression)
    return run(comm or world(), trace, sink, format=format)

"""Where merged rows go: the one interface between the engine and every output or analysis.

A sink declares what it can do as class attributes (no probing): how rows are
distributed to ranks (``mode``), whether it takes the merge in windows, whether
it reads each column of a window once, which tables and columns (and rows) it
needs, and whether it wants to know the keys of later windows.

Every method is called on every rank and may use collectives; local work runs
under ``comm.guard()`` followed by ``comm.check()`` (see engine/mpi.py), so a
failure on one rank stops all ranks together.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from ..model import Definitions, Schema, Table
from .mpi import Comm


class Sink(ABC):
    #: "time": rank r receives the r-th slice of the global (time, location, seq)
    #: order of each window; "destination": rows go to the rank destinations() names.
    mode: ClassVar[str] = "time"
    #: True: write() may be called once per window of the global order (bounded
    #: memory); False: everything arrives in one window.
    windows: ClassVar[bool] = False
    #: True: write() reads each column of a window once (Table.column_once), so the
    #: engine keeps more of the budget for decoded rows.
    columnwise: ClassVar[bool] = False
    #: True: the engine sets ``next_keys`` before each write(): per table the key
    #: every row of later windows is >= (None: no later rows).
    wants_next_keys: ClassVar[bool] = False
    #: {table: column names or None for all}: only these are decoded into the run
    #: (None: every table and column of the schema).
    needs: dict[str, tuple[str, ...] | None] | None = None

    #: True: before prepare(), on more than one rank, the engine sets ``location_bytes``:
    #: (location ids, sorted; the bytes of their rows in the tables decoded), estimated
    #: from samples and the same on every rank, for a sink that deals locations to ranks
    weighs_locations: ClassVar[bool] = False

    next_keys: dict | None = None
    location_bytes: tuple[np.ndarray, np.ndarray] | None = None
    #: the run's memory budget per rank in bytes, set by the engine before prepare()
    #: (a sink with a fixed cost per location can refuse a run it would not fit)
    memory: int | None = None
    #: every table's rows over all ranks, as decoded (the rows the windows will bring),
    #: set by the engine before prepare(): the same on every rank and at any rank count
    table_rows: dict[str, int] | None = None

    @property
    def serial_seconds(self) -> float | None:
        """(time mode) On rank 0: CPU seconds spent so far in the windows on work for all
        the ranks, not on its own rows (None: it does none).  The engine gives rank 0 a
        smaller share of the next windows' rows for it (engine/rank0_share.py)."""
        return None

    def select(self, name: str, table: Table) -> np.ndarray | None:
        """A mask of the decoded rows of ``table`` to keep (None: all)."""
        return None

    def start(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        """Before decoding, with the definitions as the trace's files give them: what must
        be refused before the costly decode (the output's paths taken) and what
        :meth:`select` needs.  Nothing by default."""

    @abstractmethod
    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        """Once decoded, before the first window: the definitions (with those the decode
        found missing: engine/found.py) and the schema of the tables to come."""

    def destinations(self, comm: Comm, name: str, table: Table) -> np.ndarray:
        """(destination mode) the rank each row of ``table`` goes to; local, no collectives."""
        raise NotImplementedError(f"{type(self).__name__} is not a destination-mode sink")

    @abstractmethod
    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        """One window: this rank's rows of each table, in key order."""

    @abstractmethod
    def commit(self, comm: Comm) -> None:
        """After the last window: finish and publish the output."""

    @abstractmethod
    def discard(self, comm: Comm) -> None:
        """A rank failed: throw away what was written."""

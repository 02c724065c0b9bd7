"""The one small interface every trace format implements.

A format knows how to read (and maybe write) its files and nothing about MPI:
the engine calls :meth:`TraceReader.units` on one rank (or
:meth:`TraceReader.list_part` on every rank), hands units to ranks,
lets each rank :meth:`~TraceReader.survey` its units (readers that need facts
from every unit), calls :meth:`TraceReader.read_definitions` on one rank, and
calls :meth:`TraceReader.decode` on the rank that owns a unit.  Everything a
reader returns must be picklable.
"""
from __future__ import annotations

import os
import stat
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterator

import numpy as np

from ..model import Column, Definitions, Schema, Table


@dataclass(frozen=True)
class Unit:
    """One piece of decode work: an OTF stream, a DUMPI rank file, ...

    ``key`` orders units deterministically; ``size`` (bytes) balances ranks;
    ``info`` is the reader's own picklable detail (paths, byte ranges ...).
    """

    key: str
    size: int
    info: Any = None


@dataclass
class Found:
    """What decoding met that the definitions lack, where the format's own library keeps
    such a reference as data (an OTF record naming a function no DF record defines): the
    definition rows that stand in for them, and where each kind was met first, to be said
    once per run.

    ``rows``: {definitions table: Table of its columns}, one row per new ``id`` (a row
    depends on its id alone, so ranks that meet the same id give the same row).
    ``first``: {kind: (place, warning)}; ``place`` orders the places of one kind
    (comparable tuples, such as (unit key, file, line)): the run says the lowest."""

    rows: dict[str, Table] = field(default_factory=dict)
    first: dict[str, tuple[tuple, str]] = field(default_factory=dict)


class TraceReader(ABC):
    """An opened trace.  Construction must be cheap (no event decoding)."""

    format_name: ClassVar[str] = ""
    #: True if definitions need facts read from every unit (:meth:`survey`):
    #: the engine reads them on the ranks that own the units, in parallel,
    #: instead of one rank reading every file.
    surveyed: ClassVar[bool] = False
    #: True if decoding a unit continues from all units before it in key order
    #: (ROSS: a location's ``seq`` runs on across byte regions).  The engine then
    #: gives each rank a contiguous key range of units, calls
    #: :meth:`start_after` with the survey of all units before that range, and
    #: decodes the range in key order.  Implies ``surveyed``.
    ordered: ClassVar[bool] = False
    #: True if all events of a location come from one unit, in source order (an OTF stream's
    #: processes, a DUMPI rank file, an ovni thread): answers that walk each location's
    #: events in order (a profile) then need no exchange.
    locations_in_one_unit: ClassVar[bool] = False
    #: About how many input bytes one decoded chunk covers.  The engine sets
    #: it from the memory budget; readers that chunk by bytes honour it.
    chunk_bytes: int = 32 << 20
    #: What :meth:`decode` must return, set by the caller before decoding: ``{table: column
    #: names, or None for all its columns}``; None (the default) asks for everything.  A fold
    #: that reads a few columns of ``events`` lets a reader skip the rest of the work.  A reader
    #: may return more than asked (one that ignores the selection returns everything), never a
    #: selected column whose values differ from a full decode's; names the schema lacks are
    #: ignored.  :meth:`selected` reads it.
    selection: dict[str, tuple[str, ...] | None] | None = None

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    @abstractmethod
    def units(self) -> list[Unit]:
        """The work units, sorted by key."""

    @abstractmethod
    def read_definitions(self, survey: Any = None) -> Definitions:
        """Everything the trace defines once (names, ids, clock).

        ``survey`` (surveyed readers) is the :meth:`combine` of the surveys of
        all units; None means "read it yourself" (:meth:`survey_all`).
        """

    # --- surveyed readers only ---
    def survey(self, unit: Unit) -> Any:
        """Facts of one unit that the definitions (or later units) need."""
        raise NotImplementedError

    @staticmethod
    def combine(a: Any, b: Any) -> Any:
        """Two surveys in one.  Associative and commutative, so any grouping
        over any number of ranks gives the same result."""
        raise NotImplementedError

    def start_after(self, before: Any) -> None:
        """(ordered readers) ``before``: the survey of every unit before the
        first one this rank decodes (None: there are none)."""
        raise NotImplementedError

    # --- listing the units on every rank at once (optional) ---
    def list_part(self, rank: int, size: int) -> Any:
        """Rank ``rank``'s part of listing the units, when ``size`` ranks list them at once
        (ROSS: a stretch of the regions of all files).  A reader that defines it (and
        :meth:`units_from`) is listed so by the engine on every rank, instead of by
        :meth:`units` on rank 0; a part depends only on the trace, ``rank`` and ``size``.
        The error reported must be the one :meth:`units` would raise: raise it from
        :meth:`units_from`, which sees every part (ROSS), or here, giving rank 0 the first
        work of a serial listing, rank 1 the next (the lowest failing rank's is reported)."""
        raise NotImplementedError

    def units_from(self, parts: list) -> list[Unit]:
        """The units (as :meth:`units` lists them, sorted by key) from every rank's
        :meth:`list_part`, in rank order; called on every rank."""
        raise NotImplementedError

    # --- what listing the units learnt, for the ranks that own them ---
    def hand_over(self, share: list[Unit]) -> Any:
        """(every rank, after listing, before any survey) What listing the units here
        (:meth:`units` or :meth:`list_part`) learnt about the units of another rank's
        ``share`` that the owner would otherwise read again (ROSS: each region's record
        offsets), or None; forgotten here."""
        return None

    def take_over(self, handed: Any) -> None:
        """What :meth:`hand_over` gave for this rank's share (not None): once for each
        rank that gave something."""

    # --- the units a rank reads (optional) ---
    def joined(self, share: list[Unit]) -> list[Unit]:
        """(every rank, after :meth:`take_over`) This rank's ``share`` as the units it
        surveys and decodes: neighbouring units joined where one read of them costs less
        than one read each (ROSS: a file's consecutive regions, up to a few MiB), so that
        units can be small enough to balance many ranks without each paying a unit's fixed
        cost.  A joined unit decodes to the rows its parts would; by default, ``share``."""
        return share

    def survey_all(self) -> Any:
        """The survey of the whole trace, read here, unit by unit (joined)."""
        out = None
        for unit in self.joined(self.units()):
            s = self.survey(unit)
            out = s if out is None else self.combine(out, s)
        return out

    @abstractmethod
    def schema(self, defs: Definitions) -> Schema:
        """Tables this trace decodes into and their columns (``events`` first)."""

    @abstractmethod
    def decode(self, unit: Unit, defs: Definitions) -> Iterator[dict[str, Table]]:
        """Decode one unit into chunks of tables (each conforming to schema).

        ``seq`` values are per location and continue across chunks, so the
        union of chunks of all units is the same whatever the chunking.
        """

    def found_definitions(self) -> Found | None:
        """(after this rank's decode) What the units decoded here named that the
        definitions lack (see :class:`Found`), then forgotten; None: nothing.  The engine
        meets every rank's on rank 0 and adds the rows to the definitions before any sink
        or fold sees them."""
        return None

    def selected(self, table: str, columns: list[str]) -> list[str] | None:
        """The names of ``columns`` (a table's schema, in order) that the selection asks for;
        None when it does not ask for ``table`` at all."""
        if self.selection is None:
            return list(columns)
        if table not in self.selection:
            return None
        wanted = self.selection[table]
        return list(columns) if wanted is None else [c for c in columns if c in wanted]

    def holdings(self, defs: Definitions) -> dict[str, dict[str, int]]:
        """What the trace consists of where nothing in it lists the parts, so that a user
        can see one missing (ROSS files per kind, ovni threads per process): ``{what:
        {name: count}}`` for ``info``; {} where the trace lists all its parts."""
        return {}

    def source_files(self) -> list[Path]:
        """Every file the trace consists of (for ``info`` and size figures)."""
        return [self.path] if self.path.is_file() else sorted(
            p for p in self.path.rglob("*") if p.is_file())


class Format(ABC):
    """A format: recognises a path and opens it."""

    name: ClassVar[str]
    description: ClassVar[str]

    @classmethod
    @abstractmethod
    def sniff(cls, path: Path) -> bool:
        """True if ``path`` is a trace of this format (cheap: names, magic bytes)."""

    @classmethod
    @abstractmethod
    def open(cls, path: str | os.PathLike, **options) -> TraceReader:
        """Open a trace for reading.  ``options`` are the format's own (``partrace.open(path,
        **options)``, ``--reader-option KEY=VALUE``); a format refuses those it does not know
        (:func:`check_options`)."""


def check_options(format_name: str, options: dict, known: tuple[str, ...] = ()) -> None:
    """A UsageError for an option the format does not take."""
    from ..errors import UsageError
    unknown = sorted(set(options) - set(known))
    if unknown:
        takes = f"its options: {', '.join(known)}" if known else "it takes no options"
        raise UsageError(f"format {format_name!r} has no option {unknown[0]!r} ({takes})")


# What a path that is not a regular file is, for error messages: (test of st_mode, words).
FILE_TYPES = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
              (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def regular_size(path: str | os.PathLike, *, missing: str | None = None,
                 unreadable: str = "cannot read: {reason}",
                 not_regular: str = "expected a regular file, found {found}",
                 types=FILE_TYPES, other: str = "not a regular file") -> int:
    """Size of `path` if it is a regular file (after symlinks), else a TraceError naming it.

    Checked before every open: a FIFO would block the reader forever, a folder fails
    with an OSError that names no place in the trace.  The wording is the format's:
    `missing` (nothing there or a broken link; None: as `unreadable`), `unreadable`
    ({reason}: the OS's), `not_regular` ({found}: the first of `types` that matches
    the file's mode, else `other`).
    """
    from ..errors import TraceError
    try:
        st = os.stat(path)
    except FileNotFoundError as e:
        raise TraceError(path, None, missing if missing is not None
                         else unreadable.format(reason=e.strerror)) from None
    except OSError as e:
        raise TraceError(path, None, unreadable.format(reason=e.strerror)) from None
    if not stat.S_ISREG(st.st_mode):
        found = next((words for test, words in types if test(st.st_mode)), other)
        raise TraceError(path, None, not_regular.format(found=found))
    return st.st_size


def regular_file(path: str | os.PathLike, what: str) -> int:
    """regular_size worded for a named part of a trace (`what`: "DUMPI metafile", "thread stream" ...)."""
    return regular_size(path, missing=f"{what} is missing", unreadable=f"cannot read the {what}: {{reason}}",
                        not_regular=f"not a regular file ({{found}}); expected the {what}",
                        types=((stat.S_ISDIR, "a folder"),), other="a FIFO, device or socket")


def repeated(value, n: int, column: Column) -> np.ndarray:
    """A column of ``n`` rows that all hold ``value`` (a chunk's thread, rank, kind ...):
    a read-only view of one element (stride 0, np.broadcast_to), so neither the reader
    nor the engine makes a pass over it (the engine keeps it as one value:
    engine/narrow.py).  Made in ``column``'s dtype when the value fits it, so conform
    keeps the view as it is; else as int64, which conform then refuses, as it would a
    full column.  Whatever takes it from a chunk and writes in place copies it first
    (the API's tables are copies already)."""
    dt = column.element_dtype()
    if dt.kind in "iu" and not np.iinfo(dt).min <= value <= np.iinfo(dt).max:
        dt = np.dtype(np.int64)
    if not n:       # no rows: a plain empty array (nothing to save, nothing read-only)
        return np.empty(0, dt)
    return np.broadcast_to(np.asarray(value, dt), (n,))

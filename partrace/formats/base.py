"""The one small interface every trace format implements.

A format knows how to read (and maybe write) its files and nothing about MPI:
the engine calls :meth:`TraceReader.units` and :meth:`TraceReader.read_definitions`
on one rank, hands units to ranks, and calls :meth:`TraceReader.decode` on the
rank that owns a unit.  Everything a reader returns must be picklable.
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterator

from ..model import Definitions, Schema, Table


@dataclass(frozen=True)
class Unit:
    """One piece of decode work: an OTF stream, a DUMPI rank file, ...

    ``key`` orders units deterministically; ``size`` (bytes) balances ranks;
    ``info`` is the reader's own picklable detail (paths, byte ranges ...).
    """

    key: str
    size: int
    info: Any = None


class TraceReader(ABC):
    """An opened trace.  Construction must be cheap (no event decoding)."""

    format_name: ClassVar[str] = ""
    #: About how many input bytes one decoded chunk covers.  The engine sets
    #: it from the memory budget; readers that chunk by bytes honour it.
    chunk_bytes: int = 32 << 20

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    @abstractmethod
    def units(self) -> list[Unit]:
        """The work units, sorted by key."""

    @abstractmethod
    def read_definitions(self) -> Definitions:
        """Everything the trace defines once (names, ids, clock)."""

    @abstractmethod
    def schema(self, defs: Definitions) -> Schema:
        """Tables this trace decodes into and their columns (``events`` first)."""

    @abstractmethod
    def decode(self, unit: Unit, defs: Definitions) -> Iterator[dict[str, Table]]:
        """Decode one unit into chunks of tables (each conforming to schema).

        ``seq`` values are per location and continue across chunks, so the
        union of chunks of all units is the same whatever the chunking.
        """

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
    def open(cls, path: str | os.PathLike) -> TraceReader:
        """Open a trace for reading."""

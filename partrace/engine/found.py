"""Definitions a decode found missing, added once every rank has decoded its units.

A format's library may keep a record that names something no definition defines (OTF's
reader hands every token on as is); partrace keeps such a record too, and its reader
reports a stand-in definition row for each id (:meth:`TraceReader.found_definitions`).
Here every rank's report meets on rank 0: the rows are joined (sorted by id, each id
once: the same whatever the rank count), each kind is said in one warning at the first
place any rank met it, and the definitions every rank continues with get the rows.
Every path that decodes (the merge pipeline, the folds) comes through here before a
sink or an answer looks a name up.
"""
from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np

from ..model import Definitions, Table
from .mpi import Comm


def complete_definitions(comm: Comm, reader, defs: Definitions) -> Definitions:
    """Collective: ``defs`` with the rows every rank's reader found missing (``defs``
    itself when none did)."""
    found = None
    with comm.guard():
        found = reader.found_definitions()
    comm.check()
    everyone = comm.gather(found)
    rows = None
    if comm.rank == 0:
        reports = [f for f in everyone if f is not None]
        rows = _joined([f.rows for f in reports])
        for text in _first_places([f.first for f in reports]):
            warnings.warn(text)     # one place: a command that decodes twice says it once
    rows = comm.bcast(rows)
    return with_rows(defs, rows) if rows else defs


def _joined(parts: list[dict[str, Table]]) -> dict[str, Table]:
    """The rows of every report per table, sorted by id, each id once."""
    out = {}
    for name in sorted({n for p in parts for n in p}):
        tabs = [p[name] for p in parts if name in p and len(p[name])]
        if not tabs:
            continue
        cols = tabs[0].names
        joined = Table({c: np.concatenate([np.asarray(t[c]) for t in tabs]) for c in cols})
        _, first = np.unique(np.asarray(joined["id"]), return_index=True)    # sorted by id
        out[name] = joined.take(first)
    return out


def _first_places(firsts: list[dict[str, tuple[tuple, str]]]) -> list[str]:
    """Per kind, the warning of the lowest place any rank met it, in the order of those places."""
    best: dict[str, tuple[tuple, str]] = {}
    for f in firsts:
        for kind, (place, text) in f.items():
            if kind not in best or place < best[kind][0]:
                best[kind] = (place, text)
    return [text for _, text in sorted(best.values())]


def with_rows(defs: Definitions, rows: dict[str, Table]) -> Definitions:
    """A copy of ``defs`` whose tables end with ``rows`` (ids they do not hold yet)."""
    tables = dict(defs.tables)
    for name, new in rows.items():
        old = tables.get(name)
        if old is None:
            tables[name] = new
            continue
        fresh = new.take(np.flatnonzero(~np.isin(np.asarray(new["id"]),
                                                   np.asarray(old["id"]))))
        tables[name] = Table({c: _appended(old[c], fresh[c]) for c in old.names})
    return replace(defs, tables=tables)


def _appended(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``old`` then ``new``, in ``old``'s dtype (object columns stay objects)."""
    out = np.empty(len(old) + len(new), dtype=old.dtype)
    out[:len(old)] = old
    out[len(old):] = new
    return out

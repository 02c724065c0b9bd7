"""Which files make a ROSS run: `<prefix>-<kind>.bin` in the stats folder (no numba here).

ROSS files have no magic number, so a run's files are told by the names ROSS
gives them (FORMAT-NOTES section 1), never by what their first bytes look like:
every entry named `<prefix>-{gvt,rt,analysis-lps,evtrace,model}.bin` is part of
the trace, and one that cannot be read is an error (the hop says where), never
skipped.  Entries with other names are not ROSS output and are ignored.
"""
from __future__ import annotations

import re
from pathlib import Path

from ...errors import TraceError
from ..base import FILE_TYPES, regular_size
from .layouts import FILE_KINDS

NAME = re.compile(r"^(?P<prefix>.+)-(?P<kind>" + "|".join(FILE_KINDS) + r")\.bin$")


def kind_of(path: Path) -> str | None:
    m = NAME.match(path.name)
    return m.group("kind") if m else None


def check_regular(path: Path) -> int:
    """Size of ``path``; a TraceError unless it is a regular file (opening a FIFO
    or a device could block forever, a directory cannot be read as records)."""
    return regular_size(path, not_regular="not a regular file ({found}): expected a ROSS .bin file",
                        types=FILE_TYPES[:2], other="a special file")


def _named(folder: Path) -> list[Path]:
    """Entries of ``folder`` that ROSS's names say are its output (any file type)."""
    try:
        return sorted(p for p in folder.iterdir() if kind_of(p))
    except OSError:
        return []


def run_files(path: Path) -> list[Path]:
    """The ROSS files of ``path``: one .bin file, the stats folder, or its parent.

    A parent qualifies when exactly one of its sub-folders holds ROSS files.
    Empty list if ``path`` is none of these.  Every file returned is a regular
    file (else TraceError naming it).
    """
    if kind_of(path) and path.exists() and not (path.is_dir() and _named(path)):
        check_regular(path)           # a FIFO or a directory named like a ROSS file
        return [path]
    if not path.is_dir():
        return []
    found = _named(path)
    if not found:
        subs = [s for s in sorted(path.iterdir()) if s.is_dir() and _named(s)]
        if len(subs) != 1:
            return []
        found = _named(subs[0])
    prefixes = {NAME.match(p.name).group("prefix") for p in found}
    if len(prefixes) > 1:
        raise TraceError(path, None, f"several ROSS runs in one folder (prefixes "
                         f"{sorted(prefixes)}); open one .bin file or separate the runs")
    for p in found:
        check_regular(p)
    return found

"""The files a run reads: no output may be written over them or delete them.

The pipeline records the trace path and every path its units name (rank 0,
once per run); the output's staging step refuses an output name that is, or
holds, one of them.  Both the path as written and the path with symlinks
resolved are kept, so a link to an input, or an input reached through a link,
is caught too.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

_inputs: set[Path] = set()          # input files and folders
_holders: set[Path] = set()         # every folder above an input

_OTF_PART = r"\.([0-9a-f]+\.(def|events|snaps|stats|marker)(\.z)?|otf)$"


def protect(trace: str | os.PathLike, units=()) -> None:
    """Record the inputs of the run about to write (forgets an earlier run's)."""
    _inputs.clear()
    _holders.clear()
    trace = Path(trace)
    paths = [trace, trace.parent / f"{trace.name}.parts"]    # an HDF5 output read back
    if trace.suffix == ".otf":      # OTF: NAME.otf names NAME.<stream>.<kind> beside it
        pattern = re.compile(re.escape(trace.stem) + _OTF_PART)
        try:
            paths += [p for p in trace.parent.iterdir() if pattern.match(p.name)]
        except OSError:
            pass
    for unit in units:
        paths += _paths_in(unit.info)
    for p in paths:
        for form in _forms(p):
            _inputs.add(form)
            _holders.update(form.parents)


def conflict(path: str | os.PathLike) -> Path | None:
    """The input that writing or deleting ``path`` would destroy, if any."""
    for form in _forms(Path(path)):
        if form in _inputs:
            return form
        if form in _holders:
            return next(p for p in sorted(_inputs) if form in p.parents)
    return None


def _forms(p: Path) -> set[Path]:
    plain = Path(os.path.abspath(p))
    try:
        return {plain, p.resolve()}
    except (OSError, RuntimeError):     # a symlink loop: the plain form only
        return {plain}


def _paths_in(info) -> list[Path]:
    """Paths named in a unit's info (PathLike, or a str with a slash or naming a file),
    at any depth."""
    if isinstance(info, os.PathLike):
        return [Path(info)]
    if isinstance(info, str):
        return [Path(info)] if os.sep in info or os.path.exists(info) else []
    if isinstance(info, dict):
        info = list(info.values())
    if isinstance(info, (list, tuple, set, frozenset)):
        return [p for item in info for p in _paths_in(item)]
    return []

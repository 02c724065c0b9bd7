"""The files a run reads: no output may be written over them or delete them.

The pipeline records the trace path, the files its reader says the trace consists of
(``TraceReader.source_files``) and every path its units name (rank 0, once per run); the
output's staging step refuses an output name that is, or holds, one of them.  Which files
belong to a trace is the format's to say: nothing here knows a format's file names.  Both the path as written and the path with symlinks
resolved are kept, so a link to an input, or an input reached through a link,
is caught too.
"""
from __future__ import annotations

import os
from pathlib import Path

_inputs: set[Path] = set()          # input files and folders
_holders: set[Path] = set()         # every folder above an input

def protect(trace: str | os.PathLike, files=(), units=()) -> None:
    """Record the inputs of the run about to write (forgets an earlier run's): the trace path,
    ``files`` (its reader's ``source_files()``) and the paths in ``units``."""
    _inputs.clear()
    _holders.clear()
    paths = {Path(trace): None, **dict.fromkeys(map(Path, files))}
    for unit in units:      # many units name one file (regions, streams): resolved once
        paths.update(dict.fromkeys(_paths_in(unit.info)))
    folders: dict[Path, Path] = {}      # a trace's files share few folders: each resolved once
    for p in paths:
        for form in _forms(p, folders):
            if form not in _inputs:
                _inputs.add(form)
                if form.parent not in _holders:     # else its parents are in already
                    _holders.update(form.parents)


def conflict(path: str | os.PathLike) -> Path | None:
    """The input that writing or deleting ``path`` would destroy, if any."""
    for form in _forms(Path(path)):
        if form in _inputs:
            return form
        if form in _holders:
            return next(p for p in sorted(_inputs) if form in p.parents)
    return None


def _forms(p: Path, folders: dict | None = None) -> set[Path]:
    """``p`` as written (absolute) and with its symlinks resolved; ``folders``: resolved
    folders already met (a path that is not a link itself resolves as its folder does,
    one system call instead of one per component)."""
    plain = Path(os.path.abspath(p))
    try:
        if folders is None or plain.parent == plain or os.path.islink(plain):
            return {plain, p.resolve()}
        folder = folders.get(plain.parent)
        if folder is None:
            folder = folders[plain.parent] = plain.parent.resolve()
        return {plain, folder / plain.name}
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

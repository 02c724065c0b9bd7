"""The files a run reads: no output may be written over them or delete them.

The pipeline records the trace path, the files its reader says the trace consists of
(``TraceReader.source_files``) and every path its units name (rank 0, once per run); the
output's staging step refuses an output name that is, or holds, one of them.  Which files
belong to a trace is the format's to say: nothing here knows a format's file names.  Both the path as written and the path with symlinks
resolved are kept, so a link to an input, or an input reached through a link,
is caught too.

Paths are kept as strings (os.path), not pathlib objects: rank 0 records every file of
the trace while the other ranks wait, and a trace of ten thousand rank files is ten
thousand of them.  A trace's files share few folders, so each folder is resolved once
and read once for which of its entries are links, instead of a system call per file.
"""
from __future__ import annotations

import os
from pathlib import Path

_inputs: set[str] = set()           # input files and folders, absolute
_holders: set[str] = set()          # every folder above an input
# a folder holding at least this many of the run's paths is listed once for its links;
# fewer are asked one by one (a trace's one file in a big folder)
LIST_FROM = 8


def protect(trace: str | os.PathLike, files=(), units=()) -> None:
    """Record the inputs of the run about to write (forgets an earlier run's): the trace path,
    ``files`` (its reader's ``source_files()``) and the paths in ``units``."""
    _inputs.clear()
    _holders.clear()
    paths = dict.fromkeys([os.fspath(trace), *map(os.fspath, files)])
    for unit in units:      # many units name one file (regions, streams): resolved once
        paths.update(dict.fromkeys(_paths_in(unit.info)))
    by_folder: dict[str, list[str]] = {}
    for p in paths:
        plain = os.path.abspath(p)
        by_folder.setdefault(os.path.dirname(plain), []).append(plain)
    folders: dict[str, str] = {}
    for folder, plains in by_folder.items():
        links = _links_in(folder) if len(plains) >= LIST_FROM else None
        for plain in plains:
            for form in _forms(plain, folders, links):
                if form not in _inputs:
                    _inputs.add(form)
                    _hold(os.path.dirname(form))


def conflict(path: str | os.PathLike) -> Path | None:
    """The input that writing or deleting ``path`` would destroy, if any."""
    for form in _forms(path):
        if form in _inputs:
            return Path(form)
        if form in _holders:
            inside = form if form.endswith(os.sep) else form + os.sep
            return Path(next(p for p in sorted(_inputs) if p.startswith(inside)))
    return None


def _hold(folder: str) -> None:
    """``folder`` and every folder above it, as holders (up to one already in)."""
    while folder not in _holders:
        _holders.add(folder)
        up = os.path.dirname(folder)
        if up == folder:
            return
        folder = up


def _forms(p: str | os.PathLike, folders: dict | None = None,
           links: set[str] | None = None) -> set[str]:
    """``p`` as written (absolute) and with its symlinks resolved; ``folders``: resolved
    folders already met (a path that is not a link itself resolves as its folder does,
    one look-up instead of one per component); ``links``: the names of the links in
    ``p``'s folder, if it was listed (else ``p`` itself is asked whether it is one)."""
    plain = os.path.abspath(p)
    folder, name = os.path.split(plain)
    try:
        if folders is None or not name or (
                name in links if links is not None else os.path.islink(plain)):
            return {plain, _resolved(os.fspath(p))}
        real = folders.get(folder)
        if real is None:
            real = folders[folder] = _resolved(folder)
        return {plain, os.path.join(real, name)}
    except (OSError, RuntimeError):     # a symlink loop: the plain form only
        return {plain}


def _resolved(path: str) -> str:
    """``path`` with its links resolved, as pathlib's resolve() (a loop: RuntimeError)."""
    return os.fspath(Path(path).resolve())


def _links_in(folder: str) -> set[str] | None:
    """The names of the symlinks in ``folder`` (None if it cannot be listed: each of its
    paths is then asked)."""
    try:
        with os.scandir(folder) as entries:
            return {e.name for e in entries if e.is_symlink()}
    except OSError:
        return None


def _paths_in(info) -> list[str]:
    """Paths named in a unit's info (PathLike, or a str with a slash or naming a file),
    at any depth."""
    if isinstance(info, os.PathLike):
        return [os.fspath(info)]
    if isinstance(info, str):
        return [info] if os.sep in info or os.path.exists(info) else []
    if isinstance(info, dict):
        info = list(info.values())
    if isinstance(info, (list, tuple, set, frozenset)):
        return [p for item in info for p in _paths_in(item)]
    return []

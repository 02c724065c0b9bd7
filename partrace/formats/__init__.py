"""The registry of trace formats.

Built-in formats are listed by module name and imported only when asked for,
so ``partrace --help`` does not pay for every format's tables.  Third-party
formats register a :class:`~partrace.formats.base.Format` subclass under the
``partrace.formats`` entry-point group (or name it in the PARTRACE_FORMATS
environment variable: ``name=module:attr,...``).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path

from ..errors import UsageError

# name -> "module:attribute"
BUILTIN = {
    "hdf5": "partrace.formats.hdf5:HDF5",
    "otf": "partrace.formats.otf:OTF",
    "dumpi": "partrace.formats.dumpi:DUMPI",
    "ovni": "partrace.formats.ovni:Ovni",
    "ross": "partrace.formats.ross:ROSS",
    "otf2": "partrace.formats.otf2:OTF2",
}

_loaded: dict = {}


def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points
    return {ep.name: ep.value for ep in entry_points(group="partrace.formats")}


def _from_environment() -> dict[str, str]:
    """Formats named in PARTRACE_FORMATS="name=module:attr,..." (plugins, tests)."""
    spec = os.environ.get("PARTRACE_FORMATS", "")
    return dict(item.split("=", 1) for item in spec.split(",") if "=" in item)


def _builtins() -> dict[str, str]:
    return {name: target for name, target in BUILTIN.items()
            if importlib.util.find_spec(target.split(":")[0]) is not None}


def _plugins() -> dict[str, str]:
    """Formats of other packages.  Asked for only when no built-in one fits: the
    entry-point scan reads every installed distribution's metadata, which at 256
    ranks on a shared file system is thousands of metadata operations for nothing."""
    return {**_entry_points(), **_from_environment()}


def available() -> dict[str, str]:
    """Every known format name -> its import target (built-ins first)."""
    found = _builtins()
    for name, target in _plugins().items():
        found.setdefault(name, target)
    return found


def canonical(name: str) -> str:
    """The registered name of format ``name`` given in any case ("OTF", as ``info`` prints
    it, is "otf"); an unknown name as it is."""
    if name in _loaded:
        return name
    targets = _builtins()
    if name not in targets:
        targets = available()
    return name if name in targets else {n.lower(): n for n in targets}.get(name.lower(), name)


def get(name: str):
    """The Format class registered under ``name`` (in any case)."""
    name = canonical(name)
    if name not in _loaded:
        targets = _builtins()
        if name not in targets:
            targets = available()
        if name not in targets:
            raise UsageError(f"unknown format {name!r}; known: {', '.join(targets)}")
        mod, attr = targets[name].split(":")
        try:
            _loaded[name] = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"format {name!r} cannot be loaded from {targets[name]}: {exc}") \
                from exc
    return _loaded[name]


def detect(path: str | os.PathLike) -> str:
    """The name of the format that recognises ``path``; an error naming those tried.

    Built-in formats are asked first, then (only if none fits) the plugins: the
    same order as :func:`available`."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{p}: no such file or directory")
    if not (p.is_dir() or p.is_file()):    # a FIFO or device: a sniffer reading it would block
        raise UsageError(f"{p}: not a regular file (a FIFO, device or socket): expected a trace "
                         f"file or folder")
    tried, broken = [], []
    builtin = _builtins()
    for names in (lambda: list(builtin), lambda: [n for n in _plugins() if n not in builtin]):
        for name in names():        # the plugins are listed only once the built-ins are tried
            try:
                fmt = get(name)
            except UsageError as exc:   # a broken plugin must not hide the others
                broken.append(str(exc))
                continue
            tried.append(name)
            if fmt.sniff(p):
                return name
    extra = f"; could not load {', '.join(broken)}" if broken else ""
    raise UsageError(f"{p}: not a trace of any known format (tried {', '.join(tried)}){extra}")


def open_trace(path: str | os.PathLike, format: str | None = None, **options):
    """Open ``path`` with the named format or the one that recognises it (``options``: the
    format's own)."""
    return get(format or detect(path)).open(path, **options)

"""Which files make a ROSS run: `<prefix>-<kind>.bin` in the stats folder (no numba here)."""
from __future__ import annotations

import re
import struct
from pathlib import Path

from ...errors import TraceError
from .layouts import FILE_KINDS

NAME = re.compile(r"^(?P<prefix>.+)-(?P<kind>" + "|".join(FILE_KINDS) + r")\.bin$")


def kind_of(path: Path) -> str | None:
    m = NAME.match(path.name)
    return m.group("kind") if m else None


def _plausible(path: Path) -> bool:
    """Cheap check of the first record (ROSS files have no magic number)."""
    kind = kind_of(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(48)
    except OSError:
        return False
    if size == 0:
        return True        # ROSS creates the files even when nothing is written
    if len(head) < 24:
        return False
    a, b = struct.unpack_from("<ii", head)
    if kind == "evtrace":
        return 24 + struct.unpack_from("<I", head, 20)[0] <= size
    if kind == "model":
        return a == 3 and b == 24
    if kind == "analysis-lps" and b == 0:
        return len(head) == 48 and struct.unpack_from("<i", head, 44)[0] == 3
    return (a, b) in ((0, 104), (1, 44), (2, 48))


def _bins(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_file() and kind_of(p))
    except OSError:
        return []


def run_files(path: Path) -> list[Path]:
    """The ROSS files of ``path``: one .bin file, the stats folder, or its parent.

    A parent qualifies when exactly one of its sub-folders holds ROSS files.
    Empty list if ``path`` is none of these.
    """
    if path.is_file():
        return [path] if kind_of(path) and _plausible(path) else []
    if not path.is_dir():
        return []
    found = _bins(path)
    if not found:
        subs = [s for s in sorted(path.iterdir()) if s.is_dir() and _bins(s)]
        if len(subs) != 1:
            return []
        found = _bins(subs[0])
    found = [p for p in found if _plausible(p)]
    prefixes = {NAME.match(p.name).group("prefix") for p in found}
    if len(prefixes) > 1:
        raise TraceError(path, None, f"several ROSS runs in one folder (prefixes "
                         f"{sorted(prefixes)}); open one .bin file or separate the runs")
    return found

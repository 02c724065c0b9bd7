"""OTF v1 (ASCII Open Trace Format of VampirTrace): reader and writer.

Kept light: the numba kernel is imported only when a stream is decoded.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..base import Format, TraceReader, check_options


def _master(path: Path) -> Path | None:
    """The master file NAME.otf of a path (the file itself, or the only *.otf in a folder,
    or in its ``trace/`` folder: a run folder as VampirTrace users keep them)."""
    if path.is_dir():
        found = sorted(path.glob("*.otf")) or sorted(path.glob("trace/*.otf"))
        return found[0] if len(found) == 1 else None
    # any non-folder NAME.otf: parse_master then says if it is not a regular file
    return path if path.suffix == ".otf" and path.exists() else None


class OTF(Format):
    name = "otf"
    description = "OTF v1, the ASCII Open Trace Format of VampirTrace (short/long records, zlib)"

    @classmethod
    def sniff(cls, path: Path) -> bool:
        from ...errors import TraceError
        from .files import parse_master
        m = _master(Path(path))
        if m is None:
            return False
        stub = str(m.with_suffix(""))
        if os.path.lexists(stub + ".0.def") or os.path.lexists(stub + ".0.def.z"):
            return True      # NAME.otf beside NAME.0.def: OTF, even if damaged (open says where)
        try:
            parse_master(m)
        except (TraceError, OSError, UnicodeDecodeError):
            return False
        return True

    @classmethod
    def open(cls, path: str | os.PathLike, **options) -> TraceReader:
        check_options(cls.name, options)
        from ...errors import TraceError
        from .reader import OTFReader
        m = _master(Path(path))
        if m is None:
            raise TraceError(path, None, "expected NAME.otf or a folder holding exactly one *.otf")
        return OTFReader(m)


__all__ = ["OTF"]

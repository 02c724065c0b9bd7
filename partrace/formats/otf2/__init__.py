"""OTF2 (Score-P's Open Trace Format 2): an encoder only, on the official library.

The ``otf2`` package (PyPI) bundles libotf2 and its ctypes bindings (``_otf2``).
Definitions are few and go through those bindings (definitions.py); events go
straight from a numba loop to the library's C event writers (events.py), so the
library itself encodes every record (compressed integers, timestamps, chunks)
and checks what it can (a location's timestamps never go back).
"""
from __future__ import annotations

from pathlib import Path

from ..base import Format, check_options


class OTF2(Format):
    """OTF2 archives (NAME.otf2 anchor file, NAME.def, NAME/<location>.evt), read through the
    bundled libotf2's own event reader (reader.py)."""

    name = "otf2"
    description = "OTF2 archive (Score-P, partrace's OTF2 output): anchor file NAME.otf2 or its folder"

    @classmethod
    def sniff(cls, path: Path) -> bool:
        path = Path(path)
        if path.is_file():
            return path.suffix == ".otf2"
        if path.is_dir():
            return any(p.suffix == ".otf2" and p.is_file() for p in path.iterdir())
        return False

    @classmethod
    def open(cls, path, **options):
        """Options: unit_bytes (event file bytes of one work unit: consecutive small
        locations share a unit up to it; default 4 MiB)."""
        check_options(cls.name, options, ("unit_bytes",))
        from .library import load
        load()          # one clear line if the otf2 package is missing
        from .reader import OTF2Reader
        return OTF2Reader(path, **options)

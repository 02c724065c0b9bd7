"""ovni traces (bsc-pm/ovni): binary per-thread event streams in loom/process folders.

Light on purpose: sniffing looks at folder names only; the reader, numba
kernel and MCV tables are imported when a trace is opened or decoded.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..base import Format, TraceReader, check_options


class Ovni(Format):
    """An ovni trace folder: the ``ovni`` folder, or the folder that holds it."""

    name = "ovni"
    description = "ovni (bsc-pm/ovni) per-thread binary streams, layouts v1, v2 and v3"

    @classmethod
    def sniff(cls, path: Path) -> bool:
        from .layout import trace_dir
        path = Path(path)
        return path.is_dir() and trace_dir(path) is not None

    @classmethod
    def open(cls, path: str | os.PathLike, **options) -> TraceReader:
        check_options(cls.name, options)
        from .reader import OvniReader
        return OvniReader(path)


__all__ = ["Ovni"]

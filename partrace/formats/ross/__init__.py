"""ROSS instrumentation output (engine, model and event-trace .bin files of a run)."""
from __future__ import annotations

import os
from pathlib import Path

from ...errors import TraceError
from ..base import Format, TraceReader


class ROSS(Format):
    name = "ross"
    description = ("ROSS discrete-event simulator instrumentation: GVT / real-time / "
                   "virtual-time engine samples, model samples and event traces")

    @classmethod
    def sniff(cls, path: Path) -> bool:
        from .files import run_files
        try:
            return bool(run_files(Path(path)))
        except TraceError:            # several runs in one folder: ours, but open() says why
            return True

    @classmethod
    def open(cls, path: str | os.PathLike, **options) -> TraceReader:
        """Options: region_size (bytes per work unit), model_dtypes ({table: np.dtype})."""
        from .reader import ROSSReader
        return ROSSReader(path, **options)


__all__ = ["ROSS"]

"""ROSS instrumentation output (engine, model and event-trace .bin files of a run)."""
from __future__ import annotations

import os
from pathlib import Path

from ...errors import TraceError
from ..base import Format, TraceReader, check_options


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
        """Options: region_size (bytes per work unit; default 4 MiB, more beyond 65,536
        regions), model_dtypes ({table: np.dtype}; from
        the command line a JSON object of [[name, type], ...] lists, as numpy's dtype takes
        tuples)."""
        from .reader import ROSSReader
        check_options(cls.name, options, ("region_size", "model_dtypes"))
        if isinstance(options.get("model_dtypes"), dict):
            options["model_dtypes"] = {k: _tuples(v) for k, v in options["model_dtypes"].items()}
        return ROSSReader(path, **options)


def _tuples(descr):
    """JSON's lists of [name, type(, shape)] as the tuples np.dtype takes."""
    if isinstance(descr, list):
        return [tuple(_tuples(x) if isinstance(x, list) and i == 1 else x for i, x in enumerate(f))
                if isinstance(f, list) else f for f in descr]
    return descr


__all__ = ["ROSS"]

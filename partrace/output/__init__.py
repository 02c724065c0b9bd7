"""Output sinks, chosen by the output path (``.h5``/``.hdf5``, ``.otf``, ``.pftrace`` or ``.otf2``)."""
from __future__ import annotations

from pathlib import Path

from ..errors import UsageError

HDF5_SUFFIXES = (".h5", ".hdf5", ".hdf")
PERFETTO_SUFFIX = ".pftrace"


def output_kind(path, to: str | None = None) -> str:
    if to:
        return to
    suffix = Path(path).suffix.lower()
    if suffix in HDF5_SUFFIXES:
        return "hdf5"
    if suffix == ".otf":
        return "otf"
    if suffix == PERFETTO_SUFFIX:
        return "perfetto"
    if suffix == ".otf2":
        return "otf2"
    raise UsageError(f"{path}: cannot tell the output format from the name "
                     f"(use .h5, .otf, .pftrace or .otf2, or --to hdf5|otf|perfetto|otf2)")


def make_sink(path, *, to: str | None = None, source: str = "", overwrite: bool = False,
              streams: int | None = None, compression: str | None = None,
              layout: str | None = None):
    """``layout`` (HDF5 only): "single" (default, one self-contained file at any rank
    count) or "parts" (a file of virtual datasets over per-rank ``OUT.parts/``)."""
    kind = output_kind(path, to)
    if kind == "hdf5":
        if streams is not None:
            raise UsageError("--streams applies to OTF output only")
        if compression == "zlib":
            raise UsageError("--compress zlib applies to OTF output; HDF5 takes gzip or lzf")
        from .hdf5_sink import HDF5Sink
        return HDF5Sink(path, source=source, overwrite=overwrite, compression=compression,
                        layout=layout)
    if layout is not None:
        raise UsageError("--layout applies to HDF5 output only")
    if kind == "perfetto":
        if streams is not None or compression is not None:
            raise UsageError("--streams and --compress do not apply to Perfetto output")
        from .perfetto_sink import PerfettoSink
        return PerfettoSink(path, overwrite=overwrite)
    if kind == "otf2":
        if streams is not None or compression is not None:
            raise UsageError("--streams and --compress do not apply to OTF2 output")
        from .otf2_sink import OTF2Sink
        return OTF2Sink(path, overwrite=overwrite)
    if compression not in (None, "zlib"):
        raise UsageError(f"--compress {compression} applies to HDF5 output; OTF takes zlib")
    from .otf_sink import OTFSink
    return OTFSink(path, streams=streams, overwrite=overwrite, compress=compression == "zlib")

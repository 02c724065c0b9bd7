"""Output sinks: a registry chosen by the output's suffix or ``--to``, as readers are.

An output is declared here once (its name, suffixes, the options it takes and
where its sink lives); the sink's module is imported only when chosen.  Adding
an output: write its sink in a module of this folder, on the base that fits
(staged.py, owned.py, parts.py), and add one ``Output`` below (see output/README.md).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError


@dataclass(frozen=True)
class Output:
    name: str                       # for --to
    title: str                      # for messages
    suffixes: tuple[str, ...]
    sink: str                       # "module:Class" in this package
    compression: tuple[str, ...] = ()   # the --compress values it takes
    streams: bool = False           # takes --streams
    layout: bool = False            # takes --layout
    source: bool = False            # records the input's path
    opens_in: str = ""              # the viewers and tools that open it (info, --help)


OUTPUTS = {o.name: o for o in [
    Output("hdf5", "HDF5", (".h5", ".hdf5", ".hdf"), "hdf5_sink:HDF5Sink",
           compression=("gzip", "lzf"), layout=True, source=True,
           opens_in="h5py, pandas, any HDF5 1.10+ tool; partrace itself"),
    Output("otf", "OTF", (".otf",), "otf_sink:OTFSink", compression=("zlib",), streams=True,
           opens_in="Vampir; otfprint, otfprofile and the other OTF tools"),
    Output("perfetto", "Perfetto", (".pftrace",), "perfetto_sink:PerfettoSink",
           opens_in="ui.perfetto.dev, trace_processor"),
    Output("otf2", "OTF2", (".otf2",), "otf2_sink:OTF2Sink",
           opens_in="Vampir, Scalasca/Cube, Pipit, otf2-print"),
    Output("chrome", "Chrome JSON", (".json",), "chrome_sink:ChromeSink",
           opens_in="chrome://tracing, ui.perfetto.dev (small traces)"),
]}
HDF5_SUFFIXES = OUTPUTS["hdf5"].suffixes


def output_kind(path, to: str | None = None) -> str:
    if to:
        return to
    suffix = Path(path).suffix.lower()
    for o in OUTPUTS.values():
        if suffix in o.suffixes:
            return o.name
    names = ", ".join(o.suffixes[0] for o in OUTPUTS.values())
    raise UsageError(f"{path}: cannot tell the output format from the name "
                     f"(use {names}, or --to {'|'.join(OUTPUTS)})")


def _only(option: str, attr: str) -> str:
    takers = [o.title for o in OUTPUTS.values() if getattr(o, attr)]
    return f"{option} applies to {' and '.join(takers)} output only"


def make_sink(path, *, to: str | None = None, source: str = "", overwrite: bool = False,
              streams: int | None = None, compression: str | None = None,
              layout: str | None = None):
    """The sink writing ``path``.  ``streams`` (OTF): output streams; ``compression``:
    one of the output's own codecs; ``layout`` (HDF5): "single" (default, one
    self-contained file at any rank count) or "parts" (virtual datasets over
    per-rank ``OUT.parts/``)."""
    out = OUTPUTS[output_kind(path, to)]
    if streams is not None and not out.streams:
        raise UsageError(_only("--streams", "streams"))
    if layout is not None and not out.layout:
        raise UsageError(_only("--layout", "layout"))
    if compression is not None and compression not in out.compression:
        owners = [o.title for o in OUTPUTS.values() if compression in o.compression]
        takes = (f"{out.title} takes {' or '.join(out.compression)}" if out.compression
                 else f"{out.title} output is not compressed")
        raise UsageError(f"--compress {compression} applies to {' and '.join(owners)} "
                         f"output; {takes}")
    module, cls = out.sink.split(":")
    sink = getattr(importlib.import_module(f".{module}", __name__), cls)
    kwargs = {"overwrite": overwrite}
    if out.source:
        kwargs["source"] = source
    if out.compression:
        kwargs["compression"] = compression
    if out.streams:
        kwargs["streams"] = streams
    if out.layout:
        kwargs["layout"] = layout
    return sink(path, **kwargs)

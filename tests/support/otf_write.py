"""Writing an OTF trace stream by stream from whole tables (the tests' and the synthetic
benchmarks' traces); a merge writes through the OTF sink's StreamWriter window by window."""
from __future__ import annotations

from pathlib import Path

from partrace.formats.otf.writer import StreamWriter
from partrace.model import Definitions, Schema, Table


def write_stream(stub: str | Path, stream: int, tables: dict[str, Table], defs: Definitions,
                 schema: Schema | None = None, compress: bool = False) -> list[Path]:
    """NAME.<s>.events/.snaps/.stats from all rows of the stream's processes (see StreamWriter)."""
    w = StreamWriter(stub, stream, defs, schema or {n: [] for n in tables}, compress)
    w.append(tables)
    return w.close()

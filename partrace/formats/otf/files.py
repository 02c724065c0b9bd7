"""OTF file names, the master file, and reading plain or zlib (.z) files in chunks."""
from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Iterator

from ...errors import TraceError

CHUNK = 32 << 20


def stub_of(master: Path) -> Path:
    """NAME for NAME.otf (the prefix of every file of the trace)."""
    return master.with_suffix("")


def stream_file(stub: Path, stream: int, kind: str) -> Path | None:
    """The existing file of a stream and kind ('events', 'def', ...), plain or .z."""
    base = Path(f"{stub}.{stream:x}.{kind}")
    if base.exists():
        return base
    z = Path(f"{base}.z")
    return z if z.exists() else None


def parse_master(path: Path, data: bytes | None = None) -> dict[int, list[int]]:
    """{stream: [processes]} in file order (hex numbers, 'stream:p,p,...')."""
    if data is None:
        data = path.read_bytes()
    out: dict[int, list[int]] = {}
    for no, raw in enumerate(data.split(b"\n"), 1):
        line = raw.strip()
        if not line:
            continue
        try:
            s, _, procs = line.decode("ascii").partition(":")
            if not _:
                raise ValueError
            stream = int(s, 16)
            procs = [int(p, 16) for p in procs.rstrip(",").split(",") if p]
        except ValueError:
            raise TraceError.at_line(path, no, "expected '<stream>:<process>,<process>,...' in hex") from None
        if stream <= 0 or stream in out:
            raise TraceError.at_line(path, no, "expected a new stream id > 0")
        out[stream] = procs
    if not out:
        raise TraceError(path, None, "expected at least one stream line in the master file")
    return out


def read_blocks(path: Path, chunk: int = CHUNK) -> Iterator[bytes]:
    """The uncompressed bytes of a plain or .z file, in blocks of about `chunk`.

    OTF's zlib streams are never finished (no end-of-stream block): the
    decompressor's output is taken as is and a missing end is not an error.
    """
    if path.suffix != ".z":
        with open(path, "rb") as f:
            while True:
                b = f.read(chunk)
                if not b:
                    return
                yield b
    d = zlib.decompressobj()
    with open(path, "rb") as f:
        while True:
            raw = f.read(max(chunk // 8, 1 << 16))
            if not raw:
                break
            try:
                out = d.decompress(raw, chunk)
                while out:
                    yield out
                    out = d.decompress(d.unconsumed_tail, chunk) if d.unconsumed_tail else b""
            except zlib.error as e:
                raise TraceError(path, None, f"expected zlib data ({e})") from None
        try:
            rest = d.flush()
        except zlib.error:
            rest = b""
        if rest:
            yield rest


def read_all(path: Path) -> bytes:
    return b"".join(read_blocks(path))


def file_size(path: Path | None) -> int:
    return os.path.getsize(path) if path is not None else 0

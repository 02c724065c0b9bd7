"""OTF file names, the master file, and reading plain or zlib (.z) files in chunks."""
from __future__ import annotations

import os
import re
import zlib
from pathlib import Path
from typing import Iterator

from ...errors import TraceError
from ..base import regular_size

CHUNK = 32 << 20
_LEAST_READ = 1 << 16     # a read past what the file held at its start (it grew; or its end)


def stub_of(master: Path) -> Path:
    """NAME for NAME.otf (the prefix of every file of the trace)."""
    return master.with_suffix("")


# what follows NAME in the name of a file of the trace: the master, or a stream's file of a kind
_TRACE_FILE = r"\.([0-9a-f]+\.(def|events|snaps|stats|marker)(\.z)?|otf)"


def trace_files(master: Path) -> list[Path]:
    """Every file of the trace NAME.otf names: itself and NAME.<stream>.<kind>[.z] beside it
    (not the other files whose names begin with NAME, an output written beside it, say)."""
    stub = stub_of(master)
    pattern = re.compile(re.escape(stub.name) + _TRACE_FILE)
    try:
        return sorted(p for p in stub.parent.iterdir() if pattern.fullmatch(p.name) and p.is_file())
    except OSError:
        return []


def require_regular(path: Path) -> Path:
    """``path`` if it is a regular file (after symlinks); TraceError naming it otherwise."""
    regular_size(path, missing="expected a file of the trace, found nothing (missing or broken link)",
                 unreadable="expected a readable file ({reason})")
    return path


def stream_file(stub: Path, stream: int, kind: str) -> Path | None:
    """The existing file of a stream and kind ('events', 'def', ...), plain or .z
    (None if neither exists; TraceError if the one found is not a regular file)."""
    base = Path(f"{stub}.{stream:x}.{kind}")
    for p in (base, Path(f"{base}.z")):
        if os.path.lexists(p):
            return require_regular(p)
    return None


def parse_master(path: Path, data: bytes | None = None) -> dict[int, list[int]]:
    """{stream: [processes]} in file order (hex numbers, 'stream:p,p,...')."""
    return master_entries(path, data)[0]


def master_lines(path: Path) -> dict[int, int]:
    """{stream: line number of its line in the master file} (for messages)."""
    return master_entries(path)[1]


def master_entries(path: Path, data: bytes | None = None) -> tuple[dict[int, list[int]], dict[int, int]]:
    if data is None:
        data = require_regular(path).read_bytes()
    out: dict[int, list[int]] = {}
    lines: dict[int, int] = {}
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
        lines[stream] = no
    if not out:
        raise TraceError.at_line(path, data.count(b"\n") + 1,
                                 "expected at least one stream line in the master file")
    return out, lines


def read_blocks(path: Path, chunk: int = CHUNK) -> Iterator[bytes]:
    """The uncompressed bytes of a plain or .z file, in blocks of about `chunk`.

    OTF's zlib streams are never finished (no end-of-stream block): the writer
    flushes (a sync flush: the stream ends with the empty stored block ``00 00 ff ff``),
    so a missing end is not an error.  A stream that ends neither finished nor at a
    flush was cut inside a compressed block: what it holds is read, as OTF's reader
    does, and a warning says the rest is lost.
    """
    require_regular(path)
    if path.suffix != ".z":
        with open(path, "rb") as f:
            left = os.fstat(f.fileno()).st_size
            while True:
                # no more than the file holds: read(n) makes an n-byte object first, and a
                # chunk-sized one for each small file cost more CPU than reading it
                b = f.read(min(chunk, max(left, _LEAST_READ)))
                if not b:
                    return
                left -= len(b)
                yield b
    d = zlib.decompressobj()
    at = 0                 # compressed offset of `raw`
    with open(path, "rb") as f:
        while True:
            raw = f.read(max(chunk // 8, 1 << 16))
            if not raw:
                break
            before = d.copy()   # to find the failing byte: zlib does not say where it failed
            try:
                out = d.decompress(raw, chunk)
                while out:
                    yield out
                    out = d.decompress(d.unconsumed_tail, chunk) if d.unconsumed_tail else b""
            except zlib.error as e:
                raise TraceError.at_byte(path, at + _failing_byte(before, raw),
                                         f"expected zlib data ({e})") from None
            at += len(raw)
        try:
            rest = d.flush()
        except zlib.error:
            rest = b""
        if rest:
            yield rest
        if not d.eof and not _ends_at_flush(f):
            import warnings
            warnings.warn(f"{path}: byte {at}: zlib stream cut short (it ends inside a "
                          f"compressed block, not at a flush as OTF's writer ends it); "
                          f"the records after its last whole line are lost", stacklevel=3)


_SYNC_FLUSH = b"\x00\x00\xff\xff"     # the empty stored block a zlib sync flush ends with


def _ends_at_flush(f) -> bool:
    size = os.fstat(f.fileno()).st_size
    if size < len(_SYNC_FLUSH):
        return False
    return os.pread(f.fileno(), len(_SYNC_FLUSH), size - len(_SYNC_FLUSH)) == _SYNC_FLUSH


def read_all(path: Path) -> bytes:
    return b"".join(read_blocks(path))


def file_size(path: Path | None) -> int:
    return os.path.getsize(path) if path is not None else 0


def _failing_byte(state, raw: bytes) -> int:
    """The offset in `raw` of the first byte whose arrival makes a copy of the decompressor
    `state` fail (bisection; output is discarded in bounded pieces)."""
    def fails(n: int) -> bool:
        d = state.copy()
        try:
            out = d.decompress(raw[:n], 1 << 16)
            while out and d.unconsumed_tail:
                out = d.decompress(d.unconsumed_tail, 1 << 16)
        except zlib.error:
            return True
        return False
    lo, hi = 0, len(raw)        # fails(hi) holds; find the smallest n with fails(n)
    while lo < hi:
        mid = (lo + hi) // 2
        if fails(mid):
            hi = mid
        else:
            lo = mid + 1
    return max(lo - 1, 0)

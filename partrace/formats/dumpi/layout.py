"""DUMPI file-level records: metafile, index, header, footer and label records.

Everything here is small and read with ``struct``; the call stream is decoded
in :mod:`.scan`.  Byte layouts follow dumpi/common/io.c (libdumpi 13):
big-endian throughout; strings are u16 length + bytes.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import TraceError

HEAD_MAGIC = 0xFFAADD44554D5049
FOOT_MAGIC = 0x00000000F007FEE7
END_OF_STREAM = 293
NUM_FOOTER = 291          # footer slots: labels 0..290 (290 = all functions)
INDEX_FIELDS = ("sizelbl", "addrlbl", "perflbl", "header", "body", "footer", "keyval")


class Cursor:
    """Big-endian reads from a bytes object; errors name the file and offset."""

    def __init__(self, data: bytes, path: Path, pos: int = 0):
        self.data, self.path, self.pos = data, path, pos

    def _take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TraceError.at_byte(self.path, self.pos,
                                     f"expected {what} ({n} bytes), file ends at {len(self.data)}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u8(self, what="u8") -> int:
        return self._take(1, what)[0]

    def u32(self, what="u32") -> int:
        return struct.unpack(">I", self._take(4, what))[0]

    def i32(self, what="i32") -> int:
        return struct.unpack(">i", self._take(4, what))[0]

    def u64(self, what="u64") -> int:
        return struct.unpack(">Q", self._take(8, what))[0]

    def string(self, what="string") -> str:
        n = struct.unpack(">H", self._take(2, what + " length"))[0]
        return self._take(n, what).decode("utf-8", "surrogateescape")

    def i32s(self, what="int array") -> list[int]:
        n = self.u32(what + " length")
        return list(struct.unpack(f">{n}i", self._take(4 * n, what)))


@dataclass
class RankFile:
    """The non-stream records of one rank file (everything but the calls)."""

    path: Path
    size: int
    index: dict[str, int]
    version: tuple[int, int, int]
    starttime: int
    hostname: str
    username: str
    meshcrd: list[int]
    meshsize: list[int]
    cpu_offset: int
    wall_offset: int
    calls: list[int]            # footer: call counts per label 0..290
    ignored: list[int]          # footer: ignored counts per label 0..290
    keyvals: list[tuple[str, str]] = field(default_factory=list)
    perf_labels: list[str] = field(default_factory=list)
    datatype_sizes: list[int] = field(default_factory=list)
    addresses: list[tuple[int, str]] = field(default_factory=list)

    @property
    def stream_start(self) -> int:
        return self.index["body"] + 8

    @property
    def stream_end(self) -> int:
        """Offset of the end-of-stream label (just before the header)."""
        return self.index["header"] - 2

    def summary(self) -> dict:
        """JSON-able form (Definitions.source)."""
        d = {k: getattr(self, k) for k in (
            "starttime", "hostname", "username", "meshcrd", "meshsize", "cpu_offset",
            "wall_offset", "perf_labels", "datatype_sizes")}
        d.update(file=self.path.name, size=self.size, index=self.index,
                 version=".".join(map(str, self.version)),
                 keyvals=[list(kv) for kv in self.keyvals],
                 addresses=[[a, n] for a, n in self.addresses],
                 calls={i: c for i, c in enumerate(self.calls) if c},
                 ignored={i: c for i, c in enumerate(self.ignored) if c})
        return d


def read_index(path: Path, head: bytes, last: bytes, size: int) -> dict[str, int]:
    """The index record in the last 64 bytes; older files lack the first 1-3 fields."""
    if size < 16 + 40:
        raise TraceError.at_byte(path, 0, f"file of {size} bytes is too short for DUMPI")
    if struct.unpack(">Q", head[:8])[0] != HEAD_MAGIC:
        raise TraceError.at_byte(path, 0, "expected DUMPI head magic ff aa dd 44 55 4d 50 49")
    last = last[-64:]
    for skip in range(4):                      # full index first, then older, shorter ones
        at = 8 * skip
        if struct.unpack(">Q", last[at:at + 8])[0] == HEAD_MAGIC:
            names = INDEX_FIELDS[skip:]
            index = dict.fromkeys(INDEX_FIELDS, 0) | dict(
                zip(names, struct.unpack(f">{len(names)}Q", last[at + 8:])))
            where = size - 64 + at
            for k in ("header", "body", "footer"):
                if not 0 < index[k] < where:
                    raise TraceError.at_byte(path, where, f"bad index record: {k} offset "
                                             f"{index[k]} outside the file")
            return index
    raise TraceError.at_byte(path, size - 64, "expected index record with head magic "
                             "at the end of the file (truncated file?)")


class Tail:
    """A rank file's first 16 bytes and its records after the stream, without the stream."""

    def __init__(self, path: Path):
        with open(path, "rb") as f:
            self.size = f.seek(0, 2)
            f.seek(0)
            self.head = f.read(16)
            f.seek(max(0, self.size - 64))
            self.index = read_index(path, self.head, f.read(64), self.size)
            self.base = max(16, self.index["header"] - 2)
            f.seek(self.base)
            self.tail = f.read()

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key):
        if isinstance(key, int):
            return self[key:key + 1][0]
        a, b = key.start or 0, min(key.stop, self.size)
        if b <= 16:
            return self.head[a:b]
        if a >= self.base:
            return self.tail[a - self.base:b - self.base]
        raise IndexError("DUMPI call stream is not loaded")


def read_rank_file(path: Path, data=None) -> RankFile:
    """Parse every record except the call stream (data: whole file or a Tail)."""
    data = Tail(path) if data is None else data
    idx = read_index(path, data[:16], data[max(0, len(data) - 64):len(data)], len(data))
    c = Cursor(data, path, idx["body"])
    cpu_off, wall_off = c.u32("cpu time offset"), c.u32("wall time offset")
    c.pos = idx["header"] - 2
    if struct.unpack(">H", data[c.pos:c.pos + 2])[0] != END_OF_STREAM:
        raise TraceError.at_byte(path, c.pos, "expected end-of-stream label 293 before header")
    c.pos = idx["header"]
    version = (c.u8(), c.u8(), c.u8())
    starttime = c.u64("start time")
    hostname, username = c.string("hostname"), c.string("username")
    meshcrd = c.i32s("mesh coordinates")
    meshsize = c.i32s("mesh size")
    c.pos = idx["footer"]
    if c.u64("footer magic") != FOOT_MAGIC:
        raise TraceError.at_byte(path, idx["footer"], "expected footer magic 00 00 00 00 f0 07 fe e7")
    counts = struct.unpack(f">{2 * NUM_FOOTER}I", c._take(8 * NUM_FOOTER, "footer counts"))
    rf = RankFile(path, len(data), idx, version, starttime, hostname, username, meshcrd,
                  meshsize, cpu_off, wall_off, list(counts[:NUM_FOOTER]), list(counts[NUM_FOOTER:]))
    if idx["keyval"]:
        c.pos = idx["keyval"]
        rf.keyvals = [(c.string("key"), c.string("value")) for _ in range(c.u32("keyval count"))]
    if idx["perflbl"]:
        c.pos = idx["perflbl"]
        rf.perf_labels = [c.string("perf label") for _ in range(c.u32("perf label count"))]
    if idx["sizelbl"]:
        c.pos = idx["sizelbl"]
        rf.datatype_sizes = c.i32s("datatype sizes")
    if idx["addrlbl"]:
        c.pos = idx["addrlbl"]
        rf.addresses = [(c.u64("address"), c.string("function name"))
                        for _ in range(c.u32("address count"))]
    return rf


def read_metafile(path: Path) -> dict[str, str]:
    """key=value lines (hostname, numprocs, username, startime, fileprefix, version...)."""
    out = {}
    for no, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise TraceError.at_line(path, no, "expected key=value")
        out[key.strip()] = value.strip()
    for key in ("numprocs", "fileprefix"):
        if key not in out:
            raise TraceError(path, None, f"metafile lacks the {key}= line")
    if not out["numprocs"].isdigit():
        raise TraceError(path, None, f"numprocs={out['numprocs']!r} is not a number")
    return out

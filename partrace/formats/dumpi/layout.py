"""DUMPI file-level records: metafile, index, header, footer and label records.

Everything here is small and read with ``struct``; the call stream is decoded
in :mod:`.scan`.  Byte layouts follow dumpi/common/io.c (libdumpi 13):
big-endian throughout; strings are u16 length + bytes.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import TraceError
from ..base import regular_file

HEAD_MAGIC = 0xFFAADD44554D5049
FOOT_MAGIC = 0x00000000F007FEE7
END_OF_STREAM = 293
NUM_FOOTER = 291          # footer slots: labels 0..290 (290 = all functions)
INDEX_FIELDS = ("sizelbl", "addrlbl", "perflbl", "header", "body", "footer", "keyval")
FOOTER_BYTES = 8 + 8 * NUM_FOOTER        # magic + calls and ignored counts
# header versions read as sst-dumpi 13.0.0 (the newest release) reads them: the
# layouts that changed (header meshsize from 0.5; Init, Cart_get, Type_struct before
# 0.6.2/0.6.8/0.6.9: scan.OLD_LAYOUTS) are read the old way; a newer version is read
# with 13.0.0's layouts, with a warning, as dumpi_open_input_file reads it
NEWEST = (13, 0, 0)


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
    """The index record in the last 64 bytes; older files lack the first 1-3 fields.

    The offsets are checked against each other and the file size (a file cut
    short shifts the fields, so a magic found early must still give a
    consistent layout) before anything is read at them.
    """
    if size < 16 + 40:
        raise TraceError.at_byte(path, size, f"file of {size} bytes is too short for DUMPI "
                                 "(expected head magic, call stream, header, footer and index)")
    if struct.unpack(">Q", head[:8])[0] != HEAD_MAGIC:
        raise TraceError.at_byte(path, 0, "expected DUMPI head magic ff aa dd 44 55 4d 50 49")
    last = last[-64:].rjust(64, b"\0")
    for skip in range(4):                      # full index first, then older, shorter ones
        at = 8 * skip
        if struct.unpack(">Q", last[at:at + 8])[0] == HEAD_MAGIC:
            names = INDEX_FIELDS[skip:]
            index = dict.fromkeys(INDEX_FIELDS, 0) | dict(
                zip(names, struct.unpack(f">{len(names)}Q", last[at + 8:])))
            _check_index(path, index, size - 64 + at)
            return index
    raise TraceError.at_byte(path, max(0, size - 64), "expected index record with head magic "
                             "at the end of the file (truncated file?)")


def _check_index(path: Path, index: dict[str, int], where: int) -> None:
    """Stream, header, footer and label records in the order libdumpi writes them,
    all before the index record at ``where``."""
    def bad(text):
        raise TraceError.at_byte(path, where, f"bad index record: {text} (truncated or "
                                 "corrupt file?)")

    for k in ("header", "body", "footer"):
        if not 0 < index[k] < where:
            bad(f"{k} offset {index[k]} outside the file")
    if index["body"] < 8 or index["body"] + 8 > index["header"] - 2:
        bad(f"call stream at {index['body']} does not end before the header at "
            f"{index['header']}")
    if not index["header"] + 3 + 8 + 2 + 2 + 8 <= index["footer"]:
        bad(f"footer offset {index['footer']} overlaps the header at {index['header']}")
    records_from = index["footer"] + FOOTER_BYTES
    if records_from > where:
        bad(f"footer at {index['footer']} needs {FOOTER_BYTES} bytes, the index starts at "
            f"{where}")
    for k in ("sizelbl", "addrlbl", "perflbl", "keyval"):
        if index[k] and not records_from <= index[k] <= where - 4:
            bad(f"{k} offset {index[k]} is not between the footer end {records_from} and "
                f"the index at {where}")


class Tail:
    """A rank file's first 16 bytes, the stream's 8-byte preamble and its records after
    the stream, without the stream itself."""

    def __init__(self, path: Path):
        self.path = path
        self.size = regular_file(path, "DUMPI rank file")
        try:
            with open(path, "rb") as f:
                self.head = f.read(16)
                f.seek(max(0, self.size - 64))
                self.index = read_index(path, self.head, f.read(64), self.size)
                f.seek(self.index["body"])
                self.preamble = f.read(8)
                self.base = max(16, self.index["header"] - 2)
                f.seek(self.base)
                self.tail = f.read()
        except OSError as e:
            raise TraceError(path, None, f"cannot read the DUMPI rank file: {e.strerror}") from None

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key):
        if isinstance(key, int):
            return self[key:key + 1][0]
        a, b = key.start or 0, min(key.stop, self.size)
        if b <= 16:
            return self.head[a:b]
        body = self.index["body"]
        if body <= a and b <= body + 8:
            return self.preamble[a - body:b - body]
        if a >= self.base:
            return self.tail[a - self.base:b - self.base]
        # only reachable through offsets the index check let through
        raise TraceError.at_byte(self.path, a, "expected a record after the call stream, "
                                 "found an offset inside it (corrupt index record?)")


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
    # meshsize was added in 0.5 (dumpi/common/io.c reads it only from then on)
    meshsize = c.i32s("mesh size") if meshcrd and version[:2] > (0, 4) else []
    if c.pos > idx["footer"]:
        raise TraceError.at_byte(path, idx["header"], f"header record runs to byte {c.pos}, "
                                 f"past the footer at {idx['footer']} (corrupt header?)")
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


def newer_version_warning(rf: RankFile, others: int) -> str | None:
    """sst-dumpi's warning for a file newer than its own version (dumpi_open_input_file
    reads it on with its own layouts), or None; ``others``: further rank files so new."""
    if rf.version <= NEWEST:
        return None
    text = ".".join(map(str, rf.version))
    more = f" (and {others} more rank file(s))" if others else ""
    return (f"{rf.path}: byte {rf.index['header']}: DUMPI version {text}{more} is newer than "
            f"sst-dumpi {'.'.join(map(str, NEWEST))}; read with its layouts, as sst-dumpi "
            f"reads it (forward compatibility is not guaranteed)")


def read_metafile(path: Path) -> dict[str, str]:
    """key=value lines (hostname, numprocs, username, startime, fileprefix, version...).
    Read as sst-dumpi's metadata.cc reads them: a line without ``=`` is skipped, and
    numprocs is the integer its value starts with (``istream >> int``)."""
    regular_file(path, "DUMPI metafile")
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise TraceError(path, None, f"cannot read the DUMPI metafile: {e.strerror}") from None
    out = {}
    lines = text.splitlines()
    for line in lines:
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    for key in ("numprocs", "fileprefix"):
        if key not in out:
            raise TraceError.at_line(path, len(lines) + 1, f"the metafile ends without the {key}= line")
    number = re.match(r"[+-]?\d+", out["numprocs"])
    if number is None:
        raise TraceError.at_line(path, metafile_line(path, "numprocs"),
                                 f"numprocs={out['numprocs']!r} is not a number")
    out["numprocs"] = str(int(number[0]))
    return out


def metafile_line(path: Path, key: str) -> int:
    """The line of ``key=`` in a metafile (for errors about its value)."""
    for no, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if line.partition("=")[0].strip() == key:
            return no
    return 0

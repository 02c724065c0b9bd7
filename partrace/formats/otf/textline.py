"""Python parser of single OTF record lines, for the small files (.def, .marker).

Same grammar tables as the numba kernel; fields come back as a dict.
"""
from __future__ import annotations

from pathlib import Path

from ...errors import TraceError
from .grammar import HEX, HEXSTR, MEMBERS, REQ, STRING, VERSION, Rec

_UP = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ#")
_HEX = frozenset(b"0123456789abcdef")


def keyword_index(recs) -> dict[bytes, Rec]:
    out = {}
    for r in recs:
        out[r.short.encode()] = r
        out[r.long.encode()] = r
    return out


def _run(line: bytes, i: int, chars) -> int:
    while i < len(line) and line[i] in chars:
        i += 1
    return i


def _skip(line: bytes, i: int) -> int:
    while i < len(line) and line[i] == 32:
        i += 1
    return i


def parse_line(line: bytes, index: dict[bytes, Rec], path: Path, no: int) -> tuple[Rec, dict]:
    """(record, {column: value}) of one line; TraceError naming path:line if it does not parse."""
    def fail(what):
        raise TraceError.at_line(path, no, f"expected {what}: {line[:80].decode('latin-1')!r}")
    i = _skip(line, 0)
    j = _run(line, i, _UP)
    rec = index.get(line[i:j])
    if rec is None:
        fail("a known record keyword")
    i = j
    vals: dict = {}
    for k, f in enumerate(rec.fields):
        i = _skip(line, i)
        if k:
            j = _run(line, i, _UP)
            tags = (f.short,) + f.long
            if f.ftype == MEMBERS and k + 1 < len(rec.fields):
                # an empty member list puts the next field's tag right after this one
                # ('DPG3MNM"..."'): the library reads the two tags together then
                # (OTF_Reader_readDefProcessGroup), so does this
                nxt = rec.fields[k + 1]
                run = line[i:j].decode()
                pairs = [(f.short, nxt.short), *zip(f.long, nxt.long)]
                j = next((i + len(a) for a, b in pairs if run == a + b), j)
            if line[i:j].decode() not in tags or i == j:
                if f.opt != REQ:
                    vals[f.col] = "" if f.ftype == STRING else 0
                    continue
                fail(f"field tag {f.short!r} of {rec.name}")
            i = _skip(line, j)
        elif f.opt != REQ and (i == len(line) or line[i] not in _HEX):
            vals[f.col] = 0
            continue
        if f.ftype == STRING:
            if i >= len(line) or line[i] != 34:
                fail(f"a quoted string for {rec.name}")
            j = line.find(b'"', i + 1)
            if j < 0:
                fail("a closing quote")
            vals[f.col] = line[i + 1:j].decode("utf-8", "surrogateescape")
            i = j + 1
        elif f.ftype == MEMBERS:
            members = []
            while True:
                j = _run(line, i, _HEX)
                if j == i:
                    break
                members.append(int(line[i:j], 16))
                if j >= len(line) or line[j] != 44:
                    fail("',' after a member")
                i = j + 1
            vals[f.col] = members
        elif f.ftype == VERSION:
            parts = []
            for m in range(3):
                j = _run(line, i, _HEX)
                if j == i:
                    fail("a version major.minor.sub")
                parts.append(int(line[i:j], 16))
                i = j + 1 if m < 2 and j < len(line) and line[j] == 46 else j
            if len(parts) != 3 or i >= len(line) or line[i] != 34:
                fail("a version string")
            j = line.find(b'"', i + 1)
            if j < 0:
                fail("a closing quote")
            vals[f.col] = parts + [line[i + 1:j].decode("utf-8", "surrogateescape")]
            i = j + 1
        else:
            j = _run(line, i, _HEX)
            if j == i:
                fail(f"a hex number for {f.col} of {rec.name}")
            if f.ftype == HEX and j - i > 16:
                fail("at most 16 hex digits")
            vals[f.col] = line[i:j].decode() if f.ftype == HEXSTR else int(line[i:j], 16)
            i = j
    if _skip(line, i) != len(line):
        fail(f"end of line after {rec.name}")
    return rec, vals


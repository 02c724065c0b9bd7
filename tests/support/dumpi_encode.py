"""Write DUMPI rank files and metafiles (for the tests and the synthetic benchmarks of scripts/).

Built from the same function table as the decoder.  A call is
``Call(name, args, wall=(in, out), cpu=(in, out), thread=0, perf=())`` with
times in ns; ``args`` maps argument names to values: int for scalars, a list
of ints for arrays, a list of int lists for ``ranges``, a list of
``(bytes, source, cancelled, error, tag)`` for statuses (single status too;
``[]`` = MPI_STATUS_IGNORE), str / list[str] / list[list[str]] for strings,
``argv`` a list of str (written with its argc).  Root-only arguments are
written only when the condition holds, as libdumpi does.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from partrace.formats.dumpi.functable import FUNCTIONS
from partrace.formats.dumpi.layout import END_OF_STREAM, FOOT_MAGIC, HEAD_MAGIC, NUM_FOOTER

BY_NAME = {name: (fid, args) for fid, name, args in FUNCTIONS if args is not None}
DEFAULT_SIZES = [0, 0, 1, 1, 1, 1, 4, 2, 2, 4, 4, 8, 8, 4, 8, 16, 0, 8, 8, 1, 0, 0, 8, 12,
                 12, 6, 8, 20]


@dataclass
class Call:
    name: str
    args: dict = field(default_factory=dict)
    wall: tuple[int, int] = (0, 0)
    cpu: tuple[int, int] = (0, 0)
    thread: int = 0
    perf: tuple = ()


def _s(text: str) -> bytes:           # u16-length string (header, labels)
    b = text.encode()
    return struct.pack(">H", len(b)) + b


def _c(text: str) -> bytes:           # u32-length char array (call arguments)
    b = text.encode()
    return struct.pack(">I", len(b)) + b


def _arr(fmt: str, xs) -> bytes:
    return struct.pack(f">I{len(xs)}{fmt}", len(xs), *xs)


def _times(t: tuple[int, int], offset: int) -> bytes:
    (a, b) = t
    return struct.pack(">HIHI", a // 10**9 - offset, a % 10**9, b // 10**9 - offset, b % 10**9)


def encode_args(name: str, args: dict, mask: int, status_tag: bool = True) -> bytes:
    _fid, layout = BY_NAME[name]
    out = []
    for an, kind, _role, cond in layout:
        if cond and args.get(cond[0], 0) != args.get(cond[1], 0):
            continue
        v = args.get(an)
        if kind == "i32":
            out.append(struct.pack(">i", v or 0))
        elif kind == "u16":
            out.append(struct.pack(">H", v or 0))
        elif kind == "u8":
            out.append(struct.pack(">B", v or 0))
        elif kind == "i64":
            out.append(struct.pack(">q", v or 0))
        elif kind == "status":
            if mask & 0x03:
                v = v or []
                # writers before 0.6.3 left the tag out (iodefs.h put_statuses)
                out.append(struct.pack(">I", len(v)) + b"".join(
                    struct.pack(">iiBBi", by, src, canc, err, tag) if status_tag
                    else struct.pack(">iiBB", by, src, canc, err)
                    for by, src, canc, err, tag in v))
        elif kind in ("a32", "a16", "a8"):
            out.append(_arr({"a32": "i", "a16": "H", "a8": "B"}[kind], v or []))
        elif kind == "aa32":
            v = v or []
            out.append(struct.pack(">I", len(v)) + b"".join(_arr("i", x) for x in v))
        elif kind == "str":
            out.append(_c(v or ""))
        elif kind in ("str2", "argv"):
            v = v or []
            out.append(struct.pack(">I", len(v)) + b"".join(_c(x) for x in v))
        elif kind == "str3":
            v = v or []
            out.append(struct.pack(">I", len(v)) + b"".join(
                struct.pack(">I", len(x)) + b"".join(_c(y) for y in x) for x in v))
    return b"".join(out)


def encode_call(call: Call, mask: int, cpu_offset: int, wall_offset: int,
                status_tag: bool = True) -> bytes:
    fid, _layout = BY_NAME[call.name]
    out = [struct.pack(">HB", fid, mask)]
    if mask & 0x40:
        out.append(struct.pack(">H", call.thread))
    if mask & 0x04:
        out.append(_times(call.cpu, cpu_offset))
    if mask & 0x08:
        out.append(_times(call.wall, wall_offset))
    if mask & 0x80:
        out.append(struct.pack(">B", len(call.perf)) + b"".join(
            struct.pack(">QQ", a, b) for a, b in call.perf))
    out.append(encode_args(call.name, call.args, mask, status_tag))
    return b"".join(out)


def write_rank(path: Path, calls, *, mask: int = 0x4F, cpu_offset: int = 0,
               wall_offset: int = 0, version=(13, 0, 0), starttime: int = 0,
               hostname: str = "host", username: str = "user", meshcrd=(), meshsize=(),
               ignored: dict[str, int] | None = None, keyvals=(), perf_labels=(),
               datatype_sizes=DEFAULT_SIZES, addresses=(), stream: bytes | None = None,
               counts: dict[int, int] | None = None) -> None:
    """One rank file.  ``stream`` (pre-encoded records) and ``counts`` skip ``calls``."""
    if stream is None:
        tag = tuple(version) >= (0, 6, 3)
        stream = b"".join(encode_call(c, mask, cpu_offset, wall_offset, tag) for c in calls)
        counts = {}
        for c in calls:
            fid = BY_NAME[c.name][0]
            counts[fid] = counts.get(fid, 0) + 1
    called = [0] * NUM_FOOTER
    ign = [0] * NUM_FOOTER
    for fid, n in (counts or {}).items():
        if fid < NUM_FOOTER - 1:
            called[fid] += n
    for name, n in (ignored or {}).items():
        fid = BY_NAME[name][0]
        called[fid] += n
        ign[fid] += n
    called[-1], ign[-1] = sum(called[:-1]), sum(ign[:-1])
    parts = [struct.pack(">QII", HEAD_MAGIC, cpu_offset, wall_offset), stream,
             struct.pack(">H", END_OF_STREAM)]
    idx = {"body": 8}

    def add(key: str, blob: bytes) -> None:
        idx[key] = sum(map(len, parts))
        parts.append(blob)

    add("header", bytes(version) + struct.pack(">Q", starttime) + _s(hostname) + _s(username)
        + _arr("i", list(meshcrd)) + _arr("i", list(meshsize)))
    add("footer", struct.pack(f">Q{2 * NUM_FOOTER}I", FOOT_MAGIC, *called, *ign))
    add("keyval", struct.pack(">I", len(keyvals)) + b"".join(_s(k) + _s(v) for k, v in keyvals))
    if not keyvals:
        idx["keyval"] = 0                   # as libdumpi: the slot stays 0
    add("perflbl", struct.pack(">I", len(perf_labels)) + b"".join(map(_s, perf_labels)))
    add("sizelbl", _arr("i", list(datatype_sizes)))
    add("addrlbl", struct.pack(">I", len(addresses)) + b"".join(
        struct.pack(">Q", a) + _s(n) for a, n in addresses))
    parts.append(struct.pack(">8Q", HEAD_MAGIC, idx["sizelbl"], idx["addrlbl"], idx["perflbl"],
                             idx["header"], idx["body"], idx["footer"], idx["keyval"]))
    Path(path).write_bytes(b"".join(parts))


def write_meta(folder: Path, prefix: str, nprocs: int, *, hostname: str = "host",
               username: str = "user", starttime: int = 0) -> Path:
    """The metafile rank 0 writes; rank files are ``<prefix>-NNNN.bin`` beside it."""
    path = Path(folder) / f"{prefix}.meta"
    path.write_text(f"hostname={hostname}\nnumprocs={nprocs}\nusername={username}\n"
                    f"startime={starttime}\nfileprefix={prefix}\nversion=13\n"
                    f"subversion=0\nsubsubversion=0\n")
    return path


def rank_path(folder: Path, prefix: str, rank: int) -> Path:
    return Path(folder) / f"{prefix}-{rank:04d}.bin"

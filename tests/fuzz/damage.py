"""Seeded generator of damaged copies of the real fixtures under tests/data/.

A :class:`Case` is one damage of one fixture run through one command
(``info``, ``merge -o x.h5`` or ``merge -o x.otf``).  :func:`cases` returns the
same list on every run (``random.Random`` seeded from the fixture's name and
:data:`SEED`), so a case id names the same damage from run to run.

Offsets are chosen where the format's structure is (headers, size and id
fields, record starts, index entries, line starts, quoted names), found by a
small walker per format written from FORMAT-NOTES.md, plus plain random bit
flips.  Each damage says what an exit 0 may still show (``rows``):

* ``"same"``: the damage cannot legitimately change how many rows the trace
  holds (a changed value, a broken header or size field, a broken definition,
  a deleted or swapped file the trace names or counts);
* ``"fewer"``: the format has no way to notice the loss (a file cut at a record
  or line boundary in a format without a trailer, a deleted file that nothing
  in the trace names), so fewer rows per table are acceptable;
* ``"any"``: the format's own library reads the damaged bytes as records of other
  sizes (an ovni stream has no framing but the event sizes, and libovni reads any
  byte as an event's flags), so the row count may change either way.
"""
from __future__ import annotations

import os
import random
import re
import shutil
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
SEED = 11
COMMANDS = ("h5", "otf", "info")


@dataclass(frozen=True)
class Fixture:
    name: str           # short id used in case ids
    format: str
    folder: str         # under tests/data; copied whole (minus reference files)
    trace: str          # the trace argument, relative to the copied folder ("" = the folder)
    keep: tuple = ()    # suffixes of the files that belong to the trace ("" = every file)
    offsets: bool = True    # errors give a line or byte (False: the format's library names none)

    def root(self) -> Path:
        """Where the fixture's files are: tests/data, or (partrace HDF5) made per session."""
        if self.format == "hdf5":
            from .hdf5_damage import fixture_parent
            return fixture_parent() / self.folder
        return DATA / self.folder

    def files(self) -> list[str]:
        """Relative paths of the trace's files, sorted."""
        root = self.root()
        out = []
        for p in sorted(root.rglob("*")):
            if p.is_file() and (not self.keep or p.name.endswith(self.keep)):
                out.append(p.relative_to(root).as_posix())
        return out


FIXTURES = [
    Fixture("otf-ring8", "otf", "otf/ring8/trace", "ring8.otf"),
    Fixture("otf-hybrid16", "otf", "otf/hybrid16/trace", "hybrid16.otf"),
    Fixture("otf-zlib", "otf", "otf/real-zlib/trace", "ring8_z.otf"),
    Fixture("otf-long", "otf", "otf/real-long/trace", "ring8_long.otf"),
    Fixture("dumpi-p2p", "dumpi", "dumpi/p2p-4rank", "p2p4-2026.11.22.05.47.08.meta",
            (".bin", ".meta")),
    Fixture("dumpi-coll", "dumpi", "dumpi/coll-4rank", "coll4-2026.11.22.05.47.23.meta",
            (".bin", ".meta")),
    Fixture("ovni-v1", "ovni", "ovni/v1-zoo-small/ovni", ""),
    Fixture("ovni-v3", "ovni", "ovni/v3-mpisim-small/ovni", ""),
    Fixture("ross-phold", "ross", "ross/phold-np2-opt-gvt-pekplp/stats", ""),
    Fixture("ross-pi1", "ross", "ross/pi-np1-seq-allmodes/stats", ""),
    Fixture("ross-pi2", "ross", "ross/pi-np2-opt-evtrace-full-model-gvt/stats", ""),
    Fixture("h5-ring8", "hdf5", "hdf5-ring8", "ring8.h5"),     # made by partrace merge
    # the OTF2 library reports no byte offset of what it cannot read
    Fixture("otf2-mpi3", "otf2", "otf2/mpi3", "traces.otf2", offsets=False),
]
BY_NAME = {f.name: f for f in FIXTURES}


@dataclass(frozen=True)
class Damage:
    """One change to a copy of a fixture.

    op: ``flip`` (bit ``b`` of byte ``a``), ``splice`` (bytes ``a``..``a+b`` replaced by
    ``data``), ``truncate`` (to ``a`` bytes), ``append`` (``data``), ``delete``,
    ``swap`` (contents with ``file2``), ``dir`` / ``fifo`` (the file replaced by an
    empty folder / a named pipe), ``h5edit`` (edit ``label`` of hdf5_damage.EDITS on the
    object named by ``data``, ``a`` its parameter).
    """
    label: str          # the damage class, as reported (e.g. "flip", "meta-numprocs-small")
    file: str           # relative to the copied folder
    op: str
    a: int = 0
    b: int = 0
    data: bytes = b""
    file2: str = ""
    rows: str = "same"  # "same", "fewer" or "any": what an exit 0 may show (module docstring)

    def describe(self) -> str:
        if self.op == "h5edit":
            return f"{self.label} {self.file}:{self.data.decode()}"
        where = {"flip": f"@{self.a}.bit{self.b}", "splice": f"@{self.a}+{self.b}",
                 "truncate": f"@{self.a}", "append": f"+{len(self.data)}",
                 "swap": f"<->{self.file2}"}.get(self.op, "")
        return f"{self.label} {self.file}{where}"

    def apply(self, root: Path) -> None:
        path = root / self.file
        if self.op == "none":
            return
        if self.op == "delete":
            path.unlink()
        elif self.op == "swap":
            other = root / self.file2
            a, b = path.read_bytes(), other.read_bytes()
            path.write_bytes(b)
            other.write_bytes(a)
        elif self.op == "dir":
            path.unlink()
            path.mkdir()
        elif self.op == "fifo":
            path.unlink()
            os.mkfifo(path)
        elif self.op == "h5edit":
            from .hdf5_damage import apply_edit
            apply_edit(path, self.label, self.data.decode(), self.a)
        else:
            raw = bytearray(path.read_bytes())
            if self.op == "flip":
                raw[self.a] ^= 1 << self.b
            elif self.op == "splice":
                raw[self.a:self.a + self.b] = self.data
            elif self.op == "truncate":
                del raw[self.a:]
            elif self.op == "append":
                raw += self.data
            else:
                raise ValueError(self.op)
            path.write_bytes(bytes(raw))


@dataclass(frozen=True)
class Case:
    id: str
    fixture: Fixture
    damage: Damage
    command: str        # "h5", "otf" or "info"

    def argv(self, trace: Path, out_dir: Path, spill: Path) -> list[str]:
        if self.command == "info":
            return ["info", str(trace), "--json"]
        verb = "convert" if self.fixture.format == "hdf5" else "merge"
        # --progress none: a run slowed by a loaded machine would log progress lines,
        # which the checks would take for unexpected stderr
        return [verb, str(trace), "-o", str(out_dir / f"x.{self.command}"),
                "--tmpdir", str(spill), "--progress", "none"]


def copy_fixture(fx: Fixture, dest: Path) -> Path:
    """Copy the fixture's trace files to ``dest``/<folder name>; return the trace argument."""
    root = dest / Path(fx.folder).name
    for rel in fx.files():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(fx.root() / rel, root / rel)
    return root / fx.trace if fx.trace else root


def fixture_root(fx: Fixture, dest: Path) -> Path:
    return dest / Path(fx.folder).name


# --- structural offsets per format ---------------------------------------------------------

def _hexdigits(line: bytes, start: int) -> list[int]:
    return [start + i for i, c in enumerate(line) if chr(c) in "0123456789abcdef"]


def _lines(raw: bytes) -> list[tuple[int, bytes]]:
    out, pos = [], 0
    for line in raw.split(b"\n"):
        out.append((pos, line))
        pos += len(line) + 1
    return [(p, ln) for p, ln in out if ln]


def otf_damages(fx: Fixture, rng: random.Random) -> list[Damage]:
    files = fx.files()
    root = DATA / fx.folder
    master = fx.trace
    events = [f for f in files if ".events" in f]
    out: list[Damage] = []
    zipped = any(f.endswith(".z") for f in files)
    aimed = set(rng.sample(events, 2))      # events files that get every damage; others a flip
    for f in files:
        raw = (root / f).read_bytes()
        if ".events" in f and f not in aimed:
            out.append(Damage("flip", f, "flip", rng.randrange(len(raw)), rng.randrange(8)))
            continue
        if f.endswith(".z"):
            # compressed: no text structure to aim at; random bits, the zlib header, cuts
            for _ in range(3 if ".events" in f else 1):
                out.append(Damage("flip", f, "flip", rng.randrange(len(raw)), rng.randrange(8)))
            out.append(Damage("zlib-header", f, "splice", 0, 2, b"\x00\x00"))
            out.append(Damage("zero", f, "splice", len(raw) // 2, 16, bytes(16)))
            out.append(Damage("truncate", f, "truncate", rng.randrange(2, len(raw)),
                              rows="fewer"))
            out.append(Damage("append-garbage", f, "append", data=rng.randbytes(24)))
            continue
        lines = _lines(raw)
        if f == master:
            out.append(Damage("master-line-deleted", f, "splice", lines[-1][0],
                              len(lines[-1][1]) + 1, b""))
            p, ln = lines[0]
            colon = ln.index(b":")
            out.append(Damage("master-stream-0", f, "splice", p, colon, b"0"))
            out.append(Damage("master-bad-separator", f, "splice", p + colon, 1, b";"))
            p2, ln2 = lines[1] if len(lines) > 1 else lines[0]
            c2 = ln2.index(b":")
            out.append(Damage("master-proc-twice", f, "splice", p2 + c2 + 1,
                              len(ln2) - c2 - 1, ln[colon + 1:]))
            out.append(Damage("master-empty", f, "truncate", 0))
            out.append(Damage("master-non-hex", f, "splice", p + colon + 1, 1, b"g"))
            continue
        if f.endswith(".def"):
            dp = [(p, ln) for p, ln in lines if ln.startswith(b"DP") and not ln.startswith(b"DPG")]
            df = [(p, ln) for p, ln in lines if ln.startswith(b"DF") and not ln.startswith(b"DFG")]
            for label, pick in (("def-process-deleted", dp), ("def-function-deleted", df)):
                if pick:
                    p, ln = rng.choice(pick)
                    out.append(Damage(label, f, "splice", p, len(ln) + 1, b""))
            if dp:
                p, ln = dp[0]
                out.append(Damage("def-token-0", f, "splice", p + 2, _hexlen(ln, 2), b"0"))
                out.append(Damage("def-duplicate-line", f, "splice", p, 0, ln + b"\n"))
            quoted = [(p, ln) for p, ln in lines if ln.count(b'"') >= 2]
            p, ln = rng.choice(quoted)
            q = ln.index(b'"')
            out.append(Damage("def-non-utf8-name", f, "splice", p + q + 1, 0, b"\xff\xfe"))
            out.append(Damage("def-unterminated-quote", f, "splice", p + ln.rindex(b'"'), 1, b""))
            tr = [(p, ln) for p, ln in lines if ln.startswith(b"DTR") and not ln.startswith(b"DTRG")]
            if tr:
                p, ln = tr[0]
                out.append(Damage("def-timer-resolution-0", f, "splice", p + 3, len(ln) - 3, b"0"))
            out.append(Damage("def-version-broken", f, "splice", lines[0][0], 2, b"XV"))
            out.append(Damage("flip", f, "flip", rng.randrange(len(raw)), rng.randrange(8)))
            continue
        if f.endswith(".marker"):
            out.append(Damage("flip", f, "flip", rng.randrange(len(raw)), rng.randrange(8)))
            out.append(Damage("deleted-unnamed-file", f, "delete", rows="fewer"))
            continue
        if not (".events" in f or f.endswith((".snaps", ".stats"))):
            continue
        if f.endswith((".snaps", ".stats")):
            if rng.random() < 0.5:
                out.append(Damage("flip", f, "flip", rng.randrange(len(raw)), rng.randrange(8)))
            continue
        # an events file
        times = [(p, ln) for p, ln in lines if all(chr(c) in "0123456789abcdef" for c in ln)]
        procs = [(p, ln) for p, ln in lines if ln.startswith(b"*")]
        records = [(p, ln) for p, ln in lines if ln[:1].isupper()]
        p, ln = rng.choice(times[1:-1])
        d = rng.choice(_hexdigits(ln, p)[1:] or _hexdigits(ln, p))
        out.append(Damage("time-digit", f, "splice", d, 1, b"7" if raw[d] != ord("7") else b"3"))
        p, ln = rng.choice(procs)
        out.append(Damage("process-token-0", f, "splice", p + 1, len(ln) - 1, b"0"))
        out.append(Damage("process-unknown", f, "splice", p + 1, len(ln) - 1, b"fff"))
        p, ln = rng.choice(records)
        out.append(Damage("record-keyword", f, "splice", p, 1, b"Q"))
        enters = [(p, ln) for p, ln in records if ln.startswith(b"E") and ln[1:2].isalnum()]
        if enters:
            p, ln = rng.choice(enters)
            out.append(Damage("record-token-0", f, "splice", p + 1, _hexlen(ln, 1), b"0"))
        p, ln = rng.choice(lines[2:-2])
        out.append(Damage("newline-joined", f, "splice", p + len(ln), 1, b" "))
        out.append(Damage("non-utf8-byte", f, "splice", p + len(ln) // 2, 0, b"\xff"))
        out.append(Damage("flip", f, "flip", rng.randrange(len(raw)), rng.randrange(8)))
        out.append(Damage("zero", f, "splice", rng.randrange(len(raw) - 8), 8, bytes(8)))
        cut = rng.choice(lines[1:])[0]
        out.append(Damage("truncate-at-line", f, "truncate", cut, rows="fewer"))
        out.append(Damage("truncate-mid-line", f, "truncate", rng.randrange(1, len(raw) - 1),
                          rows="fewer"))
        out.append(Damage("append-garbage", f, "append", data=rng.randbytes(rng.randrange(1, 40))))
        out.append(Damage("append-text", f, "append", data=b"hello world\n"))
    ev = rng.sample(events, 2)
    out.append(Damage("deleted-stream-file", ev[0], "delete"))
    out.append(Damage("swapped-stream-files", ev[0], "swap", file2=ev[1]))
    defs = [f for f in files if ".0.def" in f]
    out.append(Damage("deleted-definitions", defs[0], "delete"))
    if not zipped:
        out.append(Damage("dir-instead-of-file", ev[1], "dir"))
    return out


def _hexlen(line: bytes, start: int) -> int:
    n = 0
    while start + n < len(line) and chr(line[start + n]) in "0123456789abcdef":
        n += 1
    return max(n, 1)


def dumpi_damages(fx: Fixture, rng: random.Random) -> list[Damage]:
    files = fx.files()
    root = DATA / fx.folder
    bins = [f for f in files if f.endswith(".bin")]
    meta = [f for f in files if f.endswith(".meta")][0]
    out: list[Damage] = []
    aimed = set(rng.sample(bins, 2))        # rank files that get every damage; others a flip
    for f in bins:
        raw = (root / f).read_bytes()
        n = len(raw)
        if f not in aimed:
            out.append(Damage("flip", f, "flip", rng.randrange(16, n), rng.randrange(8)))
            continue
        index = struct.unpack(">8Q", raw[-64:])     # magic, sizelbl, addrlbl, perflbl, header,
        header, footer = index[4], index[6]          # body, footer, keyval
        for _ in range(3):
            out.append(Damage("flip", f, "flip", rng.randrange(16, header), rng.randrange(8)))
        slot = rng.choice([1, 2, 3, 4, 5, 6])
        out.append(Damage("index-offset-huge", f, "splice", n - 64 + 8 * slot, 8, b"\x7f" * 8))
        out.append(Damage("index-offset-zero", f, "splice", n - 64 + 8 * rng.choice([4, 5, 6]),
                          8, bytes(8)))
        out.append(Damage("flip", f, "flip", rng.randrange(n - 64, n), rng.randrange(8)))
        out.append(Damage("flip", f, "flip", rng.randrange(header, n - 64), rng.randrange(8)))
        out.append(rng.choice([          # one of these (rng.choice draws as randrange(4) did)
            Damage("head-magic", f, "splice", 0, 1, b"\x00"),
            Damage("first-label-end-of-stream", f, "splice", 16, 2, b"\x01\x25"),
            Damage("first-label-huge", f, "splice", 16, 2, b"\xff\xf0"),
            Damage("footer-count", f, "splice", footer + 8 + 4 * 290, 4, b"\x00\x0f\x42\x40")]))
        out.append(Damage("zero", f, "splice", rng.randrange(16, header - 32), 32, bytes(32)))
        cut = rng.choice([rng.randrange(16, header), n - 1, n - 64, rng.randrange(header, n)])
        out.append(Damage("truncate", f, "truncate", cut))
    out.append(Damage("truncate-to-0", bins[0], "truncate", 0))
    out.append(Damage("append-garbage", bins[1], "append", data=rng.randbytes(rng.randrange(1, 80))))
    out.append(Damage("deleted-rank-file", bins[2], "delete"))
    out.append(Damage("swapped-rank-files", bins[0], "swap", file2=bins[3]))
    out.append(Damage("dir-instead-of-file", bins[3], "dir"))
    text = (root / meta).read_bytes()
    lines = _lines(text)
    for p, ln in lines:
        if ln.startswith(b"numprocs="):
            v = len(b"numprocs=")
            out.append(Damage("meta-numprocs-small", meta, "splice", p + v, len(ln) - v, b"2"))
            out.append(Damage("meta-numprocs-large", meta, "splice", p + v, len(ln) - v, b"9"))
            out.append(Damage("meta-numprocs-text", meta, "splice", p + v, len(ln) - v, b"four"))
            out.append(Damage("meta-line-deleted", meta, "splice", p, len(ln) + 1, b""))
        if ln.startswith(b"fileprefix="):
            v = len(b"fileprefix=")
            out.append(Damage("meta-prefix-wrong", meta, "splice", p + v, 3, b"xyz"))
            out.append(Damage("meta-line-deleted", meta, "splice", p, len(ln) + 1, b""))
            out.append(Damage("meta-non-utf8", meta, "splice", p + v, 0, b"\xff"))
    out.append(Damage("meta-empty", meta, "truncate", 0))
    return out


def ovni_events(raw: bytes) -> list[int]:
    """Start offsets of the events of one ovni stream (FORMAT-NOTES.md section 3)."""
    starts, off = [], 8
    while off + 12 <= len(raw):
        starts.append(off)
        b = raw[off]
        if b & 0x10:
            off += 16 + struct.unpack_from("<I", raw, off + 12)[0]
        else:
            off += 12 + (0 if (b & 0x0F) == 0 else (b & 0x0F) + 1)
    return starts


def ovni_damages(fx: Fixture, rng: random.Random) -> list[Damage]:
    files = fx.files()
    root = DATA / fx.folder
    streams = [f for f in files if f.endswith(".obs")]
    metas = [f for f in files if f.endswith(".json")]
    out: list[Damage] = []
    for f in streams:
        raw = (root / f).read_bytes()
        ev = ovni_events(raw)
        jumbo = [s for s in ev if raw[s] & 0x10]
        # a flipped bit of an event's flags byte changes its size, and libovni reads on
        out.append(Damage("flip", f, "flip", rng.randrange(len(raw)), rng.randrange(8),
                          rows="any"))
        s = rng.choice(ev)
        out.append(rng.choice([          # one of these (rng.choice draws as randrange(6) did)
            Damage("header-magic", f, "splice", 0, 4, b"ovnj"),
            Damage("header-version", f, "splice", 4, 4, b"\x02\x00\x00\x00"),
            Damage("event-flags", f, "splice", s, 1, b"\xff", rows="any"),
            Damage("event-size-code", f, "splice", s, 1,
                   bytes([(raw[s] & 0xF0) | ((raw[s] + 5) & 0x0F)]), rows="any"),
            Damage("event-model-unknown", f, "splice", s + 1, 1, b"\x01"),
            Damage("event-clock-high-byte", f, "splice", s + 11, 1, b"\x7f")]))
        if jumbo:
            out.append(Damage("jumbo-length-huge", f, "splice", rng.choice(jumbo) + 12, 4,
                              b"\xff\xff\xff\x7f"))
        s = rng.choice(ev[1:])
        if rng.random() < 0.5:
            out.append(Damage("truncate-at-event", f, "truncate", s, rows="fewer"))
        else:
            # inside an event: a crashed writer's last record; allowed as a warning
            out.append(Damage("truncate-mid-event", f, "truncate", s + rng.randrange(1, 12),
                              rows="fewer"))
        # 12 zero bytes: an event NUL NUL NUL of no payload to libovni (ovnidump prints it)
        out.append(Damage("zero", f, "splice", s, 12, bytes(12), rows="any"))
    out.append(Damage("append-garbage", streams[0], "append",
                      data=rng.randbytes(rng.randrange(1, 40))))
    out.append(Damage("truncate-to-0", streams[1], "truncate", 0))
    # v2/v3 keep a JSON file per stream, which names the deleted one; v1 names no thread
    named = any(m.startswith(streams[2].rsplit(".", 1)[0]) or
                m.startswith(streams[2].rsplit("/", 1)[0] + "/") for m in metas
                if not m.endswith("metadata.json"))
    out.append(Damage("deleted-stream-file", streams[2], "delete",
                      rows="same" if named else "fewer"))
    out.append(Damage("swapped-stream-files", streams[0], "swap", file2=streams[-1]))
    out.append(Damage("dir-instead-of-file", streams[3], "dir"))
    for f in metas:
        text = (root / f).read_bytes()
        pick = rng.randrange(5)
        if pick == 0:
            out.append(Damage("json-truncated", f, "truncate", len(text) // 2))
        elif pick == 1:
            out.append(Damage("json-non-utf8", f, "splice", text.index(b'"') + 1, 0, b"\xff"))
        elif pick == 2:
            key = b'"version": '
            i = text.index(key) + len(key)
            out.append(Damage("json-version-99", f, "splice", i, 1, b"99"))
        elif pick == 3:
            out.append(Damage("json-not-object", f, "splice", 0, len(text), b"[1, 2]"))
        else:
            key = b'"tid": ' if b'"tid": ' in text else b'"app_id": '
            i = text.index(key) + len(key)
            n = len(re.match(rb"-?\d+", text[i:]).group())
            out.append(Damage("json-id-text", f, "splice", i, n, b'"x"'))
    out.append(Damage("deleted-metadata", metas[0], "delete"))
    return out


def ross_records(name: str, raw: bytes) -> list[tuple[int, str]]:
    """(start, kind) of the records of one ROSS file (FORMAT-NOTES.md sections 3-5)."""
    out, off = [], 0
    while off + 24 <= len(raw):
        if "evtrace" in name:
            out.append((off, "event"))
            off += 24 + struct.unpack_from("<I", raw, off + 20)[0]
        elif "model" in name:
            out.append((off, "model"))
            off += 48 + struct.unpack_from("<I", raw, off + 44)[0]
        elif "analysis" in name and struct.unpack_from("<I", raw, off + 4)[0] == 0:
            out.append((off, "vt_model"))
            off += 48 + struct.unpack_from("<i", raw, off + 40)[0]
        else:
            kind = ("pe", "kp", "lp")[struct.unpack_from("<i", raw, off)[0]]
            out.append((off, kind))
            off += 24 + struct.unpack_from("<i", raw, off + 4)[0]
    return out


# per record kind: (offset of a size field, offsets of id fields, offset of a time value)
# and of a time value
_ROSS_FIELDS = {"event": (20, (0, 4), 8), "model": (44, (24, 32), 8),
                "vt_model": (40, (0, 8, 16), 24), "pe": (4, (24,), 8), "kp": (4, (24, 28), 8),
                "lp": (4, (24, 32), 8)}


def ross_damages(fx: Fixture, rng: random.Random) -> list[Damage]:
    files = fx.files()
    root = DATA / fx.folder
    out: list[Damage] = []
    for f in files:
        raw = (root / f).read_bytes()
        recs = ross_records(f, raw)
        for _ in range(2):
            out.append(Damage("flip", f, "flip", rng.randrange(len(raw)), rng.randrange(8)))
        for _ in range(2):
            start, kind = rng.choice(recs)
            size_at, ids, time_at = _ROSS_FIELDS[kind]
            pick = rng.randrange(5)
            if pick == 0:
                out.append(Damage("size-field-huge", f, "splice", start + size_at, 4,
                                  b"\xff\xff\xff\x7f"))
            elif pick == 1:
                out.append(Damage("size-field-plus-4", f, "splice", start + size_at, 4,
                                  struct.pack("<I", struct.unpack_from("<I", raw, start + size_at)[0] + 4)))
            elif pick == 2:
                out.append(Damage("id-field-huge", f, "splice", start + rng.choice(ids), 4,
                                  b"\xff\xff\xff\x7f"))
            elif pick == 3 and kind in ("pe", "kp", "lp"):
                out.append(Damage("sample-type-unknown", f, "splice", start, 4,
                                  b"\x07\x00\x00\x00"))
            else:
                out.append(Damage("time-value-bytes", f, "splice", start + time_at, 4,
                                  rng.randbytes(4)))
        # the first record's header: ROSS files have no magic, so this is where a reader
        # decides whether the file is one at all
        first = {"event": (20, b"\xff\xff\xff\x7f"), "vt_model": (44, b"\x09\x00\x00\x00")}
        at, data = first.get(recs[0][1], (0, b"\x09\x00\x00\x00"))
        out.append(Damage("first-record-header", f, "splice", at, 4, data))
        start, kind = rng.choice(recs[1:])
        out.append(Damage("truncate-at-record", f, "truncate", start, rows="fewer"))
        out.append(Damage("truncate-mid-record", f, "truncate", start + rng.randrange(1, 20)))
        out.append(Damage("zero", f, "splice", start, 24, bytes(24)))
        out.append(Damage("append-garbage", f, "append", data=rng.randbytes(rng.randrange(1, 60))))
    out.append(Damage("deleted-unnamed-file", files[0], "delete", rows="fewer"))
    if len(files) > 1:
        out.append(Damage("swapped-files", files[0], "swap", file2=files[1]))
    out.append(Damage("dir-instead-of-file", files[-1], "dir"))
    return out


def otf2_damages(fx: Fixture, rng: random.Random) -> list[Damage]:
    """Single-bit flips of the global definitions (traces.def), read through the otf2
    package, whose definition callbacks raise on what a flip makes of a reference."""
    raw = (fx.root() / "traces.def").read_bytes()
    return [Damage("flip", "traces.def", "flip", rng.randrange(len(raw)), rng.randrange(8))
            for _ in range(40)]


def hdf5_damages(fx: Fixture, rng: random.Random) -> list[Damage]:
    from .hdf5_damage import damages
    return damages(fx, rng, Damage)


GENERATORS = {"otf": otf_damages, "dumpi": dumpi_damages, "ovni": ovni_damages,
              "ross": ross_damages, "hdf5": hdf5_damages, "otf2": otf2_damages}
# damages of strings and names: run through every command (HDF5 and OTF writers differ)
EVERY_COMMAND = {"def-non-utf8-name", "non-utf8-byte", "meta-non-utf8", "json-non-utf8"}
# one named pipe per format in place of a file (a hang costs the whole time limit)
FIFO_TARGETS = {"otf-ring8": "ring8.3.events",
                "dumpi-p2p": "p2p4-2026.11.22.05.47.08-0001.bin",
                "ovni-v3": "loom.mpi0/proc.27414/thread.27414/stream.obs",
                "ross-pi1": "ross-stats-model.bin"}


CLEAN = Damage("clean", "", "none")


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() else "-" for c in text)
    return "-".join(p for p in keep.split("-") if p)


def cases() -> list[Case]:
    """Every case, in a fixed order with fixed ids (c000-...)."""
    out: list[Case] = []
    for k, fx in enumerate(FIXTURES):
        rng = random.Random(zlib.crc32(f"{SEED}:{fx.name}".encode()))
        damages = GENERATORS[fx.format](fx, rng)
        if fx.name in FIFO_TARGETS:
            damages.append(Damage("fifo-instead-of-file", FIFO_TARGETS[fx.name], "fifo"))
        for j, d in enumerate(damages):
            commands = COMMANDS if d.label in EVERY_COMMAND else (COMMANDS[(j + k) % 3],)
            for cmd in commands:
                short = _slug(d.file.replace(Path(fx.trace).stem or "@", ""))[-22:].strip("-")
                cid = f"c{len(out):03d}-{fx.name}-{_slug(d.label)}-{short}-{cmd}"
                out.append(Case(cid, fx, d, cmd))
    return out


def two_rank_cases(every: int = 13) -> list[Case]:
    """A deterministic spread of the cases for the runs under mpiexec -n 2."""
    return [c for i, c in enumerate(cases()) if i % every == 3 or c.damage.op == "fifo"]


def fast_cases() -> list[Case]:
    """A few cases per format for the quick (unmarked) test: the first of some classes."""
    want = {"flip", "truncate-mid-record", "truncate-mid-line", "meta-numprocs-small",
            "deleted-stream-file", "deleted-rank-file", "event-flags", "json-truncated",
            "index-offset-huge", "def-token-0", "h5-rows-huge", "h5-location-unknown"}
    seen, out = set(), []
    for c in cases():
        key = (c.fixture.format, c.damage.label)
        if c.damage.label in want and key not in seen:
            seen.add(key)
            out.append(c)
    return out

"""Where an ovni trace keeps its streams and metadata (layout versions 1, 2, 3).

v1 (libovni <= 1.4): ``loom.<L>/proc.<P>/metadata.json`` + ``thread.<T>.obs``;
v2 (1.5 - 1.10): as v1 plus ``thread.<T>.json`` beside each stream;
v3 (>= 1.11): ``loom.<L>/proc.<P>/thread.<T>/{stream.json,stream.obs}`` with
the process facts spread over the streams of the threads that set them.
The version is told apart per process folder by what is on disk.
"""
from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import TraceError

CLOCK_OFFSETS = "clock-offsets.txt"
_THREAD_OBS = re.compile(r"^thread\.(\d+)\.obs$")
_THREAD_DIR = re.compile(r"^thread\.(\d+)$")
_PROC_DIR = re.compile(r"^proc\.(\d+)$")


@dataclass
class Stream:
    """One thread stream: where it is and whose it is."""

    loom: str
    pid: int
    tid: int
    obs: Path
    meta: Path | None          # thread.<T>.json (v2) or stream.json (v3)
    version: int               # layout version of its process folder


@dataclass
class Process:
    loom: str
    pid: int
    version: int
    facts: dict[str, Any] = field(default_factory=dict)   # app_id, rank, nranks ...
    cpus: list[dict] = field(default_factory=list)        # {"index", "phyid"}


def trace_dir(path: Path) -> Path | None:
    """The folder holding ``loom.*`` folders: ``path`` itself or ``path/ovni``."""
    for d in (path, path / "ovni"):
        if d.is_dir() and any(p.name.startswith("loom.") and p.is_dir() for p in d.iterdir()):
            return d
    return None


def load_json(path: Path) -> dict:
    """A JSON object from ``path``, or a TraceError naming the line that is wrong."""
    try:
        text = path.read_text()
    except UnicodeDecodeError as e:
        raise TraceError.at_byte(path, e.start, "expected UTF-8 JSON text") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError.at_line(path, e.lineno,
                                 f"expected valid JSON ({e.msg}, column {e.colno})") from None
    if not isinstance(obj, dict):
        raise TraceError.at_line(path, 1, "expected a JSON object")
    return obj


def find_streams(root: Path) -> list[Stream]:
    """Every thread stream below the trace folder, sorted by (loom, pid, tid)."""
    streams = []
    for loom_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("loom.")):
        loom = loom_dir.name[len("loom."):]
        for proc_dir in sorted(loom_dir.iterdir()):
            m = _PROC_DIR.match(proc_dir.name)
            if not (m and proc_dir.is_dir()):
                continue
            streams += _process_streams(loom, int(m.group(1)), proc_dir)
    streams.sort(key=lambda s: (s.loom, s.pid, s.tid))
    return streams


def _process_streams(loom: str, pid: int, proc_dir: Path) -> list[Stream]:
    out = []
    v12 = []
    for p in proc_dir.iterdir():
        m = _THREAD_DIR.match(p.name)
        if m and p.is_dir():
            obs, meta = p / "stream.obs", p / "stream.json"
            if not obs.is_file():
                continue      # an empty thread folder holds no events
            if not meta.is_file():
                raise TraceError(obs, None, f"thread stream without its metadata: expected {meta}")
            out.append(Stream(loom, pid, int(m.group(1)), obs, meta, 3))
            continue
        m = _THREAD_OBS.match(p.name)
        if m and p.is_file():
            v12.append((int(m.group(1)), p))
    if v12:
        md = proc_dir / "metadata.json"
        if not md.is_file():
            raise TraceError(v12[0][1], None,
                             f"thread stream without process metadata: expected {md}")
        for tid, obs in v12:
            tj = proc_dir / f"thread.{tid}.json"
            out.append(Stream(loom, pid, tid, obs, tj if tj.is_file() else None,
                              2 if tj.is_file() else 1))
    return out


def metadata_files(s: Stream) -> list[Path]:
    """The metadata documents :func:`gather_processes` reads for stream ``s``."""
    files = [s.obs.parent / "metadata.json"] if s.version in (1, 2) else []
    return files + ([s.meta] if s.meta is not None else [])


def gather_processes(streams: list[Stream], load=None) -> tuple[list[Process], dict]:
    """Process facts merged from wherever each layout version keeps them.

    Returns the processes (sorted by loom, pid) and the raw metadata documents
    keyed by their path relative to the trace folder (the lossless source).
    ``load(path)`` reads a document (default :func:`load_json`; the reader
    passes the documents its ranks read in parallel).
    """
    load = load or load_json
    procs: dict[tuple[str, int], Process] = {}
    docs: dict[str, dict] = {}
    for s in streams:
        key = (s.loom, s.pid)
        if s.version in (1, 2):
            if key not in procs:
                md = s.obs.parent / "metadata.json"
                doc = load(md)
                docs[relpath(md)] = doc
                _expect_version(md, doc, (1, 2))
                facts = {k: v for k, v in doc.items() if k != "cpus"}
                procs[key] = Process(s.loom, s.pid, doc["version"], facts,
                                     list(doc.get("cpus", [])))
            if s.meta is None and procs[key].version == 2:
                warnings.warn(f"{s.obs}: no thread.{s.tid}.json beside it (layout v2 writes it "
                              "when the thread finishes); the stream may be incomplete",
                              stacklevel=3)
            if s.meta is not None:
                doc = load(s.meta)
                _expect_version(s.meta, doc, (2,))
                docs[relpath(s.meta)] = doc
            continue
        doc = load(s.meta)
        _expect_version(s.meta, doc, (3,))
        docs[relpath(s.meta)] = doc
        o = doc.get("ovni")
        if not isinstance(o, dict):
            raise TraceError.at_line(s.meta, 1, 'expected an "ovni" object')
        for k, want in (("loom", s.loom), ("pid", s.pid), ("tid", s.tid)):
            if k in o and o[k] != want:
                raise TraceError(s.meta, None, f'"{k}" is {o[k]!r} but the folder says {want!r}')
        proc = procs.setdefault(key, Process(s.loom, s.pid, 3))
        for k in ("app_id", "rank", "nranks"):
            if k in o:
                if k in proc.facts and proc.facts[k] != o[k]:
                    raise TraceError(s.meta, None, f'"{k}" = {o[k]!r} disagrees with '
                                     f"{proc.facts[k]!r} from another stream of process {s.pid}")
                proc.facts[k] = o[k]
        proc.cpus += list(o.get("loom_cpus", []))
    return [procs[k] for k in sorted(procs)], docs


def loom_cpus(procs: list[Process]) -> dict[str, list[tuple[int, int]]]:
    """Each loom's CPUs as sorted (index, phyid), merged over its processes."""
    out: dict[str, dict[int, int]] = {}
    for p in procs:
        cpus = out.setdefault(p.loom, {})
        for c in p.cpus:
            try:
                i, phy = int(c["index"]), int(c["phyid"])
            except (KeyError, TypeError, ValueError):
                raise TraceError(f"loom.{p.loom}/proc.{p.pid}", None, "expected CPU entries "
                                 f"with integer index and phyid, got {c!r}") from None
            if cpus.get(i, phy) != phy:
                raise TraceError(f"loom.{p.loom}/proc.{p.pid}", None,
                                 f"CPU index {i} has phyid {phy} and {cpus[i]}")
            cpus[i] = phy
    return {loom: sorted(c.items()) for loom, c in sorted(out.items())}


def read_clock_offsets(root: Path, looms: list[str]) -> tuple[dict[str, int], str | None]:
    """Per-loom offsets (ns) from ``clock-offsets.txt`` (written by ovnisync).

    As in ovniemu, a loom's host is its name up to the first dot and the
    median offset column is added to every clock of that loom.
    """
    path = root / CLOCK_OFFSETS
    if not path.is_file():
        return {}, None
    text = path.read_text()
    lines = text.splitlines()
    if not lines:
        raise TraceError.at_line(path, 1, "expected a header line")
    by_host: dict[str, int] = {}
    for n, line in enumerate(lines[1:], start=2):
        f = line.split()
        if not f:
            continue
        try:
            int(f[0])
            by_host[f[1]] = int(float(f[2]))
            float(f[3]), float(f[4])
        except (IndexError, ValueError):
            raise TraceError.at_line(path, n, "expected 'rank hostname offset_median "
                                     "offset_mean offset_std'") from None
    offsets = {}
    for loom in looms:
        host = loom.split(".", 1)[0]
        if host not in by_host:
            raise TraceError(path, None, f"no clock offset for host {host!r} of loom {loom!r}")
        offsets[loom] = by_host[host]
    return offsets, text


def _expect_version(path: Path, doc: dict, versions: tuple[int, ...]) -> None:
    v = doc.get("version")
    if v not in versions:
        want = " or ".join(map(str, versions))
        raise TraceError(path, None, f'expected "version" {want}, got {v!r}')


def relpath(path: Path) -> str:
    """``path`` from its ``loom.*`` folder on (how the source definitions name files)."""
    parts = path.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i].startswith("loom."):
            return "/".join(parts[i:])
    return str(path)

"""Where an ovni trace keeps its streams and metadata (layout versions 1, 2, 3).

v1 (libovni <= 1.4): ``loom.<L>/proc.<P>/metadata.json`` + ``thread.<T>.obs``;
v2 (1.5 - 1.10): as v1 plus ``thread.<T>.json`` beside each stream;
v3 (>= 1.11): ``loom.<L>/proc.<P>/thread.<T>/{stream.json,stream.obs}`` with
the process facts spread over the streams of the threads that set them.
The version is told apart per process folder by what is on disk.

Every entry named as a part of the trace (``loom.*``, ``proc.<P>``, ``thread.<T>``
folders, streams, metadata, ``clock-offsets.txt``) must be there and be a regular
file or folder (checked with ``os.stat`` before opening: a FIFO never blocks a
read); anything else beside them (ovniemu's Paraver output, dumps) is not the
trace's and is neither read nor counted.
"""
from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import TraceError
from ..base import regular_file

CLOCK_OFFSETS = "clock-offsets.txt"
_THREAD_OBS = re.compile(r"^thread\.(\d+)\.obs$")
_THREAD_DIR = re.compile(r"^thread\.(\d+)$")
_PROC_DIR = re.compile(r"^proc\.(\d+)$")
_THREAD_JSON = re.compile(r"^thread\.(\d+)\.json$")
# metadata layouts per libovni release: 1 (<= 1.4), 2 (1.5 - 1.10), 3 (>= 1.11);
# ovniemu itself reads only the one its release writes
METADATA_VERSIONS = (1, 2, 3)


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


def read_text(path: Path, what: str) -> str:
    """A trace text file's content; every way it cannot be read is a TraceError."""
    regular_file(path, what)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TraceError(path, None, f"cannot read the {what}: {e.strerror}") from None
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise TraceError.at_byte(path, e.start, f"expected UTF-8 text ({what})") from None


def load_json(path: Path) -> dict:
    """A JSON object from ``path``, or a TraceError naming the line that is wrong."""
    text = read_text(path, "ovni metadata JSON")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError.at_line(path, e.lineno,
                                 f"expected valid JSON ({e.msg}, column {e.colno})") from None
    if not isinstance(obj, dict):
        raise TraceError.at_line(path, 1, "expected a JSON object")
    return obj


def _folder(path: Path, what: str) -> None:
    """Entries named like the trace's folders must be folders (never opened otherwise)."""
    if not path.is_dir():
        regular_file(path, what)                 # names a FIFO or missing target
        raise TraceError(path, None, f"expected a {what}, found a file")


def find_streams(root: Path) -> list[Stream]:
    """Every thread stream below the trace folder, sorted by (loom, pid, tid).

    Every entry named as a part of the trace (loom/process/thread folders, streams
    and their metadata) must be readable: one that is not is an error, never skipped.
    Anything else (ovniemu's .prv/.pcf/.row and cfg/, dumps) is not the trace's.
    """
    streams = []
    for loom_dir in sorted(p for p in root.iterdir() if p.name.startswith("loom.")):
        _folder(loom_dir, "loom folder")
        loom = loom_dir.name[len("loom."):]
        for proc_dir in sorted(loom_dir.iterdir()):
            m = _PROC_DIR.match(proc_dir.name)
            if not m:
                continue
            _folder(proc_dir, "process folder")
            streams += _process_streams(loom, int(m.group(1)), proc_dir)
    streams.sort(key=lambda s: (s.loom, s.pid, s.tid))
    return streams


def _process_streams(loom: str, pid: int, proc_dir: Path) -> list[Stream]:
    out = []
    v12 = []
    entries = sorted(proc_dir.iterdir())
    for p in entries:
        m = _THREAD_DIR.match(p.name)
        if m:
            _folder(p, "thread stream folder (layout v3)")
            obs, meta = p / "stream.obs", p / "stream.json"
            if not os.path.lexists(obs):
                # libovni creates stream.obs with the folder (with OVNI_TMPDIR it moves
                # it here when the thread ends): without it the thread's events are lost
                raise TraceError(obs, None, "thread stream is missing (" + (
                    "its stream.json is there" if os.path.lexists(meta) else
                    "the thread folder holds neither stream.obs nor stream.json") + ")")
            regular_file(obs, "thread stream")
            if not os.path.lexists(meta):
                raise TraceError(meta, None, f"missing: the metadata of thread stream {obs}")
            regular_file(meta, "thread stream metadata")
            out.append(Stream(loom, pid, int(m.group(1)), obs, meta, 3))
            continue
        m = _THREAD_OBS.match(p.name)
        if m:
            regular_file(p, "thread stream")
            v12.append((int(m.group(1)), p))
            continue
        m = _THREAD_JSON.match(p.name)
        if m:
            regular_file(p, "thread metadata")
            if not os.path.lexists(proc_dir / f"thread.{m.group(1)}.obs"):
                raise TraceError(proc_dir / f"thread.{m.group(1)}.obs", None,
                                 f"thread stream is missing (expected beside {p.name})")
    md = proc_dir / "metadata.json"
    if v12 or os.path.lexists(md):
        if not os.path.lexists(md):
            raise TraceError(md, None, f"missing: the process metadata of thread stream "
                                       f"{v12[0][1].name} (and any others of process {pid})")
        regular_file(md, "process metadata")
        if not v12:      # libovni creates a thread's stream before the process metadata
            raise TraceError(md, None, "process metadata without any thread.<tid>.obs "
                             "stream beside it (expected at least one)")
        for tid, obs in v12:
            tj = proc_dir / f"thread.{tid}.json"
            has = os.path.lexists(tj)
            out.append(Stream(loom, pid, tid, obs, tj if has else None, 2 if has else 1))
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
                _check_facts(md, doc, "cpus")
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
        _check_facts(s.meta, o, "loom_cpus")
        for k, want in (("loom", s.loom), ("pid", s.pid), ("tid", s.tid)):
            if k in o and o[k] != want:
                raise TraceError.at_line(s.meta, json_line(s.meta, k),
                                         f'"{k}" is {o[k]!r} but the folder says {want!r}')
        proc = procs.setdefault(key, Process(s.loom, s.pid, 3))
        for k in ("app_id", "rank", "nranks"):
            if k in o:
                if k in proc.facts and proc.facts[k] != o[k]:
                    raise TraceError.at_line(s.meta, json_line(s.meta, k),
                                             f'"{k}" = {o[k]!r} disagrees with {proc.facts[k]!r} '
                                             f"from another stream of process {s.pid}")
                proc.facts[k] = o[k]
        proc.cpus += list(o.get("loom_cpus", []))
    return [procs[k] for k in sorted(procs)], docs


def _check_facts(path: Path, doc: dict, cpus_key: str) -> None:
    """Process facts are integers and the CPU list a list (never read as "not given")."""
    for k in ("app_id", "rank", "nranks"):
        if k in doc and (type(doc[k]) is not int):
            raise TraceError.at_line(path, json_line(path, k),
                                     f'expected an integer "{k}", got {doc[k]!r}')
    if cpus_key in doc and not isinstance(doc[cpus_key], list):
        raise TraceError.at_line(path, json_line(path, cpus_key), f'expected "{cpus_key}" to be a '
                                 f'list of {{"index", "phyid"}} objects, got {doc[cpus_key]!r}')


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
    if not os.path.lexists(path):
        return {}, None
    text = read_text(path, "ovnisync clock offsets")
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
    """The document's metadata version must be one its file layout uses."""
    v = doc.get("version")
    if v in versions and type(v) is int:
        return
    want = " or ".join(map(str, versions))
    if v in METADATA_VERSIONS:
        raise TraceError.at_line(path, json_line(path, "version"),
                                 f'expected "version" {want} for this file layout, got {v!r}')
    raise TraceError.at_line(path, json_line(path, "version"),
                             f'expected "version" {want}, got {v!r}: not an ovni metadata '
                     f'version partrace knows (supported: {", ".join(map(str, METADATA_VERSIONS))}'
                     ', written by libovni 1.0 to 1.14)')


def json_line(path: Path, key: str) -> int:
    """The line of a JSON document where ``"key"`` first appears (for errors about its value;
    1 when it does not: the document as a whole)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return 1
    at = text.find(f'"{key}"')
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def relpath(path: Path) -> str:
    """``path`` from its ``loom.*`` folder on (how the source definitions name files)."""
    parts = path.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i].startswith("loom."):
            return "/".join(parts[i:])
    return str(path)

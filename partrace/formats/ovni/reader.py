"""The ovni TraceReader: one unit per thread stream, one location per thread.

Location ids: threads are 1..T in unit-key order (loom name, then pid, then
tid); their processes follow as T+1..T+P and the looms as T+P+1..T+P+L, so
every thread's parent is its process and every process's parent its loom.
A thread's tid, pid and loom are one value per location: they are rows of the
``threads`` definitions table (keyed by ``location``), not event columns that
would repeat them in every event of every window, exchange and output.
``time`` is the stream clock (ns) plus the loom's clock offset when the trace
carries ``clock-offsets.txt`` (``threads/clock_offset``): the raw clock is
``time - clock_offset`` (mod 2**64), so no column repeats it.
"""
from __future__ import annotations

import os
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import TraceError
from ...model import (LOCATION_COLUMNS, REGION_COLUMNS, BYTES, STR, Column, Definitions,
                      Kind, Schema, Table, column, conform)
from ..base import TraceReader, Unit, repeated
from . import layout

CHUNK = 1 << 22          # most events per decoded chunk (else chunk_bytes of stream decide)
NO_CPU = -1


def _u1(name: str, description: str) -> Column:
    return Column(name, "uint8", description)


EVENT_COLUMNS = [
    column("time", description="event clock plus its loom's clock offset"),
    column("location"), column("seq"), column("kind"),
    column("region", description="region of a known model's MCV (regions/id): the region entered/left, "
           "or the point event's own; 0 = unknown MCV"),
    Column("cpu", "int32", "logical CPU index in the loom (cpus/index) the thread runs on, "
           "from its own OHx/OAs/OHe events; -1 = unknown"),
    _u1("flags", "flags nibble of the event's first byte (0x10 = jumbo)"),
    _u1("model", "MCV model character (byte)"),
    _u1("category", "MCV category character (byte)"),
    _u1("value", "MCV value character (byte)"),
    _u1("payload_size", "payload bytes (0, 2..16; 4 for jumbo events: the jumbo length)"),
    Column("payload", ("u1", 16), "payload bytes, zero padded to 16"),
]
JUMBO_COLUMNS = [
    column("time"), column("location"), column("seq"),
    Column("event_seq", "int64", "events/seq of the jumbo event this data belongs to", refers="events"),
    _u1("model", "MCV model character"), _u1("category", "MCV category character"),
    _u1("value", "MCV value character"),
    column("size", description="jumbo data length"),
    Column("data", BYTES, "jumbo data"),
]


class OvniReader(TraceReader):
    format_name = "ovni"
    locations_in_one_unit = True     # a thread's events are all in its stream
    surveyed = True         # each rank reads the metadata documents of its threads

    def __init__(self, path: str | os.PathLike):
        super().__init__(path)
        root = layout.trace_dir(self.path)
        if root is None:
            raise TraceError(self.path, None,
                             "expected an ovni trace folder (holding loom.* folders)")
        self.root = root
        self._streams: list[layout.Stream] | None = None

    # -- layout ---------------------------------------------------------------
    def streams(self) -> list[layout.Stream]:
        """The thread streams in unit-key order (cached)."""
        if self._streams is None:
            self._streams = sorted(layout.find_streams(self.root), key=_key)
            if not self._streams:
                raise TraceError(self.root, None,
                                 "expected thread streams in loom.*/proc.* folders")
        return self._streams

    def holdings(self, defs: Definitions) -> dict[str, dict[str, int]]:
        """Threads per process: layout v1 lists no thread (a deleted stream is not seen)."""
        names = dict(zip(defs.tables["locations"]["id"].tolist(),
                         defs.tables["locations"]["name"].tolist()))
        threads = defs.tables["threads"]["process"].tolist()
        out: dict[str, int] = {}
        for proc in threads:
            out[str(names.get(proc, proc))] = out.get(str(names.get(proc, proc)), 0) + 1
        return {"threads per process": out}

    def source_files(self) -> list[Path]:
        """The streams, their metadata and clock-offsets.txt: not what else lies in
        the folder (ovniemu's Paraver output, dumps), which is not part of the trace."""
        files = {s.obs for s in self.streams()}
        files.update(p for s in self.streams() for p in layout.metadata_files(s))
        offsets = self.root / layout.CLOCK_OFFSETS
        if os.path.lexists(offsets):
            files.add(offsets)
        return sorted(files)

    def _ids(self) -> tuple[dict, dict]:
        """Location ids of processes (by (loom, pid)) and looms (by name)."""
        streams = self.streams()
        t = len(streams)
        procs = list(dict.fromkeys((s.loom, s.pid) for s in streams))
        looms = list(dict.fromkeys(s.loom for s in streams))
        return ({p: t + 1 + i for i, p in enumerate(procs)},
                {lm: t + len(procs) + 1 + i for i, lm in enumerate(looms)})

    def units(self) -> list[Unit]:
        proc_ids, loom_ids = self._ids()
        return [Unit(_key(s), s.obs.stat().st_size,
                     {"path": str(s.obs), "loom": s.loom, "pid": s.pid, "tid": s.tid,
                      "location": i + 1, "process": proc_ids[(s.loom, s.pid)],
                      "loom_id": loom_ids[s.loom],
                      "metadata": [str(p) for p in layout.metadata_files(s)]})
                for i, s in enumerate(self.streams())]

    def survey(self, unit: Unit) -> dict[str, dict]:
        """The thread's metadata documents (and its process's), by relative path."""
        return {layout.relpath(Path(p)): layout.load_json(Path(p))
                for p in unit.info["metadata"]}

    @staticmethod
    def combine(a: dict, b: dict) -> dict:
        return {**a, **b}       # a path's document is the same whoever read it

    # -- definitions ----------------------------------------------------------
    def read_definitions(self, survey=None) -> Definitions:
        from . import mcv
        streams = self.streams()
        read = survey or {}
        procs, docs = layout.gather_processes(
            streams, lambda p: read[k] if (k := layout.relpath(p)) in read else layout.load_json(p))
        cpus = layout.loom_cpus(procs)
        proc_ids, loom_ids = self._ids()
        offsets, offsets_text = layout.read_clock_offsets(self.root, list(loom_ids))
        if offsets_text is None and len(loom_ids) > 1:
            warnings.warn(f"{self.root}: {len(loom_ids)} looms but no {layout.CLOCK_OFFSETS}; "
                          "their clocks are used uncorrected (offset 0)", stacklevel=2)
        for s in streams:
            meta = docs.get(layout.relpath(s.meta)) if s.meta is not None else None
            o = meta.get("ovni") if meta is not None else None
            if meta is not None and not (isinstance(o, dict) and o.get("finished") == 1):
                warnings.warn(f"{s.meta}: stream not marked finished (the program did not "
                              "close it); its last events may be missing", stacklevel=2)

        n = len(streams)
        ids = list(range(1, n + 1)) + list(proc_ids.values()) + list(loom_ids.values())
        names = ([f"{s.loom}/{s.pid}/{s.tid}" for s in streams]
                 + [f"{lm}/{pid}" for lm, pid in proc_ids] + list(loom_ids))
        parents = ([proc_ids[(s.loom, s.pid)] for s in streams]
                   + [loom_ids[lm] for lm, _ in proc_ids] + [0] * len(loom_ids))
        locations = _table(LOCATION_COLUMNS, id=ids, name=names, parent=parents)

        rows = mcv.parse()
        model_ids = {c: i + 1 for i, c in enumerate(mcv.MODELS)}
        # enter/leave regions, then one region per point event (ids follow, see mcv.parse)
        enters = [r for r in rows if r["kind"] == "<"]
        points = [r for r in rows if r["kind"] == "."]
        regions = _table(REGION_COLUMNS, id=[r["region"] for r in enters + points],
                         name=[f"{r['model']}: {r['name']}" for r in enters]
                         + [f"{r['model']}: {r['name']} ({r['mcv']})" for r in points],
                         group=[model_ids[r["mcv"][0]] for r in enters + points])
        kinds = {"<": Kind.ENTER, ">": Kind.LEAVE, ".": Kind.EVENT}
        mcv_table = _table(MCV_COLUMNS, **{k: [r[k] for r in rows] for k in (
            "code", "mcv", "model", "category", "value", "signature", "region")},
            description=[r["name"] for r in rows], kind=[int(kinds[r["kind"]]) for r in rows])
        models = _table(MODEL_COLUMNS, id=list(model_ids.values()), code=list(mcv.MODELS),
                        name=[m[0] for m in mcv.MODELS.values()],
                        version=[m[1] for m in mcv.MODELS.values()])
        by_key = {(p.loom, p.pid): p for p in procs}
        processes = _table(PROCESS_COLUMNS, location=list(proc_ids.values()),
                           loom=[loom_ids[lm] for lm, _ in proc_ids],
                           pid=[pid for _, pid in proc_ids],
                           app_id=[_int(by_key[k].facts.get("app_id")) for k in proc_ids],
                           rank=[_int(by_key[k].facts.get("rank")) for k in proc_ids],
                           nranks=[_int(by_key[k].facts.get("nranks")) for k in proc_ids],
                           layout=[by_key[k].version for k in proc_ids])
        cpu_rows = [(loom_ids[lm], i, phy) for lm, cs in cpus.items() for i, phy in cs]
        cpu_table = _table(CPU_COLUMNS, loom=[r[0] for r in cpu_rows],
                           index=[r[1] for r in cpu_rows], phyid=[r[2] for r in cpu_rows])

        attrs = {
            "layout_versions": sorted({p.version for p in procs}),
            "ticks_per_second": 1_000_000_000,
            "clock": "per-loom stream clock in ns (CLOCK_MONOTONIC unless libovni used the TSC)",
            "clock_offsets": {lm: offsets.get(lm, 0) for lm in loom_ids},
            "clock_offsets_applied": offsets_text is not None,
            "looms": len(loom_ids), "processes": len(proc_ids), "threads": n,
            "location_ids": "threads 1..T by (loom, pid, tid); then processes; then looms",
            "cpu_column": "logical CPU index from the thread's own OHx/OAs/OHe events",
        }
        source = {"metadata": docs, "clock_offsets_txt": offsets_text,
                  "streams": [{"loom": s.loom, "pid": s.pid, "tid": s.tid, "layout": s.version,
                               "path": layout.relpath(s.obs)} for s in streams]}
        groups = Table({"id": models["id"], "name": models["name"]})   # a region's group is its model
        threads = _table(THREAD_COLUMNS, location=list(range(1, n + 1)),
                         process=[proc_ids[(s.loom, s.pid)] for s in streams],
                         loom=[loom_ids[s.loom] for s in streams],
                         pid=[s.pid for s in streams], tid=[s.tid for s in streams],
                         clock_offset=[offsets.get(s.loom, 0) for s in streams])
        return Definitions("ovni", {"locations": locations, "regions": regions,
                                    "region_groups": groups, "mcv": mcv_table,
                                    "models": models, "threads": threads,
                                    "processes": processes, "cpus": cpu_table},
                           attrs, source)

    def schema(self, defs: Definitions) -> Schema:
        return {"events": EVENT_COLUMNS, "jumbo": JUMBO_COLUMNS}

    # -- events ---------------------------------------------------------------
    def decode(self, unit: Unit, defs: Definitions) -> Iterator[dict[str, Table]]:
        from . import scan
        info = unit.info
        path = info["path"]
        buf, big = scan.open_stream(Path(path))
        count, end, status, last = scan.check(buf, big)
        if status == scan.TRUNCATED:
            _check_cut(path, buf, end, last, big, count, _finished(info, defs))
        elif count == 0:
            # ovni's emulator warns of the same ("stream has zero events"): a thread that
            # traced nothing, or a stream cut right after its header
            warnings.warn(f"{path}: byte {end}: no events after the stream's header (cut "
                          f"short, or a thread that traced nothing)", stacklevel=2)

        known = _known_mcvs()
        offset = int(defs.attrs.get("clock_offsets", {}).get(info["loom"], 0))
        # the thread's location: one value per chunk, held as a view of it (no pass per event)
        constant = {"location": info["location"]}
        constant_columns = {c.name: c for c in EVENT_COLUMNS if c.name in constant}
        cpu_column = next(c for c in EVENT_COLUMNS if c.name == "cpu")
        ev_cols = self.selected("events", [c.name for c in EVENT_COLUMNS])
        jumbo_cols = self.selected("jumbo", [c.name for c in JUMBO_COLUMNS])
        if ev_cols is None and jumbo_cols is None:
            return
        # a fold that reads only event keys (a profile, messages, info) gets them from a
        # lighter pass (no payload, flags or CPU), the jumbo events' keys too
        keys_only = (set(ev_cols or ()) <= {*scan.KEY_COLUMNS, "seq", *constant}
                     and set(jumbo_cols or ()) <= set(scan.JUMBO_KEY_COLUMNS))
        cpu_carry, jseq, at = NO_CPU, 0, scan.HEADER
        # bigger chunks are faster (fewer, larger arrays; the kernel is one pass either way)
        step = max(1, min(CHUNK, self.chunk_bytes * count // max(end - scan.HEADER, 1)))
        for lo in range(0, max(count, 1), step):
            n = max(0, min(step, count - lo))
            if keys_only:
                g, j, at = scan.event_keys(buf, at, n, big, offset, known)
            else:
                g, j, j_at, at, next_carry = scan.events(buf, at, n, big, offset, known,
                                                         cpu_carry)
                if isinstance(g["cpu"], int):       # one CPU throughout: one value
                    g["cpu"] = repeated(g["cpu"], n, cpu_column)
                cpu_carry = next_carry
            if "seq" in (ev_cols or ()) or jumbo_cols is not None:
                g["seq"] = np.arange(lo, lo + n, dtype=np.int64)
            for name, value in constant.items():
                if name in (ev_cols or ()):
                    g[name] = repeated(value, n, constant_columns[name])
            out = {}
            if ev_cols is not None:
                out["events"] = conform(Table({c: g[c] for c in ev_cols}),
                                        [c for c in EVENT_COLUMNS if c.name in ev_cols])
            if jumbo_cols is not None:
                where = repeated(info["location"], len(j), constant_columns["location"])
                jumbo = {"time": g["time"][j], "location": where,
                         "seq": np.arange(jseq, jseq + len(j), dtype=np.int64),
                         "event_seq": g["seq"][j], "model": g["model"][j],
                         "category": g["category"][j], "value": g["value"][j]}
                if not keys_only:
                    jumbo["size"], jumbo["data"] = scan.jumbo_data(buf, j_at, g["payload"][j],
                                                                   big)
                out["jumbo"] = conform(Table({c: jumbo[c] for c in jumbo_cols}),
                                       [c for c in JUMBO_COLUMNS if c.name in jumbo_cols])
                jseq += len(j)
            yield out


def _finished(info: dict, defs: Definitions) -> bool:
    """The stream's own metadata says its writer closed it (``"finished": 1``, v2 and v3)."""
    docs = (defs.source or {}).get("metadata", {})
    for p in info["metadata"]:
        doc = docs.get(layout.relpath(Path(p)))
        o = doc.get("ovni") if isinstance(doc, dict) else None
        if isinstance(o, dict) and o.get("finished") == 1:
            return True
    return False


def _check_cut(path, buf, end: int, last: int, big: bool, count: int, finished: bool) -> None:
    """A stream that ends inside an event: what a crashed writer leaves (ovni's emulator
    refuses it; kept here up to the last whole event, with a warning), unless the tail is
    no plausible start of an event or the writer said it closed the stream: damage."""
    from . import scan
    why = scan.implausible_cut(buf, end, last, big)
    if why is None and finished:
        why = "its metadata says the writer closed it (finished), so no crash cut it"
    if why is not None:
        raise TraceError.at_byte(path, end, f"the last {len(buf) - end} bytes claim an event "
                                            f"longer than the stream, and {why}: damaged "
                                            f"after {count} whole events")
    warnings.warn(f"{path}: byte {end}: stream ends inside an event (half-written, as "
                  f"left by a crashed program); dropped its {len(buf) - end} bytes, "
                  f"kept the {count} whole events before it", stacklevel=3)


@lru_cache(maxsize=1)
def _known_mcvs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """scan.mcv_lookup of the known MCVs (others are point events): the same for every
    stream."""
    from . import mcv, scan
    return scan.mcv_lookup(*mcv.lookup(), Kind.EVENT,
                           np.array([mcv.code(m) for m in mcv.SET_CPU], np.int64),
                           np.array([mcv.code(m) for m in mcv.CLEAR_CPU], np.int64))


def _key(s: layout.Stream) -> str:
    return f"{s.loom}/{s.pid:010d}/{s.tid:010d}"


def _int(v) -> int:
    return int(v) if isinstance(v, (int, float)) else -1


def _table(columns: list[Column], **values) -> Table:
    return Table({c.name: np.array(values[c.name], dtype=c.numpy_dtype()) if not c.is_object
                  else _objects(values[c.name]) for c in columns})


def _objects(items) -> np.ndarray:
    a = np.empty(len(items), object)
    a[:] = list(items)
    return a


MCV_COLUMNS = [
    Column("code", "int64", "model << 16 | category << 8 | value"),
    Column("mcv", STR, "the three MCV characters"),
    Column("model", STR, "model name"), Column("category", STR, "category name"),
    Column("value", STR, "value character"),
    Column("signature", STR, "payload fields ('+' = jumbo)"),
    Column("description", STR, "what the event means"),
    column("kind", description="kind given to events with this MCV"),
    column("region", description="region entered/left, or the point event's own (regions/id)"),
]
MODEL_COLUMNS = [Column("id", "int64", "model id (regions/group)"),
                 Column("code", STR, "model character"), Column("name", STR, "model name"),
                 Column("version", STR, "model version in ovni 1.14.0")]
THREAD_COLUMNS = [Column("location", "int64", "location id of the thread (events/location)"),
                  Column("process", "int64", "location id of its process (processes/location)"),
                  Column("loom", "int64", "location id of its loom"),
                  Column("pid", "int64", "process id"),
                  Column("tid", "int64", "thread id"),
                  Column("clock_offset", "int64", "ns added to the stream clock to make "
                         "events/time (its loom's offset); the raw clock is time - clock_offset "
                         "(mod 2**64)")]
PROCESS_COLUMNS = [Column("location", "int64", "location id of the process"),
                   Column("loom", "int64", "location id of its loom"),
                   Column("pid", "int64", "process id"),
                   Column("app_id", "int64", "application id; -1 = not given"),
                   Column("rank", "int64", "rank; -1 = not given"),
                   Column("nranks", "int64", "number of ranks; -1 = not given"),
                   Column("layout", "int64", "trace layout version of its folder (1, 2, 3)")]
CPU_COLUMNS = [Column("loom", "int64", "location id of the loom"),
               Column("index", "int64", "logical CPU index (events/cpu)"),
               Column("phyid", "int64", "OS CPU number")]

"""OTF2 input written back as OTF2: every record as its own record type with its raw
arguments (reader.py's ``record`` and ``args`` columns), its arrays (the ``values`` table)
and its attribute list (the ``attributes`` table), and the source's global definitions
(sourcedefs.py).  The OTF2 sink hands its windows here when ``replay_of`` says the input
was OTF2 (the sink never asks the source format itself).

A record's values and attributes have its time and location, so a window cut falls between
them only at the cut key's (time, location): those rows are held for the next window.

Metric records stay where the source has them, but on a thread (a CPU_THREAD location)
only a record of the first metric class that stands right before a record of its time
(another than a Metric) stays there: readers that take a thread's metrics from its records
as the columns of the event they go with (Pipit) read no other.  Every other Metric record
of a thread goes, in its order, to the thread's metric location (LOCATION_TYPE_METRIC, in
the thread's location group, named "<thread> metrics", refs after the source's largest),
defined only where it has records, as the OTF2 output of other inputs places them.
"""
from __future__ import annotations

import numpy as np

from ...errors import PartraceError
from ...kernels.cacheload import njit
from ...kernels.jit import import_numba
from . import records as R
from .definitions import Layout
from .sourcedefs import is_own_source, write_source_global
from .writers import write_record

types = import_numba().types      # numba imported as a kernel's make (the kernels phase)

SIDE = ("values", "attributes")
COLUMNS = {"events": ("location", "time", "seq", "ticks", "record", "args"),
           "values": ("location", "time", "event_seq", "index", "type", "value"),
           "attributes": ("location", "time", "event_seq", "attribute", "type", "value")}
METRIC = 1 + [n for n, _ in R.RECORDS].index("Metric")
PROGRAM_BEGIN = 1 + [n for n, _ in R.RECORDS].index("ProgramBegin")
ARRAY_COUNT = {METRIC: 1, PROGRAM_BEGIN: 1}     # the argument that says how many values

_u64, _u32, _u8, _rc = types.uint64, types.uint32, types.uint8, types.int32
_new_list = types.ExternalFunction("OTF2_AttributeList_New", _u64())
_delete_list = types.ExternalFunction("OTF2_AttributeList_Delete", _rc(_u64))
# (list, attribute ref, OTF2_Type, OTF2_AttributeValue: an 8-byte union, passed as integer)
_add = types.ExternalFunction("OTF2_AttributeList_AddAttribute", _rc(_u64, _u32, _u8, _u64))
_clear = types.ExternalFunction("OTF2_AttributeList_RemoveAllAttributes", _rc(_u64))


class SourceLayout(Layout):
    """The planned layout with locations as the source's OTF2 refs (event writers and file
    names); rows still name partrace locations (``ids``, in the order of the refs)."""
    ids: np.ndarray = None
    mids: np.ndarray = None         # each location's metric location ref

    @property
    def metric_ids(self) -> np.ndarray:
        return self.mids

    def location_index(self, locations):
        return Layout.lookup(self, self.ids, np.asarray(locations))


GROUP_ROW = 0xFFFFFFFFFFFFFFFF     # OTF2_UNDEFINED_LOCATION: never a location's ref
CPU_THREAD, LOCATION_TYPE_METRIC = 1, 3     # OTF2_LocationType


def location_refs(defs) -> dict[int, int]:
    """{partrace location id: its OTF2 ref}.  (HDF5 files of earlier versions have no ``ref``
    column: their ids were the refs plus ``ref_shift["location"]``.)"""
    locs = defs.tables["otf2_locations"]
    ids = locs["id"].tolist()
    if "ref" in locs.names:
        return dict(zip(ids, locs["ref"].tolist()))
    shift = int(defs.attrs["ref_shift"].get("location", 0))
    return {i: i - shift for i in ids}


def replay_of(defs, layout: Layout) -> Replay | None:
    """A Replay when the definitions are OTF2's own (OTF2 input), else None."""
    if not is_own_source(defs):
        return None
    return Replay(defs, layout)


class Replay:
    tables = frozenset(SIDE)    # routed to their location's owner like the events

    def __init__(self, defs, layout: Layout):
        self.source = defs.source
        self.layout = SourceLayout(**vars(layout))
        ref_of = location_refs(defs)
        # the source's locations; the other rows of the locations table stand for their
        # location groups (globaldefs.location_rows): no ref, no event file (GROUP_ROW)
        self.refs = frozenset(ref_of.values())
        self.layout.ids = layout.loc_ids
        self.layout.loc_ids = np.asarray([ref_of.get(i, GROUP_ROW) for i in
                                          layout.loc_ids.tolist()], np.uint64)
        self.held = None
        # metric locations: refs after the largest of the source's (the same on any rank)
        n = len(self.layout.loc_ids)
        top = max(self.refs, default=-1)
        self.layout.mids = np.asarray([top + 1 + k for k in range(n)], np.uint64).astype(np.int64)
        rows = {r["ref"]: r for r in self.source.get("locations", [])}
        self.loc_rows = [rows.get(ref) for ref in self.layout.loc_ids.tolist()]
        self.thread = np.asarray([r is not None and r.get("type") == CPU_THREAD
                                  for r in self.loc_rows] or [False], bool)
        # the first metric class (a reader's "the" metrics of a thread): -1 where none
        self.first_class = next((r["ref"] for r in self.source.get("metrics", [])
                                 if r.get("type") == "MetricClass"), -1)
        self.archive = None         # the sink's EventArchive: metric locations' writers
        self.all_writers = None     # per location of this rank: its writer, its metric one's
        self.opened: set[int] = set()

    def has_location(self, ref: int) -> bool:
        """Whether ``ref`` is one of the source's OTF2 locations, or a metric location this
        rank wrote records to."""
        return ref in self.refs or ref in self.opened

    # -- events ------------------------------------------------------------------------
    def write(self, tables: dict, next_keys, writers, first_mine: int, counts) -> None:
        cols = {name: self._columns(tables, name) for name in COLUMNS}
        if self.held is not None:
            cols = {n: {c: np.concatenate([self.held[n][c], v]) for c, v in cols[n].items()}
                    for n in COLUMNS}
            self.held = None
        cut = _cut_of(next_keys)
        if cut is not None:
            later = {n: (cols[n]["time"] == cut[0]) & (cols[n]["location"] == cut[1])
                     for n in COLUMNS}
            if any(m.any() for m in later.values()):
                self.held = {n: {c: v[later[n]] for c, v in cols[n].items()} for n in COLUMNS}
                cols = {n: {c: v[~later[n]] for c, v in cols[n].items()} for n in COLUMNS}
        self._write(cols, writers, first_mine, counts)

    def _columns(self, tables, name):
        t = tables.get(name)
        if t is None or not len(t):
            return {c: np.zeros((0, R.MAX_ARGS) if c == "args" else 0, np.uint64 if c in (
                "args", "value") else np.int64) for c in COLUMNS[name]}
        return {c: np.asarray(t[c]) for c in COLUMNS[name]}

    def _write(self, cols, writers, first_mine, counts) -> None:
        ev = cols["events"]
        n = len(ev["seq"])
        if not n:
            if any(len(cols[s]["event_seq"]) for s in SIDE):
                self._orphan(cols)
            return
        li, ok = self.layout.location_index(ev["location"])
        if not ok.all():
            loc = int(ev["location"][np.flatnonzero(~ok)[0]])
            raise PartraceError(f"events: location {loc} is not in the trace's locations table")
        # each event's (location, seq) as one sortable key; its side rows by the same key
        key = li.astype(np.int64) << 40 | ev["seq"].astype(np.int64)
        order_ev = np.argsort(key, kind="stable")
        side = {}
        for s in SIDE:
            c = cols[s]
            si, sok = self.layout.location_index(c["location"])
            skey = si.astype(np.int64) << 40 | c["event_seq"].astype(np.int64)
            pos = np.searchsorted(key[order_ev], skey)
            found = (pos < n) & sok
            found[found] = key[order_ev][pos[found]] == skey[found]
            if not found.all():
                self._orphan(cols)
            o = np.lexsort((c["index"] if s == "values" else np.arange(len(skey)), skey))
            skey = skey[o]
            start = np.searchsorted(skey, key, "left")
            count = np.searchsorted(skey, key, "right") - start
            side[s] = (start, count, {k: v[o] for k, v in c.items()})
        args = np.ascontiguousarray(ev["args"], dtype=np.uint64)
        record = np.asarray(ev["record"]).astype(np.int64)
        vstart, vcount, vals = side["values"]
        for code, j in ARRAY_COUNT.items():
            rows = record == code
            bad = np.flatnonzero(rows & (vcount != (args[:, j] & (0xFF if code == METRIC
                                                                 else 0xFFFFFFFF))))
            if len(bad):
                i = bad[0]
                raise PartraceError(f"location {int(ev['location'][i])}, event "
                                    f"{int(ev['seq'][i])}: "
                                    f"{R.RECORDS[code - 1][0]} of {int(args[i, j])} values, "
                                    f"{int(vcount[i])} in the values table")
        if (vcount[(record != METRIC) & (record != PROGRAM_BEGIN)] > 0).any():
            raise PartraceError("values rows of an event that has no array (only Metric and "
                                "ProgramBegin records have values)")
        vtypes = np.ascontiguousarray(vals["type"], dtype=np.uint8)
        vvalues = np.ascontiguousarray(vals["value"], dtype=np.uint64)
        vrefs = vvalues.astype(np.uint32)           # ProgramBegin: string refs, 32 bits
        astart, acount, attrs = side["attributes"]
        # each location's rows in seq order (writers are independent)
        order = np.lexsort((ev["seq"], li))
        writers, at = self._writers(writers, counts, li - first_mine, ev["time"], record, args,
                                    order, first_mine)
        rc, row = replay_rows(order, writers, at,
                              np.asarray(ev["ticks"], np.uint64), record, args,
                              vstart, vtypes.ctypes.data, vvalues.ctypes.data, vrefs.ctypes.data,
                              astart, acount,
                              np.ascontiguousarray(attrs["attribute"], dtype=np.uint32),
                              np.ascontiguousarray(attrs["type"], dtype=np.uint8),
                              np.ascontiguousarray(attrs["value"], dtype=np.uint64), counts)
        if rc:
            from .library import error_name
            what = "no such record type" if rc == -1 else error_name(rc)
            raise PartraceError(f"location {int(ev['location'][row])}, event "
                                f"{int(ev['seq'][row])}: the OTF2 library refused the record "
                                f"({what})")

    def _writers(self, writers, counts, loc, time, record, args, order, first_mine):
        """The writers and each row's place among them: with metric locations (``counts``
        has two per location) a location's at 2k, its metric location's at 2k + 1, for the
        Metric records that do not stay on their thread (see the module's doc)."""
        writers = np.asarray(writers, np.uint64)
        if len(counts) != 2 * len(writers):
            return writers, loc
        if self.all_writers is None:
            self.all_writers = np.zeros(2 * len(writers), np.uint64)
            self.all_writers[0::2] = writers
        n = len(order)
        r, t, li = record[order], time[order], loc[order]
        metric = r == METRIC
        # the next record of the same location (seq order) has the time and is no Metric
        before = np.zeros(n, bool)
        before[:-1] = (li[1:] == li[:-1]) & (t[1:] == t[:-1]) & (r[1:] != METRIC)
        stays = before & self.thread[li + first_mine] \
            & (args[order, 0].astype(np.int64) == self.first_class)
        moved = np.zeros(n, bool)
        moved[order] = metric & ~stays & self.thread[li + first_mine]
        for k in np.unique(loc[moved]).tolist():
            if not self.all_writers[2 * k + 1]:
                ref = int(self.layout.mids[first_mine + k])
                self.all_writers[2 * k + 1] = self.archive.writer(ref)
                self.opened.add(ref)
        return self.all_writers, 2 * loc + moved

    def _orphan(self, cols):
        raise PartraceError("values or attributes rows whose event (location, event_seq) is not "
                            "in the events table: they would be lost")

    def finish(self) -> None:
        if self.held is not None and any(len(v["time"]) for v in self.held.values()):
            raise PartraceError("OTF2 replay: rows held for a later window that never came")

    # -- definitions -------------------------------------------------------------------
    def write_global(self, folder, name, counts, creator) -> None:
        """The source's definitions, and those of the metric locations that have records
        (``counts``: per location, or per location and its metric location)."""
        refs, counts, source = self.layout.loc_ids, np.asarray(counts, np.int64), self.source
        if len(counts) == 2 * len(refs):
            extra = np.flatnonzero(counts[1::2] > 0)
            source = self._with_metric_locations(extra.tolist())
            refs = np.concatenate([refs, self.layout.mids[extra].astype(np.uint64)])
            counts = np.concatenate([counts[0::2], counts[1::2][extra]])
        write_source_global(folder, name, source, refs, counts, creator)

    def _with_metric_locations(self, extra: list) -> dict:
        """The source form with a METRIC location for each location index in ``extra``
        (its name a new string where the source has no such text)."""
        if not extra:
            return self.source
        strings = list(self.source.get("strings", []))
        known = {r["name"] for r in strings}
        top = max((r["ref"] for r in strings), default=-1)
        locations = list(self.source.get("locations", []))
        for k in extra:
            row = self.loc_rows[k]
            name = f"{row['name']} metrics"
            if name not in known:
                top += 1
                strings.append({"type": "String", "ref": top, "name": name})
                known.add(name)
            locations.append({"type": LOCATION_TYPE_METRIC, "ref": int(self.layout.mids[k]),
                              "name": name, "number_of_events": 0, "group": row["group"]})
        return {**self.source, "strings": strings, "locations": locations}


def _cut_of(next_keys):
    """The (time, location) of the first key of later windows (None: no later rows)."""
    if not next_keys:
        return None
    keys = [k for k in next_keys.values() if k is not None]
    if not keys:
        return None
    k = min(keys)       # destination mode: one cut key for every table
    return int(k[0]), int(k[1])


@njit(cache=True)
def replay_rows(order, writers, loc, ticks, record, args, vstart, vtypes_at, vvalues_at,
                vrefs_at, astart, acount, aref, atype, avalue, counts):
    """Row ``order[k]`` to ``writers[loc]`` as record ``record`` with ``args``, its values
    from ``vstart`` (Metric: OTF2_Type bytes and 8-byte values; ProgramBegin: 32-bit string
    refs) and its ``acount`` attributes from ``astart``; counts records per location.
    Returns (0, -1) or (the library's error code, or -1: unknown record, the row)."""
    alist = _new_list()
    rc = 0
    bad = -1
    for k in range(len(order)):
        i = order[k]
        at = np.uint64(0)
        for j in range(astart[i], astart[i] + acount[i]):
            rc = _add(alist, aref[j], atype[j], avalue[j])
            if rc != 0:
                break
            at = alist
        if rc != 0:
            bad = i
            break
        code = record[i]
        values = vrefs_at + vstart[i] * 4 if code == PROGRAM_BEGIN else vvalues_at + vstart[i] * 8
        rc = write_record(code, np.uint64(writers[loc[i]]), at, np.uint64(ticks[i]), args[i],
                          np.uint64(vtypes_at + vstart[i]), np.uint64(values))
        if at != 0:
            _clear(alist)
        if rc != 0:
            bad = i
            break
        counts[loc[i]] += 1
    _delete_list(alist)
    return rc, bad

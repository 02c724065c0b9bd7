"""OTF records for a trace of another format, from the generic model only.

The writer knows no reader: everything here is derived from model tables,
model.DEFINITION_TABLES, column names and dtypes.  The rules:

Definitions
  locations -> DefProcess (token = location id, which the model keeps >= 1
  as OTF needs; parent 0 = none); regions ->
  DefFunction; region_groups -> DefFunctionGroup (a group used by a region
  but not defined is "group N"; regions of group 0 go to a "default" group);
  communicators + communicator_members -> DefProcessGroup; collectives ->
  DefCollectiveOperation (the model's type codes are OTF's); counters ->
  DefCounterGroup + DefCounter; files -> DefFileGroup + DefFile; one
  DefKeyValue per extra column; timer resolution 1e9 (rows carry ns);
  DefUniqueId = CRC-32 of all other definition lines (deterministic).
events
  A kind with an OTF record gets it (ENTER/LEAVE -> E/L, SEND/RECV -> S/R,
  COLLECTIVE -> COP, COUNTER -> CNT, FILE_* and RMA_* their records, ...).
  A point event (EVENT) with a region is a marker (below).  Other kinds OTF
  has no record for (EVENT with region 0, SAMPLE, MARKER in events, ...)
  become NoOp records carrying their fields as key-values: a point event has
  no value with the meaning of a counter.
point events
  An EVENT row with region != 0 is a marker spot in the marker file of its
  process's stream, NAME.<s>.marker (the OTF library reads NAME.0.marker,
  then every listed stream's; see marker_spots): marker id = region id, one
  DefMarker per region used in NAME.0.marker (the region's name, type 3 =
  hint), the row's time and location, text = "column=value ..." of its
  non-zero extra columns (decimal; byte arrays as hex without trailing zero
  bytes), and those columns also as key-value lines before the spot, as for
  events.  Spots are in (time, location, seq) order in each file.
extra columns
  Every numeric events column the row's record has no field for (the
  format's own columns, and common ones such as ticks) is a key-value pair in
  front of the record when it is non-zero (absent reads back as 0); the KV
  type follows the dtype (floats as OTF_FLOAT/OTF_DOUBLE bits).  A uint8
  sub-array column is a byte array (100 bytes per pair, as
  OTF_KeyValueList_appendByteArray).  Text (object) columns are dropped.
other tables
  Each table's role is declared in its schema (model.table_role).  Attached
  tables (a column `refers` to records of another table: DUMPI's per-call
  argument tables, ovni's jumbo payloads) hold parts of events already
  written and are left out, as are other record tables (a `kind` column, or
  a column naming a definition).  A sample table
  (Role.SAMPLES): each numeric 1-D column other than the keys is a counter
  "TABLE.COLUMN" (ids after the format's own counters; one counter group per
  table), written as CNT records at the row's time on the row's location;
  integers as signed 64-bit, floats as doubles (the DefCounter properties say
  which).  Text and sub-array columns of sample tables are dropped.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ...errors import PartraceError
from ...model import KEY_COLUMNS, Definitions, Kind, Role, Schema, Table, tables_of_role
from . import grammar as G
from .taken import take_rows

ROW_COLUMNS = ("time", "location", "seq", "kind")
KV_TYPE = {"i1": 1, "u1": 2, "i2": 3, "u2": 4, "i4": 5, "u4": 6, "i8": 7, "u8": 8, "f4": 9, "f8": 10, "b1": 2}
BYTE_ARRAY, MAX_ARRAY = 11, 100
COUNTER_ABS_POINT = 1 | 4                      # OTF_COUNTER_TYPE_ABS | OTF_COUNTER_SCOPE_POINT
VARTYPE_SIGNED8, VARTYPE_DOUBLE = 32, 288
# a defined counter's DefCounter properties from the model's mode and value type (OTF has no
# relative kind: absolute, the model's default); OTF_COUNTER_TYPE_*, _SCOPE_*, _VARTYPE_*
COUNTER_KIND_BITS = {"accumulated": 0, "absolute": 1, "relative": 1}
COUNTER_SCOPE_BITS = {"start": 0, "point": 4, "last": 8, "next": 12}
COUNTER_VARTYPE_BITS = {"uint64": 0, "int64": VARTYPE_SIGNED8, "float32": 256,
                        "float64": VARTYPE_DOUBLE}
TICKS_PER_SECOND = 10**9


@dataclass
class KVColumn:
    name: str
    key: int
    type: int
    width: int          # 0: scalar; k: uint8 sub-array of k bytes


@dataclass
class Layout:
    """What the output of one non-OTF trace looks like (the same on every rank)."""

    kv: list[KVColumn] = field(default_factory=list)
    # sample table -> [(column, counter id, properties)]
    counters: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    counter_groups: dict[str, int] = field(default_factory=dict)
    prefix_arrays: tuple | None = None      # kv_prefix_arrays, once made



def check_location_ids(defs: Definitions) -> None:
    """OTF has no process 0: the model's location ids are >= 1 (a reader bug otherwise)."""
    ids = defs.tables["locations"]["id"]
    if len(ids) and int(ids.min()) < 1:
        raise PartraceError(f"{defs.format} trace: location id {int(ids.min())} < 1 cannot be an "
                            "OTF process")


def _ids(defs: Definitions, table: str, col: str = "id") -> list[int]:
    t = defs.tables.get(table)
    return [int(x) for x in t[col]] if t is not None and len(t) else []


def layout(defs: Definitions, schema: Schema) -> Layout:
    """Key-value keys, counters and marker regions of a trace (the same for every stream:
    a sink computes it once and shares it with its stream writers, see StreamWriter)."""
    check_location_ids(defs)
    lay = Layout()
    key = 1
    for c in schema["events"]:
        if c.name in ROW_COLUMNS or c.is_object:
            continue
        dt = np.dtype(c.dtype)
        if dt.subdtype is not None:
            if dt.base != np.uint8 or len(dt.shape) != 1:
                continue
            lay.kv.append(KVColumn(c.name, key, BYTE_ARRAY, int(dt.shape[0])))
        else:
            lay.kv.append(KVColumn(c.name, key, KV_TYPE[dt.str[1:]], 0))
        key += 1
    counter_id = max(_ids(defs, "counters") + [0]) + 1
    group_id = max(_ids(defs, "counters", "group") + [0]) + 2     # +1 is the default group
    for name in tables_of_role(schema, Role.SAMPLES):
        mine = []
        cols = schema[name]
        for c in cols:
            if c.name in KEY_COLUMNS or c.is_object or np.dtype(c.dtype).subdtype is not None:
                continue
            props = COUNTER_ABS_POINT | (VARTYPE_DOUBLE if np.dtype(c.dtype).kind == "f" else VARTYPE_SIGNED8)
            mine.append((c.name, counter_id, props))
            counter_id += 1
        if mine:
            lay.counters[name] = mine
            lay.counter_groups[name] = group_id
            group_id += 1
    return lay


# -- definitions ----------------------------------------------------------------------------

def _rec(typ: str, **fields) -> dict:
    return {"type": typ, "fields": fields, "where": 0, "kv": []}


def _names(defs: Definitions, table: str) -> dict[int, str]:
    t = defs.tables.get(table)
    return {} if t is None else {int(i): str(n) for i, n in zip(t["id"].tolist(), t["name"].tolist())}


def definition_text(defs: Definitions, schema: Schema) -> str:
    """The definition lines of a non-OTF trace (see the module docstring), as NAME.0.def holds
    them.  The families with a record per location, region or communicator are formatted
    column by column (grammar.format_records): a ROSS run defines tens of thousands."""
    lay = layout(defs, schema)
    recs = [_rec("DefCreator", creator=f"partrace (from {defs.format})"),
            _rec("DefTimerResolution", ticks_per_second=TICKS_PER_SECOND)]
    for c in lay.kv:
        recs.append(_rec("DefKeyValue", key=c.key, type=c.type, name=c.name,
                         description=f"events column {c.name} of the {defs.format} trace"))
    chunks = [_lines(recs)]
    loc = defs.tables["locations"]
    chunks.append(G.format_records(G.BY_NAME["DefProcess"], {
        "token": loc["id"].tolist(), "name": [str(n) for n in loc["name"].tolist()],
        "parent": loc["parent"].tolist()}, len(loc)))
    members: dict[int, list[int]] = {}
    cm = defs.tables.get("communicator_members")
    if cm is not None:
        for c, m in zip(cm["comm"].tolist(), cm["location"].tolist()):
            members.setdefault(int(c), []).append(int(m))
    comms = _names(defs, "communicators")
    chunks.append(G.format_records(G.BY_NAME["DefProcessGroup"], {
        "token": list(comms), "members": [members.get(i, []) for i in comms],
        "name": list(comms.values())}, len(comms)))
    reg = defs.tables["regions"]
    groups = _names(defs, "region_groups")
    used = sorted(set(reg["group"].tolist()))
    default = max(list(groups) + used + [0]) + 1
    recs = [_rec("DefFunctionGroup", token=g, name=groups.get(g, f"group {g}"))
            for g in sorted(set(groups) | {g for g in used if g})]
    if 0 in used:
        recs.append(_rec("DefFunctionGroup", token=default, name="default"))
    chunks.append(_lines(recs))
    chunks.append(G.format_records(G.BY_NAME["DefFunction"], {
        "token": reg["id"].tolist(), "group": [g or default for g in reg["group"].tolist()],
        "name": [str(n) for n in reg["name"].tolist()]}, len(reg)))
    recs = []
    col = defs.tables.get("collectives")
    if col is not None:
        for i, n, t in zip(col["id"].tolist(), col["name"].tolist(), col["type"].tolist()):
            recs.append(_rec("DefCollectiveOperation", token=i, name=str(n), type=t))
    recs += _counter_records(defs, lay)
    files = _names(defs, "files")
    if files:
        recs.append(_rec("DefFileGroup", token=1, name="files"))
        recs += [_rec("DefFile", token=i, name=n, group=1) for i, n in files.items()]
    chunks.append(_lines(recs))
    text = "".join(chunks)
    head = [_rec("DefVersion", version=[1, 12, 4, "salmon"]),
            _rec("DefUniqueId", uid=zlib.crc32(text.encode("utf-8", "surrogateescape")))]
    return _lines(head) + text


def _lines(recs: list[dict]) -> str:
    return "".join(G.format_record(G.BY_NAME[r["type"]], r["fields"]) for r in recs)


def _counter_records(defs: Definitions, lay: Layout) -> list[dict]:
    recs = []
    cnt = defs.tables.get("counters")
    if cnt is not None and len(cnt):
        gids = sorted(set(cnt["group"].tolist()))
        default = max(gids) + 1
        recs += [_rec("DefCounterGroup", token=g, name=f"group {g}") for g in gids if g]
        if 0 in gids:
            recs.append(_rec("DefCounterGroup", token=default, name="default"))
        props = _counter_properties(cnt)
        for i, n, u, g, p in zip(cnt["id"].tolist(), cnt["name"].tolist(), cnt["unit"].tolist(),
                                 cnt["group"].tolist(), props):
            recs.append(_rec("DefCounter", token=i, group=g or default, name=str(n), properties=p,
                             unit=str(u)))
    for table, cols in lay.counters.items():
        recs.append(_rec("DefCounterGroup", token=lay.counter_groups[table], name=table))
        for c, cid, props in cols:
            recs.append(_rec("DefCounter", token=cid, group=lay.counter_groups[table], name=f"{table}.{c}",
                             properties=props, unit=""))
    return recs


def _counter_properties(cnt: Table) -> list[int]:
    """Each defined counter's DefCounter properties: its mode (absolute_point where it has
    none) and value type, as OTF's bits."""
    from ...model import counter_value_types
    modes = [str(m) if str(m) else "absolute_point" for m in cnt["mode"]] if "mode" in cnt \
        else ["absolute_point"] * len(cnt)
    out = []
    for mode, vtype in zip(modes, counter_value_types(cnt)):
        kind, _, scope = mode.partition("_")
        out.append(COUNTER_KIND_BITS.get(kind, 1) | COUNTER_SCOPE_BITS.get(scope, 4)
                   | COUNTER_VARTYPE_BITS[vtype])
    return out


# -- records --------------------------------------------------------------------------------

@dataclass
class Rows:
    """One stream's event rows in output order, as the formatter wants them."""

    rec: np.ndarray           # grammar code per row
    ticks: np.ndarray         # uint64
    proc: np.ndarray          # process token
    fields: np.ndarray        # (n, k) uint64 record fields, and
    colof: np.ndarray         # the column of each record's field j (writekernel.field_columns)
    kv_on: np.ndarray         # (m, n) bool: key-value column j's rows at [j]
    kv_val: np.ndarray        # (m, n) uint64
    blob: np.ndarray          # uint8: rendered byte-array KV lines (a reused buffer: valid
    pre_a: np.ndarray         # until the next event_rows); their span in blob per row
    pre_b: np.ndarray


@dataclass
class Counters:
    """The CNT records of a stream's sample rows, in (time, location, table, seq) order: sample
    row k has c_count[k] records, counter ids c_id and values c_val [c_first[k]:...]; the
    formatter merges them with the event rows (after the events of the same time and process)."""

    ticks: np.ndarray         # uint64
    proc: np.ndarray          # int64
    first: np.ndarray         # int64
    count: np.ndarray         # int64
    id: np.ndarray            # uint64
    val: np.ndarray           # uint64

    @property
    def records(self) -> int:
        return len(self.id)


def _raw_bits(a: np.ndarray) -> np.ndarray:
    """Values as OTF writes them: floats as their IEEE bits, integers two's complement."""
    if a.dtype == np.float32:
        return a.view(np.uint32).astype(np.uint64)
    if a.dtype == np.float64:
        return a.view(np.uint64)
    if a.dtype.kind == "i":
        bits = a.dtype.itemsize * 8
        return (a.astype(np.int64).view(np.uint64) & np.uint64((1 << bits) - 1)) if bits < 64 else a.view(np.uint64)
    return a.astype(np.uint64)


def _put_raw_bits(a: np.ndarray, out: np.ndarray) -> None:
    """_raw_bits(a) written into the uint64 array `out`, with no temporary: a number's bits
    as the unsigned integer of its width, widened (the same as _raw_bits' mask)."""
    kind, size = a.dtype.kind, a.dtype.itemsize
    if a.dtype.isnative and (kind in "iu" or (kind == "f" and size in (4, 8))):
        out[:] = a.view(f"u{size}")
    else:
        out[:] = _raw_bits(a)


_CARRIES = {}


def _carries(name: str) -> np.ndarray:
    """Per record code: whether the record has a field for column `name`."""
    if name not in _CARRIES:
        _CARRIES[name] = np.array([any(f.col == name for f in r.fields) for r in G.STREAM_RECORDS])
    return _CARRIES[name]


def _carried(rec: np.ndarray, name: str) -> np.ndarray:
    """Which rows' records have a field for column `name`."""
    return _carries(name)[rec]


def event_rows(tab: Table, lay: Layout, record_codes, sel: np.ndarray | None = None) -> Rows:
    """The formatter's rows of `tab`'s rows `sel` (None: all); only the columns written are
    gathered, each once (taken.take_rows: from the sink's window straight into this order)."""
    from .writekernel import field_columns
    rows = tab if sel is None else take_rows(tab, sel)

    def get(name: str) -> np.ndarray:       # each column is read once here: not kept in `rows`
        return np.asarray(rows.column_once(name))

    cols = {name: get(name) for name in ("kind", "time", "location") if name in tab}
    n = len(cols["time"])
    rec = record_codes(cols, "events")

    def put(col, out):      # as astype(np.int64).view(np.uint64): integers cast straight
        a = get(col)
        out[:] = a if a.dtype.kind in "iub" else a.astype(np.int64)

    fields, colof = field_columns("events", rec, tab.__contains__, put)
    scalars = [c for c in lay.kv if not c.width]
    # (m, n): a column is filled by one contiguous write, not one strided across every
    # row's line of the matrix (every column is written below: not zeroed first)
    kv_on = np.empty((len(scalars), n), bool)
    kv_val = np.empty((len(scalars), n), np.uint64)
    for j, c in enumerate(scalars):
        _put_raw_bits(get(c.name), kv_val[j])
        np.not_equal(kv_val[j], 0, out=kv_on[j])
        if _carries(c.name).any():      # a column that is also some record's field
            kv_on[j] &= ~_carried(rec, c.name)
    return Rows(rec, cols["time"].astype(np.uint64), cols["location"].astype(np.int64), fields,
                colof, kv_on, kv_val, *_byte_arrays(get, lay, n))


HEX2 = np.array([list(f"{i:02x}".encode()) for i in range(256)], np.uint8)


def _byte_arrays(get, lay: Layout, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Byte-array KV lines by one compiled pass: (blob, start, end) per row (empty where all
    bytes are 0); get(name): the rows' column."""
    arrays = [c for c in lay.kv if c.width]
    if not arrays:
        return np.zeros(0, np.uint8), np.zeros(n, np.int64), np.zeros(n, np.int64)
    from .writekernel import byte_array_lines
    offsets = np.cumsum([0] + [c.width for c in arrays])
    if len(arrays) == 1:
        mat = np.ascontiguousarray(get(arrays[0].name)).reshape(n, arrays[0].width)
    else:
        mat = np.zeros((n, int(offsets[-1])), np.uint8)
        for c, at in zip(arrays, offsets):
            mat[:, at:at + c.width] = get(c.name).reshape(n, c.width)
    pre = [f"K{c.key:x}Y{BYTE_ARRAY:x}V" for c in arrays]
    per_row = sum(-(-c.width // MAX_ARRAY) * (len(p) + 20) + 2 * c.width for c, p in zip(arrays, pre))
    from .writekernel import scratch
    out = scratch("blob", n * per_row)      # used before the next block's (see Rows)
    start, end = np.empty(n, np.int64), np.empty(n, np.int64)
    o = byte_array_lines(mat, offsets[:-1].astype(np.int64), np.array([c.width for c in arrays], np.int64),
                         np.array([_pad32(p) for p in pre]).reshape(len(pre), 32),
                         np.array([len(p) for p in pre], np.int64), out, start, end)
    return out[:o], start, end


def counter_records(tables: dict[str, Table], lay: Layout) -> Counters | None:
    """The CNT records of the sample tables' rows (see Counters)."""
    parts = [(name, tables[name]) for name in lay.counters if tables.get(name) is not None and len(tables[name])]
    if not parts:
        return None
    ids, vals, counts = [], [], []
    for name, tab in parts:
        cols = lay.counters[name]
        n, k = len(tab), len(cols)
        v = np.empty((n, k), np.uint64)
        for j, (c, cid, props) in enumerate(cols):
            a = np.asarray(tab[c])
            v[:, j] = (a.astype(np.float64).view(np.uint64) if a.dtype.kind == "f"
                       else a.astype(np.int64).view(np.uint64))
        vals.append(v.ravel())
        ids.append(np.array([cid for _, cid, _ in cols], np.uint64))
        counts.append(np.full(n, k, np.int64))
    ticks = np.concatenate([np.asarray(t["time"]) for _, t in parts]).astype(np.uint64)
    proc = np.concatenate([np.asarray(t["location"]) for _, t in parts]).astype(np.int64)
    count = np.concatenate(counts)
    first = np.cumsum(count) - count                 # into the values laid end to end
    keys = [ticks, proc, np.repeat(np.arange(len(parts)), [len(t) for _, t in parts]),
            np.concatenate([np.asarray(t["seq"]) for _, t in parts]).astype(np.int64)]
    # counter ids per record, laid out like the values
    cid = np.concatenate([np.tile(i, len(t)) for i, (_, t) in zip(ids, parts)])
    val = np.concatenate(vals)
    if not _ascending(keys):
        order = np.lexsort(keys[::-1])
        ticks, proc, first, count = ticks[order], proc[order], first[order], count[order]
    return Counters(ticks, proc, first, count, cid, val)


def _ascending(keys: list[np.ndarray]) -> bool:
    """Whether rows are in lexicographic order of keys (most significant first): then a stable
    sort would leave them as they are."""
    tied = np.ones(max(len(keys[0]) - 1, 0), bool)
    for k in keys:
        if (tied & (k[1:] < k[:-1])).any():
            return False
        tied &= k[1:] == k[:-1]
    return True


def stream_rows(tables: dict[str, Table], lay: Layout, record_codes) -> tuple[Rows | None, Counters | None]:
    """The records of one stream's .events file: its events (point events are markers of the
    marker file) in (time, location, seq) order, and the counters of sample tables."""
    rows = None
    ev = tables.get("events")
    if ev is not None and len(ev):
        sel = None
        point = point_events(ev)
        if point.any():
            sel = np.flatnonzero(~point)
        keys = [np.asarray(ev[c]) if sel is None else np.asarray(ev[c])[sel] for c in ("time", "location", "seq")]
        keys[0] = keys[0].astype(np.uint64)         # the order of the ticks written
        if not _ascending(keys):
            order = np.lexsort(keys[::-1])
            sel = order if sel is None else sel[order]
        if sel is None or len(sel):
            rows = event_rows(ev, lay, record_codes, sel)
    return rows, counter_records(tables, lay)


def kv_prefixes(lay: Layout) -> list[bytes]:
    """'K<key>Y<type>V' of each scalar key-value column, in the order of kv_val's rows."""
    return [f"K{c.key:x}Y{c.type:x}V".encode() for c in lay.kv if not c.width]


def kv_prefix_arrays(lay: Layout) -> tuple[np.ndarray, np.ndarray]:
    """kv_prefixes as the formatter takes them: padded rows and lengths (cached on lay)."""
    if lay.prefix_arrays is None:
        pre = kv_prefixes(lay)
        rows = np.zeros((max(len(pre), 1), 32), np.uint8)
        for j, p in enumerate(pre):
            rows[j, :len(p)] = np.frombuffer(p, np.uint8)
        lay.prefix_arrays = rows, np.array([len(p) for p in pre] or [0], np.int64)
    return lay.prefix_arrays


# -- point events as markers -------------------------------------------------------------------

MARKER_TYPE_HINT = 3                           # OTF_MARKER_TYPE_HINT
MARKER_BLOCK = 1 << 16
HEXC = np.frombuffer(b"0123456789abcdef", np.uint8)


def point_events(tab: Table) -> np.ndarray:
    """Rows written as marker spots: EVENT rows with a region."""
    if "kind" not in tab or "region" not in tab:
        return np.zeros(len(tab), bool)
    return (tab["kind"] == int(Kind.EVENT)) & (tab["region"] != 0)


def _const(text: str, n: int) -> np.ndarray:
    b = np.frombuffer(text.encode("utf-8", "surrogateescape"), np.uint8)
    return np.broadcast_to(b, (n, len(b)))


def _hex_mat(v: np.ndarray) -> np.ndarray:
    """(n, 16) hex digits of uint64 values, leading zeros as NUL bytes (dropped at the end)."""
    nib = ((v.astype(np.uint64)[:, None] >> np.arange(60, -1, -4, dtype=np.uint64)) & np.uint64(15)).astype(np.uint8)
    lead = np.cumsum(nib != 0, axis=1) == 0
    lead[:, -1] = False
    return np.where(lead, np.uint8(0), HEXC[nib])


def _str_mat(a: np.ndarray) -> np.ndarray:
    """(n, w) bytes of a fixed-width bytes array (NUL padded)."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).reshape(len(a), a.dtype.itemsize)


def marker_defs(defs: Definitions, regions: list[int]) -> str:
    """The DefMarker lines of the regions point events use (see the module docstring)."""
    names = _names(defs, "regions")
    return "".join(G.format_record(G.BY_NAME["DefMarker"],
                                   {"token": r, "name": names.get(r, f"region {r}"),
                                    "type": MARKER_TYPE_HINT}) for r in regions)


@dataclass
class Spots:
    """Marker spots in (time, location, seq) order: `data` renders them block by block, each
    block (a view of a reused buffer) valid until the next is made: written out at once."""

    time: np.ndarray
    location: np.ndarray
    seq: np.ndarray
    data: Iterable[memoryview]
    regions: np.ndarray       # the marker ids used (sorted, unique)


def marker_spots(defs: Definitions, schema: Schema, rows: Table, lay: Layout | None = None) -> Spots:
    """The marker spots of the point events among `rows` (`lay`: the run's layout, if made)."""
    sel = np.flatnonzero(point_events(rows))
    n = len(sel)
    if not n:
        return no_spots()
    keys = [np.asarray(rows[c])[sel] for c in ("time", "location", "seq")]
    if not _ascending(keys):        # rows come in this order: the sort is usually skipped
        order = np.lexsort(keys[::-1])
        sel, keys = sel[order], [k[order] for k in keys]
    keys = [np.asarray(k, np.int64) for k in keys]
    lay = lay or layout(defs, {"events": [], **schema})
    cols = [c for c in lay.kv if c.name != "region" and c.name in rows]     # region is the marker id
    # only the columns written are gathered, each once, block by block (taken.take_rows: from the
    # sink's window straight into this order); a few hundred bytes of temporaries per row
    rows = take_rows(rows, sel)
    blocks = (_spot_block(take_rows(rows, slice(lo, min(n, lo + MARKER_BLOCK))), cols)
              for lo in range(0, n, MARKER_BLOCK))
    return Spots(*keys, blocks, np.unique(np.asarray(rows["region"], np.int64)))


def _spot_block(rows, cols: list[KVColumn]) -> memoryview:
    """Integer and byte-array columns (all formats so far): numba; else numpy."""
    fast = all(np.asarray(rows[c.name]).dtype.kind in "iu" and len(c.name.encode("utf-8", "surrogateescape")) < 32
               for c in cols)
    return (_spots_kernel if fast else _spots)(rows, cols)


def no_spots() -> Spots:
    z = np.zeros(0, np.int64)
    return Spots(z, z, z, [], z)


def _pad32(text: str) -> np.ndarray:
    """text as 32 bytes, NUL padded (callers keep texts shorter)."""
    b = np.zeros(32, np.uint8)
    raw = text.encode("utf-8", "surrogateescape")
    b[:len(raw)] = np.frombuffer(raw, np.uint8)
    return b


def _spots_kernel(rows: Table, cols: list[KVColumn]) -> memoryview:
    """_spots for integer and byte-array columns, with the numba formatter."""
    from .writekernel import format_spots
    n = len(rows)
    scalar = [c for c in cols if not c.width]
    arrays = [c for c in cols if c.width]
    # filled column by column (event_rows); zeroed only if no column fills them
    raws = (np.empty if scalar else np.zeros)((max(1, len(scalar)), n), np.uint64).T
    values = (np.empty_like if scalar else np.zeros_like)(raws)
    signed = np.zeros(raws.shape[1], np.bool_)
    for j, c in enumerate(scalar):
        a = np.asarray(rows[c.name])
        _put_raw_bits(a, raws[:, j])
        signed[j] = a.dtype.kind == "i"
        values[:, j] = a        # integers (see _spot_block): as astype(int64 or uint64), in place
    offsets = np.cumsum([0] + [c.width for c in arrays])
    arr = np.zeros((n, max(1, int(offsets[-1]))), np.uint8)
    for c, at in zip(arrays, offsets):
        arr[:, at:at + c.width] = np.asarray(rows[c.name]).reshape(n, c.width)
    kind = np.array([1 if c.width else 0 for c in cols], np.int64)
    col = np.array([offsets[arrays.index(c)] if c.width else scalar.index(c) for c in cols], np.int64)
    width = np.array([c.width for c in cols], np.int64)
    kv_pre = np.array([_pad32(f"K{c.key:x}Y{(BYTE_ARRAY if c.width else c.type):x}V") for c in cols]
                      ).reshape(len(cols), 32)
    name_pre = np.array([_pad32(f"{c.name}=") for c in cols]).reshape(len(cols), 32)
    kv_prel = np.array([len(f"K{c.key:x}Y{(BYTE_ARRAY if c.width else c.type):x}V") for c in cols], np.int64)
    name_prel = np.array([len(f"{c.name}=".encode("utf-8", "surrogateescape")) for c in cols], np.int64)
    # bound per row: key-value lines and text of every column, and the spot itself
    per_row = 64 + sum(kv_prel[j] + 18 + name_prel[j] + 22 if not c.width else
                       -(-c.width // MAX_ARRAY) * (kv_prel[j] + 20) + 2 * c.width + name_prel[j] + 2 * c.width + 1
                       for j, c in enumerate(cols))
    from .writekernel import scratch
    out = scratch("spots", n * int(per_row))
    ends = np.zeros(n, np.int64)
    o = format_spots(rows["region"], rows["time"], rows["location"], kind, col, raws, values, signed, arr,
                     width, kv_pre, kv_prel, name_pre, name_prel, out, ends)
    return memoryview(out[:o])


def _spots(rows: Table, cols: list[KVColumn]) -> memoryview:
    """Key-value lines and marker spot of each row, vectorized (NUL bytes are padding, dropped)."""
    n = len(rows)
    kv, text = [], []
    for c in cols:
        a = np.asarray(rows[c.name])
        if c.width:
            a = a.reshape(n, c.width)
            on = a.any(axis=1)
            for lo in range(0, c.width, MAX_ARRAY):
                chunk = a[:, lo:lo + MAX_ARRAY]
                kv.append(np.where(on[:, None], np.hstack([
                    _const(f"K{c.key:x}Y{BYTE_ARRAY:x}V", n), HEX2[chunk].reshape(n, -1),
                    _const(f"L{c.width - lo:x}\n", n)]), np.uint8(0)))
            last = np.where(on, c.width - np.argmax(a[:, ::-1] != 0, axis=1), 0)   # bytes up to the last non-zero
            digits = HEX2[a].reshape(n, -1)
            value = np.where(np.arange(2 * c.width) < 2 * last[:, None], digits, np.uint8(0))
        else:
            raw = _raw_bits(a)
            on = raw != 0
            kv.append(np.where(on[:, None], np.hstack([_const(f"K{c.key:x}Y{c.type:x}V", n), _hex_mat(raw),
                                                       _const("\n", n)]), np.uint8(0)))
            value = _str_mat(a.astype("S"))
        text.append((on, np.hstack([_const(f"{c.name}=", n), value])))
    parts = kv + [_const("MS", n), _hex_mat(rows["region"]), _const("T", n), _hex_mat(rows["time"]),
                  _const("P", n), _hex_mat(rows["location"]), _const('V"', n)]
    seen = np.zeros(n, bool)
    for on, piece in text:
        sep = np.where(seen & on, np.uint8(32), np.uint8(0))[:, None]
        parts.append(np.where(on[:, None], np.hstack([sep, piece]), np.uint8(0)))
        seen |= on
    parts.append(_const('"\n', n))
    body = np.hstack(parts)
    return memoryview(body[body != 0])

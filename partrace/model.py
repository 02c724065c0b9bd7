"""The data model every format decodes into and every writer reads from.

A decoded trace is a set of *tables*. A table is a set of equal-length numpy
columns (:class:`Table`). Every table that is merged in time carries three key
columns:

* ``time``     int64, nanoseconds (formats convert their own clock),
* ``location`` a 32-bit id (:data:`ID`, :data:`UID`), the place the record happened
  (OTF process token, DUMPI rank, ovni thread, ROSS PE/KP/LP ...),
* ``seq``      int64, the record's position among the records of the same
  location in the same table, counted from 0 in source order.

``(time, location, seq)`` is unique, so sorting by it is a total order that no
rank count can change.  The table named ``events`` is the main one; formats
add others (``snapshots``, ``statistics``, ``markers``, ``keyvalues``,
``text``, ROSS sample tables ...).

Column vocabulary: a column whose name appears in :data:`COMMON_COLUMNS`
means the same thing in every format, so writers (HDF5, OTF) can rely on it.
A format may add columns of its own; it declares them in its schema.  Value 0
means "not applicable" in the common integer columns, as in OTF.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import partial
from enum import IntEnum
from typing import Any, Iterable, Mapping

import numpy as np

from .errors import LimitError


class Kind(IntEnum):
    """What a row is.  Stored in HDF5 as an enum type under these names."""

    # events
    ENTER = 1
    LEAVE = 2
    SEND = 3
    RECV = 4
    COUNTER = 5
    COLLECTIVE = 6
    COLLECTIVE_BEGIN = 7
    COLLECTIVE_END = 8
    FILE_OP = 9
    FILE_BEGIN = 10
    FILE_END = 11
    RMA_PUT = 12
    RMA_PUT_REMOTE_END = 13
    RMA_GET = 14
    RMA_END = 15
    PROCESS_BEGIN = 16
    PROCESS_END = 17
    COMMENT = 18
    NOOP = 19
    MARKER = 20
    EVENT = 21        # a point event with no more specific meaning (ovni raw events ...)
    SAMPLE = 22       # a sampled record (ROSS instrumentation ...)
    # snapshots (state at a sample point)
    SNAP_COMMENT = 32
    SNAP_ENTER = 33
    SNAP_SEND = 34
    SNAP_OPEN_FILE = 35
    SNAP_COUNTER = 36
    SNAP_COLLOP_COUNT = 37
    SNAP_BEGIN_COLLOP = 38
    SNAP_BEGIN_FILE_OP = 39
    # statistics (summaries at a sample point)
    STAT_COMMENT = 48
    STAT_FUNCTION = 49
    STAT_FUNCTION_GROUP = 50
    STAT_MESSAGE = 51
    STAT_COLLOP = 52
    STAT_FILE = 53
    STAT_FILE_GROUP = 54


KIND_DTYPE = np.dtype(np.uint8)
KEY_COLUMNS = ("time", "location", "seq")

# Types of text-like columns: kept as numpy object arrays of str / bytes.
STR = "str"
BYTES = "bytes"


@dataclass(frozen=True)
class Column:
    """One column of a table: its name, numpy dtype (or STR/BYTES), meaning."""

    name: str
    dtype: Any
    description: str = ""
    unit: str | None = None
    enum: Mapping[str, int] | None = None
    # The table whose records this column points at (rows of the same location): the rows of
    # a table with such a column belong to records of another table (arguments, payloads,
    # key-values) instead of being records of their own.  The column holds the record's `seq`,
    # or a key of the same name in that table (DUMPI's `call`); ROW_TABLE: a `ref_table`
    # column of the row names the table (OTF's key-values and comments).  A definitions table
    # name: the column names a definition (as `region` names regions).
    refers: str | None = None
    # False: a column of a sample table that identifies or places the sample (an id, the
    # record's type, size or file offset) rather than measuring something; writers that
    # draw samples as counters or metrics (Perfetto, OTF2) leave it out.
    measure: bool = True

    @property
    def is_object(self) -> bool:
        return self.dtype in (STR, BYTES)

    def numpy_dtype(self) -> np.dtype:
        """The dtype to allocate with (a sub-array dtype gives (n, k) arrays)."""
        return np.dtype(object) if self.is_object else np.dtype(self.dtype)

    def element_dtype(self) -> np.dtype:
        """The dtype of the array's elements (what to cast values to)."""
        dt = self.numpy_dtype()
        return dt.base if dt.subdtype else dt


def _c(name, dtype, description, unit=None, enum=None) -> Column:
    return Column(name, dtype, description, unit, enum)


ROW_TABLE = "*"     # Column.refers: the table is named per row (by its `ref_table` code)

# Column.refers of the columns that carried it by their name alone before it was declared:
# for a stored schema that predates `refers` (partrace HDF5 files written before it), whose
# tables other than events keep their roles through these names.
LEGACY_REFERS = {"call": "events", "event_seq": "events", "ref_seq": ROW_TABLE, "marker": "marker_defs"}


def with_legacy_refers(schema: "Schema") -> "Schema":
    """`schema` (stored before Column.refers existed) with the refers its column names meant."""
    from dataclasses import replace
    return {name: [replace(c, refers=LEGACY_REFERS[c.name]) if name != "events" and c.name in LEGACY_REFERS
                   else c for c in cols] for name, cols in schema.items()}


# Sample-table columns that were bookkeeping, not measures, by their name alone before
# Column.measure was declared (ROSS's record headers): for HDF5 files that predate it.
LEGACY_NOT_MEASURED = {"offset", "sample_type", "sample_size", "stats_type", "model_size", "flag"}


def with_legacy_measures(schema: "Schema") -> "Schema":
    """`schema` (stored before Column.measure existed) with the measures its names meant."""
    from dataclasses import replace
    return {name: [replace(c, measure=False) if c.name in LEGACY_NOT_MEASURED
                   or c.name.endswith("_id") else c for c in cols]
            for name, cols in schema.items()}


KIND_ENUM = {k.name: int(k) for k in Kind}

# Ids of things a trace defines (locations, regions, communicators, ...) are
# 32-bit, so each id column costs 4 bytes per row instead of 8 in every window,
# spill, exchange and output.  Signed (ID) where the ids are DUMPI's int32 ranks
# and handles or partrace's own counts (ovni, ROSS); unsigned (UID) where the
# format's ids are uint32 and producers use the whole range (OTF tokens, OTF2
# refs: :func:`unsigned_ids`).  A location ref wider than 32 bits (OTF2's are
# 64-bit) is mapped to a dense id by its format, the ref kept in a definitions
# table.  An id that does not fit is refused (:func:`conform`), never wrapped.
ID = "int32"
UID = "uint32"

# Columns with one meaning across formats.  Formats use the subset they need.
COMMON_COLUMNS: dict[str, Column] = {c.name: c for c in [
    _c("time", "int64", "time of the record", "ns"),
    _c("location", ID, "location id, >= 1 (OTF process, DUMPI world rank + 1, ovni thread, ...)"),
    _c("seq", "int64", "position among the records of this location in this table"),
    _c("kind", KIND_DTYPE, "record kind", enum=KIND_ENUM),
    _c("region", ID, "function / region id (regions/id); 0 = none"),
    _c("ticks", "uint64", "time in the source's own clock ticks", "ticks"),
    _c("scl", ID, "source code location id; 0 = none"),
    _c("peer", ID, "other location of a message / RMA target or remote; 0 = none"),
    _c("origin", ID, "RMA origin location"),
    _c("comm", ID, "communicator / process group id"),
    _c("tag", "int64", "message tag"),
    _c("size", "uint64", "bytes sent / message length / bytes of an I/O operation", "bytes"),
    _c("received", "uint64", "bytes received (collectives)", "bytes"),
    _c("root", ID, "root location of a collective"),
    _c("collop", ID, "collective operation id"),
    _c("duration", "uint64", "duration given by the record itself", "ticks"),
    _c("match_id", "uint64", "id pairing begin/end records"),
    _c("handle", "uint64", "file handle"),
    _c("operation", "uint64", "file operation code"),
    _c("file", ID, "file id"),
    _c("counter", ID, "counter id"),
    _c("value", "uint64", "counter value (raw 64 bits)"),
]}


def column(name: str, **override) -> Column:
    """A common column, optionally with some attributes overridden."""
    base = COMMON_COLUMNS[name]
    return Column(**{**base.__dict__, **override})


class Table:
    """Equal-length numpy columns, in a fixed column order."""

    __slots__ = ("columns",)

    def __init__(self, columns: Mapping[str, np.ndarray]):
        self.columns = dict(columns)
        lengths = {len(v) for v in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of unequal length: "
                             f"{ {k: len(v) for k, v in self.columns.items()} }")

    def __len__(self) -> int:
        for v in self.columns.values():
            return len(v)
        return 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def take(self, index) -> "Table":
        return Table({k: take(v, index) for k, v in self.columns.items()})

    def rows(self, start: int, stop: int) -> "Table":
        """Rows start..stop as views (no copy: they keep the whole columns alive)."""
        return Table({k: v[start:stop] for k, v in self.columns.items()})

    def column_once(self, name: str) -> np.ndarray:
        """A column read once: a lazily built table (the engine's merged windows)
        builds it without keeping it, so column-at-a-time writers stay small."""
        return self.columns[name]

    @staticmethod
    def empty(schema: Iterable[Column]) -> "Table":
        return Table({c.name: np.empty(0, c.numpy_dtype()) for c in schema})

    @staticmethod
    def concat(tables: list["Table"], schema: Iterable[Column]) -> "Table":
        schema = list(schema)
        tables = [t for t in tables if len(t)]
        if not tables:
            return Table.empty(schema)
        return Table({c.name: np.concatenate([t[c.name] for t in tables]).astype(
            c.element_dtype(), copy=False) for c in schema})

    def __repr__(self) -> str:
        head = f"Table({len(self)} rows: {', '.join(self.names)})"
        shown = min(len(self), 10)
        if not shown:
            return head
        cells = [[name] + [str(v) for v in self.columns[name][:shown].tolist()]
                 for name in self.names]
        widths = [max(len(c) for c in col) for col in cells]
        lines = ["  ".join(col[i].rjust(w) for col, w in zip(cells, widths))
                 for i in range(shown + 1)]
        more = [f"... {len(self) - shown:,} more rows"] if len(self) > shown else []
        return "\n".join([head, *lines, *more])


Schema = dict[str, list[Column]]   # table name -> columns, in order


def unsigned_ids(schema: Schema) -> Schema:
    """``schema`` with its id columns (:data:`ID`) as unsigned 32-bit numbers: for formats whose
    ids are (OTF tokens, OTF2 refs), so that every id the format can write is kept."""
    return {t: [replace(c, dtype=UID) if c.dtype == ID else c for c in cols]
            for t, cols in schema.items()}


def take(values: np.ndarray, index) -> np.ndarray:
    """``values[index]``, with an integer index array taken as whole-row words.  numpy's
    fancy indexing copies a row of a 2-D column (ovni's 16-byte payload) element by
    element: taking the row as two uint64 words is 5x faster (16 M rows: 0.35 -> 0.07 s),
    and np.take beats fancy indexing on 1-D columns too.  Slices, masks and object
    columns are indexed as they are."""
    if (isinstance(index, slice) or values.dtype == object
            or np.asarray(index).dtype.kind not in "iu"):
        return values[index]
    if values.ndim == 1:
        return np.take(values, index)
    if not values.flags.c_contiguous:
        return values[index]
    return np.take(row_words(values), index, axis=0).view(values.dtype).reshape(
        (-1,) + values.shape[1:])


_WORD_UNITS = (8, 4, 2, 1)      # widths (bytes) a row is copied in, widest that divides it


def row_words(rows: np.ndarray) -> np.ndarray:
    """The rows' bytes as unsigned integers, the widest that divide a row: (n,) when a
    row is one of them, else (n, words per row).  A 1-D column of such a width is viewed
    at any stride; rows of several elements must be C-contiguous."""
    if rows.ndim == 1 and rows.dtype.itemsize in _WORD_UNITS:
        return rows.view(f"u{rows.dtype.itemsize}")
    elements = int(np.prod(rows.shape[1:], dtype=np.int64))
    unit = next(u for u in _WORD_UNITS if rows.dtype.itemsize * elements % u == 0)
    flat = rows.reshape(len(rows), elements).view(f"u{unit}")
    return flat[:, 0] if flat.shape[1] == 1 else flat


def byte_rows(data, starts, ends, decode: bool = False) -> np.ndarray:
    """Rows of a BYTES (or, ``decode``: STR) column cut from one buffer: row i is
    ``data[starts[i]:ends[i]]``.  The model holds variable-length values as objects,
    one per row; they are made by a chain of C-level maps, so no Python statement
    runs per row (a comprehension costs ~3x as much)."""
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    cuts = map(slice, np.asarray(starts).tolist(), np.asarray(ends).tolist())
    pieces = map(view.__getitem__, cuts)
    if decode:
        rows = map(_TEXT, pieces)
    else:
        rows = pieces if isinstance(data, bytes) else map(bytes, pieces)
    return np.fromiter(rows, dtype=object, count=len(starts))


_TEXT = partial(str, encoding="utf-8", errors="surrogateescape")   # lone bytes kept (PEP 383)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(m: "re.Match") -> str:
    c = ord(m.group())
    return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"\\u{c:04x}"


def utf8_name(text: str) -> str:
    """``text`` as valid UTF-8 for the outputs whose strings must be (OTF2, Perfetto, Chrome
    JSON): each source byte that was not UTF-8 (kept by the readers as a lone surrogate,
    U+DC80..U+DCFF) as the four characters ``\\xNN``, any other lone surrogate as
    ``\\uNNNN`` (as partrace prints them, display.py).  Names that differ stay different
    (unless a valid name spells such an escape itself); valid text is returned as it is."""
    return _SURROGATE.sub(_escaped, text)


def utf8_names(names: Iterable[str]) -> tuple[list[str], int]:
    """Each of ``names`` as :func:`utf8_name` (per definition, never per row), and how many
    of them were not valid UTF-8."""
    names = [str(n) for n in names]
    out = [utf8_name(n) for n in names]
    return out, sum(a != b for a, b in zip(out, names))


def not_utf8_warning(count: int) -> str:
    """What an output whose strings must be UTF-8 says of the names it wrote escaped."""
    return (f"{count} name(s) not valid UTF-8 (bytes of another character set) written with "
            "each such byte as \\xNN")


def cast(values, col: Column) -> np.ndarray:
    """``values`` as ``col``'s dtype; narrowing (int64 ids into int32) is checked, never
    wrapped: one min/max pass, only when the source type is wider."""
    a = np.asarray(values)
    dt = col.element_dtype()
    if a.dtype == dt:
        return a
    if (a.size and a.dtype.kind in "iu" and dt.kind in "iu"
            and a.dtype.itemsize > dt.itemsize):
        lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
        amin, amax = int(a.min()), int(a.max())
        if amin < lo or amax > hi:
            bad = amax if amax > hi else amin
            raise LimitError(f"column {col.name!r}: value {bad} does not fit partrace's "
                             f"{dt} column ({lo}..{hi})")
    return a.astype(dt, copy=False)


class Role:
    """What the rows of a table are, so that writers never ask which format it came from."""

    EVENTS = "events"        # the main table: one record per row, of a `Kind`
    RECORDS = "records"      # records of their own (a `kind` column, or a column naming a
                             # definition, as OTF's snapshots, statistics and marker spots)
    ATTACHED = "attached"    # parts of records of another table (a column `refers` to it)
    SAMPLES = "samples"      # measures taken at a time on a location (ROSS's sample tables)


def table_role(name: str, columns: Iterable[Column], tables: Iterable[str] = ()) -> str:
    """The role of table `name` of a schema whose table names are `tables` (see Role)."""
    if name == "events":
        return Role.EVENTS
    columns, tables = list(columns), {*tables, "events"}
    if any(c.refers == ROW_TABLE or c.refers in tables for c in columns):
        return Role.ATTACHED
    if any(c.name == "kind" or c.refers for c in columns):
        return Role.RECORDS
    return Role.SAMPLES


def tables_of_role(schema: Schema, role: str) -> list[str]:
    """The tables of `schema` that play `role`, in schema order."""
    return [n for n, cols in schema.items() if table_role(n, cols, schema) == role]


def member_values_table(schema: Schema) -> str | None:
    """The attached table holding the values of counter records of several values (the
    ``counter_members`` definitions name them): the first with columns counter, index and
    value (raw bits), or None."""
    for name in tables_of_role(schema, Role.ATTACHED):
        if {"counter", "index", "value"} <= {c.name for c in schema[name]}:
            return name
    return None


def conform(table: Table, columns: list[Column]) -> Table:
    """The table with exactly the schema's columns and dtypes (missing = 0/empty)."""
    n = len(table)
    out = {}
    for c in columns:
        if c.name in table:
            out[c.name] = cast(table[c.name], c)
        elif c.is_object:
            out[c.name] = np.full(n, "" if c.dtype == STR else b"", dtype=object)
        else:
            out[c.name] = np.zeros(n, c.numpy_dtype())
    return Table(out)


@dataclass
class Definitions:
    """What a trace defines once, shared by all ranks (picklable, small).

    ``tables`` always has ``locations`` (id, name, parent) and ``regions``
    (id, name, group); formats add others (communicators, counters, ...).
    ``attrs`` holds scalar facts (``ticks_per_second``, ``time_offset`` ...).
    ``source`` is the format's own complete, lossless form of its definitions,
    JSON-serialisable, so a writer of the same format can give them back.
    """

    format: str
    tables: dict[str, Table] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    source: Any = None

    def __repr__(self) -> str:     # the source form can be megabytes: not shown
        tables = ", ".join(f"{n} ({len(t)} rows)" for n, t in self.tables.items())
        return f"Definitions({self.format}: {tables}; attrs {sorted(self.attrs)})"


LOCATION_COLUMNS = [
    _c("id", "int64", "location id, as in events/location"),
    _c("name", STR, "location name"),
    _c("parent", "int64", "parent location id; 0 = none"),
]
REGION_COLUMNS = [
    _c("id", "int64", "region id, as in events/region"),
    _c("name", STR, "region name"),
    _c("group", "int64", "region group id; 0 = none"),
]

# A counter's value type (counters/value_type): how the raw 64 bits of events/value read.
# float32: the low 32 bits hold a single-precision float (OTF's OTF_Float2Counter).
COUNTER_VALUE_TYPES = ("uint64", "int64", "float64", "float32")
# What a counter value measures (counters/mode): OTF's and OTF2's shared vocabulary of a
# kind (accumulated since a start, absolute, relative to the previous value) and the span it
# covers (since the start of the measurement, at the point, since the last sample, until the
# next one).  Viewers draw the value as the source gives it; no writer turns one into another.
COUNTER_MODES = tuple(f"{k}_{s}" for k in ("accumulated", "absolute", "relative")
                      for s in ("start", "point", "last", "next"))


def counter_value_types(counters: "Table") -> list[str]:
    """Each counter's value type (counters table rows), uint64 where the table says none."""
    n = len(counters)
    types = counters["value_type"] if "value_type" in counters else [""] * n
    return [str(t) if str(t) in COUNTER_VALUE_TYPES else "uint64" for t in types]


def counter_types_by_id(counters: "Table | None") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The defined counters' ids sorted, the order that sorts the table's rows so, and
    each counter's value type (in that order) as its place in COUNTER_VALUE_TYPES
    (numbers: a row's type is looked up without Python objects; 0 is uint64, the raw
    bits).  Empty arrays where there is no counters table."""
    if counters is None or not len(counters):
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    ids = np.asarray(counters["id"], dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    types = np.asarray([COUNTER_VALUE_TYPES.index(t) for t in counter_value_types(counters)],
                       np.int64)
    return ids[order], order, types[order]


def counter_values(bits: np.ndarray, value_type: str) -> np.ndarray:
    """Raw 64-bit counter values as the numbers their type says (uint64, int64, float64)."""
    bits = np.ascontiguousarray(bits, dtype=np.uint64)
    if value_type == "int64":
        return bits.view(np.int64)
    if value_type == "float64":
        return bits.view(np.float64)
    if value_type == "float32":
        return (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32).astype(np.float64)
    return bits


# The events columns whose ids a definition table below names (what a reader shows by name).
NAMED_IN = {"comm": "communicators", "collop": "collectives", "counter": "counters",
            "file": "files"}

# Optional definition tables with one meaning across formats.  A format fills
# those it has; writers (OTF) use them to emit groups, communicators,
# collective operations and counters.  Ids are the values found in the
# matching event columns (region's group, comm, collop, counter, file).
DEFINITION_TABLES: dict[str, list[Column]] = {
    "region_groups": [_c("id", "int64", "region group id (regions/group)"),
                      _c("name", STR, "group name")],
    "communicators": [_c("id", "int64", "communicator / process group id (events/comm)"),
                      _c("name", STR, "communicator name")],
    "communicator_members": [_c("comm", "int64", "communicator id"),
                             _c("location", "int64", "member location id, in rank order")],
    "collectives": [_c("id", "int64", "collective operation id (events/collop)"),
                    _c("name", STR, "operation name"),
                    _c("type", "int64", "0 unknown, 1 barrier, 2 one-to-all, 3 all-to-one, "
                                        "4 all-to-all")],
    "counters": [_c("id", "int64", "counter id (events/counter)"), _c("name", STR, "counter name"),
                 _c("unit", STR, "unit"), _c("group", "int64", "counter group id; 0 = none"),
                 _c("value_type", STR, "how the 64 bits of events/value read: " + ", ".join(
                     COUNTER_VALUE_TYPES) + "; absent or empty = uint64"),
                 _c("mode", STR, "what a value measures: " + ", ".join(COUNTER_MODES)
                    + "; absent or empty = absolute_point")],
    # a counter whose record holds several values sampled together (an OTF2 metric class of
    # several members): each value's own name, unit and type; its record's first value is
    # events/value, every value is a row of an attached table with columns counter, index
    # and value (see member_values_table)
    "counter_members": [_c("counter", "int64", "counter id (counters/id)"),
                        _c("index", "int64", "the value's place in the record, from 0"),
                        _c("name", STR, "the value's name"), _c("unit", STR, "its unit"),
                        _c("value_type", STR, "how its 64 bits read, as counters/value_type")],
    "files": [_c("id", "int64", "file id (events/file)"), _c("name", STR, "file name")],
}

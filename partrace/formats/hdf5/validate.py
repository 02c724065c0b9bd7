"""Checking a partrace HDF5 input against the layout it claims, before anything is sized from it.

An HDF5 file read back as a trace is only as good as its attributes: the engine sizes
its work from each table's ``rows``, the schema from the column datasets' dtypes, text
rows from ``ends``.  An edited or damaged file (``rows`` changed, a column deleted or
rewritten with another dtype, text data cut short, a JSON attribute broken, a block of
metadata overwritten) is refused here with one line naming the file and the object,
instead of a spin, a traceback or a silently shorter output.

What is checked costs a few attribute and one-element reads per column, never a pass
over the rows; what only the rows can show (text ends out of order, a location id the
locations table lacks) is checked as each unit is read (faults.check_ends,
:class:`LocationCheck`), with numpy.
"""
from __future__ import annotations

import json

import numpy as np

from ...errors import TraceError
from ...model import KEY_COLUMNS
from . import text
from .faults import hdf5_errors, where

DEFINITION_GROUPS = ("locations", "regions")
# columns that hold ids or keys: any integer dtype that holds the values (older files
# have int32 ids, newer ones may be wider), never text or floating point
INTEGER_COLUMNS = {*KEY_COLUMNS, "kind"}
ID_COLUMNS = ("id", "parent")       # of /locations and /regions


def json_attr(path, obj, attr: str, kind: type):
    """Attribute ``attr`` of ``obj`` decoded from JSON, of type ``kind``."""
    name = obj.name
    if attr not in obj.attrs:
        raise TraceError(path, where(name), f"attribute {attr!r} is missing")
    raw = obj.attrs[attr]
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise TraceError(path, where(name), f"attribute {attr!r} is not JSON: {exc}") from None
    if not isinstance(value, kind):
        raise TraceError(path, where(name), f"attribute {attr!r} is not a JSON {kind.__name__}")
    return value


def check_file(f, path) -> None:
    """Every table the file lists (and the definitions) against the layout."""
    with hdf5_errors(path, "/"):
        tables = json_attr(path, f, "tables", list)
        if not all(isinstance(t, str) for t in tables) or "events" not in tables:
            raise TraceError(path, where("/"), "attribute 'tables' does not list 'events'")
        if not isinstance(f.attrs.get("source_format"), str):
            raise TraceError(path, where("/"), "attribute 'source_format' is missing")
    for name in tables:
        check_table(f, path, name, KEY_COLUMNS)
    for name in DEFINITION_GROUPS:
        check_table(f, path, name, ("id",))
        with hdf5_errors(path, f"/{name}"):
            for c in ID_COLUMNS:
                if c in f[name]:
                    _integer(path, f[name][c])
    with hdf5_errors(path, "/definitions"):
        d = _group(f, path, "definitions")
        json_attr(path, d, "attrs", dict)
        if "source" not in d:       # its JSON (megabytes at times) is parsed once, when read
            raise TraceError(path, where("/definitions"), "dataset 'source' is missing")
        others = [n for n in d if n != "source"]
    for name in others:
        check_table(f, path, f"definitions/{name}", ())


def _group(parent, path, name: str):
    import h5py
    obj = parent.get(name)
    full = f"{parent.name.rstrip('/')}/{name}"
    if not isinstance(obj, h5py.Group):
        raise TraceError(path, where(full), "missing" if obj is None else "not a group")
    return obj


def check_table(f, path, name: str, required) -> int:
    """One table group: ``columns`` and ``rows`` attributes, every column there, its length
    ``rows``, key columns integers, text pairs whole; returns the rows."""
    full = f"/{name}"
    with hdf5_errors(path, full):
        group = _group(f, path, name) if "/" not in name else _group(
            f[name.rsplit("/", 1)[0]], path, name.rsplit("/", 1)[1])
        columns = json_attr(path, group, "columns", list)
        if not all(isinstance(c, str) for c in columns):
            raise TraceError(path, where(full), "attribute 'columns' is not a list of names")
        missing = [c for c in required if c not in columns]
        if missing:
            raise TraceError(path, where(full), f"has no column {missing[0]!r}")
        rows = group.attrs.get("rows")
        if rows is None or np.ndim(rows) or np.asarray(rows).dtype.kind not in "iu" \
                or int(rows) < 0:
            raise TraceError(path, where(full), f"attribute 'rows' is not a row count: {rows!r}")
        rows = int(rows)
    for c in columns:
        with hdf5_errors(path, f"{full}/{c}"):
            _check_column(f, path, group, c, rows)
    return rows


def _check_column(f, path, group, name: str, rows: int) -> None:
    import h5py

    full = f"{group.name}/{name}"
    obj = group.get(name)
    if obj is None:
        raise TraceError(path, where(full), "missing (named in the table's 'columns')")
    if text.is_pair(obj):
        _check_pair(path, obj, rows)
        return
    if not isinstance(obj, h5py.Dataset):
        raise TraceError(path, where(full), "not a dataset nor a text data/ends pair")
    if obj.ndim < 1 or obj.shape[0] != rows:
        raise TraceError(path, where(full), f"holds {obj.shape[0] if obj.ndim else 0} rows, "
                                            f"its table's 'rows' says {rows}")
    if name in INTEGER_COLUMNS:
        _integer(path, obj)
    _check_enum(f, path, obj)


def _integer(path, ds) -> None:
    if ds.dtype.kind not in "iu" or ds.ndim != 1:
        raise TraceError(path, where(ds.name), f"stored as {ds.dtype} {ds.shape}: "
                                               "expected one integer per row")


def _check_pair(path, g, rows: int) -> None:
    ends, data = g[text.ENDS], g[text.DATA]
    if ends.ndim != 1 or ends.dtype.kind not in "iu" or ends.shape[0] != rows:
        raise TraceError(path, where(ends.name), f"{ends.dtype} {ends.shape}: expected "
                                                 f"{rows} integer text ends")
    if data.ndim != 1 or data.dtype.itemsize != 1 or data.dtype.kind not in "iu":
        raise TraceError(path, where(data.name), f"{data.dtype} {data.shape}: expected bytes")
    last = int(ends[rows - 1]) if rows else 0
    if last != data.shape[0]:
        raise TraceError(path, where(data.name), f"holds {data.shape[0]} bytes, the last "
                                                 f"row's text ends at byte {last}")


def _check_enum(f, path, ds) -> None:
    import h5py
    enum = ds.attrs.get("enum")
    if enum is None:
        return
    if isinstance(enum, h5py.Reference):
        if not enum:
            raise TraceError(path, where(ds.name), "attribute 'enum' is a null reference")
        target = f[enum]
        if not isinstance(target, h5py.Datatype) or h5py.check_enum_dtype(target.dtype) is None:
            raise TraceError(path, where(ds.name), "attribute 'enum' refers to no enum type")
        if "enum" in target.attrs:
            json_attr(path, target, "enum", dict)
        return
    json_attr(path, ds, "enum", dict)


class LocationCheck:
    """Refuses rows whose ``location`` the file's ``/locations/id`` lacks."""

    def __init__(self, path, ids: np.ndarray):
        self.path, self.ids = path, np.unique(np.asarray(ids, dtype=np.int64))

    def __call__(self, table: str, locations: np.ndarray, start: int) -> None:
        loc = np.asarray(locations)
        known = np.isin(loc.astype(np.int64, copy=False), self.ids)
        if not known.all():
            i = int(np.argmin(known))
            raise TraceError(self.path, where(f"/{table}/location"),
                             f"row {start + i}: location {int(loc[i])} is not in the "
                             f"file's locations table (/locations/id)")

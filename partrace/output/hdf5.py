"""The partrace HDF5 layout: columnar, chunked, self-describing.  No MPI here.

::

    /                      attrs: layout, layout_version, source_format, source,
                                  created_by, time_unit, order
    /events/<column>       one row per event, in global (time, location, seq) order
    /<table>/<column>      every other table the format decodes (snapshots, ...)
    /locations/{id,name,parent,...}
    /regions/{id,name,group,...}
    /definitions/<table>/<column>   the format's other definition tables
    /definitions           attrs: attrs (JSON); dataset source (JSON): lossless

Every column dataset carries ``description`` and, where it has them, ``unit``
and ``enum`` (JSON name -> value) attributes; ``events/kind`` is an HDF5 enum
type.  Every table group carries ``columns`` (JSON list, in order) and ``rows``.
"""
from __future__ import annotations

import json
from typing import Iterable

import h5py
import numpy as np

from .. import __version__
from ..model import BYTES, KIND_ENUM, STR, Column, Definitions, Table

LAYOUT = "partrace-hdf5"
LAYOUT_VERSION = 1
CHUNK_ROWS = 1 << 16
TABLES_ATTR = "tables"


def h5_dtype(col: Column):
    if col.dtype == STR:
        return h5py.string_dtype()
    if col.dtype == BYTES:
        return h5py.vlen_dtype(np.uint8)
    if col.name == "kind" and col.enum is not None:
        return h5py.enum_dtype(dict(col.enum), basetype=np.dtype(col.dtype))
    dt = np.dtype(col.dtype)
    return dt.base if dt.subdtype else dt   # a sub-array column is an (n, k) dataset


def _write_values(ds, col: Column, values: np.ndarray, start: int) -> None:
    n = len(values)
    if col.dtype != BYTES:
        ds[start:start + n] = values
        return
    out = np.empty(n, dtype=h5py.vlen_dtype(np.uint8))
    for i, b in enumerate(values):
        out[i] = np.frombuffer(b, dtype=np.uint8)
    # h5py's high-level write turns equal-length byte strings into a 2-D array
    # and refuses it; the low-level write takes the vlen array as it is.
    fspace = ds.id.get_space()
    fspace.select_hyperslab((start,), (n,))
    ds.id.write(h5py.h5s.create_simple((n,)), fspace, out)


def _column_attrs(ds, col: Column) -> None:
    ds.attrs["description"] = col.description
    if col.unit:
        ds.attrs["unit"] = col.unit
    if col.enum:
        ds.attrs["enum"] = json.dumps(dict(col.enum))


def _table_attrs(group, columns: list[Column], rows: int) -> None:
    group.attrs["columns"] = json.dumps([c.name for c in columns])
    group.attrs["rows"] = rows


def _tail(col: Column) -> tuple:
    dt = col.numpy_dtype()
    return dt.shape if dt.subdtype else ()


def create_table(parent: h5py.Group, name: str, columns: list[Column], expected_rows: int,
                 compression: str | None = None) -> h5py.Group:
    """An empty, appendable table: resizable chunked column datasets."""
    group = parent.require_group(name)
    chunk = int(min(CHUNK_ROWS, max(16, 1 << max(0, int(expected_rows) - 1).bit_length())))
    for col in columns:
        tail = _tail(col)
        ds = group.create_dataset(col.name, shape=(0,) + tail, maxshape=(None,) + tail,
                                  chunks=(chunk,) + tail, dtype=h5_dtype(col),
                                  compression=compression)
        _column_attrs(ds, col)
    _table_attrs(group, columns, 0)
    return group


def append_rows(group: h5py.Group, table: Table, columns: list[Column]) -> None:
    """Append a table's rows to a table made by create_table."""
    n = len(table)
    if not n:
        return
    start = int(group.attrs["rows"])
    for col in columns:     # one column at a time: a merged window builds each on read
        ds = group[col.name]
        ds.resize(start + n, axis=0)
        _write_values(ds, col, np.asarray(table.column_once(col.name)), start)
    group.attrs["rows"] = start + n


def write_table(parent: h5py.Group, name: str, table: Table, columns: list[Column],
                compression: str | None = None) -> h5py.Group:
    """Write one whole table as a group of column datasets."""
    group = create_table(parent, name, columns, len(table), compression)
    append_rows(group, table, columns)
    return group


def link_shards(parent: h5py.Group, name: str, columns: list[Column],
                blocks: list[tuple[str, int, int]], shard_rows: dict[str, int]) -> h5py.Group:
    """A table made of virtual datasets over blocks of per-rank shard files.

    ``blocks``: (relative shard file name, first row in the shard, rows), in
    global order; ``shard_rows``: each shard's row count for this table.
    """
    group = parent.require_group(name)
    total = sum(rows for _, _, rows in blocks)
    for col in columns:
        tail, dtype = _tail(col), h5_dtype(col)
        if total == 0:
            ds = group.create_dataset(col.name, shape=(0,) + tail, dtype=dtype)
        else:
            layout = h5py.VirtualLayout(shape=(total,) + tail, dtype=dtype)
            at = 0
            for fname, start, rows in blocks:
                if rows:
                    src = h5py.VirtualSource(fname, f"{name}/{col.name}",
                                             shape=(shard_rows[fname],) + tail)
                    layout[at:at + rows] = src[start:start + rows]
                    at += rows
            ds = group.create_virtual_dataset(col.name, layout)
        _column_attrs(ds, col)
    _table_attrs(group, columns, total)
    return group


def write_header(f: h5py.File, defs: Definitions, source: str, tables: Iterable[str]) -> None:
    """Root attributes and the definitions."""
    f.attrs["layout"] = LAYOUT
    f.attrs["layout_version"] = LAYOUT_VERSION
    f.attrs["source_format"] = defs.format
    f.attrs["source"] = source
    f.attrs["created_by"] = f"partrace {__version__}"
    f.attrs["time_unit"] = "ns"
    f.attrs["order"] = "time, location, seq"
    f.attrs[TABLES_ATTR] = json.dumps(list(tables))
    f.attrs["kind_enum"] = json.dumps(KIND_ENUM)
    d = f.require_group("definitions")
    d.attrs["attrs"] = json.dumps(defs.attrs, default=_json_default)
    d.create_dataset("source", data=json.dumps(defs.source, default=_json_default),
                     dtype=h5py.string_dtype())
    for name, table in defs.tables.items():
        parent = f if name in ("locations", "regions") else d
        cols = [_infer_column(c, table[c]) for c in table.names]
        write_table(parent, name, table, cols)


def _infer_column(name: str, values: np.ndarray) -> Column:
    if values.dtype == object:
        kind = BYTES if len(values) and isinstance(values[0], (bytes, bytearray)) else STR
        return Column(name, kind)
    return Column(name, values.dtype)


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (bytes, bytearray)):
        return o.hex()
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")


# --- reading --------------------------------------------------------------

def is_partrace_file(path) -> bool:
    try:
        with h5py.File(path, "r") as f:
            return f.attrs.get("layout") == LAYOUT
    except OSError:
        return False


def read_table(group: h5py.Group, start: int = 0, stop: int | None = None) -> Table:
    """Columns of one table group as numpy arrays (strings as str objects)."""
    names = json.loads(group.attrs["columns"])
    out = {}
    for name in names:
        ds = group[name]
        values = ds[start:stop]
        if h5py.check_string_dtype(ds.dtype) is not None:
            values = np.array([v.decode() if isinstance(v, bytes) else v for v in values],
                              dtype=object)
        elif h5py.check_vlen_dtype(ds.dtype) is not None:
            values = np.array([bytes(v) for v in values] + [None], dtype=object)[:-1]
        out[name] = values
    return Table(out)

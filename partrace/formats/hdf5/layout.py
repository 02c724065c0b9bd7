"""The partrace HDF5 layout: columnar, chunked, compressed, self-describing.  No MPI here.

::

    /                      attrs: layout, layout_version, source_format, source,
                                  created_by, time_unit, order
    /events/<column>       one row per event, in global (time, location, seq) order
    /<table>/<column>      every other table the format decodes (snapshots, ...)
    /locations/{id,name,parent,...}
    /regions/{id,name,group,...}
    /definitions/<table>/<column>   the format's other definition tables
    /definitions           attrs: attrs (JSON); dataset source (JSON): lossless

Every column dataset carries ``description`` and, where it has them, ``unit``,
``enum`` (JSON name -> value) and ``refers`` (model.Column.refers) attributes; ``events/kind`` is an HDF5 enum
type.  Every table group carries ``columns`` (JSON list, in order) and ``rows``.

Columns keep the model's dtypes (what you read is what the schema says) and are
compressed with HDF5's built-in shuffle + deflate filters (no plugin needed to
read them).  Measured on the fixtures and generated traces of every format,
shuffle + deflate beat scale-offset (alone or before deflate) everywhere:
the shuffled zero bytes of wide integers cost deflate almost nothing.  Level 1:
on the 35 MB OTF and 78 MB DUMPI suite traces it is 1.6x faster than level 4
(the merge's largest cost after decoding) for 12-15% more bytes (0.59x and
0.20x the input).  Files
use the HDF5 1.10 format (``libver="v110"``): its chunk indexes take half the
space of the 1.8 B-trees on small tables.

Text columns hold UTF-8 bytes.  A trace whose names are not UTF-8 (OTF in
Latin-1 ...) is decoded to str with ``surrogateescape``; such values are
stored as their original bytes and the dataset gets the attribute
``encoding = "bytes"`` (read them with ``.decode("utf-8", "surrogateescape")``,
or as the source's own charset).
"""
from __future__ import annotations

import json
from typing import Iterable

import h5py
import numpy as np

from ... import __version__
from ...model import BYTES, KIND_ENUM, STR, Column, Definitions, Table

LAYOUT = "partrace-hdf5"
LAYOUT_VERSION = 2
LIBVER = "v110"
CHUNK_ROWS = 1 << 14
TABLES_ATTR = "tables"
DEFLATE_LEVEL = 1
NOT_UTF8 = "bytes"      # value of a text dataset's ``encoding`` attribute


def h5_dtype(col: Column):
    if col.dtype == STR:
        return h5py.string_dtype()
    if col.dtype == BYTES:
        return h5py.vlen_dtype(np.uint8)
    if col.name == "kind" and col.enum is not None:
        return h5py.enum_dtype(dict(col.enum), basetype=np.dtype(col.dtype))
    dt = np.dtype(col.dtype)
    return dt.base if dt.subdtype else dt   # a sub-array column is an (n, k) dataset


def chunk_rows(rows: int) -> int:
    """Rows per chunk for a table whose first window has ``rows`` rows (all ranks)."""
    return int(min(CHUNK_ROWS, max(16, 1 << max(0, int(rows) - 1).bit_length())))


def filters(col: Column, compression: str | None = None) -> dict:
    """create_dataset keywords: built-in filters only (any h5py/HDF5 reads them).

    ``compression`` None or "gzip": shuffle + deflate; "lzf": shuffle + lzf
    (faster, larger; lzf ships with h5py, not with every HDF5 tool).
    """
    shuffle = not col.is_object and np.dtype(h5_dtype(col)).itemsize > 1
    if compression == "lzf":
        return dict(compression="lzf", shuffle=shuffle)
    if compression in (None, "gzip"):
        return dict(compression="gzip", compression_opts=DEFLATE_LEVEL, shuffle=shuffle)
    raise ValueError(f"unknown HDF5 compression {compression!r} (gzip or lzf)")


def _encode_text(values: np.ndarray) -> tuple[np.ndarray, bool]:
    """str objects as bytes (surrogateescape'd source bytes back as they were);
    True when some are not valid UTF-8."""
    out = np.empty(len(values), dtype=object)
    bad = False
    for i, s in enumerate(values):
        if isinstance(s, bytes):
            b = s
        else:
            try:
                b = s.encode("utf-8")
            except UnicodeEncodeError:
                b, bad = s.encode("utf-8", "surrogateescape"), True
        out[i] = b
    return out, bad


def write_values(ds, col: Column, values: np.ndarray, start: int) -> None:
    """Write ``values`` at rows start.. of ``ds`` (which must be long enough)."""
    n = len(values)
    if col.dtype == STR:
        values, bad = _encode_text(values)
        if bad:
            ds.attrs["encoding"] = NOT_UTF8
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
    if col.refers:
        ds.attrs["refers"] = col.refers


def _table_attrs(group, columns: list[Column], rows: int) -> None:
    group.attrs["columns"] = json.dumps([c.name for c in columns])
    group.attrs["rows"] = rows


def _tail(col: Column) -> tuple:
    dt = col.numpy_dtype()
    return dt.shape if dt.subdtype else ()


def create_table(parent: h5py.Group, name: str, columns: list[Column], chunk: int,
                 compression: str | None = None, rows: int | None = None) -> h5py.Group:
    """An empty table: chunked column datasets of ``chunk`` rows, compressed.

    ``rows`` None: resizable (rows appended window after window); else the
    table's final size, fixed (a smaller chunk index: most of a small table's
    bytes are HDF5's per-dataset structures); 0 rows: no chunks at all.
    """
    group = parent.require_group(name)
    for col in columns:
        tail = _tail(col)
        if rows == 0:
            ds = group.create_dataset(col.name, shape=(0,) + tail, dtype=h5_dtype(col))
        else:
            fixed = rows is not None
            ds = group.create_dataset(col.name, shape=((rows if fixed else 0),) + tail,
                                      maxshape=((rows if fixed else None),) + tail,
                                      chunks=((min(chunk, rows) if fixed else chunk),) + tail,
                                      dtype=h5_dtype(col), **filters(col, compression))
        _column_attrs(ds, col)
    _table_attrs(group, columns, 0)
    return group


def write_rows(group: h5py.Group, table: Table, columns: list[Column], start: int,
               rows: int) -> None:
    """Write a table's rows at global row ``start`` of a table that will hold ``rows``
    rows (datasets grown to that, so every rank's part has the same shape)."""
    for col in columns:     # one column at a time: a merged window builds each on read
        ds = group[col.name]
        if ds.shape[0] < rows:
            ds.resize(rows, axis=0)
        if len(table):
            write_values(ds, col, np.asarray(table.column_once(col.name)), start)
    group.attrs["rows"] = max(rows, int(group.attrs["rows"]))


def append_rows(group: h5py.Group, table: Table, columns: list[Column]) -> None:
    """Append a table's rows to a table made by create_table."""
    start = int(group.attrs["rows"])
    if len(table):
        write_rows(group, table, columns, start, start + len(table))


def write_table(parent: h5py.Group, name: str, table: Table, columns: list[Column],
                compression: str | None = None) -> h5py.Group:
    """Write one whole table as a group of column datasets."""
    group = create_table(parent, name, columns, chunk_rows(len(table)), compression, len(table))
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


def _decode_text(values: np.ndarray) -> np.ndarray:
    return np.array([v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v
                     for v in values] + [None], dtype=object)[:-1]


def read_column(ds, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows start..stop of one column dataset, as the model holds them."""
    values = ds[start:stop]
    if h5py.check_string_dtype(ds.dtype) is not None:
        return _decode_text(values)
    if h5py.check_vlen_dtype(ds.dtype) is not None:
        return np.array([bytes(v) for v in values] + [None], dtype=object)[:-1]
    return values


def read_table(group: h5py.Group, start: int = 0, stop: int | None = None,
               columns: list[str] | None = None) -> Table:
    """Columns of one table group as numpy arrays (strings as str objects)."""
    names = json.loads(group.attrs["columns"])
    if columns is not None:
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise KeyError(f"{group.name}: no column {unknown[0]!r} (has {', '.join(names)})")
        names = [c for c in names if c in columns]
    return Table({name: read_column(group[name], start, stop) for name in names})

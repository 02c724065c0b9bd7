"""The partrace HDF5 layout: columnar, chunked, compressed, self-describing.  No MPI here.

::

    /                      attrs: layout, layout_version, source_format, source,
                                  created_by, time_unit (+ time_per_unit where the
                                  time column is not ns: ROSS's virtual time x 1e9), order
    /events/<column>       one row per event, in global (time, location, seq) order
    /<table>/<column>      every other table the format decodes (snapshots, ...)
    /<table>/<text>/{data,ends}   a text column: bytes, and where each row's end
    /locations/{id,name,parent,...}
    /regions/{id,name,group,...}
    /definitions/<table>/<column>   the format's other definition tables
    /definitions           attrs: attrs (JSON); dataset source (JSON): lossless

Every column dataset carries ``description`` and, where it has them, ``unit``,
``enum``, ``refers`` (model.Column.refers) and ``measure`` (False only) attributes.
Every table group carries ``columns`` (JSON list, in order) and ``rows``.

Enums (names of a column's values: record kinds, MPI functions, special ranks
and tags ...) are stored once per file, as committed HDF5 enum types in
``/types`` (``/types/kind``, ``/types/region``, ...): a DUMPI trace has six
``region`` columns, and its 6.7 kB of MPI function names written with each was
a fifth of a small trace's output.  A column's ``enum`` attribute is an object
reference to its type (``f[ds.attrs["enum"]]``; ``h5py.check_enum_dtype`` of
its dtype gives the names; the model's order is by value, or, where it is not,
the JSON in the type's own ``enum`` attribute).  ``kind`` columns have that type as their dtype (an HDF5 enum, as
in every earlier layout); the other enum columns stay plain integers, their
values not all named (a tag is any number, ``MPI_ANY_TAG`` one of them).  A
mapping HDF5 cannot hold as an enum (two names for one value) stays a JSON
string attribute, as in layout 3.

Columns keep the model's dtypes (what you read is what the schema says) and are
compressed with HDF5's built-in filters (no plugin needed to read them): integer
columns other than enums declare lossless scale-offset, shuffle and deflate, the
others shuffle and deflate.  partrace compresses each chunk itself (chunks.py)
and stores it with ``write_direct_chunk``: a chunk of integers whose range needs
at most 6 bits (ids, ranks, tags of a chunk's rows) goes scale-offset + deflate,
any other chunk shuffle + deflate, and the chunk's filter mask says which (the
reader's HDF5 skips the filter the mask names).  Whole datasets under one filter
lost either way: shuffle + deflate made ids 1.5-30x larger than packing them,
scale-offset made wide or repeating columns larger than shuffle + deflate.  Level
1: on the 35 MB OTF and 78 MB DUMPI suite traces zlib's level 1 was 1.6x faster
than level 4 for 12-15% more bytes; chunks.py deflates with zlib-ng's level 1
(deflate_quick) where installed; ``--compress gzip`` declares level 2.  Files
use the HDF5 1.10 format (``libver="v110"``): its chunk indexes take half the
space of the 1.8 B-trees on small tables.

Text columns hold UTF-8 bytes, never variable-length strings (whose chunks
point into their own file's heap, and cost 16 bytes of heap record per value,
uncompressed).  A table the ranks write keeps each text (or bytes) column as a
``data``/``ends`` pair of numeric datasets (text.py), written and joined like
any column.  A whole table written here at once (the definitions) keeps its
text as fixed-width byte strings, or as a pair where a value would not survive
them.  A trace whose names are not UTF-8 (OTF in Latin-1 ...) is decoded to
str with ``surrogateescape``; such values are stored as their original bytes
and the column gets the attribute ``encoding = "bytes"`` (read them with
``.decode("utf-8", "surrogateescape")``, or as the source's own charset).
Files of layout 2 (variable-length text) still read.
"""
from __future__ import annotations

import itertools
import json
import os
from typing import Iterable

import h5py
import numpy as np

from ...errors import UsageError
from ...model import BYTES, KIND_ENUM, STR, Column, Definitions, Table
from ...timeunit import of as time_unit_of
from ...version import __version__
from . import chunks as hdf5_chunks
from . import text as hdf5_text
from . import virtual as hdf5_virtual
from .make import DatasetMaker, set_attrs
from .values import UNREAD, write_values

LAYOUT = "partrace-hdf5"
LAYOUT_VERSION = 4     # 4: enums once, in /types; 3: text columns as data/ends pairs
TYPES = "types"        # the root group of the committed enum types
LIBVER = "v110"
# Rows per chunk of a long table.  A time window reads whole chunks (a 1000-row
# window of every column of the ovni suite trace: 12 ms at 16,384 rows, 23 ms at
# 65,536), and each chunk costs the writer a fixed part (its bounds, a probe per byte
# plane, the deflate set-up, a chunk-index entry): on the suite traces 65,536 rows took
# 0.74-0.83x the compressing CPU of 16,384 for 0.97-0.99x the bytes.
# PARTRACE_H5_CHUNK_ROWS chooses another.
CHUNK_ROWS = 1 << 16
CHUNK_ROWS_ENV = "PARTRACE_H5_CHUNK_ROWS"
# A very long table gets longer chunks, so that each of its columns has at most
# CHUNKS_PER_COLUMN of them, up to GROWN_CHUNK_ROWS rows: every chunk is an entry of the
# file's chunk index, which one process writes (rank 0 in the serial join, each process
# in a collective write, HDF5's allocation), so a fixed chunk length would make that
# serial work grow with the trace.  Tables below CHUNK_ROWS x CHUNKS_PER_COLUMN rows
# keep CHUNK_ROWS, as a small window reads whole chunks (scripts/bench_h5window.py
# measures what longer ones cost it); the longest keep a chunk of 8-byte values at
# 2 MiB and the rows an owner carries between windows (chunk_owners.py) modest.
CHUNKS_PER_COLUMN = 1 << 14
GROWN_CHUNK_ROWS = 1 << 18
TABLES_ATTR = "tables"
DEFLATE_LEVEL = 1       # the default: zlib-ng's fastest deflate (chunks.py)
GZIP_LEVEL = 2          # --compress gzip: denser (~2/3 of the bytes), ~1.6x its CPU
NOT_UTF8 = "bytes"      # value of a text dataset's ``encoding`` attribute
# the tables' datasets, made with property lists prepared once per kind (make.py)
_MAKER = DatasetMaker()


def h5_dtype(col: Column, parent: h5py.Group | None = None, known: dict | None = None):
    """The dataset dtype of ``col``; given ``parent`` (a group of the file), a
    ``kind`` column's is the file's committed enum type (``known``: see enum_type)."""
    if col.dtype == STR:
        return h5py.string_dtype()
    if col.dtype == BYTES:
        return h5py.vlen_dtype(np.uint8)
    if col.name == "kind" and col.enum is not None:
        shared = enum_type(parent.file, col, known) if parent is not None else None
        return shared if shared is not None else (
            h5py.enum_dtype(dict(col.enum), basetype=np.dtype(col.dtype)))
    dt = np.dtype(col.dtype)
    return dt.base if dt.subdtype else dt   # a sub-array column is an (n, k) dataset


def _enum_json(col: Column) -> str:
    return json.dumps(dict(col.enum), separators=(",", ":"))


def enum_type(f: h5py.File, col: Column, known: dict | None = None) -> h5py.Datatype | None:
    """The file's committed enum type of ``col.enum``, made on first use: one per
    distinct mapping (``region`` and ``post_region`` share one; a ``kind``
    column's, its dtype, is one of its own base type),
    named after the first column that has it (``<name>_2`` ... if taken); None
    for a mapping HDF5 cannot hold (two names for one value).  The same schema
    makes the same types in the same order on every rank count.

    ``known``: the caller's dict of ``f``'s types, read from the file at the first call
    and kept as types are made, for every call on ``f`` while it is in use (a type made
    by a call without it would be missed and made again): reading every committed type
    of the file for each enum column was a third of the CPU of making a part file."""
    mapping = dict(col.enum)
    if col.name == "kind":      # the dataset's own dtype
        base = np.dtype(col.dtype)
    else:   # only names the values: the smallest type that holds them, shared by all widths
        base = np.result_type(*map(np.min_scalar_type, (min(mapping.values(), default=0),
                                                        max(mapping.values(), default=0))))
    known = {} if known is None else known
    if None not in known:   # the group, and every type the file holds, first found first
        known[None] = f.require_group(TYPES)
        for old in known[None].values():
            known.setdefault((old.dtype.base.str, tuple(_type_enum(old))), old)
    key = (base.str, tuple(mapping.items()))
    if key in known:
        return known[key]
    if len(set(mapping.values())) < len(mapping):
        return None
    types = known[None]
    # candidate names made lazily: a tuple of all 65,535 cost 6 ms a column
    candidates = itertools.chain([col.name], (f"{col.name}_{i}" for i in range(2, 1 << 16)))
    name = next(n for n in candidates if n not in types)
    types[name] = h5py.enum_dtype(mapping, basetype=base)
    values = list(mapping.values())
    if values != sorted(values):        # HDF5 keeps the names sorted: the model's order
        types[name].attrs["enum"] = _enum_json(col)
    known[key] = types[name]
    return known[key]


def _type_enum(t: h5py.Datatype) -> list[tuple[str, int]]:
    """A committed enum type's (name, value)s in the model's order: its ``enum``
    attribute where the order is not by value, else by value."""
    if "enum" in t.attrs:
        return list(json.loads(t.attrs["enum"]).items())
    return sorted(h5py.check_enum_dtype(t.dtype).items(), key=lambda kv: kv[1])


def read_enum(ds) -> dict | None:
    """A column's names of values: from its committed type (layout 4) or JSON (3)."""
    enum = ds.attrs.get("enum")
    if enum is None:
        return None
    if isinstance(enum, h5py.Reference):
        return dict(_type_enum(ds.file[enum]))
    return json.loads(enum)


def long_chunk_rows() -> int | None:
    """Rows per chunk of a long table as ``PARTRACE_H5_CHUNK_ROWS`` sets them (a power of
    two, 16 to 2**20), None if it is not set (:func:`grown_chunk_rows` decides)."""
    chosen = os.environ.get(CHUNK_ROWS_ENV, "").strip()
    if not chosen:
        return None
    n = int(chosen) if chosen.isdigit() else 0
    if not 16 <= n <= 1 << 20 or n & (n - 1):
        raise UsageError(f"{CHUNK_ROWS_ENV}={chosen}: rows per chunk, a power of two "
                         "from 16 to 1048576")
    return n


def grown_chunk_rows(total_rows: int) -> int:
    """Rows per chunk of a table of ``total_rows`` rows (over all windows and ranks):
    CHUNK_ROWS, or the power of two that keeps its columns to CHUNKS_PER_COLUMN chunks,
    at most GROWN_CHUNK_ROWS."""
    need = -(-int(total_rows) // CHUNKS_PER_COLUMN)
    return int(min(GROWN_CHUNK_ROWS, max(CHUNK_ROWS, 1 << max(0, need - 1).bit_length())))


def chunk_rows(rows: int, longest: int = CHUNK_ROWS) -> int:
    """Rows per chunk for a table whose first window has ``rows`` rows (all ranks):
    the power of two that holds them, at most ``longest``."""
    return int(min(longest, max(16, 1 << max(0, int(rows) - 1).bit_length())))


def filters(col: Column, compression: str | None = None, piped: bool = False) -> dict:
    """create_dataset keywords: built-in filters only (any h5py/HDF5 reads them).

    ``compression`` None: shuffle + deflate level 1; "gzip": level 2 (fewer
    bytes, more CPU); "lzf": shuffle + lzf (written by HDF5's pipeline on the
    calling thread; lzf ships with h5py, not with every HDF5 tool).
    ``piped``: a dataset whose chunks go through HDF5's own pipeline (the collective
    write).  The pipeline puts every chunk through every filter, and scale-offset before
    shuffle costs more CPU than shuffle and deflate together and leaves more bytes
    (chunks.py applies it alone, to small ranges only): none declared.  Its chunks are
    filled with zeros when allocated (fill value 0, written at allocation: HDF5
    compresses the fill chunk once), so that a write of zeros alone can be left out.
    """
    dtype = None if col.is_object else np.dtype(h5_dtype(col))
    shuffle = dtype is not None and dtype.itemsize > 1
    fill = dict(fillvalue=0, fill_time="alloc") if piped and dtype is not None else {}
    if compression == "lzf":
        return dict(compression="lzf", shuffle=shuffle, **fill)
    if compression in (None, "gzip"):
        level = GZIP_LEVEL if compression == "gzip" else DEFLATE_LEVEL
        # integers (not enums: HDF5's scale-offset takes no enum type) get lossless
        # scale-offset too, which chunks.py applies to chunks of a small range
        scaled = (not piped and dtype is not None and dtype.kind in "iu"
                  and h5py.check_enum_dtype(dtype) is None)
        return dict(compression="gzip", compression_opts=level, shuffle=shuffle,
                    **(dict(scaleoffset=0) if scaled else {}), **fill)
    raise ValueError(f"unknown HDF5 compression {compression!r} (gzip or lzf)")


def _column_attrs(ds, col: Column, known: dict | None = None) -> None:
    """A new column dataset's attributes (in this order)."""
    attrs = {"description": col.description}
    if col.unit:
        attrs["unit"] = col.unit
    if col.enum:
        shared = enum_type(ds.file, col, known)
        attrs["enum"] = shared.ref if shared is not None else _enum_json(col)
    if col.refers:
        attrs["refers"] = col.refers
    if not col.measure:
        attrs["measure"] = False
    set_attrs(ds, attrs)


def _table_attrs(group, columns: list[Column], rows: int) -> None:
    """A new table group's attributes."""
    set_attrs(group, {"columns": json.dumps([c.name for c in columns]), "rows": int(rows)})


def set_rows(group: h5py.Group, rows: int) -> None:
    """A table's ``rows`` attribute, once its rows are written (the same type as made)."""
    group.attrs["rows"] = int(rows)


def _tail(col: Column) -> tuple:
    dt = col.numpy_dtype()
    return dt.shape if dt.subdtype else ()


def create_table(parent: h5py.Group, name: str, columns: list[Column], chunk: int,
                 compression: str | None = None, rows: int | None = None,
                 text: dict[str, tuple[int | None, int]] | None = None,
                 fixed: dict[str, np.ndarray] | None = None,
                 known: dict | None = None, made: dict | None = None,
                 piped: bool = False) -> h5py.Group:
    """An empty table: chunked column datasets of ``chunk`` rows, compressed.

    ``rows`` None: resizable (rows appended window after window); else the
    table's final size, fixed (a smaller chunk index: most of a small table's
    bytes are HDF5's per-dataset structures); 0 rows: no chunks at all.
    ``text``: per text column, (its final bytes or None, bytes per chunk): the
    column is a data/ends pair (text.py).
    ``fixed``: text columns written whole here as fixed-width byte strings.
    ``known``: the file's enum types found so far (enum_type), shared by its tables.
    ``made``: given, gets each numeric column's dataset by column name (a writer that
    keeps them need not look them up).
    ``piped``: HDF5's pipeline compresses the chunks (filters()).
    """
    known = {} if known is None else known
    group = parent.require_group(name)
    for col in columns:
        tail = _tail(col)
        if fixed and col.name in fixed:     # filters() gives no shuffle to text
            kw = {} if not rows else dict(chunks=(min(chunk, rows),), maxshape=(rows,),
                                          **filters(col, compression, piped))
            ds = group.create_dataset(col.name, data=fixed[col.name], **kw)
            _column_attrs(ds, col, known)
            continue
        if col.is_object:
            total, byte_chunk = text[col.name]
            hdf5_text.create(group, col, rows, chunk, total, byte_chunk,
                             filters(Column("ends", "uint64"), compression, piped))
            continue
        if rows == 0:
            ds = _MAKER.create(group, col.name, (0,) + tail, h5_dtype(col, group, known))
        else:
            final = rows is not None
            ds = _MAKER.create(group, col.name, ((rows if final else 0),) + tail,
                               h5_dtype(col, group, known),
                               maxshape=((rows if final else None),) + tail,
                               chunks=((min(chunk, rows) if final else chunk),) + tail,
                               **filters(col, compression, piped))
        _column_attrs(ds, col, known)
        if made is not None:
            made[col.name] = ds
    _table_attrs(group, columns, 0)
    return group


def write_rows(group: h5py.Group, table: Table, columns: list[Column], start: int,
               rows: int, text: dict | None = None,
               pending: hdf5_chunks.Pending | None = None, count: bool = True,
               objects=None, codecs=None) -> None:
    """Write a table's rows at global row ``start`` of a table that will hold ``rows``
    rows (datasets grown to that, so every rank's part has the same shape).

    ``text``: per data/ends pair column, (bytes, lengths, global byte offset of
    the first, where the bytes go in this file's data, the data's size after).
    ``count`` False: the caller keeps the table's rows and sets its ``rows`` attribute
    (set_rows) once, not at every window.  ``objects`` and ``codecs``: a writer's
    look-ups kept across windows, column name -> its object in ``group`` and -> its
    numeric dataset's ``chunks.codec``, instead of reading both from the file."""
    for col in columns:     # one column at a time: a merged window builds each on read
        obj = objects(col.name) if objects is not None else group[col.name]
        if hdf5_text.is_pair(obj):
            data, lengths, base, at, total = text[col.name]
            hdf5_text.write(obj, data, lengths, start, rows, base, at, total, pending)
            continue
        if obj.shape[0] < rows:
            obj.resize(rows, axis=0)
        if len(table):
            how = codecs(col.name) if codecs is not None else UNREAD
            write_values(obj, col, np.asarray(table.column_once(col.name)), start, pending,
                         how)
    if count:
        group.attrs["rows"] = max(rows, int(group.attrs["rows"]))


def write_table(parent: h5py.Group, name: str, table: Table, columns: list[Column],
                compression: str | None = None) -> h5py.Group:
    """Write one whole table (rank 0: the definitions) as a group of column datasets.

    Its text columns are fixed-width byte strings where that keeps every value
    (``f["regions/name"][:]`` reads them), else data/ends pairs: never
    variable-length (a 16-byte heap record per value, uncompressed)."""
    n = len(table)
    encoded = {c.name: hdf5_text.encode(c, table[c.name]) for c in columns if c.is_object}
    fixed = {}
    for c in columns:
        if c.is_object:
            strings = hdf5_text.fixed_width(c, *encoded[c.name][:2])
            if strings is not None:
                fixed[c.name] = strings
    text = {k: (len(d), hdf5_text.data_chunk(len(d))) for k, (d, _, _) in encoded.items()}
    group = create_table(parent, name, columns, chunk_rows(n), compression, n, text, fixed)
    for c in columns:
        if c.is_object and encoded[c.name][2]:      # not UTF-8: kept as the source's bytes
            group[c.name].attrs["encoding"] = NOT_UTF8
    pairs = {k: (d, lengths, 0, 0, len(d)) for k, (d, lengths, _) in encoded.items()
             if k not in fixed}
    write_rows(group, table, [c for c in columns if c.name not in fixed], 0, n, pairs)
    return group


def link_shards(parent: h5py.Group, name: str, columns: list[Column],
                blocks: list[tuple[str, int, int]], shard_rows: dict[str, int],
                text: dict | None = None, known: dict | None = None) -> h5py.Group:
    """A table made of virtual datasets over blocks of per-rank shard files.

    ``blocks``: (relative shard file name, first row in the shard, rows), in
    global order; ``shard_rows``: each shard's row count for this table;
    ``text``: per text column, (its byte blocks, each shard's bytes, not UTF-8);
    ``known``: the file's enum types found so far (enum_type), shared by its tables.
    """
    group = parent.require_group(name)
    total = sum(rows for _, _, rows in blocks)
    for col in columns:
        if col.is_object and text is not None:
            byte_blocks, shard_bytes, not_utf8 = text[col.name]
            hdf5_text.link(group, col, blocks, byte_blocks, name, shard_rows, shard_bytes,
                           not_utf8)
            continue
        tail, dtype = _tail(col), h5_dtype(col)
        if total == 0:
            ds = group.create_dataset(col.name, shape=(0,) + tail, dtype=dtype)
        else:
            ds = hdf5_virtual.create(group, col.name, dtype, tail, blocks, shard_rows,
                                     f"{name}/{col.name}")
        _column_attrs(ds, col, known)
    _table_attrs(group, columns, total)
    return group


def write_header(f: h5py.File, defs: Definitions, source: str, tables: Iterable[str]) -> None:
    """Root attributes and the definitions."""
    f.attrs["layout"] = LAYOUT
    f.attrs["layout_version"] = LAYOUT_VERSION
    f.attrs["source_format"] = defs.format
    f.attrs["source"] = source
    f.attrs["created_by"] = f"partrace {__version__}"
    unit = time_unit_of(defs.attrs)     # what the time column counts, as the input says
    f.attrs["time_unit"] = unit.name
    if not unit.wall_ns:
        f.attrs["time_per_unit"] = unit.per_unit
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

def is_partrace_file(path) -> bool | None:
    """True or False; None if HDF5 cannot open the file (or read its root attributes)."""
    try:
        with h5py.File(path, "r") as f:
            return f.attrs.get("layout") == LAYOUT
    except (OSError, RuntimeError):
        return None


def _decode_text(values: np.ndarray) -> np.ndarray:
    return np.array([v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v
                     for v in values] + [None], dtype=object)[:-1]


def read_column(ds, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows start..stop of one column (a dataset, or a text data/ends pair), as the
    model holds them (text as str objects, old variable-length files included)."""
    if hdf5_text.is_pair(ds):
        return hdf5_text.read(ds, start, stop)
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

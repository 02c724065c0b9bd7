"""Text and bytes columns as two numeric datasets, so ranks write them like any column.

A variable-length HDF5 column keeps its values in the file's global heap and its
chunks hold addresses into that heap: a chunk means nothing in another file, so
it cannot be written by one rank into a part file and copied raw into the final
file.  Here a text column ``<table>/<col>`` is instead a group of two datasets::

    <col>/data   uint8, every row's bytes concatenated (UTF-8 for text)
    <col>/ends   uint64, one per row: where the row's bytes end in ``data``
                 (row i is data[ends[i-1]:ends[i]], ends[-1] taken as 0)

with attributes ``dtype`` ("str" or "bytes": what the model holds),
``encoding`` ("utf-8", or "bytes" when some text is not valid UTF-8 and was kept
as its source bytes: decode with ``surrogateescape``), ``description``.  Both
datasets are plain chunked numbers: a rank writes its rows' bytes at their
global byte offset and the part's chunks copy raw.  Plain h5py::

    g = f["text/text"]
    data, ends = g["data"][:], g["ends"][:]
    texts = [b.tobytes().decode() for b in np.split(data, ends[:-1])]
"""
from __future__ import annotations

import h5py
import numpy as np

from ...model import BYTES, STR, Column, byte_rows
from . import virtual as hdf5_virtual
from .faults import check_ends     # a damaged file: never a row cut short in silence
from .values import write_values

DATA, ENDS = "data", "ends"
CHUNK_BYTES = 1 << 16       # data chunk of a resizable (many-window) column
NOT_UTF8 = "bytes"


def is_pair(obj) -> bool:
    return isinstance(obj, h5py.Group) and ENDS in obj and DATA in obj


def data_chunk(total: int) -> int:
    """Bytes per ``data`` chunk for a column that will hold ``total`` bytes."""
    return int(min(CHUNK_BYTES, max(16, 1 << max(0, int(total) - 1).bit_length())))


def encode(col: Column, values) -> tuple[np.ndarray, np.ndarray, bool]:
    """(concatenated bytes as uint8, per-row byte lengths, some text not UTF-8).

    str values join and encode once (surrogateescape: a source's non-UTF-8
    bytes go back as they were); per-row byte lengths come from the code points
    (numpy), so there is no Python step per row beyond ``len``."""
    values = np.asarray(values, dtype=object)
    n = len(values)
    if n == 0:
        return np.zeros(0, np.uint8), np.zeros(0, np.int64), False
    joined = None
    if col.dtype == STR:
        try:
            joined = "".join(values)
        except TypeError:       # some values are bytes already: the slow way, rare
            pass
    if joined is None:
        items = values if col.dtype == BYTES else [
            v if isinstance(v, bytes) else v.encode("utf-8", "surrogateescape") for v in values]
        raw = b"".join(items)
        return (np.frombuffer(raw, np.uint8), np.fromiter(map(len, items), np.int64, n),
                col.dtype == STR and not _utf8(raw))
    raw = joined.encode("utf-8", "surrogateescape")
    chars = np.fromiter(map(len, values), np.int64, n)
    bad = False
    if len(raw) == len(joined):     # one byte per character: lengths are the char counts
        lengths = chars
        bad = not raw.isascii()     # a byte >= 0x80 alone is an escaped source byte
    else:
        cp = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32)
        escaped = (cp >= 0xDC80) & (cp <= 0xDCFF)       # surrogateescape: one source byte
        width = 1 + (cp >= 0x80) + (cp >= 0x800) + (cp >= 0x10000) - 2 * escaped
        ends = np.concatenate([[0], np.cumsum(width)])[np.cumsum(chars)]
        lengths = np.diff(np.concatenate([[0], ends]))
        bad = bool(escaped.any())
    return np.frombuffer(raw, np.uint8), lengths, bad


def fixed_width(col: Column, data: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """A whole table's text column as one fixed-width bytes array (numpy ``S<w>``,
    compressed: padding costs deflate almost nothing), or None where that would
    lose or waste: bytes columns (they would read back as text), a value ending
    in NUL (numpy drops trailing NULs), a width far above the mean length."""
    n, total = len(lengths), len(data)
    width = int(lengths.max()) if n else 1
    if col.dtype != STR or n * max(width, 1) > 4 * total + 4096:
        return None
    ends = np.cumsum(lengths)
    if n and (data[ends[lengths > 0] - 1] == 0).any():
        return None
    grid = np.zeros((n, max(width, 1)), np.uint8)
    row = np.repeat(np.arange(n), lengths)
    grid[row, np.arange(total) - np.repeat(ends - lengths, lengths)] = data
    return grid.view(f"S{max(width, 1)}").reshape(n)


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def create(group: h5py.Group, col: Column, rows: int | None, row_chunk: int,
           total: int | None, byte_chunk: int, filters: dict) -> h5py.Group:
    """The empty pair for ``col``: ``rows``/``total`` None = resizable, 0 = no chunks."""
    g = group.require_group(col.name)
    g.attrs["dtype"] = STR if col.dtype == STR else BYTES
    if col.dtype == STR:
        g.attrs["encoding"] = "utf-8"
    g.attrs["description"] = col.description
    for name, n, chunk in ((ENDS, rows, row_chunk), (DATA, total, byte_chunk)):
        dtype = np.uint64 if name == ENDS else np.uint8
        if n == 0:
            g.create_dataset(name, shape=(0,), dtype=dtype)
        else:
            kw = dict(filters)
            kw["shuffle"] = kw.get("shuffle", False) and name == ENDS
            g.create_dataset(name, shape=(n or 0,), maxshape=(n,),
                             chunks=(min(chunk, n) if n else chunk,), dtype=dtype, **kw)
    return g


def write(g: h5py.Group, data: np.ndarray, lengths: np.ndarray, row: int, rows: int,
          base: int, at: int, total: int, pending=None) -> None:
    """Rows ``row..`` (of ``rows`` in all) whose bytes start at global byte ``base``
    and go at ``at`` in this file's ``data`` (which grows to ``total`` bytes);
    ``pending``: as values.write_values."""
    ends, stored = g[ENDS], g[DATA]
    if ends.shape[0] < rows:
        ends.resize(rows, axis=0)
    if stored.shape[0] < total:
        stored.resize(total, axis=0)
    if len(lengths):
        write_values(ends, None, base + np.cumsum(lengths, dtype=np.uint64), row, pending)
    if len(data):
        write_values(stored, None, data, at, pending)


def mark_not_utf8(g: h5py.Group) -> None:
    if g.attrs.get("encoding") != NOT_UTF8:
        g.attrs["encoding"] = NOT_UTF8


def read(g: h5py.Group, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows start..stop as an object array of str (or bytes): two range reads."""
    ends_ds = g[ENDS]
    start, stop, _ = slice(start, stop).indices(ends_ds.shape[0])
    out = np.empty(max(0, stop - start), dtype=object)
    if stop <= start:
        return out
    ends = ends_ds[max(0, start - 1):stop].astype(np.int64)
    lo = int(ends[0]) if start else 0
    if start:
        ends = ends[1:]
    check_ends(g.file.filename, g, ends, lo, g[DATA].shape[0])
    raw = g[DATA][lo:int(ends[-1])].tobytes()
    cuts = ends - lo
    return byte_rows(raw, np.concatenate([[0], cuts[:-1]]), cuts,
                     decode=g.attrs.get("dtype", STR) == STR)


def link(group: h5py.Group, col: Column, row_blocks, byte_blocks, table: str,
         shard_rows: dict[str, int], shard_bytes: dict[str, int], not_utf8: bool) -> None:
    """The pair as virtual datasets over per-rank shards (layout "parts"):
    ``row_blocks``/``byte_blocks``: (shard file, first row/byte in it, count), in order."""
    g = group.require_group(col.name)
    g.attrs["dtype"] = STR if col.dtype == STR else BYTES
    if col.dtype == STR:
        g.attrs["encoding"] = NOT_UTF8 if not_utf8 else "utf-8"
    g.attrs["description"] = col.description
    for name, blocks, sizes, dtype in ((ENDS, row_blocks, shard_rows, np.uint64),
                                       (DATA, byte_blocks, shard_bytes, np.uint8)):
        total = sum(n for _, _, n in blocks)
        if total == 0:
            g.create_dataset(name, shape=(0,), dtype=dtype)
            continue
        hdf5_virtual.create(g, name, dtype, (), blocks, sizes, f"{table}/{col.name}/{name}")

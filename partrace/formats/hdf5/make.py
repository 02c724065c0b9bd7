"""Datasets and attributes made through h5py's low-level API, for writers that make many.

A DUMPI trace has a table per MPI function: ~40-100 tables, ~440 column datasets, each
with two or three attributes.  h5py's ``create_dataset`` builds a new creation property
list and checks its filters for every dataset, and ``attrs[name] = value`` guesses a
type, tests whether the name exists and makes two HDF5 types per attribute; together
they were ~2.5x the CPU of the HDF5 calls themselves.  Here one property list is made
per kind of dataset (dtype, chunk, filters) and reused, and the attribute types once per
value type: the file gets the same objects, types and values h5py's calls give.
"""
from __future__ import annotations

import h5py
import numpy as np
from h5py import h5a, h5d, h5p, h5s, h5t, h5z

# The Python types of attribute values made here, as h5py types them (``attrs[k] = v``).
_ATTR_DTYPES = {str: h5py.string_dtype(), bool: np.dtype(bool), np.bool_: np.dtype(bool),
                int: np.dtype(np.int64), h5py.Reference: h5py.ref_dtype}
_attr_types: dict = {}      # Python type -> (file type, memory type), made on first use
_SCALAR = h5s.create(h5s.SCALAR)


def _ascii(name: str) -> bytes | None:
    """The name as h5py passes it (ASCII bytes), or None where h5py would pick UTF-8."""
    try:
        return name.encode("ascii")
    except UnicodeEncodeError:
        return None


def set_attrs(obj, attrs: dict) -> None:
    """Scalar attributes of a newly made object (none of these names there yet), each
    stored as ``obj.attrs[name] = value`` stores it."""
    for name, value in attrs.items():
        kind = type(value)
        key, coded = _ascii(name), _ATTR_DTYPES.get(kind)
        if key is None or coded is None:
            obj.attrs[name] = value     # any other value: h5py's own way
            continue
        types = _attr_types.get(kind)
        if types is None:   # h5py's pair: the logical type stored, the exact one in memory
            types = _attr_types[kind] = (h5t.py_create(coded, logical=True),
                                         h5t.py_create(coded))
        attr = h5a.create(obj.id, key, types[0], _SCALAR)
        try:
            attr.write(np.asarray(value, dtype=coded), mtype=types[1])
        finally:
            attr.close()


class DatasetMaker:
    """Makes datasets in one file (or several) with creation property lists prepared
    once per (dtype, chunk shape, filters) and file types once per dtype."""

    def __init__(self):
        self._dcpls: dict = {}
        self._types: dict = {}

    def create(self, group: h5py.Group, name: str, shape: tuple, dtype,
               maxshape: tuple | None = None, chunks: tuple | None = None,
               **filters) -> h5py.Dataset:
        """``group.create_dataset(name, shape=..., dtype=..., maxshape=..., chunks=...,
        **filters)`` as h5py makes it; ``filters``: what layout.filters gives."""
        key = _ascii(name)
        dcpl = self._dcpl(dtype, len(shape), chunks, filters) if key is not None else None
        tid = self._type(dtype)
        if dcpl is None or tid is None:
            return group.create_dataset(name, shape=shape, dtype=dtype, maxshape=maxshape,
                                        chunks=chunks, **filters)
        maxdims = None if maxshape is None else tuple(
            h5s.UNLIMITED if m is None else m for m in maxshape)
        space = h5s.create_simple(shape, maxdims)
        return h5py.Dataset(h5d.create(group.id, key, tid, space, dcpl=dcpl))

    def _type(self, dtype):
        if isinstance(dtype, h5py.Datatype):    # a committed type: used as it is
            return dtype.id
        dtype = np.dtype(dtype)
        if dtype.metadata:      # enums, strings ...: h5py's way
            return None
        tid = self._types.get(dtype.str)
        if tid is None:
            tid = self._types[dtype.str] = h5t.py_create(dtype, logical=True)
        return tid

    def _dcpl(self, dtype, rank: int, chunks: tuple | None, filters: dict):
        """The prepared list, or None for a combination h5py should make itself."""
        known = {"compression", "compression_opts", "shuffle", "scaleoffset"}
        if not set(filters) <= known or filters.get("compression") not in (None, "gzip", "lzf"):
            return None
        kind = dtype.dtype.kind if isinstance(dtype, h5py.Datatype) else np.dtype(dtype).kind
        tracked = h5py.get_config().track_order     # h5py's default for a new dataset
        key = (kind, rank, chunks, tuple(sorted(filters.items())), tracked)
        dcpl = self._dcpls.get(key)
        if dcpl is not None:
            return dcpl
        if (chunks is None and filters) or (
                filters.get("scaleoffset") is not None and kind not in "iu"):
            return None
        # the order h5py's fill_dcpl sets them in: scale-offset, shuffle, compression
        dcpl = h5p.create(h5p.DATASET_CREATE)
        if chunks is not None:
            dcpl.set_chunk(chunks)
        if filters.get("scaleoffset") is not None:
            dcpl.set_scaleoffset(h5z.SO_INT, filters["scaleoffset"])
        if filters.get("shuffle"):
            dcpl.set_shuffle()
        if filters.get("compression") == "gzip":
            level = filters.get("compression_opts")
            dcpl.set_deflate(4 if level is None else level)     # h5py's default level
        elif filters.get("compression") == "lzf":
            dcpl.set_filter(h5z.FILTER_LZF, h5z.FLAG_OPTIONAL)
        dcpl.set_obj_track_times(False)
        if tracked:
            dcpl.set_attr_creation_order(h5p.CRT_ORDER_TRACKED | h5p.CRT_ORDER_INDEXED)
        else:
            dcpl.set_attr_creation_order(0)
        self._dcpls[key] = dcpl
        return dcpl

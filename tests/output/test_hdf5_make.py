"""Datasets and attributes made through h5py's low-level API (formats/hdf5/make.py) are the
objects h5py's own ``create_dataset`` and ``attrs[name] = value`` make: the same type,
shape, creation properties (chunk, filters in order, time tracking, attribute order) and
attributes of the same HDF5 type and value, read back by h5py."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

from partrace.formats.dumpi.tables import REGION_ENUM
from partrace.formats.hdf5 import layout
from partrace.formats.hdf5 import make
from partrace.model import KIND_ENUM, Column

ENUM = h5py.enum_dtype({"A": 1, "B": 2}, basetype=np.int8)

# (shape, dtype, keywords) as the layout creates its columns
CASES = {
    "ids, fixed size": ((100,), np.dtype(np.int32),
                        dict(maxshape=(100,), chunks=(100,),
                             **layout.filters(Column("x", "int32")))),
    "resizable": ((0,), np.dtype(np.uint64),
                  dict(maxshape=(None,), chunks=(4096,), **layout.filters(Column("x", "uint64")))),
    "float, level 2": ((10,), np.dtype(np.float64),
                       dict(maxshape=(10,), chunks=(10,),
                            **layout.filters(Column("x", "float64"), "gzip"))),
    "bytes, lzf": ((7,), np.dtype(np.uint8),
                   dict(maxshape=(None,), chunks=(16,),
                        **layout.filters(Column("x", "uint8"), "lzf"))),
    "sub-array": ((5, 3), np.dtype(np.int64),
                  dict(maxshape=(None, 3), chunks=(16, 3), **layout.filters(Column("x", "int64")))),
    "no rows": ((0,), np.dtype(np.int16), {}),
    "an enum dtype": ((4,), ENUM, dict(maxshape=(4,), chunks=(4,), compression="gzip",
                                       compression_opts=1, shuffle=False)),
}


def _type(tid) -> tuple:
    strings = tid.get_class() == h5py.h5t.STRING
    return (tid.get_class(), tid.get_size(), tid.committed(), str(tid.dtype),
            h5py.check_enum_dtype(tid.dtype),
            (tid.get_cset(), tid.is_variable_str()) if strings else None)


def _attrs(obj) -> list:
    out = []
    for name in obj.attrs:
        value = obj.attrs[name]
        if isinstance(value, h5py.Reference):
            value = obj.file[value].name
        out.append((name, _type(obj.attrs.get_id(name).get_type()),
                    obj.attrs.get_id(name).shape, type(value).__name__, value))
    return out


def _described(ds: h5py.Dataset) -> dict:
    plist = ds.id.get_create_plist()
    return dict(type=_type(ds.id.get_type()), shape=ds.shape, maxshape=ds.maxshape,
                chunks=ds.chunks, layout=plist.get_layout(),
                filters=[plist.get_filter(i)[:3] for i in range(plist.get_nfilters())],
                track_times=plist.get_obj_track_times(),
                attr_order=plist.get_attr_creation_order(), fill=plist.fill_value_defined(),
                link_cset=ds.file.id.links.get_info(ds.name.encode()).cset,
                attrs=_attrs(ds))


@pytest.mark.parametrize("case", list(CASES))
def test_dataset_is_what_h5py_makes(tmp_path, case):
    shape, dtype, kw = CASES[case]
    maker = make.DatasetMaker()
    with h5py.File(tmp_path / "a.h5", "w", libver=layout.LIBVER) as a, \
            h5py.File(tmp_path / "b.h5", "w", libver=layout.LIBVER) as b:
        types = b.create_group("types")
        types["kind"] = h5py.enum_dtype(KIND_ENUM, basetype=np.uint8)
        a["types/kind"] = h5py.enum_dtype(KIND_ENUM, basetype=np.uint8)
        attrs = {"description": "what it holds", "unit": "ns", "enum": None, "measure": False,
                 "rows": 12}
        for f, mine in ((a, True), (b, False)):
            attrs["enum"] = f["types/kind"].ref
            for n in range(2):      # the second made with the list prepared for the first
                if mine:
                    ds = maker.create(f, f"c{n}", shape, dtype, **kw)
                    make.set_attrs(ds, attrs)
                else:
                    ds = f.create_dataset(f"c{n}", shape=shape, dtype=dtype, **kw)
                    for key, value in attrs.items():
                        ds.attrs[key] = value
        for n in range(2):
            assert _described(a[f"c{n}"]) == _described(b[f"c{n}"])


def test_committed_type_dataset(tmp_path):
    """A ``kind`` column: its dtype is the file's committed enum type."""
    col = Column("kind", np.uint8, "record kind", enum=KIND_ENUM)
    kw = dict(maxshape=(None,), chunks=(64,), **layout.filters(col))
    described = []
    for name, mine in (("a.h5", True), ("b.h5", False)):
        with h5py.File(tmp_path / name, "w", libver=layout.LIBVER) as f:
            dtype = layout.h5_dtype(col, f, {})
            ds = (make.DatasetMaker().create(f, "kind", (0,), dtype, **kw) if mine else
                  f.create_dataset("kind", shape=(0,), dtype=dtype, **kw))
            described.append(_described(ds))
    assert described[0] == described[1]
    assert described[0]["type"][2]      # committed


def test_whole_tables_match_h5py(tmp_path, monkeypatch):
    """``create_table`` with DUMPI-like columns (shared enum types, refers, measure, a
    resizable and a fixed table, one with no rows): every object as h5py's calls make it."""
    cols = [Column("time", np.int64, "time", unit="ns"),
            Column("location", np.int32, "rank + 1", refers="locations", measure=False),
            Column("kind", np.uint8, "record kind", enum=KIND_ENUM),
            Column("region", np.int32, "MPI function", enum=REGION_ENUM, refers="regions"),
            Column("post_region", np.int32, "MPI function", enum=REGION_ENUM),
            Column("size", np.uint64, "bytes"), Column("ticks", np.float64, "cpu")]
    tables = {"events": (65536, None), "calls/MPI_Send": (16, 12), "calls/MPI_Init": (16, 0)}

    def build(path):
        with h5py.File(path, "w", libver=layout.LIBVER) as f:
            known = {}
            for name, (chunk, rows) in tables.items():
                layout.create_table(f, name, cols, chunk, None, rows, {}, known=known)

    build(tmp_path / "mine.h5")

    def h5py_create(group, name, shape, dtype, maxshape=None, chunks=None, **kw):
        return group.create_dataset(name, shape=shape, dtype=dtype, maxshape=maxshape,
                                    chunks=chunks, **kw)

    def h5py_attrs(obj, attrs):
        for key, value in attrs.items():
            obj.attrs[key] = value

    monkeypatch.setattr(layout._MAKER, "create", h5py_create)
    monkeypatch.setattr(layout, "set_attrs", h5py_attrs)
    build(tmp_path / "h5py.h5")
    seen = {}
    for name in ("mine.h5", "h5py.h5"):
        with h5py.File(tmp_path / name, "r") as f:
            objects = {}
            f.visititems(lambda path, o: objects.__setitem__(
                path, _described(o) if isinstance(o, h5py.Dataset) else
                (type(o).__name__, _attrs(o), _type(o.id) if isinstance(o, h5py.Datatype)
                 else None)))
            seen[name] = objects
    # the datasets, 4 table groups (calls too), /types and its kind and region types
    assert len(seen["mine.h5"]) == 3 * len(cols) + 4 + 3
    assert seen["mine.h5"] == seen["h5py.h5"]


def test_attribute_order_tracking_follows_h5py(tmp_path):
    """With h5py's ``track_order`` on, a dataset tracks its attributes' order as h5py's
    own would: the prepared property list is not the one made with it off."""
    shape, dtype, kw = CASES["ids, fixed size"]
    maker = make.DatasetMaker()
    config = h5py.get_config()
    with h5py.File(tmp_path / "a.h5", "w") as a, h5py.File(tmp_path / "b.h5", "w") as b:
        maker.create(a, "off", shape, dtype, **kw)
        old = config.track_order
        config.track_order = True
        try:
            mine = maker.create(a, "on", shape, dtype, **kw)
            theirs = b.create_dataset("on", shape=shape, dtype=dtype, **kw)
        finally:
            config.track_order = old
        assert _described(mine) == _described(theirs)
        assert mine.id.get_create_plist().get_attr_creation_order() != 0
        assert _described(a["off"]) != _described(mine)

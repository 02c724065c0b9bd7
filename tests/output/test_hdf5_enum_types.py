"""Enums are stored once per file (committed HDF5 enum types in /types) and read back
equal, through plain h5py and through partrace, on the DUMPI fixture whose six
``region`` columns all name the MPI functions."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

import partrace
from partrace.formats.dumpi.tables import REGION_ENUM
from partrace.formats.hdf5 import layout
from partrace.model import KIND_ENUM, Column, Table
from tests.conftest import DATA, run_cli

COLL = DATA / "dumpi" / "coll-4rank"


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    out = tmp_path_factory.mktemp("enum") / "o.h5"
    r = run_cli(["merge", str(COLL), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr
    return out


def _enum_columns(f) -> dict[str, object]:
    """Every dataset with an ``enum`` attribute (path -> the attribute)."""
    out = {}
    f.visititems(lambda name, o: out.__setitem__(name, o.attrs["enum"])
                 if isinstance(o, h5py.Dataset) and "enum" in o.attrs else None)
    return out


def test_each_mapping_is_stored_once(merged):
    with h5py.File(merged, "r") as f:
        columns = _enum_columns(f)
        regions = {k: v for k, v in columns.items() if k.endswith("region")}
        assert len(regions) >= 6        # events, arrays, requests (2), statuses, strings
        assert all(isinstance(v, h5py.Reference) for v in columns.values())
        assert {f[v].name for v in regions.values()} == {"/types/region"}
        # one type per distinct (mapping, base type), each used by some column
        used = {f[v].name for v in columns.values()}
        assert used == {t.name for t in f["types"].values()}
        seen = [(str(t.dtype.base), json.dumps(h5py.check_enum_dtype(t.dtype), sort_keys=True))
                for t in f["types"].values()]
        assert len(seen) == len(set(seen))
        # the names, as plain h5py gives them, are DUMPI's MPI functions and the kinds
        assert h5py.check_enum_dtype(f["types/region"].dtype) == REGION_ENUM
        kind = f["events/kind"]
        assert h5py.check_enum_dtype(kind.dtype) == dict(KIND_ENUM)
        assert kind.id.get_type().committed() and f[kind.attrs["enum"]].name == "/types/kind"
        # no column carries its own copy of a mapping any more
        assert max(f[k].attrs.get_id("enum").get_storage_size() for k in columns) <= 8


def test_read_back_equal_to_the_source(merged):
    """Every table partrace reads from the file equals the trace's own decode, and
    plain h5py reads the enum columns as the same numbers."""
    src, out = partrace.open(COLL), partrace.open(merged)
    checked = 0
    with h5py.File(merged, "r") as f:
        for name in out.tables:
            got, want = out.table(name), src.table(name)
            assert list(got.names) == list(want.names), name
            for col in want.names:
                a, b = np.asarray(got[col]), np.asarray(want[col])
                assert a.dtype == b.dtype and len(a) == len(b), (name, col)
                if a.dtype == object:
                    assert list(a) == list(b), (name, col)
                    continue
                assert np.array_equal(a, b), (name, col)
                if "enum" in f[name][col].attrs:
                    assert np.array_equal(f[name][col][:], b), (name, col)
                    checked += 1
    assert checked >= 6


def test_schema_enums_keep_the_models_order(merged):
    from partrace.formats import get
    src = get("dumpi").open(COLL)
    want = src.schema(src.read_definitions())
    back = get("hdf5").open(merged)
    got = back.schema(back.read_definitions())
    for name, cols in want.items():
        mine = {c.name: c for c in got[name]}
        for c in cols:
            if c.enum:
                assert list(mine[c.name].enum.items()) == list(dict(c.enum).items()), (name, c.name)


def test_layout_3_json_enums_still_read(merged, tmp_path):
    old = tmp_path / "old.h5"
    old.write_bytes(merged.read_bytes())
    with h5py.File(old, "a") as f:
        ds = f["arrays/region"]
        del ds.attrs["enum"]
        ds.attrs["enum"] = json.dumps(REGION_ENUM)
    with h5py.File(old, "r") as f:
        assert layout.read_enum(f["arrays/region"]) == REGION_ENUM


def test_a_mapping_hdf5_cannot_hold_stays_json(tmp_path):
    cols = [Column("flag", "int32", "two names for one value", enum={"a": 1, "b": 1, "c": 2}),
            Column("step", "int32", "out of value order", enum={"z": 5, "y": 1})]
    table = Table({"flag": np.array([1, 2, 7], np.int32), "step": np.array([5, 1, 9], np.int32)})
    with h5py.File(tmp_path / "t.h5", "w") as f:
        layout.write_table(f, "t", table, cols)
    with h5py.File(tmp_path / "t.h5", "r") as f:
        assert isinstance(f["t/flag"].attrs["enum"], str)
        assert layout.read_enum(f["t/flag"]) == {"a": 1, "b": 1, "c": 2}
        assert list(layout.read_enum(f["t/step"]).items()) == [("z", 5), ("y", 1)]
        assert f["t/step"][:].tolist() == [5, 1, 9]


def _types_used(path) -> tuple[dict, dict]:
    """(type name -> its (name, value)s, column path -> the name of its type)."""
    with h5py.File(path, "r") as f:
        types = {t.name: h5py.check_enum_dtype(t.dtype) for t in f["types"].values()}
        return types, {k: f[v].name for k, v in _enum_columns(f).items()}


def test_types_known_across_tables_equal_those_read_from_the_file(tmp_path):
    """create_table's ``known`` (the file's types read once, kept as they are made) gives
    the types and references that reading the file's types at every column gives: a
    mapping met again is the same type, one whose name is taken gets ``<name>_2``, a type
    the file held before is found, also in a later table."""
    tables = [[Column("region", "int32", "r", enum={"send": 1, "recv": 2}),
               Column("kind", "uint8", "k", enum=dict(KIND_ENUM))],
              [Column("post_region", "int64", "r", enum={"send": 1, "recv": 2}),
               Column("region", "int16", "other names", enum={"wait": 1, "test": 2})],
              [Column("region", "int8", "held before", enum={"held": 3})]]

    def make(path, shared: bool) -> None:
        with h5py.File(path, "w") as f:
            layout.write_table(f, "before", Table({"region": np.array([3], np.int8)}),
                               tables[2])
            known = {} if shared else None
            for i, cols in enumerate(tables):
                layout.create_table(f, f"t{i}", cols, 16, rows=None,
                                    known=known if shared else None)
    make(tmp_path / "shared.h5", True)
    make(tmp_path / "each.h5", False)
    types, used = _types_used(tmp_path / "shared.h5")
    assert (types, used) == _types_used(tmp_path / "each.h5")
    assert used["t0/region"] == used["t1/post_region"] == "/types/region_2"
    assert used["t1/region"] == "/types/region_3"
    assert used["t2/region"] == used["before/region"] == "/types/region"
    assert types["/types/region_3"] == {"wait": 1, "test": 2}

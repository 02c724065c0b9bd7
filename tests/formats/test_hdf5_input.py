"""partrace's own HDF5 read back: a file is checked against the layout it claims
(formats/hdf5/validate.py); damage of every kind is in the fuzz family
(tests/fuzz/hdf5_damage.py).  Here: what must still read, and the lines users see."""
from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest

from tests.conftest import DATA, run_cli

RING8 = DATA / "otf" / "ring8" / "trace" / "ring8.otf"


@pytest.fixture(scope="module")
def ring8_h5(tmp_path_factory):
    out = tmp_path_factory.mktemp("h5") / "ring8.h5"
    r = run_cli(["merge", str(RING8), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr
    return out


def _retyped(src, dst, path, dtype):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        values, attrs = f[path][:], dict(f[path].attrs)
        del f[path]
        f.create_dataset(path, data=values.astype(dtype))
        for k, v in attrs.items():
            f[path].attrs[k] = v
    return dst


@pytest.mark.parametrize("dtype", ["int64", "uint32", "int16"])
def test_id_columns_of_any_integer_width_read(ring8_h5, tmp_path, dtype):
    """Older files keep 32-bit ids, newer ones may keep wider: any integer dtype that holds
    the values reads, with the same rows and values."""
    f = _retyped(ring8_h5, tmp_path / "w.h5", "events/location", dtype)
    out = tmp_path / "back.h5"
    r = run_cli(["convert", str(f), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr
    with h5py.File(ring8_h5) as a, h5py.File(out) as b:
        assert b["events/location"].shape == a["events/location"].shape
        assert (b["events/location"][:].astype(np.int64)
                == a["events/location"][:].astype(np.int64)).all()


@pytest.mark.parametrize("command", ["info", "h5", "otf"])
def test_a_location_the_file_does_not_define_is_refused_by_every_command(ring8_h5, tmp_path,
                                                                         command):
    f = tmp_path / "loc.h5"
    shutil.copy(ring8_h5, f)
    with h5py.File(f, "r+") as h:
        loc = h["events/location"][:]
        loc[100] = 999
        h["events/location"][:] = loc
    argv = ["info", str(f)] if command == "info" else [
        "convert", str(f), "-o", str(tmp_path / f"x.{command}"), "-q"]
    r = run_cli(argv)
    assert r.returncode == 2
    assert r.stderr == (f"partrace: error: {f}:object /events/location: row 100: location 999 "
                        f"is not in the file's locations table (/locations/id)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loc.h5"]


def test_rows_that_disagree_with_the_columns_are_refused_before_any_work(ring8_h5, tmp_path):
    f = tmp_path / "rows.h5"
    for rows in (3, 10**12):
        shutil.copy(ring8_h5, f)
        with h5py.File(f, "r+") as h:
            h["events"].attrs["rows"] = rows
            first = json.loads(h["events"].attrs["columns"])[0]
            n = h["events"][first].shape[0]
        r = run_cli(["info", str(f)], timeout=60)
        assert r.returncode == 2 and r.stderr == (
            f"partrace: error: {f}:object /events/{first}: holds {n} rows, its table's "
            f"'rows' says {rows}\n")

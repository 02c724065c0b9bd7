"""The HDF5 layout round-trips every column type the engine carries."""
import h5py
import numpy as np

from partrace.model import BYTES, STR, Column, Table, column
from partrace.formats.hdf5.layout import read_table, write_table


def test_every_column_type_round_trips(tmp_path):
    cols = [column("time"), column("kind"), Column("payload", ("u1", 4), "four bytes"),
            Column("text", STR, "text"), Column("blob", BYTES, "equal-length bytes"),
            Column("ragged", BYTES, "bytes of any length")]
    t = Table({"time": np.arange(3, dtype=np.int64), "kind": np.array([1, 2, 21], np.uint8),
               "payload": np.arange(12, dtype=np.uint8).reshape(3, 4),
               "text": np.array(["a", "", "ünï"], dtype=object),
               "blob": np.array([b"abc", b"def", b"ghi"], dtype=object),
               "ragged": np.array([b"", b"x", b"\x00\xff"], dtype=object)})
    with h5py.File(tmp_path / "t.h5", "w") as f:
        write_table(f, "t", t, cols)
    with h5py.File(tmp_path / "t.h5", "r") as f:
        assert h5py.check_enum_dtype(f["t/kind"].dtype)["EVENT"] == 21
        assert f["t/time"].attrs["unit"] == "ns"
        back = read_table(f["t"])
    assert back.names == t.names
    for name in t.names:
        a, b = t[name], back[name]
        assert a.shape == b.shape, name
        assert list(a) == list(b) if a.dtype == object else np.array_equal(a, b), name

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


def _pair_round_trip(path, col, values):
    from partrace.formats.hdf5 import text
    from partrace.formats.hdf5.layout import create_table, write_rows
    data, lengths, bad = text.encode(col, values)
    with h5py.File(path, "w") as f:
        g = create_table(f, "t", [col], 4, rows=len(values),
                         text={col.name: (len(data), text.data_chunk(len(data)))})
        write_rows(g, Table({col.name: values}), [col], 0, len(values),
                   {col.name: (data, lengths, 0, 0, len(data))})
    with h5py.File(path, "r") as f:
        return read_table(f["t"]).columns[col.name], read_table(f["t"], 2, 5).columns[col.name], \
            data, lengths, bad


def test_text_pairs_round_trip_any_text(tmp_path):
    """The vectorised encoder gives each row's exact UTF-8 length, whatever the text:
    ASCII, 2-4 byte characters, NUL (also trailing), empty rows, escaped source bytes."""
    rng = np.random.default_rng(7)
    alphabet = ["a", "\x00", "é", "✓", "😀", "\udce9", " "]
    rows = ["".join(rng.choice(alphabet, rng.integers(0, 6))) for _ in range(300)]
    rows += ["", "end\x00", "\udcff\udc80"]
    values = np.array(rows + [None], dtype=object)[:-1]
    back, window, data, lengths, bad = _pair_round_trip(tmp_path / "s.h5", Column("s", STR), values)
    assert bad
    assert list(lengths) == [len(s.encode("utf-8", "surrogateescape")) for s in rows]
    assert data.tobytes() == "".join(rows).encode("utf-8", "surrogateescape")
    assert list(back) == rows and list(window) == rows[2:5]
    ascii_rows = np.array(["x" * k for k in range(40)], dtype=object)
    back, _, _, lengths, bad = _pair_round_trip(tmp_path / "a.h5", Column("s", STR), ascii_rows)
    assert not bad and list(lengths) == list(range(40)) and list(back) == list(ascii_rows)
    raw = np.array([b"", b"\x00", b"\xff\xfe", b"abc\x00"] * 10, dtype=object)
    back, window, _, _, bad = _pair_round_trip(tmp_path / "b.h5", Column("b", BYTES), raw)
    assert not bad and list(back) == list(raw) and list(window) == list(raw[2:5])
    assert all(isinstance(v, bytes) for v in back)


def test_whole_tables_keep_names_as_fixed_width_strings(tmp_path):
    """write_table (the definitions): names as fixed-width strings plain h5py reads;
    a value that would not survive them (ending in NUL, or far wider than the rest)
    makes that column a data/ends pair instead.  Every value reads back."""
    cols = [Column("name", STR), Column("nul", STR), Column("wide", STR), Column("latin", STR)]
    ten = lambda *v: np.array(list(v) * 10, dtype=object)     # noqa: E731
    t = Table({"name": ten("main", "", "ünï"), "nul": ten("a", "end\x00", "b"),
               "wide": np.array(["x"] * 29 + ["z" * 9000], dtype=object),
               "latin": ten("caf\udce9", "ok", "")})
    with h5py.File(tmp_path / "t.h5", "w") as f:
        write_table(f, "t", t, cols)
    with h5py.File(tmp_path / "t.h5", "r") as f:
        assert [n.decode() for n in f["t/name"][:3]] == ["main", "", "ünï"]
        assert isinstance(f["t/nul"], h5py.Group) and isinstance(f["t/wide"], h5py.Group)
        assert f["t/latin"].attrs["encoding"] == "bytes" and f["t/latin"][0] == b"caf\xe9"
        assert "encoding" not in f["t/name"].attrs
        back = read_table(f["t"])
    for name in t.names:
        assert list(back[name]) == list(t[name]), name

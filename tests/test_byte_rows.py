"""model.byte_rows: variable-length rows cut from one buffer, as the formats and the
HDF5 text reader make them (jumbo data, ROSS model data, text columns)."""
import numpy as np

from partrace.model import byte_rows


def _cuts(rng, total, n):
    ends = np.sort(rng.integers(0, total + 1, n))
    starts = np.concatenate([[0], ends[:-1]])
    return starts, ends


def test_rows_equal_slices_of_every_buffer_kind():
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, 5000, dtype=np.uint8)
    starts, ends = _cuts(rng, len(raw), 300)
    expect = [raw.tobytes()[a:b] for a, b in zip(starts, ends)]
    for data in (raw, raw.tobytes(), bytearray(raw.tobytes())):
        rows = byte_rows(data, starts, ends)
        assert rows.dtype == object and len(rows) == len(expect)
        assert all(type(r) is bytes for r in rows)
        assert list(rows) == expect


def test_decoded_rows_give_their_bytes_back():
    text = "ascii, naïve, 漢字, \U0001f600 ".encode() + b"\xff\xfe not utf-8 \x80"
    ends = np.arange(1, len(text) + 1, 3)
    starts = np.concatenate([[0], ends[:-1]])
    rows = byte_rows(np.frombuffer(text, np.uint8), starts, ends, decode=True)
    assert all(type(r) is str for r in rows)
    assert b"".join(r.encode("utf-8", "surrogateescape") for r in rows) == text[:ends[-1]]


def test_no_rows():
    assert byte_rows(b"abc", np.zeros(0, np.int64), np.zeros(0, np.int64)).shape == (0,)

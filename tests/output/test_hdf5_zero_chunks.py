"""Chunks whose rows are all zero are not written: the fill value (0) reads back for
them, on any rank count, in partrace and in plain h5py."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

from partrace.formats.hdf5.values import write_values
from tests.conftest import run_cli
from tests.formats.test_contract import FIXTURES


def test_written_in_pieces_only_chunks_with_a_nonzero_row_are_stored(tmp_path):
    rng = np.random.default_rng(7)
    for _ in range(200):
        step, total = int(rng.integers(1, 20)), int(rng.integers(1, 200))
        want = np.zeros((total, 2), np.int64)
        with h5py.File(tmp_path / "w.h5", "w") as f:
            ds = f.create_dataset("a", shape=(total, 2), maxshape=(None, 2), dtype="i8",
                                  chunks=(step, 2))
            pos = 0
            while pos < total:
                n = int(rng.integers(1, total - pos + 1))
                v = np.where(rng.random((n, 2)) < rng.random() * 0.2, rng.integers(1, 9, (n, 2)), 0)
                want[pos:pos + n] = v
                write_values(ds, None, v, pos)
                pos += n
            assert (ds[:] == want).all()
            for c in range(0, total, step):
                stored = ds.id.get_chunk_info_by_coord((c, 0)).byte_offset is not None
                assert stored == bool(want[c:c + step].any()), (step, total, c)


@pytest.mark.parametrize("nranks", [None, 3])
def test_a_column_of_zeros_takes_no_bytes_and_reads_as_zeros(tmp_path, nranks):
    trace = FIXTURES["dumpi"][0]     # no record of this trace has a root, a thread
    out = tmp_path / "x.h5"
    r = run_cli(["merge", str(trace), "-o", str(out), "-q"], nranks=nranks)
    assert r.returncode == 0, r.stderr
    ref = tmp_path / "ref.h5"
    r = run_cli(["merge", str(trace), "-o", str(ref), "-q", "--compress", "lzf"])
    assert r.returncode == 0, r.stderr
    with h5py.File(out) as f, h5py.File(ref) as g:
        zero = [c for c in f["events"] if isinstance(f["events"][c], h5py.Dataset)
                and not f["events"][c][:].any()]
        assert zero, "the fixture should have a column that no record uses"
        for c in zero:
            assert f["events"][c].id.get_storage_size() == 0, c
        for c in f["events"]:
            if isinstance(f["events"][c], h5py.Dataset):
                assert np.array_equal(f["events"][c][:], g["events"][c][:]), c

"""The serial join's holes (output/hdf5_holes.py): HDF5 places a chunk, its bytes come later.

Real HDF5 through h5py's fileobj driver: chunks stored with placeholders leave no bytes
written and are indexed where the file object says; filled from another file, they read
back as the values and stored bytes written there.  An HDF5 that copied the buffer
would be caught, not read as zeros.
"""
from __future__ import annotations

import os
import re

import h5py
import numpy as np
import pytest

from partrace.errors import WriteFailed
from partrace.output import hdf5_holes
from partrace.output.hdf5_holes import HoleFile, fill, runs
from partrace.output.hdf5_chunk_map import whole_chunks

MAKE = dict(chunks=(4096,), dtype="i8", compression="gzip", shuffle=True)


def _part(path, values):
    """A part holding ``values`` whole, as the sink's ranks write them: (its chunks'
    (row, mask, offset, size) rows, as whole_chunks lists them)."""
    with h5py.File(path, "w", libver="v110") as f:
        ds = f.create_dataset("v", shape=values.shape, **MAKE)
        ds[:] = values
        return whole_chunks(ds, [(0, len(values))])


def _values(n, seed):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.integers(0, 1 << rng.integers(1, 40, -(-n // 4096)).repeat(4096)[:n],
                                  n))


def _place(final, listed, n):
    """Every chunk of ``listed`` placed in a new ``n``-row dataset of ``final``;
    returns the places (part offset, final offset, size) and what was written."""
    with h5py.File(final, "w", libver="v110") as f:
        f.create_dataset("v", shape=(n,), **MAKE)
    holes = HoleFile(final, int(listed[:, 3].max()))
    with h5py.File(holes, "r+") as f:
        write = f["v"].id.write_direct_chunk
        for row, mask, _, size in listed.tolist():
            write((row,), holes.placeholder(size), mask)
        at = holes.holes_since(0, listed[:, 3])
    holes.close()
    return np.column_stack([listed[:, 2], at, listed[:, 3]]), holes.written_bytes


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_placed_chunks_filled_read_back_as_written(tmp_path, monkeypatch, kernel_copy):
    """Chunks placed leave their bytes unwritten (what the file object wrote is a small
    part of them) at the offsets HDF5's index gives; fill (copy_file_range, or reads and
    writes where it is missing) makes the file read back the part's values and stored
    chunks, and HDF5's own index agrees with the places."""
    monkeypatch.setattr(hdf5_holes, "_kernel_copy", kernel_copy)
    monkeypatch.setattr(hdf5_holes, "COPY_BYTES", 5000)    # pieces smaller than a chunk
    values = _values(100_000, 1)
    part, final = tmp_path / "part.h5", tmp_path / "final.h5"
    listed = _part(part, values)
    places, written = _place(final, listed, len(values))
    assert len(places) == 25 and written < listed[:, 3].sum() / 4
    assert fill(part, final, places) == int(listed[:, 3].sum())
    with h5py.File(final, "r") as f, h5py.File(part, "r") as p:
        assert np.array_equal(f["v"][:], values)
        for row, _, _, size in listed.tolist():
            info = f["v"].id.get_chunk_info_by_coord((row,))
            at = places[listed[:, 0] == row][0]
            assert (info.byte_offset, info.size) == (at[1], size)
            assert f["v"].id.read_direct_chunk((row,)) == p["v"].id.read_direct_chunk((row,))


def test_runs_join_chunks_that_follow_each_other_in_both_files():
    places = np.array([[0, 100, 10], [10, 110, 5], [15, 200, 5], [20, 205, 1],
                       [40, 206, 2]], np.int64)
    assert runs(places).tolist() == [[0, 100, 15], [15, 200, 6], [40, 206, 2]]
    assert runs(places[:1]).tolist() == [[0, 100, 10]]


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_a_part_shorter_than_its_chunks_is_named(tmp_path, monkeypatch, kernel_copy):
    """A part that ends inside a chunk to copy: an error naming it and the byte where it
    ends, not a chunk of zeros."""
    monkeypatch.setattr(hdf5_holes, "_kernel_copy", kernel_copy)
    values = _values(20_000, 2)
    part, final = tmp_path / "part.h5", tmp_path / "final.h5"
    listed = _part(part, values)
    places, _ = _place(final, listed, len(values))
    end = int(listed[:, 2].max() + listed[listed[:, 2].argmax(), 3])
    short = tmp_path / "short.h5"
    short.write_bytes(part.read_bytes()[:end - 5])
    with pytest.raises(WriteFailed, match=f"{re.escape(str(short))}: short.h5, a rank's part "
                                          f"of it in the staging folder, ends at byte "
                                          f"{end - 5}, inside a stored chunk"):
        fill(short, final, places)


def test_a_copied_placeholder_is_caught(tmp_path):
    """A chunk stored from other memory than the placeholder (what an HDF5 that copied
    the buffer would hand the driver) is written, and holes_since refuses the count."""
    values = _values(20_000, 3)
    part, final = tmp_path / "part.h5", tmp_path / "final.h5"
    listed = _part(part, values)
    with h5py.File(final, "w", libver="v110") as f:
        f.create_dataset("v", shape=(len(values),), **MAKE)
    holes = HoleFile(final, int(listed[:, 3].max()))
    with h5py.File(holes, "r+") as f:
        for row, mask, _, size in listed.tolist():
            f["v"].id.write_direct_chunk((row,), np.array(holes.placeholder(size)), mask)
        with pytest.raises(RuntimeError, match=r"HDF5 wrote 0 placeholder chunks where 5 "):
            holes.holes_since(0, listed[:, 3])
    holes.close()
    assert holes.written_bytes >= listed[:, 3].sum()
    assert os.path.getsize(final) > 0


SHORT_PART = """
import os, sys
from partrace.engine.stop import install
install()
from partrace.output import hdf5_joined
real = hdf5_joined.fill

def short_fill(part, final, places):
    if os.environ.get("PMI_RANK") == "2":       # this rank's part cut inside its chunks
        os.truncate(part, int(places[:, 0].max()) + 1)
    return real(part, final, places)

hdf5_joined.fill = short_fill
from partrace.cli import entry
sys.argv = ["partrace", *sys.argv[1:]]
entry()
"""


@pytest.mark.mpi
def test_a_rank_failing_to_fill_its_chunks_fails_the_run_whole(tmp_path):
    """Rank 2's part cut short after rank 0 placed its chunks: the run ends with exit 2
    and one line naming the part and the byte where it ends, on no rank left waiting,
    and leaves no output and no staging behind."""
    import subprocess
    import sys

    from tests.conftest import DATA, ROOT, mpiexec
    out = tmp_path / "out" / "o.h5"
    out.parent.mkdir()
    trace = DATA / "otf" / "ring8" / "trace" / "ring8.otf"
    r = subprocess.run([mpiexec(), "-n", "3", sys.executable, "-c", SHORT_PART, "merge",
                        str(trace), "-o", str(out), "-q"], capture_output=True, text=True,
                       cwd=ROOT, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_H5_CHUNK_ROWS": "64"})
    assert r.returncode == 2, r.stderr
    assert re.fullmatch(rf"partrace: error: {re.escape(str(out))}: rank-00002\.h5, a rank's part "
                        r"of it in the staging folder, ends at byte \d+, inside a stored "
                        r"chunk\n", r.stderr), r.stderr
    assert os.listdir(out.parent) == []

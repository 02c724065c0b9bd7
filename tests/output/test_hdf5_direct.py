"""Owned chunks written once, straight into the one HDF5 file (output/hdf5_direct.py).

At several ranks and many windows, every whole chunk a rank r > 0 owns is placed by rank
0 after its window and written by its rank into the output: no part holds it, nothing is
copied at commit, and the file is the one rank gives.  A pipeline h5py runs (lzf)
keeps the parts' way.  A rank that cannot write its chunks fails the run whole.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from partrace.output.hdf5_direct import ChunkLog, LoggedDataset
from tests.conftest import ROOT, mpiexec, run_cli
from tests.support.compare import assert_same_content
from tests.support.scripts import gen_otf

pytestmark = pytest.mark.mpi


def _outputs(stats: Path) -> list[dict]:
    return [r["output"] for r in json.loads(stats.read_text())["ranks"]]


def test_owned_chunks_go_straight_into_the_output(tmp_path):
    """3 ranks, many windows, 4,096-row chunks: ranks 1 and 2 write their chunks' bytes
    into the output themselves (none filled in from a part), rank 0 placed exactly those
    bytes, most of them during the windows; the file's chunks are byte for byte the
    1-rank file's."""
    trace = gen_otf(tmp_path, 60000)
    one, three, stats = tmp_path / "one.h5", tmp_path / "three.h5", tmp_path / "s.json"
    env = {"PARTRACE_H5_CHUNK_ROWS": "4096"}
    r = run_cli(["merge", str(trace), "-o", str(one), "-q"], env=env)
    assert r.returncode == 0, r.stderr
    r = run_cli(["merge", str(trace), "-o", str(three), "-q", "--memory", "8M",
                 "--stats", str(stats)], nranks=3, env=env)
    assert r.returncode == 0, r.stderr
    assert_same_content(one, three)
    said = _outputs(stats)
    assert all(s["filled_bytes"] == 0 for s in said)
    assert said[1]["direct_bytes"] > 0 and said[2]["direct_bytes"] > 0
    assert said[0]["placed_bytes"] == said[1]["direct_bytes"] + said[2]["direct_bytes"]
    assert 0 < said[0]["window_place_seconds"] <= said[0]["place_seconds"]
    assert len(json.loads(stats.read_text())["ranks"][0]["windows"]) >= 3
    with h5py.File(one, "r") as a, h5py.File(three, "r") as b:
        x, y = a["events/time"], b["events/time"]
        for c in range(0, x.shape[0], x.chunks[0]):
            assert x.id.read_direct_chunk((c,)) == y.id.read_direct_chunk((c,))


def test_a_pipeline_h5py_runs_keeps_the_parts(tmp_path):
    """--compress lzf: h5py's filter pipeline writes the chunks, so an owner's go into its
    part and are filled in at commit, as before; the same rows as 1 rank's."""
    trace = gen_otf(tmp_path, 30000)
    one, two, stats = tmp_path / "one.h5", tmp_path / "two.h5", tmp_path / "s.json"
    env = {"PARTRACE_H5_CHUNK_ROWS": "4096"}
    assert run_cli(["merge", str(trace), "-o", str(one), "-q", "--compress", "lzf"],
                   env=env).returncode == 0
    r = run_cli(["merge", str(trace), "-o", str(two), "-q", "--compress", "lzf",
                 "--stats", str(stats)], nranks=2, env=env)
    assert r.returncode == 0, r.stderr
    assert_same_content(one, two)
    said = _outputs(stats)
    assert said[1]["direct_bytes"] == 0 and said[1]["filled_bytes"] > 0


FAIL_DIRECT = """
import os, sys
from partrace.errors import WriteFailed
from partrace.output import hdf5_joined
real = hdf5_joined.write_logged

def failing(path, offsets, data):
    if os.environ.get("PMI_RANK") == "2" and len(data):
        raise WriteFailed(f"{path}: no space left on device")
    return real(path, offsets, data)

hdf5_joined.write_logged = failing
from partrace.cli import entry
sys.argv = ["partrace", *sys.argv[1:]]
entry()
"""


def test_a_rank_failing_to_write_its_chunks_fails_the_run_whole(tmp_path):
    """Rank 2 cannot write its chunks into the output after a window: exit 2, one line
    naming the output, no rank left waiting, nothing left beside the trace."""
    trace = gen_otf(tmp_path, 30000)
    out = tmp_path / "out" / "o.h5"
    out.parent.mkdir()
    r = subprocess.run([mpiexec(), "-n", "3", sys.executable, "-c", FAIL_DIRECT, "merge",
                        str(trace), "-o", str(out), "-q", "--memory", "8M"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT),
                            "PARTRACE_H5_CHUNK_ROWS": "4096"})
    assert r.returncode == 2, r.stderr
    assert re.fullmatch(rf"partrace: error: {re.escape(str(out))}: no space left on device\n",
                        r.stderr), r.stderr
    assert os.listdir(out.parent) == []


def test_a_chunk_is_logged_once_and_never_read_back():
    """The writer's invariants, checked: an owned chunk stored twice, or looked up or read
    back once logged, is an internal error, never a chunk silently lost; past its bound
    the log leaves a chunk to the part, where it is looked up as any other."""
    class PartId:
        def __init__(self):
            self.stored = {}

        def write_direct_chunk(self, offsets, data, mask=0):
            self.stored[offsets[0]] = (data, mask)

        def get_chunk_info_by_coord(self, offsets):
            return type("Info", (), {"byte_offset": 1 if offsets[0] in self.stored else None})

    class Part:
        dtype, chunks, shape, ndim, name = np.dtype("i8"), (4,), (16,), 1, "/t/x"
        id = PartId()

    log = ChunkLog(limit=4)
    ds = LoggedDataset(Part(), 0, log)
    assert ds.id.get_chunk_info_by_coord((4,)).byte_offset is None
    ds.id.write_direct_chunk((4,), b"abc", 2)
    with pytest.raises(RuntimeError, match="stored twice"):
        ds.id.write_direct_chunk((4,), b"abc", 2)
    with pytest.raises(RuntimeError, match="written again or read back"):
        ds.id.get_chunk_info_by_coord((4,))
    with pytest.raises(RuntimeError, match="written again or read back"):
        ds.id.read_direct_chunk((4,))
    assert not log.full
    ds.id.write_direct_chunk((8,), b"de", 0)
    assert log.full and log.held == 5 and not Part.id.stored
    ds.id.write_direct_chunk((12,), b"fgh", 1)      # past the bound: the part's
    assert Part.id.stored == {12: (b"fgh", 1)}
    assert ds.id.get_chunk_info_by_coord((12,)).byte_offset == 1
    meta = log.take()
    assert meta.tolist() == [[0, 4, 2, 3], [0, 8, 0, 2]]
    assert log.full     # taken, but their bytes wait in the log until released
    assert log.take().shape == (0, 4)
    assert log.release() == [b"abc", b"de"] and not log.full and log.release() == []


BOUNDED = """
import sys
from partrace.output import hdf5_direct
hdf5_direct.LOG_BYTES = int(sys.argv.pop(1))
from partrace.cli import entry
sys.argv = ["partrace", *sys.argv[1:]]
entry()
"""


def test_a_full_log_leaves_the_chunks_to_the_parts(tmp_path):
    """A log bound of one chunk: each window's first chunk of a rank goes straight into
    the file, the rest into its part and from there at commit; the same rows."""
    trace = gen_otf(tmp_path, 30000)
    one, three, stats = tmp_path / "one.h5", tmp_path / "three.h5", tmp_path / "s.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_H5_CHUNK_ROWS": "4096"}
    assert run_cli(["merge", str(trace), "-o", str(one), "-q"], env=env).returncode == 0
    r = subprocess.run([mpiexec(), "-n", "3", sys.executable, "-c", BOUNDED, "1", "merge",
                        str(trace), "-o", str(three), "-q", "--memory", "8M", "--stats",
                        str(stats)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert_same_content(one, three)
    said = _outputs(stats)
    for s in said[1:]:
        assert s["direct_bytes"] > 0 and s["filled_bytes"] > 0

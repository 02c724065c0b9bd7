"""A long table's chunks grow with its rows, so the file's chunk index stays small.

The rule's constants (layout.CHUNK_ROWS, CHUNKS_PER_COLUMN, GROWN_CHUNK_ROWS) are made
small here, in every rank's process, so that a trace of a few thousand rows shows what
a trace of billions would: the same rows at every rank count, the long table's chunks
grown, the short ones not, and PARTRACE_H5_CHUNK_ROWS still choosing for itself.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from partrace.formats.hdf5 import layout
from tests.conftest import DATA, ROOT, mpiexec
from tests.support.compare import assert_same_content
from tests.support.scripts import gen_otf

pytestmark = pytest.mark.mpi

SMALL = dict(CHUNK_ROWS=256, CHUNKS_PER_COLUMN=8, GROWN_CHUNK_ROWS=1 << 14)
TINY = dict(CHUNK_ROWS=16, CHUNKS_PER_COLUMN=8, GROWN_CHUNK_ROWS=1 << 10)
DUMPI = DATA / "dumpi" / "p2p-4rank"   # a long table, short ones, text columns

MERGE = """
import json, sys
from partrace.formats.hdf5 import layout
for name, value in json.loads(sys.argv[4]).items():
    setattr(layout, name, value)
from partrace.engine.mpi import world
from partrace.engine.pipeline import run
from partrace.output.hdf5_sink import HDF5Sink
sink = HDF5Sink(sys.argv[2])
stats = run(world(), sys.argv[1], sink, memory=int(sys.argv[3]))
if world().rank == 0:
    print(json.dumps(dict(windows=stats.windows, rows=sink.table_rows,
                          chunk_rows=sink.chunk_rows, written=sink.files.written())))
"""


def _merge(trace: Path, out: Path, ranks: int, env: dict | None = None,
           memory: int = 1 << 30, rule: dict = SMALL) -> dict:
    r = subprocess.run([mpiexec(), "-n", str(ranks), sys.executable, "-c", MERGE, str(trace),
                        str(out), str(memory), json.dumps(rule)], capture_output=True,
                       text=True, cwd=ROOT,
                       timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_rule_keeps_a_column_to_its_chunks_up_to_the_longest():
    rows = layout.CHUNK_ROWS * layout.CHUNKS_PER_COLUMN
    assert layout.grown_chunk_rows(0) == layout.CHUNK_ROWS
    assert layout.grown_chunk_rows(rows) == layout.CHUNK_ROWS
    assert layout.grown_chunk_rows(rows + 1) == 2 * layout.CHUNK_ROWS
    for total in (rows + 1, 3 * rows, 5 * rows + 7, 1 << 40):
        got = layout.grown_chunk_rows(total)
        assert got & (got - 1) == 0 and got <= layout.GROWN_CHUNK_ROWS
        if got < layout.GROWN_CHUNK_ROWS:   # the shortest that keeps the column's chunks
            assert -(-total // got) <= layout.CHUNKS_PER_COLUMN < -(-total // (got // 2))
    assert layout.grown_chunk_rows(1 << 40) == layout.GROWN_CHUNK_ROWS


def _reference(trace: Path, out: Path) -> Path:
    """``trace`` merged on one rank with the default chunks."""
    subprocess.run([sys.executable, "-m", "partrace", "merge", str(trace), "-o", str(out),
                    "-q"], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return out


def _grown(events: int, step: int, rule: dict) -> None:
    """``step`` is the shortest power of two keeping ``events`` rows to the rule's chunks."""
    assert step > rule["CHUNK_ROWS"] and step & (step - 1) == 0
    assert -(-events // step) <= rule["CHUNKS_PER_COLUMN"] < -(-events // (step // 2))


def test_a_long_table_s_chunks_grow_the_same_at_any_rank_count(tmp_path):
    """Many windows (a small budget) and 1, 2 and 3 ranks: one file, the same rows as the
    default chunks give, the events table's chunks grown to keep each column to
    CHUNKS_PER_COLUMN chunks; the join's account names each table's rows, chunk rows and
    chunks placed."""
    trace = gen_otf(tmp_path, 30000)
    ref = _reference(trace, tmp_path / "ref.h5")
    said = {}
    for ranks in (1, 2, 3):
        said[ranks] = _merge(trace, tmp_path / f"r{ranks}.h5", ranks, memory=1 << 21)
        assert_same_content(ref, tmp_path / f"r{ranks}.h5")
    assert said[3]["windows"] > 1
    rows, chunk_rows = said[1]["rows"], said[1]["chunk_rows"]
    assert all(said[r]["rows"] == rows and said[r]["chunk_rows"] == chunk_rows for r in (2, 3))
    events = rows["events"]
    with h5py.File(tmp_path / "r3.h5", "r") as f:
        step = f["events/time"].chunks[0]
    assert step == chunk_rows["events"]
    _grown(events, step, SMALL)
    placed = said[3]["written"]["tables"]
    assert placed["events"][:2] == [events, step] and placed["events"][2] > 0


def test_only_the_long_tables_grow(tmp_path):
    """DUMPI: a long events table grows its chunks, the short tables keep theirs (each
    the power of two that holds it, at most CHUNK_ROWS); the same rows as the default's
    at 1 and 3 ranks, text columns included."""
    ref = _reference(DUMPI, tmp_path / "ref.h5")
    limit = TINY["CHUNK_ROWS"] * TINY["CHUNKS_PER_COLUMN"]
    for ranks in (1, 3):
        out = tmp_path / f"r{ranks}.h5"
        said = _merge(DUMPI, out, ranks, rule=TINY)
        assert_same_content(ref, out)
        rows = said["rows"]
        assert rows["events"] > limit and 0 < rows["requests"] <= limit
        with h5py.File(out, "r") as f:
            _grown(rows["events"], f["events/time"].chunks[0], TINY)
            for name, n in rows.items():
                if 0 < n <= limit:
                    assert f[name]["time"].chunks[0] <= TINY["CHUNK_ROWS"], name


def test_the_environment_s_chunk_rows_are_not_grown(tmp_path):
    trace = gen_otf(tmp_path, 30000)
    said = _merge(trace, tmp_path / "o.h5", 2, env={"PARTRACE_H5_CHUNK_ROWS": "128"})
    assert set(said["chunk_rows"].values()) == {128}
    with h5py.File(tmp_path / "o.h5", "r") as f:
        assert f["events/time"].chunks == (128,)

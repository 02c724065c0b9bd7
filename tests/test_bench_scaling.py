"""scripts/bench_scaling.py on a tiny trace at 1 and 2 ranks: its tables, its model and the
check that every rank count wrote the same output."""
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
@pytest.mark.mpi
def test_bench_scaling_tables_model_and_identity(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_scaling.py"), "--mb", "0.3",
         "--ranks", "1,2", "--formats", "dumpi", "--outputs", "h5", "--wall-rounds", "1",
         "--workdir", str(tmp_path), "--results", str(tmp_path / "results.md")],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "### dumpi" in out and "-> h5" in out
    assert "| phase | busy(1) s | P=1 | P=2 |" in out
    for phase in ("start-up", "plan", "decode", "cuts", "exchange", "merge", "write", "commit",
                  "total"):
        assert f"| {phase} |" in out
    assert "same data at every P: yes" in out           # the identity check ran and held
    assert "identity across rank counts: every output the same" in out
    assert "t(2)/t(1)" in out
    assert "| step | P=1 | P=256 | P=1024 |" in out
    assert "| HDF5 join (rank 0's bytes) |" in out and "| modelled E(P) |" in out
    assert "## " in (tmp_path / "results.md").read_text()

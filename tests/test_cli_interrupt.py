"""A run killed mid-way (SIGTERM: Slurm's time limit, scancel) leaves nothing behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from .conftest import ROOT, SYNTH, mpiexec
from .support.held_run import wait_until_held


def _start(args, env, nranks=None):
    cmd = [sys.executable, "-m", "partrace", *args]
    if nranks:
        cmd = [mpiexec(), "-n", str(nranks), *cmd]
    full = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH, **env}
    full.pop("PARTRACE_MPI", None)
    return subprocess.Popen(cmd, env=full, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("nranks", [None, 2])
@pytest.mark.parametrize("suffix", ["h5", "otf"])
def test_sigterm_removes_spill_and_unpublished_output(synth_trace, tmp_path, nranks, suffix):
    trace = synth_trace(locations=6, events=20000, units=6)
    spill = tmp_path / "spill"
    spill.mkdir()
    out = tmp_path / f"out.{suffix}"
    # a rank decodes its units in key order: 0005 comes after others have spilled
    proc = _start(["merge", str(trace), "-o", str(out), "--memory", "1M", "--tmpdir", str(spill)],
                  {"PARTRACE_TEST_HOLD_DECODE": "0005"}, nranks)
    held = tmp_path / f"{trace.name}.held"
    wait_until_held(proc, held)
    assert any(spill.rglob("*")), "the test needs a run that has spilled"
    assert any(p.name.startswith(f".{out.name}.partrace-") for p in tmp_path.iterdir())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err     # mpiexec passes the ranks' status on
    assert not list(spill.iterdir()), err
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([trace.name, held.name, "spill"]), (left, err)

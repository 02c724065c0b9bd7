"""A stop signal while numba compiles a kernel: held until the compile returns, then the run
stops as it would have (exit 143 on every rank, no traceback, nothing left behind)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from .conftest import DATA, ROOT, mpiexec
from .test_cli_safety import _alive, _ranks

RING8 = DATA / "otf" / "ring8" / "trace" / "ring8.otf"

# Loaded by Python at start-up (sitecustomize on the path): on the rank named, the first
# numba compile waits inside numba, until the test has signalled that rank, for a file
HOOK = """
import os
if os.environ.get("PMI_RANK") == os.environ.get("HOLD_COMPILE_RANK"):
    import time
    from numba.core import event

    class Hold(event.Listener):
        done = False

        def on_start(self, ev):
            if Hold.done:
                return
            Hold.done = True
            folder = os.environ["HOLD_COMPILE_DIR"]
            open(os.path.join(folder, "compiling"), "w").close()
            while not os.path.exists(os.path.join(folder, "go")):
                time.sleep(0.01)

        def on_end(self, ev):
            pass

    event.register("numba:compile", Hold())
"""


@pytest.mark.mpi
@pytest.mark.slow
def test_sigterm_while_a_rank_compiles_stops_every_rank_cleanly(tmp_path):
    hook, marks, out_dir = tmp_path / "hook", tmp_path / "marks", tmp_path / "out"
    for d in (hook, marks, out_dir):
        d.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    env = {**os.environ, "PYTHONPATH": f"{hook}{os.pathsep}{ROOT}",
           "NUMBA_CACHE_DIR": str(tmp_path / "cache"),     # empty: every kernel compiles
           "PARTRACE_JIT": "numba", "PARTRACE_WARM": "0",
           "HOLD_COMPILE_RANK": "1", "HOLD_COMPILE_DIR": str(marks)}
    for var in ("PARTRACE_FORMATS", "PARTRACE_MPI"):
        env.pop(var, None)
    out = out_dir / "m.otf"
    proc = subprocess.Popen([mpiexec(), "-n", "2", sys.executable, "-m", "partrace", "merge",
                             str(RING8), "-o", str(out), "--tmpdir", str(out_dir)],
                            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 300
    while not (marks / "compiling").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "rank 1 never compiled a kernel"
        time.sleep(0.05)
    ranks = _ranks(proc.pid)
    assert sorted(ranks) == [0, 1], ranks
    os.kill(ranks[1], signal.SIGTERM)       # rank 1 is inside numba's compile
    (marks / "go").touch()
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert "did not stop together" not in err, err      # stopped together, not by the watchdog
    assert any(line.startswith("partrace: terminated (SIGTERM on rank 1)")
               for line in err.splitlines()), err
    assert not list(out_dir.iterdir()), err             # no output, no spill, no staging
    assert not [p for p in ranks.values() if _alive(p)], "a rank outlived mpiexec"

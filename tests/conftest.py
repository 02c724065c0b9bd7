"""Shared test helpers: running the CLI in-process, serially, or under mpiexec."""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support import forkserver

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SYNTH = "synth=tests.support.synth:Synth"

# A temporary folder of this test process's own (each xdist worker's), which the runs it
# starts inherit: a run removes the spill folders killed runs left in its temporary folder,
# with a warning, and a test that expects no warning must not meet those of another
# worker's kill test, or of any run killed on this machine before.  numba's cache is not in
# it (partrace/__init__.py: the package's own __pycache__, else the user's cache folder).
_TMP = tempfile.mkdtemp(prefix="partrace-tests-")
os.environ["TMPDIR"] = _TMP
tempfile.tempdir = None
atexit.register(shutil.rmtree, _TMP, True)

# The suite's MPI runs share the cores with each other (a worker per core, each running
# jobs of 2-8 ranks): their MPICH waits sleep instead of spin, as partrace sets by itself
# only when one job has more ranks than cores (engine/mpi.py).
os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")


def mpiexec() -> str | None:
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def run_cli(args: list[str], nranks: int | None = None, timeout: float = 180,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``partrace ARGS`` as a plain process (nranks None) or under mpiexec -n N."""
    base_env = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH}
    base_env.pop("PARTRACE_MPI", None)
    full_env = {**base_env, **(env or {})}
    full_env.pop("PARTRACE_MPI", None)
    cmd = [sys.executable, "-m", "partrace", *args]
    if nranks is None:      # forked from a Python with numpy, h5py and numba imported
        done = forkserver.run(cmd, [str(a) for a in args], full_env, str(ROOT), timeout,
                              base_env)
        if done is not None:
            return done
    if nranks is not None:
        launcher = mpiexec()
        if launcher is None:
            pytest.fail("mpiexec not found: install the test extras (pip install -e '.[mpich,test]')")
        cmd = [launcher, "-n", str(nranks), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env,
                          cwd=ROOT)


@pytest.fixture
def synth_trace(tmp_path):
    def make(locations=7, events=2000, units=5, seed=3):
        p = tmp_path / f"synth-{locations}-{events}-{units}-{seed}.json"
        p.write_text('{"synth": {"locations": %d, "events": %d, "units": %d, "seed": %d}}'
                     % (locations, events, units, seed))
        return p
    return make


@pytest.fixture(params=[False, True], ids=["compiled", "python"])
def jit_mode(request):
    """Runs a test with the kernels compiled, then as plain Python (the small-input mode)."""
    from partrace.kernels import jit
    with jit.Scope(mode="python" if request.param else "numba"):   # as a job fixes it
        yield


def pytest_collection_modifyitems(session, config, items):
    """Files holding slow tests first, the longest of them (``@pytest.mark.slow(minutes=N)``:
    about N minutes on a 2-core machine) at the head: with pytest-xdist's ``--dist loadfile
    --no-loadscope-reorder`` (scripts/test) a file runs whole on one worker, in the order
    files are handed out, so the longest ones (the warm and wheel tests, which compile every
    kernel from scratch) start at once instead of ending the run alone."""
    minutes: dict = {}
    for item in items:
        for mark in item.iter_markers("slow"):
            minutes[item.path] = minutes.get(item.path, 0) + mark.kwargs.get("minutes", 0)
    # stable: the order within a file is kept
    items.sort(key=lambda item: (item.path not in minutes, -minutes.get(item.path, 0)))

"""A cold cache and `partrace warm`: a parallel run with a cold cache compiles on rank 0 only
while the others wait; after `partrace warm`, no command compiles anything: every kernel any
command can load (every output, every input, serial and parallel paths) is in numba's cache.

The first two share one cache, to compile the ovni kernels once: the cold run's rank 0 warms
the ovni samples, of which OVNI is one, and `partrace warm OVNI` then adds what it covers
beyond (the parallel paths) before every command runs on OVNI."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from partrace.warm import TREE
from tests.conftest import DATA, ROOT, mpiexec
from tests.support.installs import cache_state

OVNI = DATA / "ovni" / "v3-mpisim-small" / "ovni"


def _run(args, env, nranks=None):
    cmd = [sys.executable, "-m", "partrace", *args]
    if nranks:
        cmd = [mpiexec(), "-n", str(nranks), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)


def _env(cache, **more):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT),
           "PARTRACE_JIT": "numba", **more}     # compiled, however small the trace
    env.pop("PARTRACE_FORMATS", None)
    return env


@pytest.fixture(scope="module")
def cold_run(tmp_path_factory):
    """`partrace info OVNI` on 2 ranks with an empty cache (PARTRACE_WARM=1: warm first at
    any rank count): the run, its command and environment, the cache it filled."""
    cache = tmp_path_factory.mktemp("cold") / "cache"
    env = _env(cache, PARTRACE_WARM="1")
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "partrace", "info", str(OVNI), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    return r, cmd, env, cache


@pytest.mark.slow(minutes=2)
@pytest.mark.mpi
def test_cold_parallel_run_compiles_on_rank_0_while_the_others_wait(cold_run):
    """Rank 0 warms the input's format into an empty cache, once; the answer is the same."""
    cold, cmd, env, cache = cold_run
    assert cold.returncode == 0, cold.stderr
    said = cold.stderr.splitlines()
    assert len([x for x in said if "compiling the ovni kernels once on rank 0" in x]) == 1, said
    assert f"numba cache: {cache}" in said[0]
    assert json.loads((cache / "partrace-warm.json").read_text()).keys() == {"ovni", TREE}
    assert cache_state(cache)
    warm = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert warm.returncode == 0 and warm.stderr == "", warm.stderr
    assert json.loads(warm.stdout) == json.loads(cold.stdout)
    assert json.loads(warm.stdout)["events"] > 0


@pytest.mark.slow(minutes=1)
def test_after_warm_no_command_compiles(cold_run, tmp_path):
    from partrace.output import OUTPUTS
    cache = tmp_path / "cache"
    shutil.copytree(cold_run[3], cache)     # the ovni samples' kernels: compiled once
    env = _env(cache, PARTRACE_WARM="0")
    r = _run(["warm", str(OVNI)], env)
    assert r.returncode == 0, r.stderr
    said = r.stderr.splitlines()
    for o in OUTPUTS.values():      # says so per command, every output included
        assert any(f"merge -> {o.suffixes[0][1:]}" in line for line in said), (o.name, said)
    for cmd in ("info", "profile", "comm", "dump", "timeline"):
        assert any(f" {cmd} " in line for line in said), (cmd, said)
    warmed = cache_state(cache)
    assert warmed
    out = tmp_path / "out"
    out.mkdir()
    runs = [["info", str(OVNI)], ["profile", str(OVNI)], ["comm", str(OVNI)],
            ["dump", str(OVNI)], ["timeline", str(OVNI), "--plot", str(out / "t.svg")]]
    runs += [["merge", str(OVNI), "-o", str(out / f"m{o.suffixes[0]}"), "-q"]
             for o in OUTPUTS.values()]
    runs += [["convert", str(out / "m.h5"), "-o", str(out / "back.otf"), "-q"]]
    for args in runs:
        r = _run(args, env)
        assert r.returncode == 0, (args, r.stderr)
        assert cache_state(cache) == warmed, ("compiled by", args)
    for o in OUTPUTS.values():      # the parallel paths: rows exchanged and taken by rank
        # (warm rehearses on 2 ranks; 3 splits the rows otherwise)
        r = _run(["merge", str(OVNI), "-o", str(out / f"p{o.suffixes[0]}"), "-q"], env, 3)
        assert r.returncode == 0, (o.name, r.stderr)
        assert cache_state(cache) == warmed, ("compiled by a 3-rank merge to", o.name)

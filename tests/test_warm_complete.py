"""After `partrace warm`, no command compiles anything: every kernel any command can load
(every output, every input, serial and parallel paths) is in numba's cache."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import DATA, ROOT, mpiexec

OVNI = DATA / "ovni" / "v3-mpisim-small" / "ovni"


def _cache_state(folder):
    """Each cache file numba wrote (index .nbi, code .nbc), with its size and mtime."""
    return {p.relative_to(folder): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*.nb[ic]")}


def _run(args, env, nranks=None):
    cmd = [sys.executable, "-m", "partrace", *args]
    if nranks:
        cmd = [mpiexec(), "-n", str(nranks), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)


@pytest.mark.slow
def test_after_warm_no_command_compiles(tmp_path):
    from partrace.output import OUTPUTS
    cache = tmp_path / "cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT),
           "PARTRACE_JIT": "numba", "PARTRACE_WARM": "0"}   # compiled, however small the trace
    env.pop("PARTRACE_FORMATS", None)
    r = _run(["warm", str(OVNI)], env)
    assert r.returncode == 0, r.stderr
    said = r.stderr.splitlines()
    for o in OUTPUTS.values():      # says so per command, every output included
        assert any(f"merge -> {o.suffixes[0][1:]}" in line for line in said), (o.name, said)
    for cmd in ("info", "profile", "comm", "dump", "timeline"):
        assert any(f" {cmd} " in line for line in said), (cmd, said)
    warmed = _cache_state(cache)
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
        assert _cache_state(cache) == warmed, ("compiled by", args)
    for o in OUTPUTS.values():      # the parallel paths: rows exchanged and taken by rank
        # (warm rehearses on 2 ranks; 3 splits the rows otherwise)
        r = _run(["merge", str(OVNI), "-o", str(out / f"p{o.suffixes[0]}"), "-q"], env, 3)
        assert r.returncode == 0, (o.name, r.stderr)
        assert _cache_state(cache) == warmed, ("compiled by a 3-rank merge to", o.name)


WRF = DATA / "corpus" / "otf" / "otfvis-wrf" / "wrf.otf"


@pytest.mark.slow
@pytest.mark.mpi
def test_after_warm_an_otf_merge_to_otf_on_2_ranks_compiles_nothing(tmp_path):
    """The variants a larger trace meets and the samples do not: the OTF writer's kernel on a
    table cut in passes (a merge to OTF of a million-event trace met three new ones, each a
    compile of minutes on 8 busy ranks), the engine's offset gathers of every integer type."""
    cache = tmp_path / "cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT),
           "PARTRACE_JIT": "numba", "PARTRACE_WARM": "0"}
    env.pop("PARTRACE_FORMATS", None)
    r = _run(["warm", "--format", "otf", "-q"], env)
    assert r.returncode == 0, r.stderr
    warmed = _cache_state(cache)
    r = _run(["merge", str(WRF), "-o", str(tmp_path / "m.otf"), "-q"], env, 2)
    assert r.returncode == 0, r.stderr
    assert _cache_state(cache) == warmed, sorted(set(_cache_state(cache)) - set(warmed))

"""`partrace warm` and the numba cache: a read-only install compiles into a user folder,
warm names that folder, and a parallel run with a cold cache compiles on rank 0 only."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT, mpiexec

ROSS = DATA / "ross" / "pi-np1-seq-allmodes" / "stats"


def _kernel_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.nbi"))


@pytest.fixture
def readonly_install():
    """A read-only copy of the package (chmod -R a-w), as a cluster's site-packages is.

    As root, file modes do not stop writes: the runs then see the copy through a
    read-only bind mount in a mount namespace of their own (skipped where that is
    not allowed)."""
    top = Path(tempfile.mkdtemp(prefix="partrace-ro-"))
    site = top / "site"
    shutil.copytree(ROOT / "partrace", site / "partrace",
                    ignore=shutil.ignore_patterns("__pycache__"))
    work = top / "work"         # the user's writable places: cache home, outputs
    work.mkdir()
    subprocess.run(["chmod", "-R", "a-w", str(site)], check=True)
    if os.geteuid() == 0 and _readonly_prefix(site, ["true"]) is None:
        pytest.skip("root without a mount namespace: cannot make a folder read-only")
    yield site, work
    subprocess.run(["chmod", "-R", "u+w", str(site)], check=True)
    shutil.rmtree(top)


def _readonly_prefix(site: Path, probe=None) -> list[str] | None:
    """As root: the command prefix that runs a command with ``site`` mounted read-only."""
    if os.geteuid() != 0:
        return []
    prefix = ["unshare", "-m", "sh", "-c", f'mount --bind "{site}" "{site}" && '
              f'mount -o remount,bind,ro "{site}" && exec "$@"', "sh"]
    if probe is not None:
        try:
            ok = subprocess.run(prefix + probe, capture_output=True, timeout=30).returncode == 0
        except OSError:
            ok = False
        return prefix if ok else None
    return prefix


def _run(args, site: Path, work: Path, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items()
            if k not in ("NUMBA_CACHE_DIR", "PARTRACE_FORMATS", "PARTRACE_MPI")}
    full.update(PYTHONPATH=str(site), XDG_CACHE_HOME=str(work / "cache"), HOME=str(work))
    full.update(env)
    return subprocess.run([*_readonly_prefix(site), sys.executable, *args], capture_output=True,
                          text=True, cwd=work, env=full, timeout=600)


@pytest.mark.slow
def test_readonly_install_caches_kernels_in_user_folder(readonly_install):
    site, work = readonly_install
    r = _run(["-c", "import partrace, os; print(partrace.__file__); "
                    "print(os.environ['NUMBA_CACHE_DIR'])"], site, work)
    assert r.returncode == 0, r.stderr
    where, cache = r.stdout.split()
    assert Path(where) == site / "partrace" / "__init__.py"      # the copy, not the checkout
    assert Path(cache) == work / "cache" / "partrace" / "numba"

    # warm on one trace: compiles into the user folder and says so
    r = _run(["-m", "partrace", "warm", str(ROSS), "-q"], site, work)
    assert r.returncode == 0, r.stderr
    assert f"cache: {cache}\n" in r.stdout
    first = re.search(r"kernels ready in .* on 1 traces: (\d+) compiled, (\d+) loaded", r.stdout)
    assert first and int(first[1]) > 0, r.stdout
    made = _kernel_files(Path(cache))
    folders = {p.parent.name.split("_")[0] for p in made}       # numba: NAME_<hash of the path>
    assert {"ross", "engine"} <= folders, folders
    assert not list(site.rglob("*.nbi")) and not list(site.rglob("*.nbc"))

    # again: everything comes from that cache
    r = _run(["-m", "partrace", "warm", str(ROSS), "-q"], site, work)
    again = re.search(r"kernels ready in .* on 1 traces: (\d+) compiled, (\d+) loaded", r.stdout)
    assert r.returncode == 0 and again[1] == "0" and int(again[2]) > 0, r.stdout

    # info and merge from the read-only install: the same answers as from the checkout
    r = _run(["-m", "partrace", "info", str(ROSS), "--json"], site, work)
    assert r.returncode == 0, r.stderr
    here = subprocess.run([sys.executable, "-m", "partrace", "info", str(ROSS), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert json.loads(r.stdout) == json.loads(here.stdout)
    r = _run(["-m", "partrace", "merge", str(ROSS), "-o", str(work / "ross.h5")], site, work)
    assert r.returncode == 0, r.stderr
    r = _run(["-m", "partrace", "info", str(work / "ross.h5"), "--json"], site, work)
    merged = json.loads(r.stdout)
    assert merged["rows"] == json.loads(here.stdout)["rows"] and merged["events"] > 0


@pytest.mark.slow
def test_readonly_install_and_home_cache_in_the_temporary_folder(readonly_install):
    site, work = readonly_install
    (work / "tmp").mkdir()
    home = site / "home"        # inside the read-only copy: a home that cannot be written
    env = {"XDG_CACHE_HOME": str(home / ".cache"), "TMPDIR": str(work / "tmp")}
    r = _run(["-c", "import partrace, os; print(os.environ['NUMBA_CACHE_DIR'])"], site, work,
             **env)
    assert r.returncode == 0, r.stderr
    cache = work / "tmp" / f"partrace-{os.getuid()}" / "numba"
    assert r.stdout.strip() == str(cache)
    # compiled kernels even on this small trace (else they run as Python: partrace/kernels/jit.py)
    r = _run(["-m", "partrace", "info", str(ROSS), "--json"], site, work, **env,
             PARTRACE_JIT="numba")
    assert r.returncode == 0 and json.loads(r.stdout)["events"] > 0, r.stderr
    assert any(p.parent.name.startswith("ross_") for p in _kernel_files(cache))


def test_a_cache_folder_set_by_the_user_is_kept(tmp_path):
    r = subprocess.run([sys.executable, "-c", "import partrace, os; "
                        "print(os.environ['NUMBA_CACHE_DIR'])"], capture_output=True, text=True,
                       env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}, cwd=ROOT)
    assert r.stdout.strip() == str(tmp_path)


def test_warm_without_samples_or_traces_says_what_to_do(monkeypatch, capsys):
    from partrace import warm
    from partrace.cli import main
    monkeypatch.setattr(warm, "sample_folder", lambda: None)
    assert main(["warm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "partrace warm TRACE" in err[0], err


@pytest.mark.slow
@pytest.mark.mpi
def test_cold_parallel_run_compiles_on_rank_0_while_the_others_wait(tmp_path):
    """Rank 0 warms the input's format into an empty cache, once; the answer is the same."""
    trace = DATA / "ovni" / "v3-mpisim-small" / "ovni"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PARTRACE_WARM": "1",
           "PARTRACE_JIT": "numba"}     # a trace this small would run its kernels as Python
    env.pop("PARTRACE_FORMATS", None)
    cmd = [mpiexec(), "-n", "2", sys.executable, "-m", "partrace", "info", str(trace), "--json"]
    cold = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert cold.returncode == 0, cold.stderr
    said = cold.stderr.splitlines()
    assert len([x for x in said if "compiling the ovni kernels once on rank 0" in x]) == 1, said
    assert f"numba cache: {tmp_path / 'cache'}" in said[0]
    assert json.loads((tmp_path / "cache" / "partrace-warm.json").read_text()).keys() == {"ovni"}
    assert _kernel_files(tmp_path / "cache")
    warm = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert warm.returncode == 0 and warm.stderr == "", warm.stderr
    assert json.loads(warm.stdout) == json.loads(cold.stdout)
    assert json.loads(warm.stdout)["events"] > 0


def test_stamp_follows_the_kernel_sources_only(tmp_path, monkeypatch):
    """The warm stamp goes stale when a module defining a kernel changes, not another one."""
    from partrace import warm
    pkg = tmp_path / "partrace"
    (pkg / "sub").mkdir(parents=True)
    kernel = pkg / "sub" / "k.py"
    kernel.write_text("from numba import njit\n\n\n@njit(cache=True)\ndef f(x):\n    return x\n")
    other = pkg / "plain.py"
    other.write_text("# mentions njit in a comment only\n")
    monkeypatch.setattr(warm, "PACKAGE", pkg)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    assert warm._kernel_sources() == [kernel]
    assert not warm.is_warm("otf")
    warm._write_stamp(["otf"])
    assert warm.is_warm("otf") and not warm.is_warm("ovni")
    os.utime(other, ns=(1, 1))
    assert warm.is_warm("otf")
    os.utime(kernel, ns=(1, 1))
    assert not warm.is_warm("otf")

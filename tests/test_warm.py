"""`partrace warm` and the numba cache: where a read-only install keeps its kernels, a cache
folder of the user's own, the warm stamp.  A read-only wheel install warming every format,
a cold parallel run and what warm covers: tests/test_warm_wheel.py."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT
from tests.support.installs import kernel_files, readonly_prefix, run_installed

ROSS = DATA / "ross" / "pi-np1-seq-allmodes" / "stats"


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
    if os.geteuid() == 0 and readonly_prefix(site, ["true"]) is None:
        pytest.skip("root without a mount namespace: cannot make a folder read-only")
    yield site, work
    subprocess.run(["chmod", "-R", "u+w", str(site)], check=True)
    shutil.rmtree(top)


@pytest.mark.slow
def test_readonly_install_and_home_cache_in_the_temporary_folder(readonly_install):
    site, work = readonly_install
    (work / "tmp").mkdir()
    home = site / "home"        # inside the read-only copy: a home that cannot be written
    env = {"XDG_CACHE_HOME": str(home / ".cache"), "TMPDIR": str(work / "tmp")}
    r = run_installed(["-c", "import partrace, os; print(os.environ['NUMBA_CACHE_DIR'])"], site,
                      work, **env)
    assert r.returncode == 0, r.stderr
    cache = work / "tmp" / f"partrace-{os.getuid()}" / "numba"
    assert r.stdout.strip() == str(cache)
    # compiled kernels even on this small trace (else they run as Python: partrace/kernels/jit.py)
    r = run_installed(["-m", "partrace", "info", str(ROSS), "--json"], site, work, **env,
                      PARTRACE_JIT="numba")
    assert r.returncode == 0 and json.loads(r.stdout)["events"] > 0, r.stderr
    assert any(p.parent.name.startswith("ross_") for p in kernel_files(cache))


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
    with monkeypatch.context() as m:    # nothing changed: the modules are not read
        m.setattr(warm, "_kernel_sources", None)
        assert warm.is_warm("otf")
    os.utime(other, ns=(1, 1))
    assert warm.is_warm("otf")      # read again: no kernel source changed
    with monkeypatch.context() as m:    # ... and the stamp notes the new tree: not again
        m.setattr(warm, "_kernel_sources", None)
        assert warm.is_warm("otf")
    os.utime(kernel, ns=(1, 1))
    assert not warm.is_warm("otf")

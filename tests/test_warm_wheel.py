"""`partrace warm` from an installed wheel: the sample traces it compiles on travel in the wheel
(partrace/samples, package data), so a site-packages install with no source checkout beside
it warms every format, read-only as a cluster's install is, into the user's cache folder."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from partrace.warm import SAMPLES
from tests.conftest import DATA, ROOT, mpiexec
from tests.support.installs import cache_state, kernel_files, readonly_prefix, run_installed

ROSS = DATA / "ross" / "pi-np1-seq-allmodes" / "stats"
WRF = DATA / "corpus" / "otf" / "otfvis-wrf" / "wrf.otf"

# the samples' share of the wheel, compressed (141 KB when they were bundled)
SAMPLES_MOST_KB = 200


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the sources (the build writes beside what it builds;
    the copy follows partrace/samples' links into tests/data as a build of the checkout
    does)."""
    top = tmp_path_factory.mktemp("wheel")
    src = top / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "partrace", src / "partrace",
                    ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-w", str(top / "dist"), str(src)], capture_output=True, text=True,
                       timeout=600)
    if r.returncode and "invalid command 'bdist_wheel'" in r.stdout + r.stderr:
        pytest.skip("building a wheel here needs the wheel package (setuptools before 70.1)")
    assert r.returncode == 0, r.stdout + r.stderr
    return next((top / "dist").glob("partrace-*.whl"))


def test_the_wheel_holds_every_sample_and_stays_small(wheel):
    with zipfile.ZipFile(wheel) as z:
        entries = z.infolist()
    names = {e.filename for e in entries}
    for fmt, paths in SAMPLES.items():
        for rel in paths:
            inside = f"partrace/samples/{rel}"
            assert inside in names or any(n.startswith(inside + "/") for n in names), (fmt, rel)
    samples = sum(e.compress_size for e in entries if e.filename.startswith("partrace/samples/"))
    assert 0 < samples <= SAMPLES_MOST_KB << 10, samples
    assert not [n for n in names if n.startswith("tests/")]


@pytest.mark.slow(minutes=5)
@pytest.mark.mpi
def test_warm_from_a_readonly_wheel_install_compiles_every_format_into_the_user_cache(
        wheel, tmp_path):
    """The wheel installed into a folder that cannot be written, as a cluster's site-packages:
    `partrace warm` runs every format's commands on the samples the wheel carries, compiling
    into the user's cache folder and nothing into the install; again, everything loads; info
    and merge from the install give the checkout's answers."""
    site, work = tmp_path / "site", tmp_path / "work"
    work.mkdir()
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target",
                        str(site), str(wheel)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    subprocess.run(["chmod", "-R", "a-w", str(site)], check=True)
    try:
        if os.geteuid() == 0 and readonly_prefix(site, ["true"]) is None:
            pytest.skip("root without a mount namespace: cannot make a folder read-only")
        _warm_every_format_readonly(site, work)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(site)], check=True)


def _warm_every_format_readonly(site: Path, work: Path) -> None:
    env = dict(PARTRACE_JIT="numba", PARTRACE_WARM="0")    # compiled, however small the trace
    r = run_installed(["-c", "import partrace, os; print(partrace.__file__); "
                             "print(os.environ['NUMBA_CACHE_DIR'])"], site, work, **env)
    assert r.returncode == 0, r.stderr
    where, cache = r.stdout.split()
    assert Path(where) == site / "partrace" / "__init__.py"      # the install, not the checkout
    cache = Path(cache)
    assert cache == work / "cache" / "partrace" / "numba"

    r = run_installed(["-m", "partrace", "warm"], site, work, timeout=3000, **env)
    assert r.returncode == 0, r.stderr
    assert f"cache: {cache}\n" in r.stdout
    said = r.stderr.splitlines()
    for fmt in [*SAMPLES, "hdf5"]:      # every format's commands ran, on its bundled samples
        assert any(re.match(rf"  {fmt}\s+merge -> h5", line) for line in said), (fmt, said)
    traces = sum(map(len, SAMPLES.values())) + 1    # + the HDF5 made from an OTF sample
    done = re.search(r"kernels ready in .* on (\d+) traces: (\d+) compiled", r.stdout)
    assert done and int(done[1]) == traces and int(done[2]) > 0, r.stdout
    # numba keeps a module's kernels in NAME_<hash of its folder>: one per format's package
    folders = {p.parent.name.split("_")[0] for p in kernel_files(cache)}
    assert {"otf", "dumpi", "ovni", "ross", "otf2", "engine"} <= folders, folders
    assert not list(site.rglob("*.nbi")) and not list(site.rglob("*.nbc"))

    # again, on one trace: everything comes from that cache
    r = run_installed(["-m", "partrace", "warm", str(ROSS), "-q"], site, work, **env)
    again = re.search(r"kernels ready in .* on 1 traces: (\d+) compiled, (\d+) loaded", r.stdout)
    assert r.returncode == 0 and again and again[1] == "0" and int(again[2]) > 0, r.stdout

    # the variants a larger trace meets and the samples do not, covered by the warm: a
    # merge to OTF on 2 ranks of a million-event trace (the OTF writer's kernel on a table
    # cut in passes: once three new kernels, each a compile of minutes on 8 busy ranks;
    # the engine's offset gathers of every integer type) compiles nothing
    warmed = cache_state(cache)
    r = run_installed(["-m", "partrace", "merge", str(WRF), "-o", str(work / "wrf.otf"), "-q"],
                      site, work, launcher=[mpiexec(), "-n", "2"], **env)
    assert r.returncode == 0, r.stderr
    assert cache_state(cache) == warmed, sorted(set(cache_state(cache)) - set(warmed))

    # info and merge from the read-only install: the same answers as from the checkout
    r = run_installed(["-m", "partrace", "info", str(ROSS), "--json"], site, work)
    assert r.returncode == 0, r.stderr
    here = subprocess.run([sys.executable, "-m", "partrace", "info", str(ROSS), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert json.loads(r.stdout) == json.loads(here.stdout)
    r = run_installed(["-m", "partrace", "merge", str(ROSS), "-o", str(work / "ross.h5")], site,
                      work)
    assert r.returncode == 0, r.stderr
    r = run_installed(["-m", "partrace", "info", str(work / "ross.h5"), "--json"], site, work)
    merged = json.loads(r.stdout)
    assert merged["rows"] == json.loads(here.stdout)["rows"] and merged["events"] > 0

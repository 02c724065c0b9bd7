"""`partrace warm` from an installed wheel: the sample traces it compiles on travel in the wheel
(partrace/samples, package data), so a site-packages install with no source checkout beside
it warms every format."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from partrace.warm import SAMPLES
from tests.conftest import ROOT

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


@pytest.mark.slow
def test_warm_from_an_installed_wheel_compiles_every_format(wheel, tmp_path):
    site, work = tmp_path / "site", tmp_path / "work"
    work.mkdir()
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target",
                        str(site), str(wheel)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    cache = work / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("PARTRACE_FORMATS", "PARTRACE_MPI")}
    env.update(PYTHONPATH=str(site), NUMBA_CACHE_DIR=str(cache), HOME=str(work),
               PARTRACE_JIT="numba", PARTRACE_WARM="0")     # compiled, however small the trace
    r = subprocess.run([sys.executable, "-c", "import partrace; print(partrace.__file__)"],
                       capture_output=True, text=True, cwd=work, env=env, timeout=300)
    assert Path(r.stdout.strip()) == site / "partrace" / "__init__.py"     # not the checkout
    r = subprocess.run([sys.executable, "-m", "partrace", "warm"], capture_output=True,
                       text=True, cwd=work, env=env, timeout=3000)
    assert r.returncode == 0, r.stderr
    said = r.stderr.splitlines()
    for fmt in [*SAMPLES, "hdf5"]:      # every format's commands ran, on its bundled samples
        assert any(re.match(rf"  {fmt}\s+merge -> h5", line) for line in said), (fmt, said)
    traces = sum(map(len, SAMPLES.values())) + 1    # + the HDF5 made from an OTF sample
    done = re.search(r"kernels ready in .* on (\d+) traces: (\d+) compiled", r.stdout)
    assert done and int(done[1]) == traces and int(done[2]) > 0, r.stdout
    # numba keeps a module's kernels in NAME_<hash of its folder>: one per format's package
    folders = {p.parent.name.split("_")[0] for p in cache.rglob("*.nbi")}
    assert {"otf", "dumpi", "ovni", "ross", "otf2", "engine"} <= folders, folders

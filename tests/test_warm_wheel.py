"""`partrace warm` from an installed wheel: the sample traces it compiles on travel in the wheel
(partrace/samples, package data), so a site-packages install with no source checkout beside
it warms every format, read-only as a cluster's install is, into the user's cache folder.

The one cold cache of the suite's slow tests is that user cache, filled in three steps, each
checked: a parallel run with the cache empty compiles its format on rank 0 while the others
wait; `partrace warm` compiles every other format; after `partrace warm TRACE`, no command
(every output, serial and parallel paths) compiles anything.  A compile of every kernel
takes minutes: one cache for the three claims compiles the ovni kernels once, not twice."""
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

from partrace.warm import SAMPLES, TREE
from tests.conftest import DATA, ROOT, mpiexec
from tests.support.installs import cache_state, kernel_files, readonly_prefix, run_installed

ROSS = DATA / "ross" / "pi-np1-seq-allmodes" / "stats"
WRF = DATA / "corpus" / "otf" / "otfvis-wrf" / "wrf.otf"
OVNI = DATA / "ovni" / "v3-mpisim-small" / "ovni"     # also one of the ovni samples

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


@pytest.mark.slow(minutes=6)
@pytest.mark.mpi
def test_warm_from_a_readonly_wheel_install_compiles_every_format_into_the_user_cache(
        wheel, tmp_path):
    """The wheel installed into a folder that cannot be written, as a cluster's site-packages:
    a 2-rank run with an empty cache compiles its format on rank 0 only; `partrace warm` runs
    every format's commands on the samples the wheel carries, compiling into the user's cache
    folder and nothing into the install; again, everything loads; after `warm TRACE` no
    command on TRACE compiles; info and merge from the install give the checkout's answers."""
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

    _cold_parallel_run_compiles_on_rank_0_while_the_others_wait(site, work, cache)

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

    _after_warm_no_command_compiles(site, work, cache, env)

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


def _cold_parallel_run_compiles_on_rank_0_while_the_others_wait(site: Path, work: Path,
                                                                cache: Path) -> None:
    """`partrace info OVNI` on 2 ranks with the cache empty (PARTRACE_WARM=1: warm first at
    any rank count): rank 0 warms the input's format once; run again, it says nothing and
    gives the same answer."""
    assert not kernel_files(cache)
    env = dict(PARTRACE_JIT="numba", PARTRACE_WARM="1")
    args = ["-m", "partrace", "info", str(OVNI), "--json"]
    two = [mpiexec(), "-n", "2"]
    cold = run_installed(args, site, work, launcher=two, **env)
    assert cold.returncode == 0, cold.stderr
    said = cold.stderr.splitlines()
    assert len([x for x in said if "compiling the ovni kernels once on rank 0" in x]) == 1, said
    assert f"numba cache: {cache}" in said[0]
    assert json.loads((cache / "partrace-warm.json").read_text()).keys() == {"ovni", TREE}
    assert kernel_files(cache)
    warm = run_installed(args, site, work, launcher=two, **env)
    assert warm.returncode == 0 and warm.stderr == "", warm.stderr
    assert json.loads(warm.stdout) == json.loads(cold.stdout)
    assert json.loads(warm.stdout)["events"] > 0


def _after_warm_no_command_compiles(site: Path, work: Path, cache: Path, env: dict) -> None:
    """`partrace warm OVNI` says what it ran, per command and output; then every command on
    OVNI (info, profile, comm, dump, timeline, merge to every output, convert back from
    HDF5) and a 3-rank merge to every output (warm rehearses on 2 ranks; 3 splits the rows
    otherwise) leave numba's cache files as they were."""
    from partrace.output import OUTPUTS
    r = run_installed(["-m", "partrace", "warm", str(OVNI)], site, work, **env)
    assert r.returncode == 0, r.stderr
    said = r.stderr.splitlines()
    for o in OUTPUTS.values():
        assert any(f"merge -> {o.suffixes[0][1:]}" in line for line in said), (o.name, said)
    for cmd in ("info", "profile", "comm", "dump", "timeline"):
        assert any(f" {cmd} " in line for line in said), (cmd, said)
    warmed = cache_state(cache)
    out = work / "after-warm"
    out.mkdir()
    runs = [["info", str(OVNI)], ["profile", str(OVNI)], ["comm", str(OVNI)],
            ["dump", str(OVNI)], ["timeline", str(OVNI), "--plot", str(out / "t.svg")]]
    runs += [["merge", str(OVNI), "-o", str(out / f"m{o.suffixes[0]}"), "-q"]
             for o in OUTPUTS.values()]
    runs += [["convert", str(out / "m.h5"), "-o", str(out / "back.otf"), "-q"]]
    for args in runs:
        r = run_installed(["-m", "partrace", *args], site, work, **env)
        assert r.returncode == 0, (args, r.stderr)
        assert cache_state(cache) == warmed, ("compiled by", args)
    for o in OUTPUTS.values():
        r = run_installed(["-m", "partrace", "merge", str(OVNI), "-o",
                           str(out / f"p{o.suffixes[0]}"), "-q"], site, work,
                          launcher=[mpiexec(), "-n", "3"], **env)
        assert r.returncode == 0, (o.name, r.stderr)
        assert cache_state(cache) == warmed, ("compiled by a 3-rank merge to", o.name)

"""Start-up: each command imports only what it uses (what the time budget rests on; the
times themselves are measured by scripts/bench_startup.py, not asserted here)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import DATA, ROOT

HEAVY = ("numpy", "h5py", "mpi4py", "numba", "pandas", "matplotlib")

# run the CLI in a fresh interpreter and list the heavy modules it imported
PROBE = """
import contextlib, io, json, sys
from partrace.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:       # --help
        code = exc.code
print(json.dumps({"code": code, "out": out.getvalue(),
                  "loaded": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)

OTF = DATA / "otf" / "real-long" / "trace" / "ring8_long.otf"
TRACES = {"otf": OTF, "dumpi": DATA / "dumpi" / "p2p-4rank",
          "ovni": DATA / "ovni" / "v1-zoo-small" / "ovni",
          "ross": DATA / "ross" / "pi-np1-seq-allmodes" / "stats"}


def _probe(*args) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PARTRACE_MPI", "PARTRACE_FORMATS")}
    r = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], capture_output=True,
                       text=True, cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_import_partrace_loads_nothing_heavy():
    code = f"import sys, partrace; print([m for m in {HEAVY!r} if m in sys.modules])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


def test_help_loads_nothing_heavy():
    got = _probe("--help")
    assert got["code"] == 0 and "merge" in got["out"] and "warm" in got["out"]
    assert got["loaded"] == []


@pytest.mark.parametrize("fmt", sorted(TRACES))
def test_info_without_a_launcher_loads_neither_h5py_nor_mpi4py(fmt):
    got = _probe("info", TRACES[fmt], "--json")
    assert got["code"] == 0
    report = json.loads(got["out"])
    assert report["format"] == fmt and report["events"] > 0
    assert "h5py" not in got["loaded"] and "mpi4py" not in got["loaded"], got["loaded"]


def test_info_on_partrace_hdf5_runs_no_compiled_kernel(tmp_path):
    out = tmp_path / "otf.h5"
    assert _probe("merge", OTF, "-o", out, "-q")["code"] == 0
    got = _probe("info", out, "--json")
    assert got["code"] == 0 and json.loads(got["out"])["events"] == \
        json.loads(_probe("info", OTF, "--json")["out"])["events"]
    assert "numba" not in got["loaded"] and "mpi4py" not in got["loaded"], got["loaded"]


def test_merge_to_otf_does_not_load_h5py(tmp_path):
    got = _probe("merge", OTF, "-o", tmp_path / "o.otf", "-q")
    assert got["code"] == 0 and (tmp_path / "o.otf").is_file()
    assert "h5py" not in got["loaded"] and "mpi4py" not in got["loaded"], got["loaded"]


def test_bench_startup_answers_help():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_startup.py"), "--help"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "--repeat" in r.stdout and "--against" in r.stdout


def _bench_startup():
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_startup",
                                                  ROOT / "scripts" / "bench_startup.py")
    module = importlib.util.module_from_spec(spec)
    # the script imports its neighbour bench_results, as it does when run from scripts/
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return module


def test_bench_startup_against_a_tree_shows_the_median_of_per_pair_ratios():
    """A busy machine slows both runs of a pair alike: the ratio of each pair, then their
    median (0.5 here), not the ratio of the medians (1.5)."""
    bench = _bench_startup()
    times = {("python -c 'import numpy'", "here"): [(1.0, 1.0)] * 3,
             ("info X", "here"): [(1.0, 1.0), (2.0, 4.0), (3.0, 3.0)],
             ("info X", "s11"): [(2.0, 2.0), (2.0, 2.0), (3.0, 6.0)]}
    lines = bench.report(times, {"info X": 2048}, {"here": ROOT, "s11": ROOT}, 3, "python")
    row = next(line for line in lines if line.startswith("info X")).split()
    assert row[3:] == ["KB", "2.000", "3.000", "3.00", "2.000", "2.000", "1.000", "0.500"]


def test_bench_startup_refuses_a_tree_that_is_not_partrace(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_startup.py"),
                        "--against", f"old={tmp_path}"], capture_output=True, text=True)
    assert r.returncode == 2 and "a partrace checkout" in r.stderr


def test_registry_reads_plugin_metadata_only_when_no_builtin_fits(monkeypatch, tmp_path):
    """Scanning entry points reads every installed package's metadata (on every rank)."""
    from partrace import formats
    from partrace.errors import UsageError
    asked = []
    monkeypatch.setattr(formats, "_entry_points", lambda: asked.append(1) or {})
    monkeypatch.delenv("PARTRACE_FORMATS", raising=False)
    assert formats.detect(TRACES["dumpi"]) == "dumpi" and formats.get("ross").name == "ross"
    assert asked == []
    other = tmp_path / "notes.txt"
    other.write_text("not a trace\n")
    with pytest.raises(UsageError, match="tried hdf5, otf, dumpi, ovni, ross"):
        formats.detect(other)
    assert asked == [1]

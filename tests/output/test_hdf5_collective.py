"""The collective HDF5 write path (output/hdf5_collective.py) against the serial path.

Runs where scripts/parallel_hdf5 built ``.venv-mpio`` (h5py on a parallel HDF5, with
Debian's MPICH): fixtures of several formats merged by that venv under
``mpiexec.mpich`` on 1 to 4 ranks, in one window or many, every dataset and
attribute of each output compared with the normal venv's one-rank output; which path
ran is read from ``--stats``.  Skips, saying why, where that environment is missing
(fails instead under ``PARTRACE_REQUIRE_PARALLEL_HDF5=1``, as on CI once it is built).
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from tests.conftest import DATA, ROOT, SYNTH, run_cli

pytestmark = pytest.mark.mpi

MPIO_PYTHON = ROOT / ".venv-mpio" / "bin" / "python"
LAUNCHER = "mpiexec.mpich"
RING8 = DATA / "otf" / "ring8" / "trace" / "ring8.otf"
DUMPI = DATA / "dumpi" / "p2p-4rank"            # text columns
OVNI = DATA / "ovni" / "v1-zoo-small" / "ovni"  # a bytes column
ROSS = DATA / "ross" / "phold-np2-opt-gvt-pekplp"


@functools.lru_cache(maxsize=None)
def _missing() -> str | None:
    """Why the parallel-HDF5 environment cannot run here (None: it can)."""
    if not MPIO_PYTHON.exists():
        return f"no {MPIO_PYTHON.relative_to(ROOT)} (scripts/parallel_hdf5 builds it)"
    if shutil.which(LAUNCHER) is None:
        return f"no {LAUNCHER} (Debian's mpich)"
    r = subprocess.run([str(MPIO_PYTHON), "-c", "import h5py, sys; "
                        "sys.exit(0 if h5py.get_config().mpi else 3)"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode:
        return f"h5py in {MPIO_PYTHON.relative_to(ROOT)} has no MPI support: {r.stderr[-200:]}"
    return None


REQUIRE = "PARTRACE_REQUIRE_PARALLEL_HDF5"     # .ci/run sets it once the venv is built


@pytest.fixture(autouse=True)
def _parallel_hdf5():
    why = _missing()
    if why and os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{REQUIRE}=1 but {why}")
    if why:
        pytest.skip(why)


def _mpio(args, nranks: int, env=None, module="partrace", timeout=300):
    full = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH, **(env or {})}
    full.pop("PARTRACE_MPI", None)
    return subprocess.run([LAUNCHER, "-n", str(nranks), str(MPIO_PYTHON), "-m", module, *args],
                          capture_output=True, text=True, timeout=timeout, env=full, cwd=ROOT)


def _merge_mpio(trace, out: Path, nranks: int, extra=(), env=None) -> dict:
    """Merge under the parallel-HDF5 venv; the --stats summary's word on the output."""
    stats = out.with_suffix(".json")
    r = _mpio(["merge", str(trace), "-o", str(out), "-q", "--stats", str(stats), *extra],
              nranks, env)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == sorted([out.name, stats.name])
    return json.loads(stats.read_text())["summary"]["output"]


def _attr(f: h5py.File, value):
    if isinstance(value, h5py.Reference):
        return ("reference", f[value].name)
    return value


def _everything(path: Path) -> dict:
    """Every object of the file: its attributes, and a dataset's dtype, shape, chunks,
    filters and values; a committed type's dtype."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            item = {"attrs": {k: _attr(f, v) for k, v in obj.attrs.items()}}
            if isinstance(obj, (h5py.Dataset, h5py.Datatype)):
                item["dtype"] = (obj.dtype.str, h5py.check_enum_dtype(obj.dtype))
            if isinstance(obj, h5py.Dataset):
                item.update(shape=obj.shape, chunks=obj.chunks, maxshape=obj.maxshape,
                            filters=(obj.compression, obj.compression_opts, obj.shuffle),
                            scaleoffset=obj.scaleoffset, values=obj[()])
            out[name] = item
        visit("/", f)
        f.visititems(visit)
    return out


LAYOUT = ("chunks", "maxshape", "filters")     # may differ with the windows' count


def _assert_same_file(a: Path, b: Path, layout: bool = True, collective: bool = False) -> None:
    """Every object, attribute and value alike; with ``layout``, chunks and filters too
    (the rank count may change the windows' count, hence chunk shapes: not the data).
    ``collective``: the tables of ``b`` were written by HDF5's pipeline, which declares
    no scale-offset (layout.filters) where the serial path ``a`` declares it for
    integers; its definitions, which rank 0 writes alone, declare what ``a``'s do."""
    ea, eb = _everything(a), _everything(b)
    if collective:
        piped = [name for name, item in eb.items() if "scaleoffset" in item
                 and item["scaleoffset"] is None and ea[name]["scaleoffset"] is not None]
        assert piped and all(not n.startswith("definitions/") for n in piped), piped
        for name in piped:
            eb[name]["scaleoffset"] = ea[name]["scaleoffset"]
    assert sorted(ea) == sorted(eb)
    for name in ea:
        x, y = ea[name], eb[name]
        assert x.keys() == y.keys(), name
        assert sorted(x["attrs"]) == sorted(y["attrs"]), name
        for k in x["attrs"]:
            assert np.array_equal(np.asarray(x["attrs"][k]), np.asarray(y["attrs"][k])), (name, k)
        for k in x:
            if k == "values":
                assert np.array_equal(x[k], y[k]), name
            elif k != "attrs" and (layout or k not in LAYOUT):
                assert x[k] == y[k], (name, k)


def _serial_reference(trace, tmp_path: Path, extra=(), env=None) -> Path:
    """The normal venv's output on one rank: the serial path."""
    ref = tmp_path / "ref" / "o.h5"
    ref.parent.mkdir()
    r = run_cli(["merge", str(trace), "-o", str(ref), "-q", *extra], env=env)
    assert r.returncode == 0, r.stderr
    return ref


# More ranks than this machine's 2 cores make Debian's MPICH (4.0.2: no sleeping waits)
# spin through the collective write's many collective calls, many times longer than on 2:
# three ranks and more are run where the case needs them (an odd split: ROSS here, shared
# chunks, many windows), two elsewhere.
@pytest.mark.parametrize("trace, ranks", [(RING8, (1, 2)), (DUMPI, (2,)), (OVNI, (2,)),
                                          (ROSS, (3,))], ids=["otf", "dumpi", "ovni", "ross"])
def test_collective_file_equals_the_serial_one(trace, ranks, tmp_path):
    ref = _serial_reference(trace, tmp_path)
    for n in ranks:
        out = tmp_path / f"n{n}" / "o.h5"
        out.parent.mkdir()
        said = _merge_mpio(trace, out, n)
        assert said["path"] == ("collective" if n > 1 else "one rank"), said
        _assert_same_file(ref, out, collective=n > 1)


def test_chunks_shared_by_ranks(synth_trace, tmp_path):
    """16-row chunks: most chunks hold rows of two ranks, merged by HDF5 in the write."""
    trace = synth_trace(locations=7, events=3000, units=5)
    env = {"PARTRACE_H5_CHUNK_ROWS": "16"}
    ref = _serial_reference(trace, tmp_path, env=env)
    out = tmp_path / "n3" / "o.h5"
    out.parent.mkdir()
    assert _merge_mpio(trace, out, 3, env=env)["path"] == "collective"
    _assert_same_file(ref, out, collective=True)


def _windows(summary_path: Path) -> int:
    return len(json.loads(summary_path.read_text())["ranks"][0]["windows"])


@pytest.mark.slow
def test_many_windows_written_collectively(synth_trace, tmp_path):
    """A merge of many windows (--memory 1M: 14 on one rank) with 512-row chunks: most
    windows end inside a chunk, whose rows the next window completes (and the text
    bytes of all windows share one chunk).  At 1 to 4 ranks every dataset and attribute
    equals the serial path's, and nothing went through rank 0."""
    trace = synth_trace(locations=7, events=6000, units=5)
    extra = ("--memory", "1M")
    env = {"PARTRACE_H5_CHUNK_ROWS": "512"}
    ref = _serial_reference(trace, tmp_path, extra, env)
    for n in (1, 2, 3, 4):
        out = tmp_path / f"n{n}" / "o.h5"
        out.parent.mkdir()
        said = _merge_mpio(trace, out, n, extra, env)
        assert _windows(out.with_suffix(".json")) > 1
        if n > 1:
            assert said["path"] == "collective" and said["through_rank0_bytes"] == 0, said
        _assert_same_file(ref, out, collective=n > 1)


def test_windows_held_over_for_several_chunks_per_rank(synth_trace, tmp_path):
    """256-row chunks under --memory 1M: the budget's hold-over share takes 4 chunks of
    every dataset per rank, so at 2 ranks a window that holds 2 chunks per rank is carried
    on, whole, where a chunk per rank would have written it; every dataset and attribute
    still equals the serial path's."""
    trace = synth_trace(locations=7, events=6000, units=5)
    extra = ("--memory", "1M")
    env = {"PARTRACE_H5_CHUNK_ROWS": "256"}
    ref = _serial_reference(trace, tmp_path, extra, env)
    out = tmp_path / "n2" / "o.h5"
    out.parent.mkdir()
    said = _merge_mpio(trace, out, 2, extra, env)
    assert _windows(out.with_suffix(".json")) > 1
    assert said["path"] == "collective" and said["chunks_per_rank"] == 4, said
    _assert_same_file(ref, out, collective=True)


def test_the_serial_join_can_be_kept_and_says_what_rank_0_indexed(tmp_path):
    ref = _serial_reference(DUMPI, tmp_path)
    out = tmp_path / "join" / "o.h5"
    out.parent.mkdir()
    said = _merge_mpio(DUMPI, out, 2, env={"PARTRACE_H5_COLLECTIVE": "0"})
    assert said["path"] == "serial join" and said["placed_chunks"] > 0, said
    _assert_same_file(ref, out)


@pytest.mark.parametrize("nth", [1, 9])
def test_a_rank_failing_in_the_collective_write_leaves_nothing(nth, tmp_path):
    """Rank 1 fails before its first (or a later) dataset write, while rank 0 is on its way
    into the collective call: one error line, exit 2, no rank left waiting, nothing beside
    the trace."""
    _assert_fails_cleanly(["merge", str(DUMPI)], 2, nth, tmp_path)


def test_a_rank_failing_in_a_later_window_leaves_nothing(synth_trace, tmp_path):
    """The same in the middle of a merge of many windows: rank 1's 10th write (of 21)
    is the events' 4th column in a later window, with rows carried from the one before."""
    trace = synth_trace(locations=7, events=6000, units=5)
    _assert_fails_cleanly(["merge", str(trace), "--memory", "1M"], 2, 10, tmp_path / "out",
                          {"PARTRACE_H5_CHUNK_ROWS": "512"})


def _assert_fails_cleanly(args, nranks: int, nth: int, where: Path, env=None) -> None:
    where.mkdir(exist_ok=True)
    out = where / "o.h5"
    r = _mpio([*args, "-o", str(out), "--progress", "none"], nranks,
              env={"PARTRACE_TEST_FAIL_COLLECTIVE": f"1:{nth}", **(env or {})},
              module="tests.support.fail_collective", timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("partrace: error: ") and (
        "injected failure in the collective write" in lines[0]), r.stderr
    assert ".partrace-" not in lines[0]
    assert list(where.iterdir()) == []

"""Small inputs run their kernels as Python (partrace/kernels/jit.py): the same tables, the
same `info`, `profile`, `comm` and timeline figures and the same errors as compiled kernels, on
every fixture of every format in tests/data, and `info` on a small trace never
imports numba."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from partrace.kernels import jit
from partrace.analysis import communication, profile
from partrace.engine.mpi import serial
from partrace.errors import TraceError
from partrace.formats import detect, get
from partrace.info import gather_info, render
from tests.conftest import DATA, ROOT
from tests.support.damage import api_error, decode_units

FIXTURES = {
    "dumpi": ["dumpi/p2p-4rank", "dumpi/coll-4rank", "dumpi/papi-3rank"],
    "otf": ["otf/ring8/trace/ring8.otf", "otf/real-long/trace/ring8_long.otf",
            "otf/real-zlib/trace/ring8_z.otf", "otf/hybrid16/trace/hybrid16.otf",
            "otf/hybrid16/merged_n5/hybrid16_n5.otf", "otf/hybrid16/merged_n16/hybrid16_n16.otf",
            "otf/ring8/merged_n1/ring8_n1.otf", "otf/ring8/merged_n3/ring8_n3.otf"],
    "ovni": ["ovni/v1-zoo-small/ovni", "ovni/v3-mpisim-small/ovni"],
    "ross": ["ross/pi-np1-seq-allmodes/stats", "ross/phold-np2-opt-gvt-pekplp/stats",
             "ross/pi-np2-opt-evtrace-full-model-gvt/stats"],
}
CASES = [(fmt, DATA / rel) for fmt, rels in FIXTURES.items() for rel in rels]


def test_every_fixture_in_tests_data_is_covered():
    """A fixture added to tests/data is compared here too (or this fails); the traces of
    tests/data/corpus have tests of their own (tests/formats/test_corpus.py)."""
    listed = {str(p) for _, p in CASES}
    found = {str(p) for p in DATA.rglob("*.otf")}
    found |= {str(p.parent) for p in DATA.rglob("*.meta")}
    found = {p for p in found if not p.startswith(str(DATA / "corpus"))}
    found |= {str(p) for p in DATA.glob("ovni/*/ovni")}
    found |= {str(p) for p in DATA.glob("ross/*/stats")}
    assert found <= listed, sorted(found - listed)


def Mode(small: bool) -> jit.Scope:
    """Run a block with kernels as Python (small=True) or compiled: a job's scope."""
    return jit.Scope(mode="python" if small else "numba")


def _everything(fmt: str, path: Path) -> dict:
    """What a reader and the commands give for one trace: definitions, every table of
    every unit, the info text and JSON, the profile and the communication figures."""
    reader = get(fmt).open(path)
    defs = reader.read_definitions()
    comm = serial()
    report = gather_info(comm, path, fmt)
    return {"definitions": {n: t.columns for n, t in defs.tables.items()},
            "facts": json.dumps(defs.attrs, sort_keys=True, default=str),
            "units": {k: {n: t.columns for n, t in tables.items()}
                      for k, tables in decode_units(reader, every_table=True).items()},
            "info": render(report), "info_json": render(report, as_json=True),
            "profile": json.dumps(profile(path, comm=comm, format=fmt, per_location=True),
                                  default=str),
            "comm": json.dumps(communication(path, comm=comm, format=fmt, with_names=True),
                               default=str),
            "timeline": _timeline(comm, path, fmt)}


def _timeline(comm, path: Path, fmt: str) -> str:
    """The timeline's data with every array as its dtype and values (or its usage error)."""
    from partrace.analysis.timeline import timeline_data
    from partrace.errors import UsageError

    def plain(x):
        if isinstance(x, np.ndarray):
            return [str(x.dtype), x.tolist()]
        if isinstance(x, dict):
            return {str(k): plain(v) for k, v in x.items()}
        return x
    try:
        return json.dumps(plain(timeline_data(comm, path, format=fmt)), default=str)
    except UsageError as e:     # a trace with no events (ROSS GVT samples)
        return f"UsageError: {e}"


def _same_columns(a: dict, b: dict, where: str) -> None:
    assert list(a) == list(b), where
    for col in a:
        x, y = a[col], b[col]
        assert x.dtype == y.dtype and x.shape == y.shape, (where, col)
        if x.dtype == object:
            assert x.tolist() == y.tolist(), (where, col)
        else:   # NaN where NaN, every bit else
            assert np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"), (where, col)


@pytest.mark.parametrize("fmt,path", CASES, ids=[f"{f}:{p.relative_to(DATA)}" for f, p in CASES])
def test_python_kernels_give_what_compiled_ones_give(fmt, path):
    with Mode(small=False):
        compiled = _everything(fmt, path)
    with Mode(small=True):
        python = _everything(fmt, path)
    rows = sum(len(c) for tables in compiled["units"].values() for cols in tables.values()
               for c in list(cols.values())[:1])
    assert rows > 0, "nothing decoded"
    for name, cols in compiled["definitions"].items():
        _same_columns(cols, python["definitions"][name], f"definitions {name}")
    assert list(compiled["units"]) == list(python["units"])
    for unit, tables in compiled["units"].items():
        assert list(tables) == list(python["units"][unit]), unit
        for name, cols in tables.items():
            _same_columns(cols, python["units"][unit][name], f"{unit} {name}")
    for key in ("facts", "info", "info_json", "profile", "comm", "timeline"):
        assert compiled[key] == python[key], key


# -- damaged inputs: the same error (or the same tables) in both modes ------------------
def _damaged_copies(tmp_path: Path, src: Path, pick) -> list[Path]:
    """Copies of a trace folder, each with its file ``pick(folder)`` cut in half, cut one
    byte short, or with 8 bytes overwritten in its middle."""
    out = []
    for i, how in enumerate(("half", "short", "flip")):
        dst = tmp_path / f"d{i}" / src.name
        shutil.copytree(src, dst)
        victim = pick(dst)
        data = bytearray(victim.read_bytes())
        if how == "half":
            data = data[:len(data) // 2]
        elif how == "short":
            data = data[:-1]
        else:
            mid = len(data) // 2
            data[mid:mid + 8] = b"\xff\x00\x7f\x80\x01\xfe\x10\xef"
        victim.chmod(0o644)
        victim.write_bytes(bytes(data))
        out.append(dst)
    return out


def _outcome(fmt: str, path: Path):
    """The TraceError's text, or every table when the damage decodes."""
    def decode(p):
        return decode_units(get(fmt).open(p), every_table=True)
    try:
        units = decode(path)
    except TraceError:
        return ("error", str(api_error(decode, path)))
    return ("tables", {k: {n: {c: v.tolist() for c, v in t.columns.items()}
                           for n, t in tables.items()} for k, tables in units.items()})


DAMAGED = {   # format, trace folder under tests/data, the file damaged (by its name's end)
    "dumpi": ("dumpi/coll-4rank", "-0001.bin"),
    "ovni": ("ovni/v1-zoo-small/ovni", ".obs"),
    "ross": ("ross/pi-np1-seq-allmodes/stats", "evtrace.bin"),
    "otf": ("otf/ring8/trace", ".1.events"),
}


@pytest.mark.parametrize("fmt", sorted(DAMAGED))
def test_damaged_inputs_fail_alike(fmt, tmp_path):
    folder, end = DAMAGED[fmt]

    def pick(dst: Path) -> Path:
        return sorted(p for p in dst.rglob("*") if p.is_file() and p.name.endswith(end))[0]
    errors = 0
    for dst in _damaged_copies(tmp_path, DATA / folder, pick):
        trace = next(dst.glob("*.otf")) if fmt == "otf" else dst
        with Mode(small=False):
            compiled = _outcome(fmt, trace)
        with Mode(small=True):
            python = _outcome(fmt, trace)
        assert compiled == python, trace
        errors += compiled[0] == "error"
    assert errors >= 1, "no damage reached an error path"


# -- the mode a command takes, and what it imports ------------------------------------
def test_mode_follows_the_input_size_unless_forced(monkeypatch):
    monkeypatch.delenv(jit.ENV, raising=False)
    assert jit.Scope(jit.SMALL_BYTES).small is True
    assert jit.Scope(jit.SMALL_BYTES + 1).small is False
    assert jit.Scope(None).small is False
    monkeypatch.setenv(jit.ENV, "python")
    assert jit.Scope(10 ** 12).small is True
    monkeypatch.setenv(jit.ENV, "numba")
    assert jit.Scope(1).small is False
    assert jit.Scope(1, mode="python").small is True     # a job's own requirement wins


def test_a_jobs_mode_is_restored_when_it_ends_even_by_an_error(monkeypatch):
    """One job's mode never outlives it: a small merge then a large one in one session;
    a job inside a job whose mode was fixed (a warm-up's runs) keeps that mode."""
    monkeypatch.delenv(jit.ENV, raising=False)
    before = jit.is_small()
    with pytest.raises(RuntimeError), jit.Scope(jit.SMALL_BYTES):
        assert jit.is_small()
        raise RuntimeError
    assert jit.is_small() is before
    with jit.Scope(mode="numba"):
        with jit.Scope(1):
            assert not jit.is_small()
        assert not jit.is_small()
    assert jit.is_small() is before


def test_the_forced_mode_holds_from_import(tmp_path):
    """PARTRACE_JIT=python holds for the API too (no command chooses there)."""
    code = ("from partrace.kernels import jit; import partrace.api, sys; "
            "print(jit.is_small(), 'numba' in sys.modules)")
    for mode, want in (("python", "True False"), ("numba", "False False")):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, jit.ENV: mode, "PYTHONPATH": str(ROOT)})
        assert r.stdout.strip() == want, r.stderr


def test_input_bytes_counts_an_otf_master_files_streams():
    otf = DATA / "otf" / "ring8" / "trace" / "ring8.otf"
    assert jit.input_bytes(otf) == sum(p.stat().st_size for p in otf.parent.glob("ring8.*"))
    folder = DATA / "dumpi" / "p2p-4rank"
    assert jit.input_bytes(folder) == sum(p.stat().st_size for p in folder.iterdir())
    assert jit.input_bytes(DATA / "no-such-trace") is None
    zlib = DATA / "otf" / "real-zlib" / "trace" / "ring8_z.otf"
    assert jit.input_bytes(zlib) == sum(p.stat().st_size * (3 if p.suffix == ".z" else 1)
                                        for p in zlib.parent.glob("ring8_z.*"))


def test_a_dumpi_metafile_counts_its_rank_files(tmp_path, monkeypatch):
    """A metafile names STEM-NNNN.bin rank files (not STEM.*): they count.  And should a
    guess still come out small, the plan's unit bytes turn compiled mode on before any
    unit is decoded (a large trace decoded by Python kernels runs ~100x slower)."""
    folder = DATA / "dumpi" / "p2p-4rank"
    meta = next(folder.glob("*.meta"))
    bins = sorted(folder.glob("*.bin"))
    assert len(bins) == 4
    assert jit.input_bytes(meta) >= sum(p.stat().st_size for p in bins + [meta])
    from partrace.engine.mpi import serial
    from partrace.engine.pipeline import open_on_all_ranks, read_plan
    monkeypatch.delenv(jit.ENV, raising=False)
    units_bytes = sum(p.stat().st_size for p in bins)
    monkeypatch.setattr(jit, "SMALL_BYTES", units_bytes - 1)
    with jit.Scope(1):                      # as if the name-based guess had been small
        assert jit.is_small()
        read_plan(serial(), open_on_all_ranks(serial(), meta, None))
        assert not jit.is_small()
    monkeypatch.setattr(jit, "SMALL_BYTES", units_bytes * 2)
    with jit.Scope(1):
        read_plan(serial(), open_on_all_ranks(serial(), meta, None))
        assert jit.is_small()               # a small plan keeps the small mode
    with jit.Scope(mode="python"):
        monkeypatch.setattr(jit, "SMALL_BYTES", units_bytes - 1)
        read_plan(serial(), open_on_all_ranks(serial(), meta, None))
        assert jit.is_small()               # a mode the job fixed is not second-guessed


PROBE = """
import contextlib, io, json, sys
from partrace.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "out": out.getvalue(), "numba": "numba" in sys.modules}))
"""


@pytest.mark.parametrize("fmt,rel", [("dumpi", "dumpi/p2p-4rank"),
                                     ("otf", "otf/ring8/trace/ring8.otf"),
                                     ("ovni", "ovni/v1-zoo-small/ovni"),
                                     ("ross", "ross/pi-np1-seq-allmodes/stats")])
def test_info_on_a_small_trace_does_not_import_numba(fmt, rel):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PARTRACE_MPI", "PARTRACE_FORMATS", jit.ENV)}
    r = subprocess.run([sys.executable, "-c", PROBE, "info", str(DATA / rel)], capture_output=True,
                       text=True, cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["code"] == 0 and "format:" in got["out"] and detect(DATA / rel) == fmt
    assert got["numba"] is False


# -- kernels run as Python on several threads at once ------------------------------------
@jit.njit
def _first_plus_one(values):
    return values[0] + 1


class _Held:
    """A sequence whose first item is given only once ``release`` is set: a kernel run as
    Python on it stays inside that call meanwhile."""

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()

    def __getitem__(self, i):
        self.entered.set()
        self.release.wait(60)
        return 0


def test_a_kernel_run_as_python_on_one_thread_leaves_the_other_threads_calls_alone():
    """The HDF5 writer's pool threads run kernels beside the main thread: one thread inside
    a kernel run as Python must not make another thread's call skip the widening of its
    narrow integers (a uint8 255 + 1 is numba's 256, not numpy's wrapped 0)."""
    narrow = np.array([255], dtype=np.uint8)
    with Mode(small=False):
        compiled = _first_plus_one(narrow)
    held = _Held()
    with Mode(small=True):
        other = threading.Thread(target=_first_plus_one, args=(held,))
        other.start()
        try:
            assert held.entered.wait(60)
            python = _first_plus_one(narrow)
        finally:
            held.release.set()
            other.join()
    assert compiled == python == 256


# -- merges: the order, HDF5 chunk and OTF formatting kernels run as Python too ------------
MERGED = [("dumpi", "dumpi/coll-4rank"), ("otf", "otf/hybrid16/trace/hybrid16.otf"),
          ("ovni", "ovni/v1-zoo-small/ovni"),
          ("ross", "ross/pi-np2-opt-evtrace-full-model-gvt/stats")]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("fmt,rel", MERGED, ids=[f for f, _ in MERGED])
def test_a_merge_with_python_kernels_writes_what_compiled_ones_write(fmt, rel, tmp_path):
    """merge to HDF5 (the same values and the same stored chunk bytes: shuffle and
    scale-offset packing ran as Python) and to OTF (the same bytes in every file)."""
    from tests.conftest import run_cli
    from tests.support.compare import assert_same_content
    out = {}
    for mode in ("python", "numba"):
        (tmp_path / mode).mkdir()
        for ext in ("h5", "otf"):
            r = run_cli(["merge", str(DATA / rel), "-o", str(tmp_path / mode / f"m.{ext}"), "-q"],
                        env={jit.ENV: mode})
            assert r.returncode == 0, r.stderr
        out[mode] = tmp_path / mode
    assert_same_content(out["python"] / "m.h5", out["numba"] / "m.h5")
    import h5py
    with h5py.File(out["python"] / "m.h5", "r") as a, h5py.File(out["numba"] / "m.h5", "r") as b:
        ds_a, ds_b = a["events/time"], b["events/time"]
        assert ds_a.id.read_direct_chunk((0,)) == ds_b.id.read_direct_chunk((0,))
    otf = {mode: {k: v for k, v in _files(folder).items() if not k.endswith(".h5")}
           for mode, folder in out.items()}
    assert len(otf["python"]) >= 3 and otf["python"] == otf["numba"]


def test_a_merge_of_a_small_trace_does_not_import_numba(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PARTRACE_MPI", "PARTRACE_FORMATS", jit.ENV)}
    trace = DATA / "ovni/v1-zoo-small/ovni"
    for ext in ("h5", "otf"):
        r = subprocess.run([sys.executable, "-c", PROBE, "merge", str(trace),
                            "-o", str(tmp_path / f"m.{ext}"), "-q"], capture_output=True,
                           text=True, cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, timeout=120)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout.splitlines()[-1])
        assert got["code"] == 0 and got["numba"] is False, ext

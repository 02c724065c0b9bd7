"""Damaged and hostile ovni traces: every damage is one clear error naming the file,
never a silent skip or a hang; files beside the trace that are not its own change nothing.

Each case damages a copy of a real fixture (tests/data/ovni) and checks the reader
API and the CLI (plain and under mpiexec): exit 2, one stderr line naming the
damaged file (and the byte where the damage is inside it), no output, input untouched.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.ovni import Ovni
from partrace.model import Table
from tests.support import damage
from tests.support.damage import decode_units

DATA = Path(__file__).resolve().parents[1] / "data" / "ovni"
V1 = DATA / "v1-zoo-small"
V3 = DATA / "v3-mpisim-small"


# -- helpers ----------------------------------------------------------------------
def copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "in" / src.name
    shutil.copytree(src, dst)
    return dst / "ovni"


def decode_all(path: Path) -> dict[str, dict[str, Table]]:
    return decode_units(Ovni.open(path), every_table=True)


def check(trace: Path, tmp_path: Path, damaged: Path, where: str | None, match: str,
          nranks: int | None = None) -> None:
    damage.check(decode_all, trace, tmp_path, damaged, where, match, nranks)


def cli_fails(trace: Path, tmp_path: Path, damaged: Path, where: str | None) -> str:
    return damage.cli_fails(trace, tmp_path / "out-None", damaged, where, folder=trace.parent)


def api_error(trace: Path) -> TraceError:
    return damage.api_error(decode_all, trace)


def thread_dir(trace: Path, tid: int) -> Path:
    return next(trace.glob(f"loom.*/proc.*/thread.{tid}"))


# -- files of the trace that are missing --------------------------------------------
@pytest.mark.parametrize("nranks", [None, 2])
def test_v3_stream_json_without_its_stream(tmp_path, nranks):
    """The fuzz case: the thread's events used to vanish with exit 0."""
    trace = copy(V3, tmp_path)
    obs = thread_dir(trace, 27416) / "stream.obs"
    obs.unlink()
    check(trace, tmp_path, obs, None, "thread stream is missing (its stream.json is there)",
          nranks)


def test_v3_empty_thread_folder(tmp_path):
    trace = copy(V3, tmp_path)
    d = thread_dir(trace, 27417)
    for f in d.iterdir():
        f.unlink()
    check(trace, tmp_path, d / "stream.obs", None, "holds neither stream.obs nor stream.json")


def test_v1_process_metadata_without_streams(tmp_path):
    trace = copy(V1, tmp_path)
    proc = trace / "loom.zoo0" / "proc.31004"
    for f in proc.glob("thread.*.obs"):
        f.unlink()
    check(trace, tmp_path, proc / "metadata.json", None, "without any thread.<tid>.obs stream")


def test_v2_thread_json_without_its_stream(tmp_path):
    trace = copy(V1, tmp_path)
    proc = trace / "loom.zoo0" / "proc.31001"
    (proc / "thread.31002.json").write_text('{"version": 2, "ovni": {"finished": 1}}')
    (proc / "thread.31002.obs").unlink()
    check(trace, tmp_path, proc / "thread.31002.obs", None,
          "thread stream is missing (expected beside thread.31002.json)")


# -- FIFOs and folders in place of trace files (never opened: no hang) -----------------
def _fifo(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "x").write_text("x")


V3_FILES = ["loom.mpi0/proc.27414/thread.27417/stream.obs",
            "loom.mpi0/proc.27414/thread.27417/stream.json"]
V1_FILES = ["loom.zoo0/proc.31004/thread.31005.obs", "loom.zoo0/proc.31004/metadata.json"]


@pytest.mark.parametrize("make", [_fifo, _folder], ids=["fifo", "folder"])
@pytest.mark.parametrize("rel", V3_FILES + V1_FILES)
def test_not_a_regular_file(tmp_path, make, rel):
    trace = copy(V3 if rel.startswith("loom.mpi0") else V1, tmp_path)
    make(trace / rel)
    what = "a FIFO, device or socket" if make is _fifo else "a folder"
    check(trace, tmp_path, trace / rel, None, f"not a regular file ({what})")


@pytest.mark.parametrize("nranks", [None, 2])
def test_fifo_clock_offsets(tmp_path, nranks):
    trace = copy(V3, tmp_path)
    _fifo(trace / "clock-offsets.txt")
    check(trace, tmp_path, trace / "clock-offsets.txt", None, "not a regular file", nranks)


def test_fifo_or_file_in_place_of_a_thread_folder(tmp_path):
    trace = copy(V3, tmp_path)
    d = thread_dir(trace, 27415)
    shutil.rmtree(d)
    os.mkfifo(d)
    check(trace, tmp_path, d, None, "not a regular file (a FIFO, device or socket); "
          "expected the thread stream folder (layout v3)")
    d.unlink()
    d.write_text("")
    e = api_error(trace)
    assert e.path == str(d)
    assert "expected a thread stream folder (layout v3), found a file" in str(e)


# -- damage inside a file: named with its byte or line ---------------------------------
def test_stream_version_unknown(tmp_path):
    trace = copy(V3, tmp_path)
    obs = thread_dir(trace, 27415) / "stream.obs"
    data = bytearray(obs.read_bytes())
    data[4:8] = struct.pack("<I", 2)
    obs.write_bytes(bytes(data))
    check(trace, tmp_path, obs, "byte 4", "expected stream version 1 (the only one libovni "
          "1.0 to 1.14 writes), got 2")


@pytest.mark.parametrize("version,match", [
    (4, 'expected "version" 3, got 4: not an ovni metadata version partrace knows '
        '(supported: 1, 2, 3'),
    (2, 'expected "version" 3 for this file layout, got 2'),
    ("3", "expected \"version\" 3, got '3'")])
def test_v3_metadata_version(tmp_path, version, match):
    trace = copy(V3, tmp_path)
    sj = thread_dir(trace, 27413) / "stream.json"
    sj.write_text(json.dumps({**json.loads(sj.read_text()), "version": version}))
    check(trace, tmp_path, sj, "line 1", match)


def test_v1_metadata_version_unknown(tmp_path):
    trace = copy(V1, tmp_path)
    md = trace / "loom.zoo0" / "proc.31001" / "metadata.json"
    md.write_text(json.dumps({**json.loads(md.read_text()), "version": 0}))
    check(trace, tmp_path, md, "line 1", 'expected "version" 1 or 2, got 0: not an ovni metadata')


def _with_loom_cpus(trace: Path) -> Path:
    return next(p for p in trace.glob("loom.*/proc.*/thread.*/stream.json")
                if "loom_cpus" in p.read_text())


@pytest.mark.parametrize("src,key,value,match", [
    (V3, "loom_cpus", 5, 'expected "loom_cpus" to be a list of {"index", "phyid"} objects, got 5'),
    (V3, "rank", "x", "expected an integer \"rank\", got 'x'"),
    (V3, "nranks", True, 'expected an integer "nranks", got True'),
    (V1, "cpus", None, 'expected "cpus" to be a list of {"index", "phyid"} objects, got None'),
    (V1, "app_id", 1.5, 'expected an integer "app_id", got 1.5')], ids=str)
def test_metadata_facts_of_the_wrong_type(tmp_path, src, key, value, match):
    """Used to be an internal TypeError (cpus) or a silent "not given" (-1) rank."""
    trace = copy(src, tmp_path)
    if src is V3:
        doc_path = _with_loom_cpus(trace)
        doc = json.loads(doc_path.read_text())
        doc["ovni"][key] = value
    else:
        doc_path = next(p for p in trace.glob("loom.*/proc.*/metadata.json")
                        if "cpus" in p.read_text())
        doc = {**json.loads(doc_path.read_text()), key: value}
    doc_path.write_text(json.dumps(doc))
    check(trace, tmp_path, doc_path, "line 1", match)


def test_truncated_json_at_its_line(tmp_path):
    trace = copy(V3, tmp_path)
    sj = thread_dir(trace, 27413) / "stream.json"
    text = json.dumps(json.loads(sj.read_text()), indent=2)
    sj.write_text(text[:len(text) // 2])
    e = api_error(trace)
    assert e.path == str(sj) and e.where.startswith("line ") and "expected valid JSON" in e.message
    cli_fails(trace, tmp_path, sj, e.where)


def test_json_not_utf8_at_its_byte(tmp_path):
    trace = copy(V1, tmp_path)
    md = trace / "loom.zoo0" / "proc.31004" / "metadata.json"
    md.write_bytes(md.read_bytes()[:5] + b"\xff" + md.read_bytes()[5:])
    check(trace, tmp_path, md, "byte 5", "expected UTF-8 text")


# -- files that are not the trace's ---------------------------------------------------
def _own_files(trace: Path) -> list[Path]:
    return sorted(p for p in trace.rglob("*") if p.is_file())


def _pollute(trace: Path) -> None:
    """What ovniemu and users leave beside a trace: Paraver output, cfg/, dumps, notes."""
    for name in ("cpu", "thread"):
        (trace / f"{name}.prv").write_bytes(b"#Paraver (x):1000_ns:0:1:1(6)\n" * 5000)
        (trace / f"{name}.pcf").write_text("DEFAULT_OPTIONS\n")
        (trace / f"{name}.row").write_text("LEVEL CPU SIZE 6\n")
    (trace / "cfg" / "cpu" / "ovni").mkdir(parents=True)
    (trace / "cfg" / "cpu" / "ovni" / "pid.cfg").write_text("ConfigFile.Version: 3.4\n")
    (trace.parent / "ovnidump-again.txt").write_bytes(b"x" * 100000)
    loom = next(trace.glob("loom.*"))
    (loom / "notes.txt").write_text("not a stream\n")
    proc = next(loom.glob("proc.*"))
    (proc / "core.1234").write_bytes(b"\0" * 4096)
    (proc / "stream.obs.bak").write_bytes(b"ovni")
    os.mkfifo(trace / "a-fifo")                   # never opened either


@pytest.mark.parametrize("src", [V1, V3], ids=["v1", "v3"])
def test_files_beside_the_trace_are_not_counted_or_read(tmp_path, src):
    clean = copy(src, tmp_path / "clean")
    dirty = copy(src, tmp_path / "dirty")
    own = [p.relative_to(clean) for p in _own_files(clean)]
    _pollute(dirty)
    for path, trace in ((clean, clean), (dirty.parent, dirty), (dirty, dirty)):
        assert [p.relative_to(trace) for p in Ovni.open(path).source_files()] == own
    assert [u.size for u in Ovni.open(dirty).units()] == [u.size for u in Ovni.open(clean).units()]
    infos = [damage.info_json(trace, nranks=2) for trace in (clean, dirty)]
    assert infos[0] == infos[1]
    assert infos[0]["size_bytes"] == sum(f.stat().st_size for f in _own_files(clean))
    assert infos[0]["files"] == len(own)
    a, b = decode_all(clean), decode_all(dirty)
    assert a.keys() == b.keys()
    for key in a:
        for name, t in a[key].items():
            for col in t.names:
                x, y = t[col], b[key][name][col]
                assert (list(x) == list(y)) if x.dtype == object else np.array_equal(x, y)

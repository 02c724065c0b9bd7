"""Text columns in the HDF5 output: data/ends pairs that ranks write like numbers.

A text-heavy OTF trace (ring8 with a comment after every enter/leave and 2000
marker spots; UTF-8, 4-byte emoji, Latin-1 bytes, empty strings) is merged on 1,
2 and 3 ranks: the same strings as the decoded trace, the same stored chunks
byte for byte, and the other ranks' text joins as stored chunks (rank 0 places
them, their ranks fill them in; only the rows of chunks two ranks share go through
rank 0, as values).  Old files, whose text
columns are variable-length datasets, still read.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import partrace
from tests.conftest import DATA, ROOT, mpiexec, run_cli
from tests.support.compare import assert_same_content

pytestmark = pytest.mark.mpi

RING8 = DATA / "otf" / "ring8" / "trace"
WORDS = [b"plain ascii", "unicod\u00e9 \u2713 \U0001F600".encode(), b"latin1 caf\xe9", b""]


def wordy_trace(folder: Path, pad: int = 0) -> Path:
    """ring8 with a comment after every enter and leave record (``pad`` more bytes
    each) and 2000 more marker spots."""
    shutil.copytree(RING8, folder)
    for p in sorted(folder.glob("*.events")):
        out = []
        for i, line in enumerate(p.read_bytes().splitlines()):
            out.append(line)
            if line[:1] in (b"E", b"L"):
                out.append(b'#"%s row %d %s%s"' % (p.stem.encode(), i, WORDS[i % 4], b"x" * pad))
        p.write_bytes(b"\n".join(out) + b"\n")
    m = folder / "ring8.0.marker"
    m.write_bytes(m.read_bytes() + b"".join(
        b'MS1T%xP%dV"marker %d \xc3\xa9"\n' % (0xF4458 + 97 * k, 1 + k % 8, k) for k in range(2000)))
    return folder / "ring8.otf"


def _merge(trace, out: Path, nranks, extra=()) -> None:
    r = run_cli(["merge", str(trace), "-o", str(out), "-q", *extra], nranks=nranks)
    assert r.returncode == 0, r.stderr


def _text_datasets(f) -> list[str]:
    return [f"{t}/{c}/{d}" for t in ("text", "markers") for c in ("text",) for d in ("data", "ends")]


def _stored_chunks(path: Path) -> dict[str, list[bytes]]:
    out = {}
    with h5py.File(path, "r") as f:
        for name in _text_datasets(f):
            ds = f[name]
            step = ds.chunks[0]
            out[name] = [ds.id.read_direct_chunk((c,))[1] for c in range(0, ds.shape[0], step)]
    return out


def test_text_at_any_rank_count(tmp_path):
    trace = wordy_trace(tmp_path / "t", pad=100)
    decoded = partrace.open(trace)
    ref = tmp_path / "ref.h5"
    _merge(trace, ref, None)
    stored = partrace.open(ref)
    for table in ("text", "markers"):
        want, got = decoded.columns(table), stored.columns(table)
        assert len(want["text"]) > 1900
        assert list(got["text"]) == list(want["text"]), table
        assert np.array_equal(got["time"], want["time"])
    texts = list(stored.columns("text")["text"])
    assert "ring8.1 row 10 latin1 caf\udce9" + "x" * 100 in texts     # Latin-1 byte kept
    assert any("\U0001F600" in t for t in texts)
    with h5py.File(ref, "r") as f:
        g = f["text/text"]
        assert g.attrs["encoding"] == "bytes" and g.attrs["dtype"] == "str"
        assert f["markers/text"].attrs["encoding"] == "utf-8"
        # the plain-h5py recipe of docs/hdf5-layout.md
        data, ends = g["data"][:], g["ends"][:]
        plain = [b.tobytes().decode("utf-8", "surrogateescape") for b in np.split(data, ends[:-1])]
        assert plain == texts
        assert g["data"].shape[0] > 4 * g["data"].chunks[0]
    chunks = _stored_chunks(ref)
    for n in (3,):      # 2 and 3 ranks: test_text_joins_as_stored_chunks too
        out = tmp_path / f"n{n}.h5"
        _merge(trace, out, n)
        assert_same_content(ref, out)
        assert _stored_chunks(out) == chunks, n


JOIN = """
import json, sys
from partrace.engine.mpi import world
from partrace.engine.pipeline import run
from partrace.output.hdf5_sink import HDF5Sink
sink = HDF5Sink(sys.argv[2])
run(world(), sys.argv[1], sink)
if world().rank == 0:
    print(json.dumps(sink.join_counts))
"""


@pytest.mark.parametrize("nranks", [2, 3])
def test_text_joins_as_stored_chunks(nranks, tmp_path):
    """How the others' text joins at commit: whole stored chunks (placed by rank 0), and
    as values only the rows of the chunks a rank shares with its neighbours."""
    trace = wordy_trace(tmp_path / "t", pad=200)
    out = tmp_path / "o.h5"
    r = subprocess.run([mpiexec(), "-n", str(nranks), sys.executable, "-c", JOIN, str(trace),
                        str(out)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    counts = json.loads(r.stdout.strip().splitlines()[-1])["text"]
    with h5py.File(out, "r") as f:
        total = sum(f[n].shape[0] for n in _text_datasets(f))
        edges = sum(2 * (nranks - 1) * f[n].chunks[0] for n in _text_datasets(f))
    assert counts["chunks"] > 0 and counts["stored_bytes"] > 0
    assert counts["value_items"] <= edges < total / 2
    # the old layout sent every text row of ranks 1.. through rank 0 as values:
    # here, at most the shared chunks' rows
    assert_same_content(out, _merged_once(trace, tmp_path))


def _merged_once(trace, tmp_path) -> Path:
    ref = tmp_path / "ref.h5"
    if not ref.exists():
        _merge(trace, ref, None)
    return ref


def test_text_in_many_windows_and_parts_layout(tmp_path):
    """Text bytes at global offsets across windows (a small --memory budget), and
    as virtual datasets over parts (layout "parts")."""
    trace = wordy_trace(tmp_path / "t", pad=400)
    ref = _merged_once(trace, tmp_path)
    out = tmp_path / "w2.h5"
    r = run_cli(["merge", str(trace), "-o", str(out), "--memory", "1M"], nranks=2)
    assert r.returncode == 0, r.stderr
    assert int(re.search(r"(\d+) window\(s\)", r.stderr).group(1)) > 3
    assert_same_content(ref, out)
    with h5py.File(out, "r") as f:
        assert f["text/text/data"].maxshape == (None,)      # resizable: many windows
    parts = tmp_path / "p" / "o.h5"
    parts.parent.mkdir()
    r = run_cli(["merge", str(trace), "-o", str(parts), "--layout", "parts", "-q"], nranks=3)
    assert r.returncode == 0, r.stderr
    assert_same_content(ref, parts)
    with h5py.File(parts, "r") as f:
        assert f["text/text/data"].is_virtual and f["text/text"].attrs["encoding"] == "bytes"


def _to_old_layout(path: Path) -> None:
    """Rewrite every data/ends pair as the variable-length dataset layout 2 wrote."""
    with h5py.File(path, "a") as f:
        pairs = []
        f.visititems(lambda name, o: pairs.append(name)
                     if isinstance(o, h5py.Group) and "ends" in o else None)
        for name in pairs:
            g = f[name]
            data, ends = g["data"][:], g["ends"][:]
            values = [b.tobytes() for b in np.split(data, ends[:-1])] if len(ends) else []
            attrs = dict(g.attrs)
            del f[name]
            if attrs["dtype"] == "str":
                ds = f.create_dataset(name, data=np.array(values + [b""], object)[:-1],
                                      dtype=h5py.string_dtype())
            else:
                ds = f.create_dataset(name, shape=(len(values),), dtype=h5py.vlen_dtype(np.uint8))
                for i, v in enumerate(values):
                    ds[i] = np.frombuffer(v, np.uint8)
            ds.attrs["description"] = attrs["description"]
            if attrs.get("encoding") == "bytes":
                ds.attrs["encoding"] = "bytes"


@pytest.mark.parametrize("trace", ["wordy", DATA / "ovni" / "v1-zoo-small" / "ovni"],
                         ids=["otf-text", "ovni-bytes"])
def test_old_variable_length_files_still_read(trace, tmp_path):
    if trace == "wordy":
        trace = wordy_trace(tmp_path / "t")
    new, old = tmp_path / "new.h5", tmp_path / "old.h5"
    _merge(trace, new, None)
    shutil.copy(new, old)
    _to_old_layout(old)
    with h5py.File(old, "r") as f:
        assert not any(isinstance(f[t][c], h5py.Group) for t in json.loads(f.attrs["tables"])
                       for c in json.loads(f[t].attrs["columns"]))
    assert_same_content(new, old)
    with h5py.File(old, "a") as f:
        f.attrs["layout_version"] = 2
    a, b = partrace.open(new), partrace.open(old)
    table = "text" if "text" in a.tables else "jumbo"
    col = "text" if table == "text" else "data"
    full = a.columns(table)
    assert len(full[col]) > 0
    t0, t1 = int(full["time"][len(full["time"]) // 3]), int(full["time"][-1])
    for t in (a, b):
        got = t.columns(table, time=(t0, t1))
        keep = (full["time"] >= t0) & (full["time"] < t1)
        assert list(got[col]) == list(full[col][keep])
        assert 0 < len(got[col]) < len(full[col])
    assert_same_content(new, _convert_back(old, tmp_path))


def _convert_back(path: Path, tmp_path) -> Path:
    """An old file is an input too: converted to a new one, the same content."""
    out = tmp_path / "again.h5"
    r = run_cli(["convert", str(path), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr
    return out

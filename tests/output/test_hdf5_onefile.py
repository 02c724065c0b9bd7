"""One self-contained HDF5 file at any rank count.

Merged on 1, 2 and 3 ranks (and under a tiny memory budget, many windows) the
output is one file with the same rows; moved alone to another folder it still
reads.  A ``layout="parts"`` output missing a part is refused with one line
naming it, never read as zeros.
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
from partrace.errors import TraceError
from partrace.formats.hdf5 import chunks as hdf5_chunks
from partrace.output.hdf5_holes import HoleFile, fill
from partrace.output.hdf5_chunk_map import (shared_chunks, stored_chunks,
                                             stored_chunks_by_lookup, whole_chunks)
from partrace.output.hdf5_joined import _encoder
from tests.conftest import DATA, ROOT, mpiexec, run_cli
from tests.support.compare import assert_same_content, h5_content
from tests.support.scripts import gen_otf

pytestmark = pytest.mark.mpi

RING8 = DATA / "otf" / "ring8" / "trace" / "ring8.otf"
DUMPI = DATA / "dumpi" / "p2p-4rank"           # text columns (variable length)
OVNI = DATA / "ovni" / "v1-zoo-small" / "ovni"  # a bytes column (jumbo data)


def _merge(trace, out: Path, nranks, extra=()) -> str:
    r = run_cli(["merge", str(trace), "-o", str(out), *extra], nranks=nranks)
    assert r.returncode == 0, r.stderr
    return r.stderr


def _only_the_file(out: Path) -> None:
    """The output folder holds the .h5 and nothing else: no parts, no staging."""
    assert sorted(os.listdir(out.parent)) == [out.name]


@pytest.mark.parametrize("trace", [RING8, DUMPI, OVNI], ids=lambda p: p.parts[-3])
def test_one_file_at_any_rank_count_reads_alone(trace, tmp_path):
    """1, 2 and 3 ranks on OTF; 3 ranks on the traces with text and bytes columns (the
    suite's time budget: 2 ranks is the case of test_mpi_runs and test_dumpi_mpi too)."""
    ref = tmp_path / "one" / "o.h5"
    ref.parent.mkdir()
    _merge(trace, ref, None, ["-q"])
    _only_the_file(ref)
    for n in (1, 2, 3) if trace == RING8 else (3,):
        out = tmp_path / f"n{n}" / "o.h5"
        out.parent.mkdir()
        _merge(trace, out, n, ["-q"])
        _only_the_file(out)
        alone = tmp_path / f"moved{n}" / "o.h5"     # the single file, moved on its own
        alone.parent.mkdir()
        shutil.move(out, alone)
        shutil.rmtree(out.parent)
        with h5py.File(alone, "r") as f:
            virtual = []
            f.visititems(lambda _, o: virtual.append(o.name)
                         if isinstance(o, h5py.Dataset) and o.is_virtual else None)
        assert virtual == []
        assert_same_content(ref, alone)
        events = h5_content(alone)["events"]
        assert len(events["time"]) > 100 and np.all(np.diff(events["time"]) >= 0)
        assert events["time"].max() > 0 and len(np.unique(events["location"])) > 1
    assert not list(tmp_path.rglob("*.parts")) and not list(tmp_path.rglob(".*partrace-*"))


def test_many_windows_give_the_same_single_file(tmp_path):
    """A tiny --memory budget (many windows, resizable tables) changes no row."""
    trace = gen_otf(tmp_path, 40000)
    ref = tmp_path / "ref" / "o.h5"
    ref.parent.mkdir()
    _merge(trace, ref, None)
    for n in (None, 3):
        out = tmp_path / f"w{n}" / "o.h5"
        out.parent.mkdir()
        windows = int(re.search(r"(\d+) window\(s\)", _merge(trace, out, n, ["--memory", "1M"]))
                      .group(1))
        assert windows > 3
        _only_the_file(out)
        assert_same_content(ref, out)


def _mappings(path: Path) -> dict[str, int]:
    """Per virtual dataset of the file, its mappings."""
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, o: out.__setitem__(name, len(o.virtual_sources()))
                     if isinstance(o, h5py.Dataset) and o.is_virtual else None)
    return out


def test_parts_index_maps_each_part_once(tmp_path):
    """Layout "parts" at 3 ranks and many windows, text columns too: the index reads the
    same rows as the single file, each of its virtual datasets mapping each part once
    (a part's pieces of every window, one mapping), not once a window."""
    generated = gen_otf(tmp_path, 40000)
    for trace, extra in ((generated, ["--memory", "1M"]), (DUMPI, [])):
        ref = tmp_path / f"ref-{trace.name}" / "o.h5"
        ref.parent.mkdir()
        _merge(trace, ref, None)
        out = tmp_path / f"parts-{trace.name}" / "o.h5"
        out.parent.mkdir()
        said = _merge(trace, out, 3, ["--layout", "parts", *extra])
        if extra:
            assert int(re.search(r"(\d+) window\(s\)", said).group(1)) > 3
        assert_same_content(ref, out)
        mapped = _mappings(out)
        assert mapped and max(mapped.values()) <= 3, mapped
        if trace == DUMPI:      # text columns: their data and ends are mapped per part too
            assert any(name.endswith("/data") for name in mapped)


@pytest.mark.skipif(shutil.which("h5dump") is None,
                    reason="h5dump (Debian's hdf5-tools, HDF5's own C tools) is not installed")
def test_hdf5s_own_tool_reads_the_parts_index(tmp_path):
    """HDF5's C library through its own h5dump (Debian's: 1.10) reads every virtual
    dataset of a parts index, mappings of many windows' blocks included, as the values
    of the single file of a 1-rank merge."""
    trace = gen_otf(tmp_path, 40000)
    ref = tmp_path / "ref" / "o.h5"
    ref.parent.mkdir()
    _merge(trace, ref, None)
    out = tmp_path / "parts" / "o.h5"
    out.parent.mkdir()
    _merge(trace, out, 3, ["--layout", "parts", "--memory", "1M"])
    mapped = _mappings(out)
    assert max(mapped.values()) > 1
    with h5py.File(ref, "r") as f:
        for name in mapped:
            want = f[name][()]
            names = h5py.check_enum_dtype(f[name].dtype)
            got = _h5dump_enum(out, name, names) if names else _h5dump_numbers(out, name, want)
            assert np.array_equal(got, want), name


def _h5dump_numbers(path: Path, name: str, like: np.ndarray) -> np.ndarray:
    raw = path.parent / "raw.bin"
    r = subprocess.run(["h5dump", "-d", f"/{name}", "-b", "LE", "-o", str(raw), str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return np.fromfile(raw, like.dtype.newbyteorder("<")).reshape(like.shape)


def _h5dump_enum(path: Path, name: str, names: dict) -> np.ndarray:
    """An enum dataset as h5dump prints it, its values' names (its binary output of
    an enum is empty), as numbers."""
    r = subprocess.run(["h5dump", "-y", "-w", "0", "-d", f"/{name}", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    data = r.stdout.split("DATA {", 1)[1].split("}", 1)[0]
    return np.array([names[v.strip()] for v in data.replace("\n", " ").split(",") if v.strip()])


OWNED = """
import json, sys
from partrace.engine.mpi import world
from partrace.engine.pipeline import run
from partrace.output.hdf5_sink import HDF5Sink
sink = HDF5Sink(sys.argv[2])
stats = run(world(), sys.argv[1], sink, memory=1 << 20)
if world().rank == 0:
    print(json.dumps(dict(sink.join_counts["numbers"], windows=stats.windows)))
"""


def test_every_numeric_chunk_has_one_writer(tmp_path, monkeypatch):
    """3 ranks and many windows (slices ending mid-chunk everywhere): each chunk is
    written whole by its owner (output/chunk_owners.py), so every chunk of the parts
    goes into the output as stored bytes (rank 0 places it, its rank fills it in) and
    none is made whole from values; the chunks are byte for byte those of the 1-rank
    file."""
    monkeypatch.setenv("PARTRACE_H5_CHUNK_ROWS", "4096")
    trace = gen_otf(tmp_path, 20000)
    one, three = tmp_path / "one.h5", tmp_path / "three.h5"
    _merge(trace, one, None, ["-q"])
    r = subprocess.run([mpiexec(), "-n", "3", sys.executable, "-c", OWNED, str(trace),
                        str(three)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    counts = json.loads(r.stdout.strip().splitlines()[-1])
    assert counts["windows"] > 3
    assert counts["chunks"] > 0 and counts["value_items"] == 0
    assert_same_content(one, three)
    with h5py.File(one, "r") as a, h5py.File(three, "r") as b:
        for name in ("events/time", "events/location", "events/region"):
            assert stored_chunks(a[name]) and len(stored_chunks(a[name])) == len(
                stored_chunks(b[name]))
            for coord, *_ in stored_chunks(a[name]):
                assert a[name].id.read_direct_chunk(coord) == b[name].id.read_direct_chunk(
                    coord), (name, coord)


def test_whole_chunks_of_parts_are_copied_as_stored(tmp_path, monkeypatch):
    """Enough rows per rank for whole 16384-row chunks (PARTRACE_H5_CHUNK_ROWS): the
    joined file holds them byte for byte as the single-rank file does, and the same rows."""
    monkeypatch.setenv("PARTRACE_H5_CHUNK_ROWS", "16384")
    trace = gen_otf(tmp_path, 120000)
    one, two = tmp_path / "one.h5", tmp_path / "two.h5"
    _merge(trace, one, None, ["-q"])
    _merge(trace, two, 2, ["-q"])
    assert_same_content(one, two)
    with h5py.File(one, "r") as a, h5py.File(two, "r") as b:
        ds_a, ds_b = a["events/time"], b["events/time"]
        assert ds_a.shape[0] > 4 * ds_a.chunks[0]
        for c in range(ds_a.shape[0] // ds_a.chunks[0]):
            at = (c * ds_a.chunks[0],)
            assert ds_a.id.read_direct_chunk(at) == ds_b.id.read_direct_chunk(at), c


def test_chunk_rows_chosen_by_environment(tmp_path):
    """PARTRACE_H5_CHUNK_ROWS sets the rows per chunk of long tables (the same rows as
    the default's); a value that is not a power of two from 16 is refused (exit 2,
    no output) on every rank."""
    ref, out = tmp_path / "ref.h5", tmp_path / "o.h5"
    _merge(RING8, ref, None, ["-q"])
    r = run_cli(["merge", str(RING8), "-o", str(out), "-q"], nranks=2,
                env={"PARTRACE_H5_CHUNK_ROWS": "64"})
    assert r.returncode == 0, r.stderr
    with h5py.File(out, "r") as f, h5py.File(ref, "r") as g:
        assert f["events/time"].chunks == (64,)
        assert f["events/time"].shape[0] > 64 and g["events/time"].chunks[0] > 64
    assert_same_content(ref, out)
    for bad in ("1000", "8", "lots"):
        r = run_cli(["merge", str(RING8), "-o", str(tmp_path / "bad.h5")], nranks=2,
                    env={"PARTRACE_H5_CHUNK_ROWS": bad})
        assert r.returncode == 2
        assert f"PARTRACE_H5_CHUNK_ROWS={bad}: rows per chunk, a power of two" in r.stderr
        assert not (tmp_path / "bad.h5").exists()


def test_shared_chunks_are_encoded_off_rank_0_turn_by_turn():
    """A shared chunk goes to one of its writers other than rank 0 (which has the final
    file's duties and sends its own rows instead), the chunks of many writers in turn:
    the chunks of a small table that every rank wrote are spread over the ranks, not
    all assembled by one that opens every part for each."""
    every = [(r, 10 * r, 10 * r + 10) for r in range(8)]
    assert [_encoder(every, k) for k in range(9)] == [1, 2, 3, 4, 5, 6, 7, 1, 2]
    assert _encoder([(0, 0, 37), (1, 37, 64)], 0) == _encoder([(0, 0, 37), (1, 37, 64)], 5) == 1
    assert _encoder([(2, 448, 450), (1, 450, 512)], 1) == 2
    assert _encoder([(0, 0, 5), (0, 9, 12)], 3) == 0    # rank 0's alone: no one else holds it


def test_a_shared_chunk_is_assembled_from_parts_and_rank_0_s_rows(tmp_path):
    """The encoder reads its writers' parts, never rank 0's file: rank 0's rows come from
    what rank 0 sent; and rank 0, encoding a chunk only it wrote, reads its own file."""
    from partrace.output.hdf5_joined import SingleFileLayout
    values = np.arange(200, dtype=np.int64) * 3 + 1
    make = dict(shape=(200,), chunks=(64,), dtype="i8", compression="gzip")
    with h5py.File(tmp_path / "p1.h5", "w") as p1, h5py.File(tmp_path / "p0.h5", "w") as p0:
        p1.create_dataset("t/c", **make)[70:128] = values[70:128]
        p0.create_dataset("t/c", **make)[64:128] = values[64:128]
        layout = SingleFileLayout.__new__(SingleFileLayout)
        datasets = [("t", "c", None, 512)]
        for files, parts, given in (
                ({1: p1}, [(0, 64, 70), (1, 70, 128)], {(0, 64): values[64:70]}),
                ({0: p0}, [(0, 64, 100), (0, 100, 128)], {(0, 64): values[64:100],
                                                          (0, 100): values[100:128]})):
            stored = layout._whole_chunk(files, datasets, 0, 64, parts, given)
            p1["t/c"].id.write_direct_chunk((64,), *stored)
            assert np.array_equal(p1["t/c"][64:128], values[64:128]), parts


def test_join_places_whole_chunks_and_encodes_shared_ones_once(tmp_path):
    """The join's steps on ranges that start and end mid-chunk and end the dataset: the
    chunks wholly inside a part's ranges (whole_chunks) placed in the final file with
    holes for their bytes, the holes filled from the parts (fill), and the chunks
    shared_chunks names assembled and encoded once (chunks.put): every row is the
    value written, and a placed chunk holds its part's stored bytes."""
    values = np.arange(1000, dtype=np.int64) * 7 - 300
    ranges = [[(0, 37)], [(37, 200), (450, 1000)], [(200, 450)]]    # ranks 0, 1, 2
    make = dict(shape=(1000,), chunks=(64,), dtype="i8", compression="gzip", shuffle=True)
    parts, listed = [], {}
    for r, rs in enumerate(ranges):
        parts.append(tmp_path / f"rank-{r}.h5")
        with h5py.File(parts[r], "w", libver="v110") as f:
            src = f.create_dataset("v", **make)
            for a, b in rs:
                src[a:b] = values[a:b]
            listed[r] = whole_chunks(src, rs)
    final = tmp_path / "final.h5"
    with h5py.File(final, "w", libver="v110") as f:
        f.create_dataset("v", **make)[0:37] = values[0:37]     # rank 0 writes it itself
    holes = HoleFile(final, int(max(listed[r][:, 3].max() for r in (1, 2))))
    places = {}
    with h5py.File(holes, "r+") as f:
        dst = f["v"]
        for r in (1, 2):
            first = holes.hole_count
            for row, mask, _, size in listed[r].tolist():
                dst.id.write_direct_chunk((row,), holes.placeholder(size), mask)
            at = holes.holes_since(first, listed[r][:, 3])
            places[r] = np.column_stack([listed[r][:, 2], at, listed[r][:, 3]])
        shared = shared_chunks(ranges, 64, 1000)
        assert shared == [(0, [(0, 0, 37), (1, 37, 64)]), (192, [(1, 192, 200), (2, 200, 256)]),
                          (448, [(2, 448, 450), (1, 450, 512)])]
        how = hdf5_chunks.codec(dst)
        for row, pieces in shared:
            chunk = np.zeros(64, np.int64)
            for r, a, b in pieces:
                with h5py.File(parts[r], "r") as p:
                    chunk[a - row:b - row] = p["v"][a:b]
            hdf5_chunks.put(dst, row, hdf5_chunks.encode(chunk, how))
    holes.close()
    for r in (1, 2):
        assert fill(parts[r], final, places[r]) == int(listed[r][:, 3].sum())
    with h5py.File(final, "r") as f, h5py.File(parts[1], "r") as p1, \
            h5py.File(parts[2], "r") as p2:
        assert np.array_equal(f["v"][:], values)
        # chunk 4 (256..319) lies inside rank 2's rows, the last chunk in rank 1's
        assert f["v"].id.read_direct_chunk((256,)) == p2["v"].id.read_direct_chunk((256,))
        assert f["v"].id.read_direct_chunk((960,)) == p1["v"].id.read_direct_chunk((960,))


@pytest.mark.parametrize("step", [1, 4, 16, 64])
def test_shared_chunks_equal_the_chunks_of_many_writers(step):
    """Against the rows' owners, row by row: windows of slices of random sizes (empty
    ones included), several per chunk or several chunks per slice."""
    rng = np.random.default_rng(step)
    for ranks in (2, 3, 5):
        sizes = rng.integers(0, 3 * step + 2, (4, ranks))   # 4 windows
        owner = np.repeat(np.tile(np.arange(ranks), 4), sizes.ravel())
        size = len(owner)
        spans = [[] for _ in range(ranks)]
        at = 0
        for r, n in zip(np.tile(np.arange(ranks), 4), sizes.ravel()):
            if n:
                if spans[r] and spans[r][-1][1] == at:
                    spans[r][-1] = (spans[r][-1][0], at + n)
                else:
                    spans[r].append((at, at + int(n)))
                at += int(n)
        want = [c for c in range(0, size, step) if len(set(owner[c:c + step])) > 1]
        got = shared_chunks(spans, step, size)
        assert [c for c, _ in got] == want
        for c, pieces in got:
            rows = np.concatenate([np.full(b - a, r) for r, a, b in pieces])
            assert np.array_equal(rows, owner[c:c + step])


def test_chunk_index_walk_equals_lookups(tmp_path):
    """The one walk of the chunk index finds what a lookup per chunk finds (the path
    for HDF5 without H5Dchunk_iter): chunks never written are absent."""
    with h5py.File(tmp_path / "d.h5", "w", libver="v110") as f:
        ds = f.create_dataset("v", shape=(1000, 2), chunks=(64, 2), dtype="i4",
                              compression="gzip", shuffle=True)
        ds[100:700] = np.arange(1200, dtype=np.int32).reshape(600, 2)
        ds[640:704] = 0     # stored (written), though all zero
        f.flush()
        walked = sorted(stored_chunks(ds))
        assert walked == stored_chunks_by_lookup(ds)
        assert [c[0] for c in walked] == [(row, 0) for row in range(64, 704, 64)]
        assert all(size > 0 and address > 0 for _, _, address, size in walked)


def _parts_output(tmp_path) -> Path:
    out = tmp_path / "p" / "o.h5"
    out.parent.mkdir()
    code = ("import sys, partrace; partrace.merge(sys.argv[1], sys.argv[2], layout='parts')")
    from tests.conftest import mpiexec
    r = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-c", code, str(RING8), str(out)],
                       capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(out.parent / "o.h5.parts")) == ["rank-00000.h5", "rank-00001.h5"]
    return out


def test_parts_layout_missing_part_is_an_error_not_zeros(tmp_path):
    out = _parts_output(tmp_path)
    ref = tmp_path / "ref.h5"
    _merge(RING8, ref, None, ["-q"])
    assert_same_content(ref, out)                       # whole, it reads like the single file
    r = run_cli(["info", str(out)])
    assert r.returncode == 0 and "8" in r.stdout
    (out.parent / "o.h5.parts" / "rank-00001.h5").unlink()
    missing = str(out.parent / "o.h5.parts" / "rank-00001.h5")
    for args in (["info", str(out)], ["convert", str(out), "-o", str(tmp_path / "back.h5")]):
        r = run_cli(args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and missing in lines[0] and "missing" in lines[0], lines
        assert "time span: 0 .. 0" not in r.stdout
    assert not (tmp_path / "back.h5").exists()
    with pytest.raises(TraceError, match=re.escape(missing)):
        partrace.open(out).to_pandas()
    with pytest.raises(TraceError, match=re.escape(missing)):
        partrace.open(out).columns("events", columns=["time"])
    with pytest.raises(TraceError, match=re.escape(missing)):
        partrace.open(out).definitions


def test_copied_without_its_parts_folder(tmp_path):
    out = _parts_output(tmp_path)
    alone = tmp_path / "elsewhere" / "o.h5"
    alone.parent.mkdir()
    shutil.copy(out, alone)
    r = run_cli(["info", str(alone)])
    assert r.returncode == 2
    assert str(alone.parent / "o.h5.parts" / "rank-00000.h5") in r.stderr

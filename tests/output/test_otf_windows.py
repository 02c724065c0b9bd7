"""OTF output written window by window: under a tiny --memory budget (many windows) every file is
byte-identical to the unbudgeted, one-window output, on 1, 2 and 3 ranks, plain and zlib-compressed;
the compressed files decompress to the plain files."""
from __future__ import annotations

import re
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, mpiexec, run_cli

pytestmark = pytest.mark.mpi

# generated traces big enough for tens of windows at a 1 MiB budget
SOURCES = {
    "otf": (["gen_otf.py", "{d}/g.otf", "--processes", "8", "--streams", "3", "--events", "20000"], "g.otf"),
    "ovni": (["gen_ovni.py", "{d}", "--looms", "1", "--procs", "2", "--threads", "2", "--events", "8000"],
             "ovni"),
    "dumpi": (["gen_dumpi.py", "{d}", "--ranks", "4", "--calls", "3000"], "synth.meta"),
}
BUDGET = "1M"


@pytest.fixture(scope="module", params=sorted(SOURCES))
def source(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(request.param)
    args, name = SOURCES[request.param]
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / args[0]), *(a.format(d=d) for a in args[1:])],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return request.param, d / name


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.parent.iterdir())}


def _merge(trace, out: Path, nranks=None, extra=()) -> int:
    """Merge to OTF through the CLI; returns the number of windows from the summary line."""
    out.parent.mkdir()
    r = run_cli(["merge", str(trace), "-o", str(out), "--streams", "3", *extra], nranks=nranks)
    assert r.returncode == 0, r.stderr
    return int(re.search(r"(\d+) window\(s\)", r.stderr).group(1))


@pytest.fixture(scope="module")
def one_window(source, tmp_path_factory):
    """(windows, files) of the source's unbudgeted merge to OTF on one process, made once for
    the tests that compare with it."""
    out = tmp_path_factory.mktemp("one") / "one" / "x.otf"
    windows = _merge(source[1], out)
    return windows, _files(out)


def test_budgeted_output_equals_one_window_output(source, one_window, tmp_path):
    fmt, trace = source
    windows, want = one_window
    assert windows == 1
    assert "x.otf" in want and any(n.endswith(".events") for n in want)
    if fmt == "ovni":       # its point events are marker spots in their streams' marker files
        assert b"MD" in want["x.0.marker"] and b"MS" not in want["x.0.marker"]
        assert sum(b"\nMS" in b for n, b in want.items() if re.fullmatch(r"x\.[1-9a-f]\d*\.marker", n)) > 1
    for n in (None, 3):
        out = tmp_path / f"w{n}" / "x.otf"
        assert _merge(trace, out, n, ["--memory", BUDGET]) > 3
        got = _files(out)
        assert list(got) == list(want), n
        for name in want:
            assert got[name] == want[name], (n, name)


RUN = """
import sys
from partrace.engine.mpi import world
from partrace.engine.pipeline import run
from partrace.output.otf_sink import OTFSink
trace, out, memory = sys.argv[1], sys.argv[2], int(sys.argv[3])
stats = run(world(), trace, OTFSink(out, streams=3, compress=True), memory=memory)
print(stats.windows)
"""


def _merge_compressed(trace, out: Path, nranks, memory: int) -> int:
    out.parent.mkdir()
    cmd = [sys.executable, "-c", RUN, str(trace), str(out), str(memory)]
    if nranks:
        cmd = [mpiexec(), "-n", str(nranks), *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=180,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[0])


def test_compressed_output_is_one_zlib_stream_per_file(source, one_window, tmp_path):
    _, trace = source
    _, plain = one_window
    assert _merge_compressed(trace, tmp_path / "z1" / "x.otf", None, 1 << 40) == 1
    want = _files(tmp_path / "z1" / "x.otf")
    # every file but the master file is compressed and holds exactly the plain file's bytes
    assert sorted(want) == sorted(n if n == "x.otf" else n + ".z" for n in plain)
    for name, data in want.items():
        if name == "x.otf":
            assert data == plain[name]
            continue
        d = zlib.decompressobj()
        assert d.decompress(data) == plain[name[:-2]], name
        assert not d.unused_data
    for n in (None, 2):
        out = tmp_path / f"zw{n}" / "x.otf"
        assert _merge_compressed(trace, out, n, 1 << 20) > 3
        got = _files(out)
        assert list(got) == list(want)
        for name in want:
            assert got[name] == want[name], (n, name)


# -- the sink alone, fed windows as the pipeline does -----------------------------------------

def _decoded(path):
    from partrace.engine.mpi import serial
    from partrace.engine.pipeline import run
    from partrace.output.memory import MemorySink
    sink = MemorySink()
    run(serial(), path, sink)
    return sink.defs, sink.schema, sink.tables


def _window_of(table, cuts) -> np.ndarray:
    """Per row, the number of cut keys <= its (time, location, seq) key."""
    t, loc, seq = (table[c].astype(np.int64) for c in ("time", "location", "seq"))
    w = np.zeros(len(table), np.int64)
    for c0, c1, c2 in cuts:
        w += (t > c0) | ((t == c0) & ((loc > c1) | ((loc == c1) & (seq >= c2))))
    return w


def _quantile_keys(table, windows: int) -> list[tuple[int, int, int]]:
    idx = (np.arange(1, windows) * len(table)) // windows
    return [tuple(int(table[c][i]) for c in ("time", "location", "seq")) for i in idx] if len(table) else []


def _write_windows(defs, schema, tables, out: Path, cuts: dict | None, hook: bool) -> list[int]:
    """Write through OTFSink window by window; returns the rows it held after each window."""
    from partrace.engine.mpi import serial
    from partrace.output.otf_sink import OTFSink
    comm, sink = serial(), OTFSink(out, streams=3)
    out.parent.mkdir()
    sink.prepare(comm, defs, schema)
    n = 1 + max((len(c) for c in (cuts or {}).values()), default=0)
    win = {name: _window_of(t, (cuts or {}).get(name, [])) for name, t in tables.items()}
    held = []
    for w in range(n):
        if hook:
            sink.next_keys = {name: (cuts[name][w] if w < len(cuts.get(name, [])) else None) for name in tables}
        sink.write(comm, {name: t.take(np.flatnonzero(win[name] == w)) for name, t in tables.items()})
        held.append(sum(len(t) for t in sink.held.values() if t is not None))
    sink.commit(comm)
    return held


@pytest.mark.parametrize("trace", ["otf/hybrid16/trace/hybrid16.otf", "otf/ring8/trace/ring8.otf",
                                   "ovni/v1-zoo-small/ovni"])
def test_sink_output_is_the_same_for_any_windows(trace, tmp_path, monkeypatch):
    from tests.conftest import DATA
    defs, schema, tables = _decoded(DATA / trace)
    _write_windows(defs, schema, tables, tmp_path / "one" / "x.otf", None, False)
    want = _files(tmp_path / "one" / "x.otf")
    events = tables["events"]
    common = _quantile_keys(events, 12)
    per_table = {name: _quantile_keys(t, 12) for name, t in tables.items()}
    cases = {"common cuts, told": ({name: common for name in tables}, True),
             "own cuts, told": (per_table, True),
             "own cuts, not told": (per_table, False)}
    for case, (cuts, hook) in cases.items():
        out = tmp_path / case.replace(" ", "").replace(",", "-") / "x.otf"
        held = _write_windows(defs, schema, tables, out, cuts, hook)
        got = _files(out)
        assert list(got) == list(want), case
        for name in want:
            assert got[name] == want[name], (case, name)
        if case == "common cuts, told":
            # bounded: only rows at the time of the next window's first key wait
            assert max(held[:-1]) < len(events) / 12, held
    # and the writer's own blocks (formatter passes, event blocks, marker spot blocks)
    from partrace.formats.otf import generic, writer
    monkeypatch.setattr(writer, "ROWS_PER_PASS", 97)
    monkeypatch.setattr(generic, "MARKER_BLOCK", 13)
    _write_windows(defs, schema, tables, tmp_path / "blocks" / "x.otf", None, False)
    got = _files(tmp_path / "blocks" / "x.otf")
    assert list(got) == list(want)
    for name in want:
        assert got[name] == want[name], name


def test_marker_spot_kernel_equals_the_numpy_formatter():
    """The numba spot formatter (integer and byte-array columns) writes what the general numpy
    formatter writes: negative and extreme integers, byte arrays over one key-value line."""
    from partrace.formats.otf import generic as g
    from partrace.model import Table
    rng = np.random.default_rng(7)
    n = 500
    cols = {"time": np.sort(rng.integers(0, 10**12, n)), "location": rng.integers(1, 9, n),
            "seq": np.arange(n), "region": rng.integers(1, 5, n),
            "small": rng.integers(-128, 128, n).astype(np.int8),
            "big": rng.choice(np.array([0, -1, -2**63, 2**63 - 1, 5], np.int64), n),
            "huge": rng.choice(np.array([0, 2**64 - 1, 2**63, 1], np.uint64), n),
            "flags": rng.integers(0, 3, n).astype(np.uint16),
            "blob": np.where(rng.random((n, 1)) < 0.3, 0, rng.integers(0, 256, (n, 250)) *
                             (np.arange(250) < rng.integers(0, 251, (n, 1)))).astype(np.uint8)}
    rows = Table(cols)
    kv = [g.KVColumn("small", 1, 1, 0), g.KVColumn("big", 2, 7, 0), g.KVColumn("blob", 3, g.BYTE_ARRAY, 250),
          g.KVColumn("huge", 4, 8, 0), g.KVColumn("flags", 5, 4, 0)]
    got, want = g._spots_kernel(rows, kv).tobytes(), g._spots(rows, kv).tobytes()
    assert got == want
    assert got.count(b"\nMS") + got.startswith(b"MS") == n      # a spot per row


def test_compressed_file_does_not_depend_on_how_the_text_is_cut(tmp_path):
    """One zlib stream with a full flush (sync point) after every ZBLOCK text bytes, whatever the pieces."""
    from partrace.formats.otf.writer import ZBLOCK, OutFile
    data = np.random.default_rng(1).integers(48, 58, 3 * ZBLOCK + 12345).astype(np.uint8).tobytes()
    files = []
    for k, cuts in enumerate([[], [10, ZBLOCK, ZBLOCK + 5, 2 * ZBLOCK], list(range(0, len(data), 777_777))]):
        out, prev = OutFile(tmp_path / f"f{k}", compress=True), 0
        for c in cuts + [len(data)]:
            out.write(data[prev:c])
            prev = c
        files.append(out.close().read_bytes())
    assert files[1] == files[0] and files[2] == files[0]
    d = zlib.decompressobj()
    assert d.decompress(files[0]) == data and not d.eof        # flushed, not finished
    assert files[0].count(b"\x00\x00\xff\xff") >= 4             # 3 block flushes and the last one


def test_rows_grouped_by_stream_keep_their_order(jit_mode):
    """Each stream's rows of a window, as the sink hands them to the stream's writer: the
    rows of that stream in their (key) order, streams in ascending order, as a stable
    argsort of the rows' streams gives them."""
    from partrace.output.otf_sink import _grouped
    rng = np.random.default_rng(4)
    for n, count in ((0, 1), (1, 3), (50, 1), (200, 2), (500, 7), (300, 40)):
        slot = rng.integers(0, count, n).astype(np.int64)
        order, starts = _grouped(slot, count)
        want = np.argsort(slot, kind="stable")
        assert np.array_equal(order, want)
        assert np.array_equal(starts, np.searchsorted(slot[want], np.arange(count + 1)))

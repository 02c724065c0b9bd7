"""OTF output holds little besides the window it is given: no copy of the whole window (neither the
rows held from the last window joined to it, nor every stream's rows taken at once), measured by
tracemalloc (numpy's buffers included) while the sink writes windows of a generated ROSS trace,
whose samples become many counter records and whose events carry many key-value columns."""
from __future__ import annotations

import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.output.test_otf_windows import _decoded, _quantile_keys, _window_of

WINDOWS = 4        # the first is not measured: it may compile the numba kernels (a fresh cache)
# what the sink may allocate beyond a window, as a share of the window's bytes: less than a copy of
# it (one stream's rows, with 4 streams about a quarter, and its block cuts; a stream index per row;
# one formatter block).  Joining held rows to the window and taking every stream's rows at once
# took 1.2-1.6.  (0.85 before ids became 32-bit: the window shrank, the formatter's
# 64-bit work arrays did not.)
MAX_EXTRA = 0.95


@pytest.fixture(scope="module")
def ross(tmp_path_factory):
    d = tmp_path_factory.mktemp("ross")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_ross.py"), str(d), "--mb", "2", "--pes", "4",
                        "--nkp", "2", "--lps-per-pe", "16"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return _decoded(d)


@pytest.mark.parametrize("streams", [4, None])
def test_sink_allocates_a_fraction_of_its_window(ross, streams, tmp_path, monkeypatch):
    from partrace.engine.mpi import serial
    from partrace.formats.otf import writer
    from partrace.output.otf_sink import OTFSink
    monkeypatch.setattr(writer, "ROWS_PER_PASS", 1024)     # a block much smaller than a window
    defs, schema, tables = ross
    cuts = _quantile_keys(tables["events"], WINDOWS)
    win = {name: _window_of(t, cuts) for name, t in tables.items()}
    comm, sink = serial(), OTFSink(tmp_path / "x.otf", streams=streams)
    sink.prepare(comm, defs, schema)
    extra = []
    tracemalloc.start()
    try:
        for w in range(WINDOWS):
            window = {name: t.take(np.flatnonzero(win[name] == w)) for name, t in tables.items()}
            size = sum(t[c].nbytes for t in window.values() for c in t.names)
            sink.next_keys = {name: (cuts[w] if w < len(cuts) else None) for name in tables}
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            sink.write(comm, window)
            if w:
                extra.append((tracemalloc.get_traced_memory()[1] - before) / size)
            del window
        sink.commit(comm)
    finally:
        tracemalloc.stop()
    assert sum(1 for p in tmp_path.glob("x.*.events")) == (4 if streams else len(defs.tables["locations"]))
    assert max(extra) < MAX_EXTRA, extra


def test_rows_in_order_are_recognised_as_a_stable_sort_would():
    """merge() skips the sort (and its copies) of one table whose rows are in order: exactly
    when a stable lexsort of the keys leaves every row in place (ties, unsigned ticks)."""
    from partrace.formats.otf.generic import _ascending
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(400):
        n = int(rng.integers(0, 7))
        keys = [np.sort(rng.integers(0, 3, n)).astype(np.uint64)] + [rng.integers(0, 2, n) for _ in range(3)]
        if rng.random() < 0.5:      # often in order: sort all keys together
            order = np.lexsort(keys[::-1])
            keys = [k[order] for k in keys]
        want = bool(np.array_equal(np.lexsort(keys[::-1]), np.arange(n)))
        assert _ascending(keys) == want, keys
        seen.add(want)
    assert seen == {True, False}

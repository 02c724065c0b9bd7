"""Runs hold each column at its narrowest form (one value, or a base plus narrow offsets),
in memory and spilled, and give back exactly the decoded values and dtypes."""
from pathlib import Path

import numpy as np
import pytest

from partrace.engine.mpi import serial
from partrace.engine.narrow import (Constant, Offsets, Shifted, Steps, Words, narrowed,
                                    narrowed_columns, piece)
from partrace.engine.order import lower_bound, sort_by_key
from partrace.engine.runs import Run, RunStore, SpilledRun, row_bytes
from partrace.engine.windows import choose_cuts, time_window
from partrace.formats import get
from partrace.model import Table
from tests.conftest import DATA

FIXTURES = {"otf": DATA / "otf" / "hybrid16" / "trace" / "hybrid16.otf",
            "dumpi": DATA / "dumpi" / "p2p-4rank",
            "ovni": DATA / "ovni" / "v3-mpisim-small" / "ovni",
            "ross": DATA / "ross" / "pi-np2-opt-evtrace-full-model-gvt" / "stats",
            "otf2": DATA / "otf2" / "threads2"}


def _chunks(fmt: str):
    """The fixture's schema and its decoded chunks (small ones: many runs per table)."""
    reader = get(fmt).open(FIXTURES[fmt])
    defs = reader.read_definitions(reader.survey_all()) if reader.surveyed else reader.read_definitions()
    reader.chunk_bytes = 4096
    if reader.ordered:
        reader.start_after(None)
    schema = reader.schema(defs)
    chunks = [(name, t) for unit in reader.units() for chunk in reader.decode(unit, defs)
              for name, t in chunk.items() if len(t)]
    return schema, chunks


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":      # bit for bit (NaN, -0.0)
        got, want = got.view(f"u{want.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}")
    assert np.array_equal(got, want)


def _keys(t: Table) -> list:
    """Keys to search: every row's neighbours at a few places, and beyond both ends."""
    n = len(t)
    rows = sorted({0, n // 3, n // 2, n - 1})
    keys = [(int(t["time"][i]) + dt, int(t["location"][i]) + dl, int(t["seq"][i]) + ds)
            for i in rows for dt in (-1, 0, 1) for dl in (-1, 0, 1) for ds in (-1, 0, 1)]
    return keys + [(-2**63, 0, 0), (2**63 - 1, 0, 0)]


def _check_run(run, table: Table, wide_schema) -> None:
    n = len(table)
    assert run.n == n
    for c in wide_schema:
        want = table[c.name]
        for a, b in ((0, n), (n // 3, min(n, n // 3 + 5)), (n - 1, n), (min(n, 2), min(n, 2))):
            got = run.columns[c.name][a:b] if isinstance(run, Run) else run.column(c.name, a, b)
            _same(got, want[a:b])
            dest = np.empty(b - a, c.numpy_dtype())
            run.put(c.name, a, b, dest)     # widened into a schema-typed buffer, as astype does
            _same(dest, want[a:b].astype(c.element_dtype()))
    for key in _keys(table):
        assert run.lower_bound(key) == lower_bound(table["time"], table["location"], table["seq"], key)
    if isinstance(run, Run):
        wide = Run.__new__(Run)
        wide.columns, wide.n = dict(table.columns), n
        assert run.samples(3) == Run.samples(wide, 3)


@pytest.fixture(scope="module", params=sorted(FIXTURES))
def decoded(request):
    return request.param, *_chunks(request.param)


def test_runs_of_every_format_read_back_exactly_in_memory_and_spilled(decoded, tmp_path):
    fmt, schema, chunks = decoded
    roomy = RunStore(schema, 1 << 40, tmp_path, keep_fraction=0.5)
    tight = RunStore(schema, 1 << 40, tmp_path, keep_fraction=0.5, resident_fraction=1e-9)
    forms = set()
    try:
        for name, t in chunks:
            roomy.add(name, t)
            tight.add(name, t)
            sorted_t = sort_by_key(t)
            kept, spilled = roomy.runs[name][-1], tight.runs[name][-1]
            assert isinstance(kept, Run) and isinstance(spilled, SpilledRun)
            _check_run(kept, sorted_t, schema[name])
            _check_run(spilled, sorted_t, schema[name])
            forms |= {type(v) for v in kept.columns.values()}
        assert {Constant, Offsets} <= forms, fmt      # real chunks do narrow
        wide = sum(len(t) * row_bytes(schema[name]) for name, t in chunks)
        # windows are counted from the wide bytes; the runs hold less, and spill less
        assert roomy.total_bytes() == tight.total_bytes() == wide
        assert roomy.in_memory < wide and roomy.spilled_bytes == 0
        on_disk = sum(f.stat().st_size for f in Path(tight.spill_dir).rglob("*.bin"))
        assert tight.spilled_bytes == on_disk < wide
    finally:
        roomy.close()
        tight.close()


def test_a_window_of_narrow_runs_kept_and_spilled_equals_a_sort_of_the_rows(decoded, tmp_path):
    fmt, schema, chunks = decoded
    name = max(schema, key=lambda k: sum(len(t) for n, t in chunks if n == k))
    parts = [t for n, t in chunks if n == name]
    store = RunStore(schema, 1 << 40, tmp_path, keep_fraction=0.5)
    try:
        for i, t in enumerate(parts):
            if i % 2:       # every other run spilled
                store.runs[name].append(store._spill(name, sort_by_key(t).columns))
            else:
                store.add(name, t)
        whole = Table.concat(parts, schema[name])
        order = np.lexsort((whole["seq"], whole["location"], whole["time"]))
        cuts = choose_cuts(serial(), store.runs[name], 3)
        got = [time_window(serial(), store.runs[name], cuts, w, schema[name]) for w in range(3)]
        for c in schema[name]:
            _same(np.concatenate([g[c.name] for g in got]),
                  whole[c.name][order].astype(c.element_dtype()))
    finally:
        store.close()


I64 = np.iinfo(np.int64)
EDGES = {
    "int64 min, constant": (np.full(5, I64.min, np.int64), Constant),
    "int64 max, constant": (np.full(5, I64.max, np.int64), Constant),
    "near int64 min": (I64.min + np.array([0, 7, 255, 300]), Offsets),
    "near int64 max": (I64.max - np.array([2**32 - 1, 9, 0]), Offsets),
    "int64 full range": (np.array([I64.min, 0, I64.max]), np.ndarray),
    "uint64 above 2^63": (np.array([2**64 - 5, 2**64 - 1, 2**64 - 2**32], np.uint64), Offsets),
    "uint64 full range": (np.array([0, 2**64 - 1], np.uint64), np.ndarray),
    "int32 negative": (np.array([-30000, 3, -5], np.int32), Offsets),
    "int32 range beyond u2": (np.array([-70000, 3, -5], np.int32), np.ndarray),
    "int16 u1 range": (np.array([-100, 100, 0], np.int16), Offsets),
    "uint8 varying": (np.array([0, 255], np.uint8), np.ndarray),
    "bool constant": (np.ones(4, bool), Constant),
    "broadcast row (stride 0)": (np.broadcast_to(np.int32(-7), 6), Constant),
    "float nan constant": (np.full(3, np.nan), Constant),
    "float -0.0 and 0.0": (np.array([0.0, -0.0, 0.0]), np.ndarray),
    "float varying": (np.array([1.5, 2.5, 1.5]), np.ndarray),
    "sub-array constant": (np.tile(np.array([1, 2, 3], np.uint8), (4, 1)), Constant),
    "sub-array of narrow fields": (np.array([[1, 2], [1, 3], [1, 2**40]], np.int64), Words),
    "sub-array of bytes, narrow fields": (np.array([[0, 0, 9, 0, 7, 1, 1, 1]] * 3 + [[0, 0, 0, 0, 7, 2, 1, 1]],
                                                   np.uint8), Words),
    "sub-array of float fields": (np.array([[1.5, -0.0], [1.5, 0.0]]), Words),
    "sub-array varying widely": (np.random.default_rng(3).integers(-2**62, 2**62, (64, 2)), np.ndarray),
    "sub-array of odd width": (np.array([[1, 2, 3], [4, 5, 6]], np.uint8), np.ndarray),
    "counting up (a seq)": (np.arange(41, 41 + 300), Steps),
    "counting up near uint64 max": (np.arange(2**64 - 3, 2**64, dtype=np.uint64), Steps),
    "counting up in int32 from negative": (np.arange(-5, 70000, dtype=np.int32), Steps),
    "counting up but one step of two": (np.array([3, 4, 6, 6, 7]), Offsets),
    "a permutation of a count": (np.array([1, 3, 2, 4]), Offsets),
    "objects": (np.array(["a", "a"], dtype=object), np.ndarray),
    "empty": (np.zeros(0, np.int64), np.ndarray),
}


@pytest.mark.parametrize("label", list(EDGES))
def test_edge_values_narrow_to_the_expected_form_and_round_trip(label, tmp_path):
    values, form = EDGES[label]
    held = narrowed(values)
    assert type(held) is form, label
    n = len(values)
    _same(held[0:n], values)
    _same(held[1:n], values[1:])
    dest = np.empty_like(values)
    if isinstance(held, np.ndarray):
        dest[...] = held
    else:
        held.put(0, n, dest)
        assert held.nbytes < values.nbytes
    _same(dest, values)
    if n:       # the same column in a spilled run (the key columns: any sorted values)
        keys = {"time": np.arange(n), "location": np.ones(n, np.int32), "seq": np.arange(n)}
        spilled = SpilledRun(tmp_path, {**keys, "x": values})
        _same(spilled.column("x", 0, n), values)
        out = np.empty_like(values)
        spilled.put("x", 0, n, out)
        _same(out, values)


@pytest.mark.parametrize("values", [np.array([5, 5, 9, 12, 12, 12, 300]),
                                    np.arange(-3, 40),
                                    np.array([2**64 - 70000, 2**64 - 70000, 2**64 - 1], np.uint64),
                                    I64.min + np.array([0, 0, 4]),
                                    np.full(4, 77)])
def test_search_in_narrow_sorted_values_equals_numpy_search(values):
    held = narrowed(values)
    assert not isinstance(held, np.ndarray)
    lo, hi = int(values.min()), int(values.max())
    probes = {lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, (lo + hi) // 2} | set(values.tolist())
    for v in probes:
        for side in ("left", "right"):
            want = np.searchsorted(values, v, side=side) if 0 <= v < 2**64 or values.dtype.kind == "i" \
                else (0 if v < 0 else len(values))
            assert np.searchsorted(held, v, side=side) == want, (v, side)


def test_a_window_with_no_rows_on_this_rank_gives_empty_columns_of_the_schema():
    """A rank that holds no rows of a window still sends (empty) columns in destination order."""
    from partrace.engine.windows import _merged_spans
    from tests.engine.test_windows import SCHEMA
    empty = _merged_spans([], SCHEMA, np.zeros(0, np.int64))
    for c in SCHEMA:
        got = empty.column_once(c.name)
        assert len(got) == 0 and got.dtype == c.element_dtype()


@pytest.mark.parametrize("delta, dtype", [(0, np.uint64), (-10**9, np.uint64), (12345, np.int64),
                                          (2**40, np.uint64)])
def test_ticks_that_are_time_plus_one_offset_hold_nothing_and_read_back(delta, dtype, tmp_path):
    """ovni's ticks are its time minus the loom's clock offset: held as the offset (Shifted)
    in memory, as time's offsets in every piece, and spilled as their own values."""
    rng = np.random.default_rng(1)
    time = np.sort(rng.integers(10**9, 10**9 + 2**20, 5000))
    ticks = (time + delta).astype(dtype)
    cols = narrowed_columns({"time": time, "location": np.ones(5000, np.int32),
                             "seq": np.arange(5000), "ticks": ticks})
    held = cols["ticks"]
    assert type(held) is Shifted and held.nbytes == 0 and type(cols["time"]) is Offsets
    _same(held[0:5000], ticks)
    _same(held[np.array([4999, 0, 17])], ticks[[4999, 0, 17]])
    p = piece(held, 100, 900)
    assert type(p) is Offsets and p.offsets is not None
    _same(p[0:800], ticks[100:900])
    dest = np.empty(800, dtype)
    held.put(100, 900, dest)
    _same(dest, ticks[100:900])
    spilled = SpilledRun(tmp_path, {"time": time, "location": np.ones(5000, np.int32),
                                    "seq": np.arange(5000), "ticks": ticks})
    _same(spilled.column("ticks", 0, 5000), ticks)
    off = ticks.copy()
    off[2500] += 1          # one row off: an ordinary column
    assert type(narrowed_columns({"time": time, "ticks": off})["ticks"]) is not Shifted

"""A window's columns put in key order straight from the runs' narrow forms equal the
rows widened in span order and taken in that order, on real decodes of every fixture
format, for runs kept and spilled, kernels compiled and run as Python."""
import numpy as np
import pytest

from partrace.engine.gather import ordered_column, span_of
from partrace.engine.narrow import Constant, Offsets, Words
from partrace.engine.order import merge_order, sort_by_key
from partrace.engine.runs import RunStore, SpilledRun
from partrace.engine.windows import _gather_column, _span_starts
from partrace.model import KEY_COLUMNS, Table
from tests.engine.test_narrow_runs import FIXTURES, _chunks, _same


@pytest.fixture(scope="module", params=sorted(FIXTURES))
def decoded(request):
    return request.param, *_chunks(request.param)


def _forms(run, name: str) -> tuple:
    """The form a run holds a column in, and whether the run is spilled."""
    piece = run.piece(name, 0, 0)
    kind = next((k for k in (Constant, Offsets, Words) if isinstance(piece, k)), np.ndarray)
    return kind, isinstance(run, SpilledRun)


def _store(schema, chunks, tmp_path) -> RunStore:
    """Every chunk as two runs that interleave (its even and its odd rows), one kept and
    one spilled: every table's window is a real merge of both kinds of run."""
    store = RunStore(schema, 1 << 40, tmp_path, keep_fraction=0.5)
    for name, t in chunks:
        rows = np.arange(len(t))
        store.add(name, t.take(rows[0::2]))
        if len(t) > 1:
            store.runs[name].append(store._spill(name, sort_by_key(t.take(rows[1::2])).columns))
    return store


def test_columns_put_in_merge_order_equal_a_take_of_the_widened_rows(decoded, jit_mode, tmp_path):
    fmt, schema, chunks = decoded
    store = _store(schema, chunks, tmp_path)
    seen, merged = set(), 0
    try:
        for name, columns in schema.items():
            runs = store.runs[name]
            if len(runs) < 2:
                continue
            # rows from the middle of a run too, as a window cuts them
            spans = [(run, run.n // 3 if i % 3 == 1 else 0, run.n) for i, run in enumerate(runs)]
            spans = [s for s in spans if s[2] > s[1]]
            cols = {c.name: c for c in columns}
            keys = Table({k: _gather_column(spans, cols[k]) for k in KEY_COLUMNS})
            order = merge_order(keys, _span_starts(spans))
            if order is None:       # runs that do not interleave: no merge to check
                continue
            merged += 1
            source = span_of(spans, order)
            for c in columns:
                want = np.take(_gather_column(spans, c), order, axis=0)
                _same(ordered_column(spans, c.name, c.numpy_dtype(), source), want)
                seen |= {_forms(run, c.name) for run, _, _ in spans}
        assert merged, fmt
        for form in (Constant, Offsets, np.ndarray):
            assert {(form, False), (form, True)} & seen, (fmt, form)
        assert {s for _, s in seen} == {False, True}, fmt
        if fmt in ("ovni", "ross", "otf2"):     # their sub-array columns narrow word by word
            assert (Words, False) in seen, fmt
    finally:
        store.close()


def test_columns_put_in_any_permutation_equal_a_take_of_the_widened_rows(decoded, jit_mode,
                                                                           tmp_path):
    """Destination mode sends rows grouped by rank: a permutation that need not keep
    a span's rows in their order."""
    fmt, schema, chunks = decoded
    store = _store(schema, chunks, tmp_path)
    rng = np.random.default_rng(7)
    try:
        for name, columns in schema.items():
            spans = [(run, 0, run.n) for run in store.runs[name]]
            n = sum(run.n for run, _, _ in spans)
            perm = np.argsort(rng.integers(0, 3, n), kind="stable")
            source = span_of(spans, perm)
            for c in columns:
                want = np.take(_gather_column(spans, c), perm, axis=0)
                _same(ordered_column(spans, c.name, c.numpy_dtype(), source, perm), want)
    finally:
        store.close()


def test_received_runs_merged_column_by_column_equal_a_sort_of_the_rows(decoded, jit_mode):
    """What a rank receives (every sender's sorted rows, end to end) is merged by each
    row's run: every column equals the rows sorted by key."""
    from partrace.engine.windows import _sorted_lazily
    fmt, schema, chunks = decoded
    for name, columns in schema.items():
        tables = [t for n, t in chunks if n == name]
        if len(tables) == 1 and len(tables[0]) > 1:     # one chunk: its even and odd rows
            rows = np.arange(len(tables[0]))
            tables = [tables[0].take(rows[0::2]), tables[0].take(rows[1::2])]
        parts = [sort_by_key(t) for t in tables]
        if len(parts) < 2:
            continue
        whole = Table.concat(parts[::-1], columns)     # later runs first: a real merge
        order = np.lexsort((whole["seq"], whole["location"], whole["time"]))
        got = _sorted_lazily(whole, columns)
        for c in columns:
            _same(got.column_once(c.name), np.take(whole[c.name], order, axis=0))


@pytest.mark.parametrize("spans", [0, 1, 3, 300])
def test_gather_kernels_numpy_twins_equal_the_compiled_kernels(spans):
    """Small mode runs the gather kernels' numpy twins: the same columns as the compiled
    kernels, for every width, offsets added to their span's base, sub-array rows, taken
    in any order."""
    from partrace.engine import gather
    rng = np.random.default_rng(spans)
    lengths = rng.integers(0, 50, spans)
    n = int(lengths.sum())
    starts = np.cumsum(np.r_[0, lengths]).astype(np.int64)
    source = rng.permutation(np.repeat(np.arange(spans), lengths)).astype(
        np.uint8 if spans <= 256 else np.uint16)
    rows = rng.integers(0, max(n, 1), n)

    def both(kernel, twin, shape, dtype, *args):
        got = [np.full(shape, 3, dtype) for _ in range(2)]
        kernel(got[0], *args)
        twin(got[1], *args)
        assert np.array_equal(*got), kernel
        return got[0]

    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64, np.int64):
        values = rng.integers(0, 200, n).astype(dtype)
        base = rng.integers(0, 1 << 40 if dtype == np.int64 else 50, max(spans, 1)).astype(dtype)
        offsets = rng.integers(0, 200, n).astype(np.uint8)
        out = both(gather._gather, gather._gather_numpy, n, dtype, source, starts, values)
        for s in range(spans):      # each span's rows, in order, where its source says
            assert np.array_equal(out[source == s], values[starts[s]:starts[s + 1]])
        both(gather._gather_offsets, gather._gather_offsets_numpy, n, dtype, source, starts,
             base, offsets)
        both(gather._lookup, gather._lookup_numpy, n, dtype, source, base)
        both(gather._take, gather._take_numpy, n, dtype, rows, values)
        both(gather._take_offsets, gather._take_offsets_numpy, n, dtype, source, rows, base,
             offsets)
    words = rng.integers(0, 1 << 60, (n, 3)).astype(np.uint64)
    both(gather._gather_rows, gather._gather_numpy, (n, 3), np.uint64, source, starts, words)

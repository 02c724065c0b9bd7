"""Windows whose columns are gathered on read: in key order, every column type, built in
any order across windows, in both modes."""
import numpy as np

from partrace.engine.mpi import serial
from partrace.engine.order import merge_order, run_starts
from partrace.engine.windows import (_sorted_union, _spans_by_destination, by_destination,
                                     choose_cuts, time_window, window_rows)
from partrace.model import Table
from tests.engine.test_windows import SCHEMA, _lexsort, _runs


def _expected(t: Table) -> dict:
    order = _lexsort(t)
    return {c.name: t[c.name][order].astype(c.element_dtype()) for c in SCHEMA}


def _equal(got: Table, want: dict) -> None:
    for c in SCHEMA:
        a = got[c.name]
        assert a.dtype == want[c.name].dtype and a.shape == want[c.name].shape, c.name
        assert np.array_equal(a, want[c.name]), c.name


def test_time_and_destination_windows_equal_a_sort_of_their_rows_read_in_any_order():
    rng = np.random.default_rng(21)
    t, runs = _runs(rng, 2400, SCHEMA, size=250)
    cuts = choose_cuts(serial(), runs, 3)
    for make in (lambda w: time_window(serial(), runs, cuts, w, SCHEMA),
                 lambda w: by_destination(serial(), window_rows(runs, cuts, w, SCHEMA),
                                          np.zeros(0, np.int64), SCHEMA)):
        windows = [make(w) for w in range(3)]
        # columns of later windows built first, then the earlier ones: each built column
        # is its own array, whatever was gathered after it
        built = [{c.name: win.column_once(c.name) for c in SCHEMA} for win in windows[::-1]][::-1]
        rows = [Table(b) for b in built]
        whole = Table({c.name: np.concatenate([r[c.name] for r in rows]) for c in SCHEMA})
        _equal(whole, _expected(t))
        assert sum(len(r) for r in rows) == len(t) and all(len(r) for r in rows)


def test_int32_locations_order_as_widened_ones():
    rng = np.random.default_rng(5)
    n = 5000
    t = Table({"time": rng.integers(0, 50, n), "location": rng.integers(1, 9, n).astype(np.int32),
               "seq": rng.integers(0, 4, n)})
    wide = Table({**t.columns, "location": t["location"].astype(np.int64)})
    assert np.array_equal(merge_order(t), merge_order(wide))
    assert np.array_equal(merge_order(t), _lexsort(t))
    assert np.array_equal(run_starts(t["time"], t["location"], t["seq"]),
                          run_starts(wide["time"], wide["location"], wide["seq"]))


def test_spans_cut_by_destination_hold_each_ranks_rows_in_span_order():
    """Each rank's pieces, end to end, are the spans' rows whose destination is that rank,
    in the spans' order; a destination changing on most rows gives no pieces (rows are
    sent one by one then)."""
    rng = np.random.default_rng(8)
    _, runs = _runs(rng, 30000, SCHEMA, size=5000)
    spans = [(run, a, min(run.n, a + 3000)) for run in runs for a in (0, run.n // 3)]
    concat = np.concatenate([run.columns["seq"][a:b] for run, a, b in spans])
    blocks = np.repeat(rng.integers(0, 3, len(concat) // 1000 + 1), 1000)[:len(concat)]
    for dest, split in ((blocks, True), (rng.integers(0, 3, len(concat)), False)):
        pieces = _spans_by_destination(spans, dest, 3)
        if not split:
            assert pieces is None
            continue
        for r in range(3):
            got = [run.columns["seq"][a:b] for run, a, b in pieces[r]]
            assert np.array_equal(np.concatenate(got) if got else concat[:0], concat[dest == r])
            assert all(b > a for _, a, b in pieces[r])


def test_span_starts_merged_into_the_destination_changes_as_numpys_union():
    """The cuts of a window's spans (span starts, some repeated where a span is empty, merged
    into the ascending destination changes) are np.union1d's, empty arrays and ends included."""
    rng = np.random.default_rng(5)
    for _ in range(3000):
        many = np.unique(rng.integers(1, 300, rng.integers(0, 80)))
        few = np.sort(rng.integers(0, 320, rng.integers(1, 9)))
        got = _sorted_union(few, many)
        assert got.dtype == np.int64
        assert np.array_equal(got, np.union1d(few, many))

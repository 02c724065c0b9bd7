"""Columns that hold one value per decoded chunk (a thread's ids, a rank's location) leave
the readers as read-only views of that one value (formats.base.repeated), so no pass per
row makes or scans them; the engine keeps them as that value.  What a user gets from the
API is a writeable, contiguous array of its own holding the values the chunks hold."""
from __future__ import annotations

import numpy as np
import pytest

import partrace
from partrace.engine.narrow import Constant
from partrace.engine.runs import Run
from partrace.errors import LimitError
from partrace.formats import detect, get
from partrace.formats.base import repeated
from partrace.model import Table, column, conform
from tests.conftest import DATA
from tests.test_small_mode import CASES

OTF2 = [("otf2", DATA / "otf2" / name / "traces.otf2") for name in ("mpi3", "threads2")]
# the columns each reader hands as one repeated value, per table ("*": every table)
REPEATED = {"ovni": {"events": {"location"}, "jumbo": {"location"}},
            "dumpi": {"*": {"location"}}, "otf2": {"*": {"location"}}}


def _chunks(path, fmt):
    reader = get(fmt).open(path)
    defs = reader.read_definitions()
    for unit in reader.units():
        yield from reader.decode(unit, defs)


def _in_key_order(tables: list[Table]) -> dict[str, np.ndarray]:
    """The tables' rows together, in the API's (time, location, seq) order."""
    cols = {c: np.concatenate([t[c] for t in tables]) for c in tables[0].names}
    order = np.lexsort((cols["seq"], cols["location"], cols["time"]))
    return {c: v[order] for c, v in cols.items()}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype == object:
        return list(a) == list(b)
    return a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("fmt,path", CASES + OTF2, ids=lambda x: str(x).split("tests/data/")[-1])
def test_api_columns_are_writeable_copies_of_what_the_reader_decoded(fmt, path):
    assert detect(path) == fmt
    decoded: dict[str, list[Table]] = {}
    for chunk in _chunks(path, fmt):
        for name, table in chunk.items():
            if len(table):
                decoded.setdefault(name, []).append(table)
    trace = partrace.open(path)
    for name, tables in decoded.items():
        want = _in_key_order(tables)
        got = trace.columns(name)
        assert list(got) == list(want), name
        for c, v in got.items():
            assert v.flags.writeable and v.flags.c_contiguous and v.strides[0] > 0, (name, c)
            assert _same(v, want[c]), (name, c)
            v[...] = v[::-1]        # in place, as a user may: the trace's own rows stay
        again = trace.columns(name)
        assert all(_same(again[c], want[c]) for c in want), name
        frame = trace.to_pandas(name)
        assert len(frame) == len(want["time"])
        assert np.array_equal(frame["location"].to_numpy(), want["location"])


@pytest.mark.parametrize("fmt,path", [c for c in CASES + OTF2 if c[0] in REPEATED],
                         ids=lambda x: str(x).split("tests/data/")[-1])
def test_one_value_columns_are_read_only_views_the_engine_keeps_as_one_value(fmt, path):
    seen = set()
    for chunk in _chunks(path, fmt):
        for name, table in chunk.items():
            names = REPEATED[fmt].get(name, REPEATED[fmt].get("*", set()))
            if not len(table) or not names:
                continue
            run = Run(table.columns)
            for c in names:
                v = table[c]
                assert v.strides[0] == 0 and not v.flags.writeable, (name, c)
                held = run.columns[c]       # kept as one value: no array of rows
                assert isinstance(held, Constant) and held.value == v[0], (name, c)
                with pytest.raises(ValueError):
                    v[0] = v[0]
                seen.add((name, c))
    assert {("events", "location")} <= seen


def test_a_repeated_value_too_wide_for_its_column_is_refused_as_a_full_column_would_be():
    loc = column("location")
    assert repeated(7, 3, loc).dtype == loc.element_dtype()
    assert len(repeated(7, 0, loc)) == 0 and repeated(7, 0, loc).flags.writeable
    with pytest.raises(LimitError, match="does not fit"):
        conform(Table({"location": repeated(2**40, 3, loc)}), [loc])


def test_dumpi_places_a_column_in_its_schema_dtype_only_where_conform_gives_the_same_values():
    """DUMPI's event rows go straight into the schema's dtype (no cast by conform) when
    every value fits; a value that does not keeps the wide dtype, which conform refuses."""
    from partrace.formats.dumpi.events import _dtype, schema_dtypes
    i64, u32 = np.array([3, -1, 2**31 - 1]), np.array([7], np.uint32)
    assert _dtype("peer", [i64, u32], 0) == schema_dtypes()["peer"] == np.int32
    assert _dtype("size", [i64], 0) == np.uint64       # int64 bits as uint64, as astype gives
    assert _dtype("peer_rank", [i64], -1) == np.int64
    for too_wide in ([i64, np.array([2**31])], [np.array([2**32 - 1], np.uint32)]):
        made = _dtype("peer", too_wide, 0)
        assert made == np.int64
        with pytest.raises(LimitError, match="does not fit"):
            conform(Table({"peer": np.concatenate(too_wide).astype(made)}), [column("peer")])
    assert _dtype("tag", [np.array([1.5])], 0) == np.float64   # not an integer: as made

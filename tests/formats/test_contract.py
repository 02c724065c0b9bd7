"""The format contract (formats/base.py), checked on every format's real fixtures.

Every reader, the synthetic test format included, must:
- list its units sorted by key, uniquely, the same on every call (the plan
  depends on nothing but this list);
- give definitions whose locations have ids >= 1 and regions ids >= 1;
- decode chunks whose tables have exactly the schema's columns and dtypes;
- give key columns (time, location, seq) that are unique per table, with every
  location of a row defined, and seq counting each location's rows from 0
  without gaps (the rows of a location in a table are its records in order;
  FILE_ORDER_SEQ lists the one documented exception);
- decode the same tables whatever the chunk size;
- for surveyed readers: give the same definitions whatever the grouping and
  order of the surveys (``combine`` associative and commutative);
- have units, surveys and definitions that pickle (the engine sends them);
- list in parts (list_part, units_from: both or neither) the units it lists whole;
- recognise its own fixtures and no other format's.

In the style of xarray's backend test base classes: one list of fixtures,
one function per rule.
"""
from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from partrace.formats import available, get
from partrace.model import ROW_TABLE, Role, Table, table_role
from tests.conftest import DATA

FIXTURES = {
    "otf": [DATA / "otf" / "ring8" / "trace" / "ring8.otf",
            DATA / "otf" / "hybrid16" / "trace" / "hybrid16.otf",
            DATA / "otf" / "real-long" / "trace" / "ring8_long.otf",
            DATA / "otf" / "real-zlib" / "trace" / "ring8_z.otf"],
    "dumpi": [DATA / "dumpi" / "p2p-4rank", DATA / "dumpi" / "papi-3rank",
              DATA / "dumpi" / "coll-4rank"],
    "ovni": [DATA / "ovni" / "v1-zoo-small" / "ovni", DATA / "ovni" / "v3-mpisim-small" / "ovni"],
    "ross": [DATA / "ross" / "phold-np2-opt-gvt-pekplp" / "stats",
             DATA / "ross" / "pi-np2-opt-evtrace-full-model-gvt" / "stats",
             DATA / "ross" / "pi-np1-seq-allmodes" / "stats"],
    "otf2": [DATA / "otf2" / "mpi3" / "traces.otf2", DATA / "otf2" / "threads2"],
}
def _label(path):
    """The fixture's folder name (tests/data/<format>/<name>/...)."""
    return path.relative_to(DATA).parts[1]


CASES = [pytest.param((fmt, path), id=f"{fmt}-{_label(path)}")
         for fmt, paths in FIXTURES.items() for path in paths]


# Tables whose seq is the order in one shared file rather than a count per location:
# OTF's NAME.0.marker holds the marker spots of every process (otfmerge's layout), numbered in
# file order (unique per location, not gapless).
FILE_ORDER_SEQ = {("otf", "markers")}


def _synth(tmp_path):
    p = tmp_path / "synth.json"
    p.write_text('{"synth": {"locations": 5, "events": 300, "units": 3, "seed": 7}}')
    return p


@pytest.fixture(params=CASES + [pytest.param(("synth", None), id="synth")])
def trace(request, tmp_path):
    fmt, path = request.param
    if fmt == "synth":
        from tests.support.synth import Synth
        path = _synth(tmp_path)
        return Synth, path
    return get(fmt), path


def _open(trace):
    fmt, path = trace
    return fmt.open(path)


def _defs(reader):
    return reader.read_definitions(reader.survey_all()) if reader.surveyed else reader.read_definitions()


def _decode_all(reader, defs, chunk_bytes=None) -> dict[str, Table]:
    if chunk_bytes is not None:
        reader.chunk_bytes = chunk_bytes
    schema = reader.schema(defs)
    units = reader.units()
    if reader.ordered:
        reader.start_after(None)
    parts = {name: [] for name in schema}
    for unit in units:
        for chunk in reader.decode(unit, defs):
            assert set(chunk) <= set(schema), f"{unit.key}: tables outside the schema"
            for name, table in chunk.items():
                parts[name].append(table)
    return {name: Table.concat(parts[name], schema[name]) for name in schema}


def test_fixtures_exist():
    for paths in FIXTURES.values():
        for p in paths:
            assert p.exists(), p


def test_units_sorted_unique_and_stable(trace):
    reader = _open(trace)
    units = reader.units()
    keys = [u.key for u in units]
    assert units, "a trace has at least one unit"
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert all(u.size >= 0 for u in units)
    again = _open(trace).units()
    assert [(u.key, u.size) for u in again] == [(u.key, u.size) for u in units]


def test_units_listed_in_parts_are_the_units(trace):
    """A reader lists its units in parts on every rank (list_part, units_from) or not at
    all; the parts of any rank count, each from its own reader, pickle and meet in the
    units one reader lists."""
    from partrace.formats.base import TraceReader
    cls = type(_open(trace))
    hooks = [getattr(cls, h) is not getattr(TraceReader, h) for h in ("list_part", "units_from")]
    assert hooks in ([True, True], [False, False])
    if not hooks[0]:
        return
    whole = [(u.key, u.size, u.info) for u in _open(trace).units()]
    for size in (1, 2, 3, 5):
        parts = [pickle.loads(pickle.dumps(_open(trace).list_part(rank, size)))
                 for rank in range(size)]
        got = _open(trace).units_from(parts)
        assert [(u.key, u.size, u.info) for u in got] == whole, size


def test_units_surveys_and_definitions_pickle(trace):
    reader = _open(trace)
    units = reader.units()
    assert pickle.loads(pickle.dumps(units)) == units
    if reader.surveyed:
        for unit in units:
            s = reader.survey(unit)
            pickle.loads(pickle.dumps(s))
    defs = _defs(reader)
    back = pickle.loads(pickle.dumps(defs))
    assert back.format == defs.format and list(back.tables) == list(defs.tables)


def test_definitions_have_locations_and_regions_with_ids_from_one(trace):
    defs = _defs(_open(trace))
    for name in ("locations", "regions"):
        assert name in defs.tables, name
        ids = np.asarray(defs.tables[name]["id"])
        assert len(np.unique(ids)) == len(ids), f"{name}: ids repeat"
        assert (ids >= 1).all(), f"{name}: ids must be >= 1"
    assert len(defs.tables["locations"]) >= 1


def test_chunks_match_the_schema_and_keys_are_unique_and_continuous(trace):
    reader = _open(trace)
    fmt_name = reader.format_name
    defs = _defs(reader)
    schema = reader.schema(defs)
    assert list(schema)[0] == "events"
    known = np.asarray(defs.tables["locations"]["id"])
    regions = np.asarray(defs.tables["regions"]["id"])
    if reader.ordered:
        reader.start_after(None)
    tables = {name: [] for name in schema}
    for unit in reader.units():
        for chunk in reader.decode(unit, defs):
            for name, table in chunk.items():
                cols = schema[name]
                assert table.names == [c.name for c in cols], (name, table.names)
                for c in cols:
                    v = table[c.name]
                    assert v.dtype == np.dtype(c.element_dtype()) or (v.dtype == object), (name, c.name, v.dtype)
                    if np.dtype(c.dtype).subdtype:
                        assert v.shape[1:] == np.dtype(c.dtype).shape, (name, c.name)
                tables[name].append(table)
    for name, parts in tables.items():
        t = Table.concat(parts, schema[name])
        if not len(t):
            continue
        loc, seq, time = (np.asarray(t[c]) for c in ("location", "seq", "time"))
        assert np.isin(loc, known).all(), f"{name}: rows of undefined locations {set(loc[~np.isin(loc, known)])}"
        order = np.lexsort((seq, loc))
        ls, ss = loc[order], seq[order]
        first = np.r_[True, ls[1:] != ls[:-1]]
        assert not ((ls[1:] == ls[:-1]) & (ss[1:] == ss[:-1])).any(), f"{name}: (location, seq) repeats"
        if (fmt_name, name) in FILE_ORDER_SEQ:
            continue
        # seq counts each location's rows from 0 without gaps
        start = np.maximum.accumulate(np.where(first, np.arange(len(ls)), 0))
        assert np.array_equal(ss, np.arange(len(ls)) - start), f"{name}: seq not 0..n-1 per location"
        assert time.dtype == np.int64
        if name == "events":
            reg = np.asarray(t["region"])
            bad = (reg != 0) & ~np.isin(reg, regions)
            assert not bad.any(), f"events of undefined regions {set(reg[bad][:5])}"


def test_same_tables_for_small_and_large_chunks(trace):
    big = _open(trace)
    defs = _defs(big)
    a = _decode_all(big, defs, chunk_bytes=64 << 20)
    small = _open(trace)
    b = _decode_all(small, _defs(small), chunk_bytes=4096)
    assert list(a) == list(b)
    for name in a:
        ka, kb = (np.lexsort((t["seq"], t["location"], t["time"])) for t in (a[name], b[name]))
        for col in a[name].names:
            va, vb = a[name][col][ka], b[name][col][kb]
            if va.dtype == object:
                assert list(va) == list(vb), (name, col)
            else:
                assert np.array_equal(va, vb), (name, col)


def test_surveys_combine_in_any_grouping(trace):
    reader = _open(trace)
    if not reader.surveyed:
        pytest.skip("not a surveyed reader")
    units = reader.units()
    surveys = [reader.survey(u) for u in units]
    combine = reader.combine

    def fold(items):
        out = None
        for s in items:
            out = s if out is None else combine(out, s)
        return out

    def tree(items):            # pairwise, as a reduction over ranks does
        while len(items) > 1:
            items = [combine(items[i], items[i + 1]) if i + 1 < len(items) else items[i]
                     for i in range(0, len(items), 2)]
        return items[0]

    expected = _defs(_open(trace))
    for grouped in (fold(surveys), fold(surveys[::-1]), tree(list(surveys)), tree(surveys[::-1])):
        got = _open(trace).read_definitions(pickle.loads(pickle.dumps(grouped)))
        assert_same_definitions(got, expected)


def assert_same_definitions(a, b) -> None:
    assert a.format == b.format
    assert list(a.tables) == list(b.tables)
    for name in a.tables:
        ta, tb = a.tables[name], b.tables[name]
        assert ta.names == tb.names, name
        for col in ta.names:
            va, vb = np.asarray(ta[col]), np.asarray(tb[col])
            assert va.dtype == vb.dtype and va.shape == vb.shape, (name, col)
            assert (list(va) == list(vb)) if va.dtype == object else np.array_equal(va, vb), (name, col)
    assert json.dumps(a.attrs, sort_keys=True, default=str) == json.dumps(b.attrs, sort_keys=True, default=str)
    assert json.dumps(a.source, sort_keys=True, default=str) == json.dumps(b.source, sort_keys=True, default=str)


def test_each_fixture_is_recognised_by_its_format_only():
    names = [n for n in available() if n != "synth"]
    for fmt, paths in FIXTURES.items():
        for p in paths:
            claims = [n for n in names if get(n).sniff(p)]
            assert claims == [fmt], (p, claims)


def test_a_location_in_one_unit_means_it(trace):
    """A reader that says its locations' events each come from one unit must mean it
    (the profile then folds without an exchange)."""
    reader = _open(trace)
    if not reader.locations_in_one_unit:
        pytest.skip("not declared")
    defs = _defs(reader)
    where: dict[int, str] = {}
    for unit in reader.units():
        for chunk in reader.decode(unit, defs):
            ev = chunk.get("events")
            if ev is None:
                continue
            for loc in np.unique(np.asarray(ev["location"])).tolist():
                assert where.setdefault(loc, unit.key) == unit.key, (loc, where[loc], unit.key)


def test_table_roles_name_real_tables(trace):
    """A column's `refers` names a table of the schema, a definitions table, or ROW_TABLE (then
    the table has a `ref_table` column saying which); events is the events table; every table
    has one role."""
    reader = _open(trace)
    defs = _defs(reader)
    schema = reader.schema(defs)
    assert next(iter(schema)) == "events" and table_role("events", schema["events"], schema) == Role.EVENTS
    for name, cols in schema.items():
        for c in cols:
            if c.refers == ROW_TABLE:
                assert "ref_table" in [x.name for x in cols], (name, c.name)
            elif c.refers is not None:
                assert c.refers in schema or c.refers in defs.tables, (name, c.name, c.refers)
        assert table_role(name, cols, schema) in (Role.EVENTS, Role.RECORDS, Role.ATTACHED, Role.SAMPLES)


def _decode_units(reader, defs) -> list[dict[str, dict[str, np.ndarray]]]:
    """Each unit's rows, as {table: {column: values}} (chunks joined), in key order."""
    if reader.ordered:
        reader.start_after(None)
    out = []
    for unit in reader.units():
        parts: dict[str, list[Table]] = {}
        for chunk in reader.decode(unit, defs):
            for name, table in chunk.items():
                parts.setdefault(name, []).append(table)
        out.append({name: {c: np.concatenate([np.asarray(t[c]) for t in tables])
                           for c in tables[0].names} for name, tables in parts.items()})
    return out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return np.array_equal(a, b, equal_nan=a.dtype.kind in "fc") and a.dtype == b.dtype


def test_selected_columns_equal_a_full_decode(trace):
    """TraceReader.selection: whatever a reader skips, the columns asked for are a full
    decode's, unit by unit (a reader may return more); the folds' own selections, every
    other column of each table, and seq asked for on every other unit only (a ROSS region
    then starts with no carry); info's."""
    from partrace.analysis.messages import COLUMNS as MESSAGE_COLUMNS
    from partrace.analysis.regions import WALKED
    from partrace.info import counted_columns

    def opened():
        r = _open(trace)
        if hasattr(r, "region_size"):       # ROSS: small regions, so that seq carries over
            r.region_size = 1 << 12
        return r
    reader = opened()
    defs = _defs(reader)
    schema = reader.schema(defs)
    full = _decode_units(reader, defs)
    names = {t: [c.name for c in cols] for t, cols in schema.items()}
    selections = [[{"events": WALKED}], [{"events": MESSAGE_COLUMNS}],
                  [counted_columns(schema)],
                  [{t: tuple(c[0::2]) for t, c in names.items()}],
                  [{t: tuple(c[1::2]) for t, c in names.items() if "seq" not in c[1::2]},
                   {t: ("seq", "location") for t in names}]]
    for per_unit in selections:
        r = opened()
        r.chunk_bytes = 1 << 12             # many chunks where a reader cuts by bytes
        got = []
        if r.ordered:
            r.start_after(None)
        for k, unit in enumerate(r.units()):
            r.selection = per_unit[k % len(per_unit)]
            parts: dict[str, list[Table]] = {}
            for chunk in r.decode(unit, defs):
                for name, table in chunk.items():
                    parts.setdefault(name, []).append(table)
            got.append((r.selection, parts))
        for (selection, parts), want in zip(got, full):
            for table, cols in selection.items():
                expect = want.get(table)
                if expect is None or not len(next(iter(expect.values()))):
                    assert not sum(len(t) for t in parts.get(table, ())), table
                    continue
                assert table in parts, f"{table} asked for, not decoded"
                for c in names[table]:
                    if c in cols:
                        values = np.concatenate([np.asarray(t[c]) for t in parts[table]])
                        assert _same(values, expect[c]), f"{table}.{c} under {selection}"

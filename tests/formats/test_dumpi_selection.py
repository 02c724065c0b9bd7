"""The DUMPI reader honours TraceReader.selection: a selected decode gives exactly the columns
asked for, each equal to a full decode's (rows, order, dtype), on every DUMPI fixture and on a
small encoded trace of persistent requests, in one chunk and in many; what is not asked for
is not made (checked by making its producers fail), and errors do not depend on it."""
from __future__ import annotations

import numpy as np
import pytest

from partrace.analysis.messages import COLUMNS as MESSAGE_COLUMNS
from partrace.analysis.regions import WALKED
from partrace.errors import TraceError
from partrace.formats.dumpi import DUMPI, comms, decode, events, requests
from partrace.formats.dumpi.decode import decode_rank
from partrace.model import Table

from tests.formats.test_dumpi_fixtures import DATA
from tests.formats.test_dumpi_tracking import persistent_trace

FIXTURES = sorted(p.name for p in DATA.iterdir() if p.is_dir())


@pytest.fixture(scope="module", params=FIXTURES + ["persistent"])
def trace(request, tmp_path_factory):
    if request.param == "persistent":
        folder = tmp_path_factory.mktemp("pers")
        persistent_trace(folder)
    else:
        folder = DATA / request.param
    reader = DUMPI.open(folder)
    defs = reader.read_definitions()
    return folder, defs, reader.schema(defs), _decode(reader, defs, None)


def _decode(reader, defs, selection, chunk_calls=None):
    """{(rank, table): whole table} of every unit; ``chunk_calls`` cuts the ranks' streams into
    that many calls per chunk (decode_rank, with the reader's own selected columns)."""
    reader.selection = selection
    schema = reader.schema(defs)
    want = None if selection is None else {t: reader.selected(t, [c.name for c in cols])
                                           for t, cols in schema.items()}
    out = {}
    for unit in reader.units():
        path, rank = unit.info
        chunks = (list(reader.decode(unit, defs)) if chunk_calls is None else
                  list(decode_rank(reader.files[rank], rank, schema, defs, chunk_calls=chunk_calls,
                                   want=want)))
        for name in {n for c in chunks for n in c}:
            parts = [c[name] for c in chunks if name in c]
            names = parts[0].names
            assert all(p.names == names for p in parts), (rank, name)
            out[rank, name] = Table({n: np.concatenate([np.asarray(p[n]) for p in parts])
                                     for n in names})
    return out


def _selections(schema):
    """The folds' selections, a call table, the side tables and requests by halves, seq only."""
    calls = sorted(t for t in schema if t.startswith("calls/"))
    pick = calls[len(calls) // 2]
    half = {t: tuple(c.name for c in schema[t][k::2])
            for k, t in enumerate(("requests", "arrays", "statuses", "strings", "perf"))}
    return [{"events": WALKED}, {"events": MESSAGE_COLUMNS}, {pick: None},
            {"events": ("seq", "peer", "tag", "request"), pick: ("seq", "call")}, half,
            {"events": ("seq",), "requests": ("seq",)}]


@pytest.mark.parametrize("chunk_calls", [None, 7])
def test_selected_columns_are_the_full_decodes(trace, chunk_calls):
    folder, defs, schema, full = trace
    ranks = {r for r, _t in full}
    for selection in _selections(schema):
        got = _decode(DUMPI.open(folder), defs, selection, chunk_calls)
        assert {t for _r, t in got} <= set(selection), selection
        for table, cols in selection.items():
            names = [c.name for c in schema[table] if cols is None or c.name in cols]
            for r in ranks:
                want = full.get((r, table))
                if want is None or not len(want):
                    assert (r, table) not in got or not len(got[r, table]), (table, r)
                    continue
                assert got[r, table].names == names, (selection, table)
                for c in names:
                    a, b = np.asarray(got[r, table][c]), np.asarray(want[c])
                    assert a.dtype == b.dtype and np.array_equal(a, b), (selection, table, c, r)


def test_folds_selections_make_nothing_else(trace, monkeypatch):
    """profile's and comm's events: no side table, call table or requests table is made, and
    for profile no communicator id or byte count is computed (their producers fail here);
    comm's still gets every row and column it asks for."""
    folder, defs, schema, full = trace

    def refuse(*_a, **_k):
        raise AssertionError("made, though not asked for")

    monkeypatch.setattr(decode, "_requests", refuse)
    monkeypatch.setattr(decode, "_strings_for", refuse)
    monkeypatch.setattr(decode, "_text", refuse)
    with monkeypatch.context() as m:
        m.setattr(comms.CommMap, "comm", refuse)
        m.setattr(comms.CommMap, "location_of", refuse)
        m.setattr(events, "nbytes", refuse)
        m.setattr(events, "_coll_bytes", refuse)
        got = _decode(DUMPI.open(folder), defs, {"events": WALKED})
    assert {t for _r, t in got} == {"events"}
    assert all(t.names == [c.name for c in schema["events"] if c.name in WALKED]
               for t in got.values())
    got = _decode(DUMPI.open(folder), defs, {"events": MESSAGE_COLUMNS})
    assert {t for _r, t in got} == {"events"}
    for (r, _t), t in got.items():
        assert t.names == [c.name for c in schema["events"] if c.name in MESSAGE_COLUMNS]
        assert len(t) == len(full[r, "events"])
    # a call table alone: no events, so no request tracking and no communicator map either
    monkeypatch.setattr(requests.RequestTracker, "chunk", refuse)
    monkeypatch.setattr(comms.CommMap, "__init__", refuse)
    pick = sorted(t for t in schema if t.startswith("calls/"))[0]
    got = _decode(DUMPI.open(folder), defs, {pick: ("call",)})
    assert {t for _r, t in got} == {pick}
    assert all(np.array_equal(t["call"], full[r, pick]["call"]) for (r, _t), t in got.items())


def test_errors_do_not_depend_on_the_selection(tmp_path):
    """A rank file whose stream holds calls of a function the definitions have no table
    for (the file changed since the survey) is an error whatever is asked for (every call
    is still walked)."""
    persistent_trace(tmp_path)
    reader = DUMPI.open(tmp_path)
    defs = reader.read_definitions()
    schema = reader.schema(defs)
    name = next(t for t in schema if t.startswith("calls/MPI_Start"))
    del schema[name]                      # as if the survey had found no MPI_Start calls
    path = reader.files[0]
    messages = set()
    for want in (None, {t: None for t in schema}, {**{t: None for t in schema},
                                                  "events": WALKED}):
        with pytest.raises(TraceError) as err:
            list(decode_rank(path, 0, schema, defs, want=want))
        messages.add(str(err.value))
    assert len(messages) == 1 and "found, but the survey" in messages.pop()

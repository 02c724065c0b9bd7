"""`info` on DUMPI: the reader is asked only for the columns info counts, and the
counts are a full decode's and dumpi2ascii's."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from partrace.engine.mpi import serial
from partrace.formats.dumpi import DUMPI
from partrace.formats.dumpi.reader import DumpiReader
from partrace.info import counted_columns, gather_info
from partrace.model import Kind

from tests.formats.test_dumpi_fixtures import DATA, TRACES, parse_ascii


def _full_counts(trace: Path):
    """Rows per table, events per (location, kind), ENTERs per region name and the events'
    time span, from a decode of every column."""
    reader = DUMPI.open(trace)
    defs = reader.read_definitions()
    names = dict(zip(defs.tables["regions"]["id"].tolist(), defs.tables["regions"]["name"]))
    rows, kinds, enters, span = Counter(), Counter(), Counter(), []
    for unit in reader.units():
        for chunk in reader.decode(unit, defs):
            for name, t in chunk.items():
                rows[name] += len(t)
            ev = chunk["events"]
            kinds.update(zip(ev["location"].tolist(), ev["kind"].tolist()))
            enters.update(names[r] for r in ev["region"][ev["kind"] == Kind.ENTER].tolist())
            span += [int(ev["time"].min()), int(ev["time"].max())] if len(ev) else []
    return rows, kinds, enters, (min(span), max(span))


@pytest.mark.parametrize("name", TRACES)
def test_info_decodes_only_its_columns_and_counts_as_a_full_decode(name, monkeypatch):
    trace = DATA / name
    made: dict[str, set] = {}
    decode = DumpiReader.decode

    def spy(self, unit, defs):
        for chunk in decode(self, unit, defs):
            for table, t in chunk.items():
                made.setdefault(table, set()).update(t.columns)
            yield chunk
    monkeypatch.setattr(DumpiReader, "decode", spy)
    report = gather_info(serial(), trace)

    # only what info counts was made: events without peers, comms, byte counts ...
    assert made["events"] == {"time", "location", "kind", "region"}
    wanted = counted_columns({t: [] for t in made})
    assert all(cols <= set(wanted[t]) for t, cols in made.items())
    monkeypatch.setattr(DumpiReader, "decode", decode)
    rows, kinds, enters, span = _full_counts(trace)
    assert {k: c for k, c in report["rows"].items() if c} == {k: c for k, c in rows.items() if c}
    got = {(int(loc), Kind[k]): c for loc, ks in report["events_per_location"].items()
           for k, c in ks.items()}
    assert got == dict(kinds)
    assert {r["name"]: r["enters"] for r in report["regions"]} == dict(enters)
    assert (report["time_span_ns"]["events"]["first"],
            report["time_span_ns"]["events"]["last"]) == span
    # and dumpi2ascii's decode beside the fixture: one ENTER per call of each rank, the
    # calls' first entry and last exit bound the events
    for path in sorted(trace.glob("*.txt")):
        calls = parse_ascii(path)["calls"]
        rank = int(path.stem.rsplit("-", 1)[1])
        assert report["events_per_location"][str(rank + 1)]["ENTER"] == len(calls)
    walls = [c[k] for p in trace.glob("*.txt") for c in parse_ascii(p)["calls"]
             for k in ("wall_in", "wall_out")]
    assert span[1] - span[0] == max(walls) - min(walls)

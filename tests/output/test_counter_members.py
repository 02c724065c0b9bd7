"""OTF2 metrics of several members (Score-P's PAPI metrics: one class, its members sampled
together) in the Perfetto and Chrome outputs: every member of every Metric record, as the
`otf2` package's own reader reads it, is a value on the member's counter track of its
location (Perfetto: named by the member, with its unit) and a counter event named by the
member (Chrome JSON), on 1 and 3 ranks alike."""
from __future__ import annotations

import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import run_cli

otf2 = pytest.importorskip("otf2")
pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
pytestmark = pytest.mark.mpi

DATA = Path(__file__).resolve().parents[1] / "data"
TRACES = [pytest.param(DATA / "otf2" / "mpi3" / "traces.otf2", id="mpi3"),
          pytest.param(DATA / "corpus" / "otf2" / "pipit-ping-pong-papi" / "traces.otf2",
                       id="pipit-ping-pong-papi")]
COUNTER = pb.TrackEvent.Type.Value("TYPE_COUNTER")


def _upstream(anchor: Path):
    """(location id, member name) -> [(ns, value)] of every member of the Metric records of
    classes of several members, and member name -> unit, by the otf2 package's reader
    (partrace numbers locations by ref order from 1, times are ticks * 1e9 // resolution)."""
    out, units = defaultdict(list), {}
    with otf2.reader.open(str(anchor)) as t:
        ids = {ref: i + 1 for i, ref in enumerate(sorted(x._ref for x in
                                                         t.definitions.locations))}
        res = t.definitions.clock_properties.timer_resolution
        for loc, ev in t.events:
            if type(ev).__name__ != "Metric":
                continue
            cls = ev.metric if hasattr(ev.metric, "members") else ev.metric.metric_class
            if len(cls.members) < 2:
                continue
            for m, v in zip(cls.members, ev.values):
                out[(ids[loc._ref], m.name)].append((ev.time * 10**9 // res, v))
                units[m.name] = m.unit
    assert out, f"{anchor}: Metric records of a class of several members"
    return out, units


@pytest.fixture(scope="module", params=TRACES)
def outputs(request, tmp_path_factory):
    trace = request.param
    tmp = tmp_path_factory.mktemp("members")
    outs = {}
    for suffix in (".pftrace", ".json"):
        for n in (None, 3):
            out = tmp / f"m{n}{suffix}"
            r = run_cli(["merge", str(trace), "-o", str(out), "-q"], nranks=n, timeout=600)
            assert r.returncode == 0, r.stderr
            outs[(suffix, n)] = out
    return trace, outs


def test_same_bytes_on_1_and_3_ranks(outputs):
    _, outs = outputs
    for suffix in (".pftrace", ".json"):
        assert outs[(suffix, None)].read_bytes() == outs[(suffix, 3)].read_bytes(), suffix


def test_perfetto_every_member(outputs):
    trace, outs = outputs
    want, units = _upstream(trace)
    t = pb.Trace()
    t.ParseFromString(outs[(".pftrace", None)].read_bytes())
    tracks, values = {}, defaultdict(list)
    for p in t.packet:
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("counter"):
                tracks[d.uuid] = (d.parent_uuid, d.name, d.counter.unit_name)
        elif p.track_event.type == COUNTER:
            te = p.track_event
            values[te.track_uuid].append((p.timestamp, te.double_counter_value
                                          if te.HasField("double_counter_value")
                                          else te.counter_value))
    got = {(parent, name): values[uuid] for uuid, (parent, name, _) in tracks.items()
           if name in units}
    assert got == dict(want)
    for uuid, (_, name, unit) in tracks.items():
        if name in units:
            assert unit == units[name], name


def test_chrome_every_member(outputs):
    trace, outs = outputs
    want, units = _upstream(trace)
    # times exact (µs with 3 decimals), floats as the shortest repr that reads back
    events = json.loads(outs[(".json", None)].read_text(), parse_float=Decimal)["traceEvents"]
    got = defaultdict(list)
    for e in events:
        if e["ph"] == "C" and e["name"] in units:
            (series, value), = e["args"].items()
            assert series == (units[e["name"]] or "value")
            ns = Decimal(e["ts"]) * 1000
            assert ns == int(ns)
            got[(int(e["id"]), e["name"])].append(
                (int(ns), float(value) if isinstance(value, Decimal) else value))
    assert dict(got) == dict(want)

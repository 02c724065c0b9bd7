"""Counter values as their definition types them, in every output that draws counters: a
small OTF trace written here whose counters are unsigned, signed, double and single
precision (OTF's DefCounter properties; values as OTF_Signed2Counter, OTF_Double2Counter and
OTF_Float2Counter store them), read back from the Perfetto, Chrome JSON and OTF2 outputs."""
from __future__ import annotations

import json
import struct

import pytest

from tests.conftest import run_cli

# counter: (name, unit, OTF properties, values as numbers)
COUNTERS = {
    1: ("instructions", "#", 0 | 0, [5, 2**64 - 1]),                 # ACC, START, UNSIGNED8
    2: ("balance", "B", 1 | 4 | 32, [-3, 7]),                       # ABS, POINT, SIGNED8
    3: ("temperature", "C", 1 | 4 | 288, [20.5, -1.25]),            # ABS, POINT, DOUBLE
    4: ("ratio", "", 1 | 4 | 256, [0.5, 3.0]),                      # ABS, POINT, FLOAT
}
TIMES = [1000, 2000]


def _bits(props: int, v) -> int:
    kind = props & 480
    if kind == 288:
        return struct.unpack("<Q", struct.pack("<d", v))[0]
    if kind == 256:
        return struct.unpack("<I", struct.pack("<f", v))[0]
    return v & (2**64 - 1)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("typed")
    (d / "t.otf").write_text("1:1\n")
    defs = ['DTR3b9aca00', 'DP1NM"Process 0"', 'DFG1NM"Application"', 'DF1G1NM"main"',
            'DCG1NM"counters"']
    defs += [f'DCNT{c}G1NM"{n}"P{p:x}U"{u}"' for c, (n, u, p, _) in COUNTERS.items()]
    (d / "t.0.def").write_text("\n".join(defs) + "\n")
    events = [f"{TIMES[0] - 500:x}", "*1", "E1"]
    for k, t in enumerate(TIMES):
        events += [f"{t:x}", "*1"]
        events += [f"CNT{c}V{_bits(p, vals[k]):x}" for c, (_, _, p, vals) in COUNTERS.items()]
    events += [f"{TIMES[-1]:x}", "*1", "L1"]
    (d / "t.1.events").write_text("\n".join(events) + "\n")
    return d / "t.otf"


def _merge(trace, out):
    r = run_cli(["merge", str(trace), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr


def test_perfetto(trace, tmp_path):
    pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    out = tmp_path / "t.pftrace"
    _merge(trace, out)
    t = pb.Trace()
    t.ParseFromString(out.read_bytes())
    tracks, values = {}, {}
    for p in t.packet:
        if p.HasField("track_descriptor") and p.track_descriptor.HasField("counter"):
            d = p.track_descriptor
            tracks[d.uuid] = (d.name, d.counter.unit_name)
        elif p.track_event.type == pb.TrackEvent.Type.Value("TYPE_COUNTER"):
            te = p.track_event
            v = te.double_counter_value if te.HasField("double_counter_value") \
                else te.counter_value
            values.setdefault(te.track_uuid, []).append((p.timestamp, v))
    got = {tracks[u]: v for u, v in values.items()}
    assert got == {(n, u): list(zip(TIMES, [float(x) if x >= 2**63 else x for x in vals]))
                   for n, u, _, vals in COUNTERS.values()}


def test_chrome(trace, tmp_path):
    out = tmp_path / "t.json"
    _merge(trace, out)
    events = json.loads(out.read_text())["traceEvents"]
    got = {}
    for e in events:
        if e["ph"] == "C":
            (series, v), = e["args"].items()
            got.setdefault((e["name"], series), []).append((round(e["ts"] * 1000), v))
    assert got == {(n, u or "value"): list(zip(TIMES, vals))
                   for n, u, _, vals in COUNTERS.values()}


def test_otf2(trace, tmp_path):
    otf2 = pytest.importorskip("otf2")
    out = tmp_path / "t.otf2"
    _merge(trace, out)
    with otf2.reader.open(str(out)) as r:
        classes = [[(m.name, m.unit, str(m.value_type).split(".")[-1],
                     str(m.metric_mode).split(".")[-1]) for m in c.members]
                   for c in r.definitions.metric_classes]
        got = {}
        for loc, ev in r.events:
            if type(ev).__name__ == "Metric":
                for m, v in zip(ev.metric.members, ev.values):
                    got.setdefault(m.name, []).append((ev.time, v))
    # one class of the group's four counters, each with its type and mode (floats as doubles)
    assert classes[0] == [("instructions", "#", "UINT64", "ACCUMULATED_START"),
                          ("balance", "B", "INT64", "ABSOLUTE_POINT"),
                          ("temperature", "C", "DOUBLE", "ABSOLUTE_POINT"),
                          ("ratio", "", "DOUBLE", "ABSOLUTE_POINT")]
    assert got == {n: list(zip(TIMES, vals)) for n, _, _, vals in COUNTERS.values()}

"""The Chrome JSON output (Trace Event Format), parsed with ``json.load`` and compared with
the HDF5 merge of the same real fixture: every process and thread name, every slice begin
and end, instant, flow and counter value of every location, on 1 and 3 ranks, and the files
byte-identical across rank counts and window cuts."""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from decimal import Decimal

import numpy as np
import pytest

from partrace.analysis.timeline import _messages
from partrace.model import Kind, Table
from tests.conftest import DATA, run_cli
from tests.support.counters import counter_defs, counter_rows, member_defs, member_rows
from tests.support.sink_outputs import decoded, merged_outputs, write_windows
from tests.formats.test_contract import FIXTURES, _label

pytestmark = pytest.mark.mpi        # each case merges on 3 ranks too

CASES = [pytest.param(path, id=f"{fmt}-{_label(path)}") for fmt, paths in FIXTURES.items()
         for path in paths]
# 3 ranks for each format's first fixture (the suite's time budget): the sink's bytes do not
# depend on the rank count whatever the format (test_sink_output_is_the_same_for_any_windows
# cuts every fixture kind into windows too)
ON_3_RANKS = {str(paths[0]) for paths in FIXTURES.values()}
# the test's own rule for sample tables and their measures (the sink asks the schema): no
# column of records or of parts of records, and numeric columns that are not bookkeeping
NOT_SAMPLE_COLUMNS = {"kind", "ref_table", "ref_seq", "event_seq", "call", "marker"}
NOT_MEASURES = {"time", "location", "seq", "offset", "sample_type", "sample_size", "stats_type",
                "model_size", "flag"}


def _strict(name):
    raise AssertionError(f"{name} is not JSON (a browser's JSON.parse refuses it)")


def _load(path) -> list[dict]:
    """The trace's events, numbers as Decimals (exact ns from µs with 3 decimals)."""
    with open(path) as f:
        doc = json.load(f, parse_float=Decimal, parse_constant=_strict)
    assert doc["displayTimeUnit"] == "ns" and set(doc) == {"traceEvents", "displayTimeUnit"}
    return doc["traceEvents"]


def _ns(ts) -> int:
    ns = Decimal(ts) * 1000
    assert ns == int(ns), ts
    return int(ns)


@pytest.fixture(scope="module", params=CASES)
def outputs(request, tmp_path_factory):
    trace = request.param
    return merged_outputs(trace, tmp_path_factory.mktemp("chrome"), ".json",
                          str(trace) in ON_3_RANKS)


def test_same_bytes_on_1_and_3_ranks(outputs):
    _, (one, *three) = outputs
    assert len(_load(one)) > 0
    if not three:
        pytest.skip("3 ranks: each format's first fixture only (ON_3_RANKS)")
    assert one.read_bytes() == three[0].read_bytes()


def _threads(tables):
    """{location: (pid, tid)}: a thread of its parent location's process, else its own."""
    locs = tables["locations"]
    ids = {int(i) for i in locs["id"]}
    return {int(i): (int(p) if int(p) in ids else int(i), int(i))
            for i, p in zip(locs["id"], locs["parent"])}


def test_processes_threads_slices_and_instants(outputs):
    """Each location is a named thread of a named process, and holds its events in key order:
    ENTER/LEAVE as B/E named by the region, a COUNTER event of a defined counter a counter
    event (test_counter_events), every other event an instant."""
    tables, (out, *_) = outputs
    events = _load(out)
    threads = _threads(tables)
    locs = tables["locations"]
    name_of = {int(i): str(n) for i, n in zip(locs["id"], locs["name"])}
    meta = [e for e in events if e["ph"] == "M"]
    assert events[:len(meta)] == meta                   # metadata first
    assert {(e["pid"], e["tid"]): e["args"]["name"] for e in meta
            if e["name"] == "thread_name"} == {threads[i]: name_of[i] for i in threads}
    assert {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"} == \
        {pid: name_of[pid] for pid, _ in threads.values()}
    assert len(meta) == len(threads) + len({p for p, _ in threads.values()})
    got = defaultdict(list)
    for e in events:
        if e["ph"] in "BEi":
            got[(e["pid"], e["tid"])].append((_ns(e["ts"]), e["ph"], e["name"]))
            assert e["ph"] != "i" or e["s"] == "t"
    regions = {int(i): str(n) for i, n in zip(tables["regions"]["id"], tables["regions"]["name"])}
    ev = tables["events"]
    kind = np.asarray(ev["kind"]).astype(np.int64)
    loc, t, region = (np.asarray(ev[c]).astype(np.int64) for c in ("location", "time", "region"))
    _, counted = counter_rows(tables.path)
    want = defaultdict(list)
    for r in np.flatnonzero(~counted):      # the expected events, one by one (small fixtures)
        k = int(kind[r])
        ph = "B" if k == Kind.ENTER else "E" if k == Kind.LEAVE else "i"
        want[threads[int(loc[r])]].append((int(t[r]), ph, regions.get(int(region[r]))
                                           or Kind(k).name))
    assert got == want
    assert sum(len(v) for v in got.values()) == len(kind) - int(counted.sum())


def test_trace_event_format_rules(outputs):
    """What chrome://tracing requires: on each thread an E closes the innermost open B, at
    or after its time (a B left open at the end is drawn to the end); a flow's start and
    end are one "s" and one "f" each; every event has the fields of its phase."""
    _, (out, *_) = outputs
    events = _load(out)
    open_slices = defaultdict(list)
    flows = defaultdict(list)
    for e in events:
        assert {"ph", "pid"} <= set(e), e
        if e["ph"] in "BEiCsf":
            assert "ts" in e and "tid" in e, e
        if e["ph"] in "BiC":
            assert isinstance(e["name"], str), e
        if e["ph"] == "B":
            open_slices[(e["pid"], e["tid"])].append(_ns(e["ts"]))
        elif e["ph"] == "E":
            stack = open_slices[(e["pid"], e["tid"])]
            assert stack, f"an E with no open B on thread {e['tid']}"
            assert _ns(e["ts"]) >= stack.pop(), e
        elif e["ph"] in "sf":
            flows[e["id"]].append(e["ph"])
        elif e["ph"] == "C":
            assert e["args"] and all(isinstance(v, (int, Decimal)) or v is None
                                     for v in e["args"].values()), e
    assert all(sorted(p) in (["s"], ["f"], ["f", "s"]) for p in flows.values())


def test_flows_join_each_message(outputs):
    """A flow from each SEND to its RECV (the k-th of each (sender, receiver, tag) on both
    sides), and each message's instant carries its peer, tag and size."""
    tables, (out, *_) = outputs
    events = _load(out)
    starts, ends = {}, {}
    for e in events:
        if e["ph"] in "sf":
            side = starts if e["ph"] == "s" else ends
            assert e["id"] not in side and e["cat"] == "message"
            assert e["ph"] == "s" or e["bp"] == "e"
            side[e["id"]] = (e["tid"], _ns(e["ts"]))
    ev = tables["events"]
    kind = np.asarray(ev["kind"]).astype(np.int64)
    n = len(kind)
    peer = np.asarray(ev["peer"]).astype(np.int64) if "peer" in ev else np.zeros(n, np.int64)
    ids = np.asarray(tables["locations"]["id"]).astype(np.int64)
    msg = ((kind == Kind.SEND) | (kind == Kind.RECV)) & np.isin(peer, ids)
    assert len(starts) == int((msg & (kind == Kind.SEND)).sum())
    assert len(ends) == int((msg & (kind == Kind.RECV)).sum())
    cols = {c: np.asarray(ev[c]).astype(np.int64)[msg] for c in ("time", "location", "seq", "kind")}
    m = _messages(Table(cols | {"peer": peer[msg]} |
                        ({"tag": np.asarray(ev["tag"]).astype(np.int64)[msg]} if "tag" in ev else {})))
    want = Counter(zip(m["sender"].tolist(), m["send_time"].tolist(),
                       m["receiver"].tolist(), m["recv_time"].tolist()))
    assert Counter(starts[f] + ends[f] for f in starts if f in ends) == want
    args = defaultdict(list)
    for e in events:
        if e["ph"] == "i" and "args" in e:
            args[e["tid"]].append((_ns(e["ts"]), e["args"]))
    loc, t = np.asarray(ev["location"]).astype(np.int64), np.asarray(ev["time"]).astype(np.int64)
    expect = defaultdict(list)
    for r in np.flatnonzero(msg):
        expect[int(loc[r])].append((int(t[r]), {
            "peer": int(peer[r]), "tag": int(ev["tag"][r]) if "tag" in ev else 0,
            "size": int(ev["size"][r]) if "size" in ev else 0}))
    assert args == expect


def _value(v):
    """A value as compared: a float exactly (JSON gives numpy's shortest round-trip repr;
    null where it is not finite), an integer as is."""
    if isinstance(v, (float, np.floating, Decimal)):
        return float(v) if np.isfinite(float(v)) else None
    return None if v is None else int(v)


def test_counter_events(outputs):
    """Each COUNTER event of a defined counter: a counter event named by the counter on its
    location's thread, id the location, one series named by its unit holding the value as
    the counter's value type reads it."""
    tables, (out, *_) = outputs
    events = _load(out)
    threads = _threads(tables)
    defs = counter_defs(tables.path) or {}
    by_name = {name: c for c, (name, _, _) in defs.items()}
    got = defaultdict(list)
    for e in events:
        if e["ph"] == "C" and e["name"] in by_name:
            loc, c = int(e["id"]), by_name[e["name"]]
            assert (e["pid"], e["tid"]) == threads[loc]
            (series, value), = e["args"].items()
            assert series == (defs[c][1] or "value")
            got[(loc, c)].append((_ns(e["ts"]), _value(value)))
    want, _ = counter_rows(tables.path)
    assert got == {k: [(t, _value(v)) for t, v in rows] for k, rows in want.items()}


def test_counter_members(outputs):
    """A counter of several values (an OTF2 metric class of several members): each member
    after the first is a counter event of its own named by the member, id the location, its
    one series named by the member's unit, for every value of it (the first member is the
    counter's own event: test_counter_events)."""
    tables, (out, *_) = outputs
    members = member_defs(tables.path)
    if not members:
        pytest.skip("no counter of several values in this trace")
    events = _load(out)
    threads = _threads(tables)
    by_name = {name: key for key, (name, _, _) in members.items() if key[1]}
    got = defaultdict(list)
    for e in events:
        if e["ph"] == "C" and e["name"] in by_name:
            loc, (c, k) = int(e["id"]), by_name[e["name"]]
            assert (e["pid"], e["tid"]) == threads[loc]
            (series, value), = e["args"].items()
            assert series == (members[(c, k)][1] or "value")
            got[(loc, c, k)].append((_ns(e["ts"]), _value(value)))
    want = member_rows(tables.path)
    assert want, "the fixture's records of several values"
    assert got == {k: [(t, _value(v)) for t, v in rows] for k, rows in want.items()}


def test_counters(outputs):
    """Each row of a sample table: a counter event named by the table, id its location,
    one series per measured column, with the row's values."""
    tables, (out, *_) = outputs
    events = _load(out)
    threads = _threads(tables)
    defined = {name for name, _, _ in (counter_defs(tables.path) or {}).values()} \
        | {name for name, _, _ in member_defs(tables.path).values()}
    got = defaultdict(list)
    for e in events:
        if e["ph"] == "C" and e["name"] not in defined:
            loc = int(e["id"])
            assert (e["pid"], e["tid"]) == threads[loc]
            got[(e["name"], loc)].append((_ns(e["ts"]), {k: _value(v) for k, v in e["args"].items()}))
    want = defaultdict(list)
    for name, t in tables.items():
        if name in ("events", "locations", "regions") or set(t.names) & NOT_SAMPLE_COLUMNS:
            continue
        cols = [c for c in t.names if c not in NOT_MEASURES and not c.endswith("_id")
                and np.asarray(t[c]).dtype.kind in "iuf" and np.asarray(t[c]).ndim == 1]
        if not cols:
            continue
        loc, tm = np.asarray(t["location"]), np.asarray(t["time"])
        values = {c: np.asarray(t[c]) for c in cols}
        for r in range(len(loc)):
            want[(name, int(loc[r]))].append((int(tm[r]), {c: _value(v[r]) for c, v in values.items()}))
    assert got == want


def test_to_chrome_names_any_file(tmp_path):
    trace = FIXTURES["dumpi"][0]
    out = tmp_path / "trace.txt"
    r = run_cli(["merge", str(trace), "-o", str(out), "--to", "chrome", "-q"])
    assert r.returncode == 0, r.stderr
    events = _load(out)
    assert {e["tid"] for e in events if e["ph"] == "B"} == {1, 2, 3, 4}
    r = run_cli(["merge", str(trace), "-o", str(out), "--to", "chrome", "-q"])
    assert r.returncode != 0 and "exists" in r.stderr and out.exists()


@pytest.mark.parametrize("nranks", [None, 3])
def test_damaged_input_leaves_no_output(tmp_path, nranks):
    """A truncated DUMPI file: exit 2 naming it, and nothing left beside the output name."""
    from tests.support.damage import truncated_dumpi_leaves_nothing
    truncated_dumpi_leaves_nothing(tmp_path, FIXTURES["dumpi"][0], "x.json", nranks)


# -- windows: the bytes do not depend on how the merge is cut ---------------------------------

def _write_windows(defs, schema, tables, out, windows: int) -> bytes:
    from partrace.output.chrome_sink import ChromeSink
    return write_windows(ChromeSink, defs, schema, tables, out, windows)


@pytest.mark.parametrize("trace", ["dumpi/p2p-4rank", "ross/phold-np2-opt-gvt-pekplp/stats"])
def test_sink_output_is_the_same_for_any_windows(trace, tmp_path, monkeypatch):
    """1, 2 or 17 windows, and lines built in chunks of 7 rows: the same bytes."""
    from partrace.formats.chrome import encode
    args = decoded(DATA / trace)
    want = _write_windows(*args, tmp_path / "one" / "x.json", 1)
    assert len(_load(tmp_path / "one" / "x.json")) > 300
    for windows in (2, 17):
        assert _write_windows(*args, tmp_path / f"w{windows}" / "x.json", windows) == want
    monkeypatch.setattr(encode, "CHUNK", 7)
    assert _write_windows(*args, tmp_path / "chunks" / "x.json", 3) == want


def test_leave_of_no_region_and_names_not_utf8(tmp_path):
    """Every LEAVE is an E (which ends the innermost B), OTF's Leave of no function ("leave
    the innermost open region") too, named by its kind; names in KOI8-R and Latin-1 are
    written with their bytes as \\xNN (JSON's strings are UTF-8), said in one warning; the
    same bytes on 1 and 3 ranks."""
    from tests.support import otf_leave
    data = otf_leave.merged_at_1_and_3_ranks(tmp_path, ".json")
    assert data[0] == data[1]
    data[0].decode("utf-8")         # strict
    events = _load(tmp_path / "mNone.json")
    assert {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"} == \
        {1: "rank 0", 2: otf_leave.written(otf_leave.THREAD), 3: "deep"}
    got, want = defaultdict(list), defaultdict(list)
    for e in events:
        if e["ph"] in "BE":
            got[e["tid"]].append((_ns(e["ts"]), e["ph"], e["name"]))
    names = {f"{i:x}": otf_leave.written(nm) for i, nm in otf_leave.NAMES.items()}
    for t, p, rec in otf_leave.EVENTS:
        want[p].append((t, "B", names[rec[1:]]) if rec[0] == "E" else
                       (t, "E", names[rec[1:]] if rec[1:] else "LEAVE"))
    assert got == want

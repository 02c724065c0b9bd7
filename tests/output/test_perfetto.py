"""The Perfetto output, read back with perfetto's own protos (perfetto_trace_pb2) and
compared with the HDF5 merge of the same real fixture: every slice, instant, flow and
counter value, on 1 and 3 ranks, and the files byte-identical across rank counts."""
from __future__ import annotations

from collections import Counter, defaultdict

import h5py
import numpy as np
import pytest

from partrace.analysis.timeline import _messages
from partrace.model import Kind, Table
from tests.conftest import run_cli
from tests.support.counters import counter_defs, counter_rows, member_defs, member_rows
from tests.support.sink_outputs import decoded, merged_outputs, write_windows
from tests.formats.test_contract import FIXTURES, _label

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
pytestmark = pytest.mark.mpi        # most of them merge on 3 ranks too

CASES = [pytest.param(path, id=f"{fmt}-{_label(path)}") for fmt, paths in FIXTURES.items()
         for path in paths]
# 3 ranks on each format's middle fixture (Chrome's tests take the first): byte
# identity across rank counts is the engine's and each sink's, and every fixture's
# records are checked on 1 rank (the suite's time budget)
ON_3_RANKS = {str(paths[len(paths) // 2]) for paths in FIXTURES.values()}
BEGIN, END, INSTANT, COUNTER = (pb.TrackEvent.Type.Value(n) for n in
                                ("TYPE_SLICE_BEGIN", "TYPE_SLICE_END", "TYPE_INSTANT", "TYPE_COUNTER"))
CLEARED = pb.TracePacket.SequenceFlags.Value("SEQ_INCREMENTAL_STATE_CLEARED")


def test_field_numbers_are_perfettos():
    """The numbers the encoder writes (formats/perfetto/encode.py) are those of the protos."""
    expected = {
        (pb.Trace, "packet"): 1, (pb.TracePacket, "timestamp"): 8,
        (pb.TracePacket, "trusted_packet_sequence_id"): 10, (pb.TracePacket, "track_event"): 11,
        (pb.TracePacket, "interned_data"): 12, (pb.TracePacket, "sequence_flags"): 13,
        (pb.TracePacket, "track_descriptor"): 60, (pb.TrackDescriptor, "uuid"): 1,
        (pb.TrackDescriptor, "name"): 2, (pb.TrackDescriptor, "parent_uuid"): 5,
        (pb.TrackDescriptor, "counter"): 8, (pb.TrackEvent, "type"): 9,
        (pb.TrackEvent, "name_iid"): 10, (pb.TrackEvent, "track_uuid"): 11,
        (pb.TrackEvent, "counter_value"): 30, (pb.TrackEvent, "double_counter_value"): 44,
        (pb.TrackEvent, "flow_ids"): 47, (pb.TrackEvent, "terminating_flow_ids"): 48,
        (pb.InternedData, "event_names"): 2, (pb.EventName, "iid"): 1, (pb.EventName, "name"): 2,
    }
    for (message, field), number in expected.items():
        assert message.DESCRIPTOR.fields_by_name[field].number == number, (message, field)
    from partrace.formats.perfetto import encode as E
    assert (E.SLICE_BEGIN, E.SLICE_END, E.INSTANT, E.COUNTER) == (BEGIN, END, INSTANT, COUNTER)
    assert E.STATE_CLEARED == CLEARED


def _marker_names(tables):
    d = tables["marker_defs"]
    return {int(i): str(n) for i, n in zip(d["id"], d["name"])}


def _args(path):
    """Per track, the (time, {name: value}) of each packet with debug annotations."""
    trace = pb.Trace()
    trace.ParseFromString(path.read_bytes())
    out = defaultdict(list)
    for p in trace.packet:
        te = p.track_event
        if len(te.debug_annotations):
            out[te.track_uuid].append((p.timestamp, {a.name: getattr(a, a.WhichOneof("value"))
                                                     for a in te.debug_annotations}))
    return out


def _read(path, by_sequence=False):
    """Tracks, and per track the events as (time, type, name, flow out, flow in, value)
    (by_sequence: per track, per packet sequence, the (time, type, name) of each)."""
    trace = pb.Trace()
    trace.ParseFromString(path.read_bytes())
    tracks, events = {}, defaultdict(list)
    sequences = defaultdict(lambda: defaultdict(list))
    names = {}                  # sequence -> iid -> name
    started = set()
    for p in trace.packet:
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            assert d.uuid not in tracks
            tracks[d.uuid] = (d.name, d.parent_uuid, d.HasField("counter"))
            continue
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & CLEARED:
            assert seq not in started
            names[seq] = {}
        te = p.track_event
        if te.type != COUNTER:
            assert seq in names, "a sequence's first packet clears its state"
            started.add(seq)
        for n in p.interned_data.event_names:
            names[seq][n.iid] = n.name
        name = names[seq][te.name_iid] if te.HasField("name_iid") else None
        value = te.double_counter_value if te.HasField("double_counter_value") else \
            (te.counter_value if te.HasField("counter_value") else None)
        events[te.track_uuid].append((p.timestamp, te.type, name, tuple(te.flow_ids),
                                      tuple(te.terminating_flow_ids), value))
        sequences[te.track_uuid][seq].append((p.timestamp, te.type, name))
    return (tracks, sequences) if by_sequence else (tracks, events)


@pytest.fixture(scope="module", params=CASES)
def outputs(request, tmp_path_factory):
    trace = request.param
    return merged_outputs(trace, tmp_path_factory.mktemp("pftrace"), ".pftrace",
                          str(trace) in ON_3_RANKS, definitions=("marker_defs",))


def test_same_bytes_on_1_and_3_ranks(outputs):
    _, (one, *three) = outputs
    data = one.read_bytes()
    # protobuf's own serializer writes the parsed trace back byte for byte: every length,
    # varint and field is as protobuf encodes it, in field-number order
    trace = pb.Trace()
    trace.ParseFromString(data)
    assert trace.SerializeToString() == data
    if not three:
        pytest.skip("3 ranks: each format's middle fixture only (ON_3_RANKS)")
    assert data == three[0].read_bytes()


def test_to_perfetto_names_any_file(tmp_path):
    trace = FIXTURES["dumpi"][0]
    out = tmp_path / "trace.bin"
    r = run_cli(["merge", str(trace), "-o", str(out), "--to", "perfetto", "-q"])
    assert r.returncode == 0, r.stderr
    tracks, events = _read(out)
    assert set(tracks) == {1, 2, 3, 4} and all(events[i] for i in tracks)
    r = run_cli(["merge", str(trace), "-o", str(out), "--to", "perfetto", "-q"])
    assert r.returncode != 0 and "exists" in r.stderr and out.exists()


def test_tracks_slices_and_instants(outputs):
    """Each location's track holds its events, and its marker spots (OTF), each in key order
    on a packet sequence of its own."""
    tables, (out, *_) = outputs
    tracks, sequences = _read(out, by_sequence=True)
    locs = tables["locations"]
    ids = set(int(i) for i in locs["id"])
    for i, name, parent in zip(locs["id"], locs["name"], locs["parent"]):
        assert tracks[int(i)] == (str(name), int(parent) if int(parent) in ids else 0, False)
    regions = {int(i): str(n) for i, n in zip(tables["regions"]["id"], tables["regions"]["name"])}
    ev = tables["events"]
    kind = np.asarray(ev["kind"]).astype(np.int64)
    loc, t, region = (np.asarray(ev[c]).astype(np.int64) for c in ("location", "time", "region"))
    _, counted = counter_rows(tables.path)       # values on counter tracks (test_counters)
    for i in ids:
        rows = np.flatnonzero((loc == i) & ~counted)
        want = []
        for r in rows:      # the expected events of the location, one by one (small fixtures)
            k = int(kind[r])
            typ = BEGIN if k == Kind.ENTER else END if k == Kind.LEAVE else INSTANT
            name = None if typ == END else regions.get(int(region[r])) or Kind(k).name
            want.append((int(t[r]), typ, name))
        wanted = [want] if want else []
        if "markers" in tables:
            mk = tables["markers"]
            defs = _marker_names(tables)
            spots = [(int(t), INSTANT, defs[int(m)]) for t, m in
                     zip(np.asarray(mk["time"])[mk["location"] == i], np.asarray(mk["marker"])[mk["location"] == i])]
            wanted += [spots] if spots else []
        got = sorted(sequences.get(i, {}).items())
        assert [rows for _, rows in got] == wanted, i
    assert sum(len(rows) for s in sequences.values() for rows in s.values()) \
        >= len(ev["time"]) - int(counted.sum())


def test_flows_join_each_message(outputs):
    tables, (out, *_) = outputs
    _, events = _read(out)
    ev = tables["events"]
    sends, recvs = {}, {}
    for track, rows in events.items():
        for ts, _, _, fo, fi, _ in rows:
            for f in fo:
                assert f not in sends
                sends[f] = (track, ts)
            for f in fi:
                assert f not in recvs
                recvs[f] = (track, ts)
    kind = np.asarray(ev["kind"]).astype(np.int64)
    peer = np.asarray(ev["peer"]).astype(np.int64) if "peer" in ev else np.zeros(len(kind), np.int64)
    assert len(sends) == int(((kind == Kind.SEND) & (peer != 0)).sum())
    assert len(recvs) == int(((kind == Kind.RECV) & (peer != 0)).sum())
    table = Table({c: np.asarray(ev[c]).astype(np.int64) for c in ("time", "location", "seq", "kind")}
                  | {"peer": peer} | ({"tag": np.asarray(ev["tag"]).astype(np.int64)} if "tag" in ev else {}))
    m = _messages(table)
    want = Counter(zip(m["sender"].tolist(), m["send_time"].tolist(),
                       m["receiver"].tolist(), m["recv_time"].tolist()))
    joined = Counter(sends[f] + recvs[f] for f in sends if f in recvs)
    assert joined == want
    # each message's packet carries its peer, tag and size
    args = _args(out)
    loc, t = np.asarray(ev["location"]).astype(np.int64), np.asarray(ev["time"]).astype(np.int64)
    msg = ((kind == Kind.SEND) | (kind == Kind.RECV)) & (peer != 0)
    for i in np.unique(loc[msg]):
        rows = np.flatnonzero(msg & (loc == i))
        want = [(int(t[r]), {"peer": int(peer[r]),
                             **({"tag": int(ev["tag"][r])} if "tag" in ev else {}),
                             **({"size": int(ev["size"][r])} if "size" in ev else {})}) for r in rows]
        assert args[int(i)] == want, i
    assert sum(len(a) for a in args.values()) == int(msg.sum())


# in the fixtures, a table with one of these columns holds records or parts of records (kinds,
# OTF key-values and markers, ovni jumbo payloads, DUMPI call arguments): written down here, not
# taken from the schema's roles that the sink reads, so that the test checks them
NOT_SAMPLE_COLUMNS = {"kind", "ref_table", "ref_seq", "event_seq", "call", "marker"}


def _units(path):
    """Per counter track, the unit its CounterDescriptor names."""
    trace = pb.Trace()
    trace.ParseFromString(path.read_bytes())
    return {p.track_descriptor.uuid: p.track_descriptor.counter.unit_name for p in trace.packet
            if p.HasField("track_descriptor") and p.track_descriptor.HasField("counter")}


def test_counter_events(outputs):
    """Each COUNTER event of a defined counter: a value on its location's track of that
    counter (named by the counter, with its unit), as the counter's value type reads it."""
    tables, (out, *_) = outputs
    tracks, events = _read(out)
    units = _units(out)
    defs = counter_defs(tables.path) or {}
    want, _ = counter_rows(tables.path)
    by_name = {(parent, name): uuid for uuid, (name, parent, is_counter) in tracks.items()
               if is_counter}
    for (loc, c), rows in want.items():
        name, unit, _ = defs[c]
        uuid = by_name[(loc, name)]
        assert units[uuid] == unit
        assert [(ts, typ, v) for ts, typ, _, _, _, v in events[uuid]] == \
            [(ts, COUNTER, v) for ts, v in rows], (loc, name)
    names = {name for name, _, _ in defs.values()}
    assert len([1 for _, name in by_name if name in names]) == len(want)


def test_counter_members(outputs):
    """A counter of several values (an OTF2 metric class of several members): each member
    after the first is a track of its own on the location (named by the member, with its
    unit) holding every value of it, as the member's type reads it; the first member is the
    counter's own track (test_counter_events)."""
    tables, (out, *_) = outputs
    members = member_defs(tables.path)
    if not members:
        pytest.skip("no counter of several values in this trace")
    tracks, events = _read(out)
    units = _units(out)
    by_name = {(parent, name): uuid for uuid, (name, parent, is_counter) in tracks.items()
               if is_counter}
    want = member_rows(tables.path)
    assert want, "the fixture's records of several values"
    for (loc, c, k), rows in want.items():
        name, unit, _ = members[(c, k)]
        uuid = by_name[(loc, name)]
        assert units[uuid] == unit
        assert [(ts, typ, v) for ts, typ, _, _, _, v in events[uuid]] == \
            [(ts, COUNTER, v) for ts, v in rows], (loc, name)
    drawn = {(parent, name) for parent, name in by_name
             if name in {m[0] for (_, k), m in members.items() if k}}
    assert len(drawn) == len(want)


def test_counters(outputs):
    tables, (out, *_) = outputs
    tracks, events = _read(out)
    defined = {name for name, _, _ in (counter_defs(tables.path) or {}).values()} \
        | {name for name, _, _ in member_defs(tables.path).values()}
    counters = {u: v for u, v in tracks.items() if v[2] and v[0] not in defined}
    samples = [n for n, t in tables.items() if n not in ("events", "locations", "regions", "marker_defs")
               and not set(t.names) & NOT_SAMPLE_COLUMNS]
    # every sample table becomes counter tracks (the ROSS fixtures have them)
    assert {name.split(".")[0] for name, _, _ in counters.values()} == set(samples)
    for uuid, (name, parent, _) in counters.items():
        table, col = name.rsplit(".", 1)
        t = tables[table]
        rows = np.flatnonzero(np.asarray(t["location"]) == parent)
        got = events.get(uuid, [])
        assert [(ts, typ) for ts, typ, *_ in got] == [(int(x), COUNTER) for x in np.asarray(t["time"])[rows]]
        values = np.asarray(t[col])[rows]
        want = values.astype(np.float64) if values.dtype.kind == "f" else values.astype(np.int64)
        assert [v for *_, v in got] == want.tolist(), name


# -- windows: the bytes do not depend on how the merge is cut ---------------------------------

def _write_windows(defs, schema, tables, out, windows: int) -> bytes:
    from partrace.output.perfetto_sink import PerfettoSink
    return write_windows(PerfettoSink, defs, schema, tables, out, windows)


@pytest.mark.parametrize("trace", ["dumpi/p2p-4rank", "ovni/v3-mpisim-small/ovni",
                                   "ross/phold-np2-opt-gvt-pekplp/stats", "otf/hybrid16/trace/hybrid16.otf"])
def test_sink_output_is_the_same_for_any_windows(trace, tmp_path, monkeypatch):
    from partrace.output import parts
    from tests.conftest import DATA
    defs, schema, tables = decoded(DATA / trace)
    want = _write_windows(defs, schema, tables, tmp_path / "one" / "x.pftrace", 1)
    assert len(want) > 1000
    for windows in (2, 7, 40):
        out = tmp_path / f"w{windows}" / "x.pftrace"
        assert _write_windows(defs, schema, tables, out, windows) == want
    # and the parts copied into the output in small blocks
    monkeypatch.setattr(parts, "COPY_BLOCK", 97)
    assert _write_windows(defs, schema, tables, tmp_path / "blocks" / "x.pftrace", 7) == want


def test_budgeted_merge_on_3_ranks_equals_one_window(tmp_path):
    """A generated DUMPI trace under a 1 MiB budget: many windows on 3 ranks, same bytes."""
    import re
    import subprocess
    import sys
    from tests.conftest import ROOT
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_dumpi.py"), str(tmp_path),
                        "--ranks", "4", "--calls", "3000"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    trace = tmp_path / "synth.meta"
    outs, windows = [], []
    for n, extra in ((None, []), (3, ["--memory", "1M"])):
        out = tmp_path / f"o{n}.pftrace"
        r = run_cli(["merge", str(trace), "-o", str(out), *extra], nranks=n, timeout=600)
        assert r.returncode == 0, r.stderr
        windows.append(int(re.search(r"(\d+) window\(s\)", r.stderr).group(1)))
        outs.append(out.read_bytes())
    assert windows[0] == 1 and windows[1] > 1
    assert outs[0] == outs[1]
    _, events = _read(tmp_path / "oNone.pftrace")
    assert sum(len(e) for e in events.values()) > 10000


@pytest.mark.parametrize("nranks", [None, 3])
def test_damaged_input_leaves_no_output(tmp_path, nranks):
    """A truncated DUMPI file: exit 2 naming it, and nothing left beside the output name."""
    from tests.support.damage import truncated_dumpi_leaves_nothing
    truncated_dumpi_leaves_nothing(tmp_path, FIXTURES["dumpi"][0], "x.pftrace", nranks)


def test_convert_from_hdf5_gives_the_same_bytes(tmp_path):
    """partrace's HDF5 merge converted to Perfetto equals the direct merge (OTF: with markers)."""
    trace = FIXTURES["otf"][0]
    h5, direct, converted = tmp_path / "m.h5", tmp_path / "d.pftrace", tmp_path / "c.pftrace"
    for args in (["merge", str(trace), "-o", str(h5)], ["merge", str(trace), "-o", str(direct)],
                 ["convert", str(h5), "-o", str(converted)]):
        r = run_cli([*args, "-q"])
        assert r.returncode == 0, r.stderr
    assert converted.read_bytes() == direct.read_bytes()


def test_sample_measures_are_declared_and_survive_hdf5(tmp_path):
    """The ROSS reader says which sample columns measure something (not ids, record types,
    sizes or offsets); the counters follow it, through HDF5 too, and a file written before
    Column.measure existed (no such attribute) gives the same counters."""
    from partrace.formats import detect, get
    from partrace.output.perfetto_sink import counter_columns

    def schema_of(path):
        reader = get(detect(path)).open(path)
        return reader.schema(reader.read_definitions())
    trace = FIXTURES["ross"][0]
    schema = schema_of(trace)
    measured = {t: [c.name for c in cols] for t, cols in counter_columns(schema)}
    assert measured, "the ROSS fixture has sample tables"
    for t, names in measured.items():
        assert not {"offset", "sample_type", "sample_size", "flag"} & set(names), (t, names)
        assert not [n for n in names if n.endswith("_id")], (t, names)
    h5 = tmp_path / "m.h5"
    assert run_cli(["merge", str(trace), "-o", str(h5), "-q"]).returncode == 0
    assert {t: [c.name for c in cols] for t, cols in counter_columns(schema_of(h5))} == measured
    direct = tmp_path / "direct.pftrace"
    assert run_cli(["merge", str(trace), "-o", str(direct), "-q"]).returncode == 0
    with h5py.File(h5, "r+") as f:          # as written before the attribute existed
        f.visititems(lambda _n, obj: obj.attrs.__delitem__("measure")
                     if "measure" in obj.attrs else None)
    old = tmp_path / "old.pftrace"
    assert run_cli(["convert", str(h5), "-o", str(old), "-q"]).returncode == 0
    assert old.read_bytes() == direct.read_bytes()


def test_leave_of_no_region_and_names_not_utf8(tmp_path):
    """Every LEAVE ends a slice, OTF's Leave of no function ("leave the innermost open
    region") too (an end needs no name); names in KOI8-R and Latin-1 are written with their
    bytes as \\xNN (strings are UTF-8), said in one warning; the same bytes on 1 and 3
    ranks."""
    from tests.support import otf_leave
    data = otf_leave.merged_at_1_and_3_ranks(tmp_path, ".pftrace")
    assert data[0] == data[1]
    tracks, events = _read(tmp_path / "mNone.pftrace")
    assert {i: t[0] for i, t in tracks.items()} == \
        {1: "rank 0", 2: otf_leave.written(otf_leave.THREAD), 3: "deep"}
    want = defaultdict(list)
    for t, p, rec in otf_leave.EVENTS:
        want[p].append((t, BEGIN, otf_leave.written(otf_leave.NAMES[int(rec[1:], 16)]))
                       if rec[0] == "E" else (t, END, None))
    assert {p: [e[:3] for e in evs] for p, evs in events.items()} == want

"""OTF output of DUMPI, ovni and ROSS traces, through the CLI on 1, 2 and 4 ranks, read back with our
OTF reader and checked value by value against the decode of the SOURCE trace (partrace.open)."""
import struct
from collections import defaultdict

import numpy as np
import pytest

import partrace
from partrace.formats.otf.grammar import MARKER_TABLE
from partrace.model import Kind
from tests.conftest import DATA, run_cli

from tests.formats.test_otf_helpers import decode_all

pytestmark = pytest.mark.mpi

SOURCES = ["dumpi/p2p-4rank", "dumpi/coll-4rank", "ovni/v1-zoo-small/ovni", "ovni/v3-mpisim-small/ovni",
           "ross/phold-np2-opt-gvt-pekplp", "ross/pi-np1-seq-allmodes", "ross/pi-np2-opt-evtrace-full-model-gvt"]
FILE_TABLES = {"events", "snapshots", "statistics", "markers", "keyvalues", "text"}
NO_RECORD = {Kind.EVENT, Kind.SAMPLE, Kind.MARKER}     # written as NoOp (but point events with a region)


def _points(ev):
    """Point events with a region: written as marker spots, not NoOp."""
    if "region" not in ev.names:
        return np.zeros(len(ev), bool)
    return (ev["kind"] == Kind.EVENT) & (ev["region"] != 0)


@pytest.fixture(scope="module", params=SOURCES)
def converted(request, tmp_path_factory):
    src = DATA / request.param
    outs = []
    for n in (None, 2, 4):
        d = tmp_path_factory.mktemp("otf")
        out = d / "out.otf"
        r = run_cli(["merge", str(src), "-o", str(out), "-q"], nranks=n)
        assert r.returncode == 0, r.stderr
        outs.append(out)
    return src, outs


def test_files_identical_for_every_rank_count(converted):
    _, outs = converted
    names = sorted(p.name for p in outs[0].parent.iterdir())
    for out in outs[1:]:
        assert sorted(p.name for p in out.parent.iterdir()) == names
        for name in names:
            assert (out.parent / name).read_bytes() == (outs[0].parent / name).read_bytes(), name


def _by_location(t, sel, cols):
    """{location: [row values]} in (time, seq) order: OTF streams are in time order, while a source's
    own order need not be (ROSS event traces)."""
    out = defaultdict(list)
    idx = np.flatnonzero(sel)
    idx = idx[np.lexsort((t["seq"][idx], t["time"][idx], t["location"][idx]))]
    for i in idx.tolist():
        out[int(t["location"][i])].append(tuple(c(i) if callable(c) else t[c][i].item() for c in cols))
    return dict(out)


def test_records_match_the_source(converted):
    src, outs = converted
    source = partrace.open(src)
    sdefs, sev = source.definitions, source.table("events")
    _, odefs, otabs = decode_all(outs[0])
    oev = otabs["events"]
    # every location is a process, under its own name
    sloc, oloc = sdefs.tables["locations"], odefs.tables["locations"]
    assert sorted(map(str, sloc["name"])) == sorted(map(str, oloc["name"]))
    to_out = dict(zip(sloc["id"].tolist(), [dict(zip(oloc["name"], oloc["id"].tolist()))[n] for n in sloc["name"]]))
    sreg = dict(zip(sdefs.tables["regions"]["id"].tolist(), sdefs.tables["regions"]["name"]))
    oreg = dict(zip(odefs.tables["regions"]["id"].tolist(), odefs.tables["regions"]["name"]))
    # counts per kind
    skind = {Kind(k): int((sev["kind"] == k).sum()) for k in np.unique(sev["kind"])}
    okind = {Kind(k): int((oev["kind"] == k).sum()) for k in np.unique(oev["kind"])}
    noop = sum(n for k, n in skind.items() if k in NO_RECORD) - int(_points(sev).sum())
    samples = 0
    for name in source.tables:
        t = source.table(name)
        if name in FILE_TABLES or any(c in t.names for c in ("call", "event_seq", "ref_seq")):
            continue
        ncols = sum(1 for c in t.names if c not in ("time", "location", "seq")
                    and t[c].dtype != object and t[c].ndim == 1)
        samples += len(t) * ncols
    want = {k: n for k, n in skind.items() if k not in NO_RECORD}
    assert len(otabs["markers"]) == int(_points(sev).sum())
    if noop:
        want[Kind.NOOP] = noop
    if samples:
        want[Kind.COUNTER] = want.get(Kind.COUNTER, 0) + samples
    assert okind == want
    # ENTER / LEAVE: time and region name, per location in order
    for k in (Kind.ENTER, Kind.LEAVE):
        s = _by_location(sev, sev["kind"] == k, ["time", lambda i: sreg[int(sev["region"][i])]])
        o = _by_location(oev, oev["kind"] == k, ["time", lambda i: oreg[int(oev["region"][i])]])
        assert {to_out[loc]: v for loc, v in s.items()} == o, k
    # messages: time, peer, tag, size
    for k in (Kind.SEND, Kind.RECV):
        get = lambda c: (lambda i: sev[c][i].item() if c in sev else 0)     # absent = 0, as OTF writes it
        s = _by_location(sev, sev["kind"] == k, ["time", lambda i: to_out[int(sev["peer"][i])], get("tag"),
                                                 get("size")])
        o = _by_location(oev, oev["kind"] == k, ["time", "peer", "tag", "size"])
        assert {to_out[loc]: v for loc, v in s.items()} == o, k
    _check_extra_columns(sev, oev, otabs["keyvalues"], odefs, to_out)
    _check_sample_counters(source, oev, odefs, to_out)


def _check_extra_columns(sev, oev, kv, odefs, to_out):
    """Rows with no OTF record (NoOp): every numeric column of the source comes back as a key-value."""
    keys = dict(zip(odefs.tables["keys"]["name"], odefs.tables["keys"]["id"].tolist()))
    sel_s = np.isin(sev["kind"], [int(k) for k in NO_RECORD]) & ~_points(sev)
    sel_o = oev["kind"] == Kind.NOOP
    got = _kv_by_record(kv, 0)
    cols = [c for c in sev.names if c in keys and sev[c].ndim == 1]
    assert sel_s.sum() == 0 or cols

    s = _by_location(sev, sel_s, ["time"] + [lambda i, c=c: sev[c][i].item() for c in cols])
    o = _by_location(oev, sel_o, ["time"] + [lambda i, c=c: _kv_value(got, oev, i, keys[c]) for c in cols])
    assert {to_out[loc]: v for loc, v in s.items()} == o


def _kv_by_record(kv, ref_table):
    """{(location, ref_seq): {key: (type, raw value)}} of the key-values of one table's records."""
    got = defaultdict(dict)
    sel = kv["ref_table"] == ref_table
    for loc, seq, key, typ, val in zip(kv["location"][sel].tolist(), kv["ref_seq"][sel].tolist(),
                                       kv["key"][sel].tolist(), kv["type"][sel].tolist(), kv["value"][sel].tolist()):
        got[(loc, seq)][key] = (typ, val)
    return got


def _kv_value(got, rows, i, key):
    """The value of key-value `key` of record i of `rows` (absent = 0), decoded by its OTF type."""
    typ, raw = got[(int(rows["location"][i]), int(rows["seq"][i]))].get(key, (None, 0))
    if typ == 10:
        return struct.unpack("<d", struct.pack("<Q", raw))[0]
    if typ == 9:
        return struct.unpack("<f", struct.pack("<I", raw))[0]
    bits = {1: 8, 3: 16, 5: 32, 7: 64}.get(typ)
    return raw - (1 << bits) if bits and raw >> (bits - 1) else raw


def test_point_events_are_markers(converted):
    """Every EVENT row with a region is a marker spot: its time, process, the region's name as marker
    name, its non-zero columns as key-values and as 'column=value' text."""
    src, outs = converted
    _, odefs, otabs = decode_all(outs[0])
    check_point_markers(src, odefs, otabs["markers"], otabs["keyvalues"])


def check_point_markers(src, odefs, mk, kv):
    """The markers `mk` (key-values `kv`) of the OTF output of trace `src` (definitions `odefs`) are
    its point events, value by value (see test_point_events_are_markers)."""
    source = partrace.open(src)
    sdefs, sev = source.definitions, source.table("events")
    point = _points(sev)
    if source.format == "ovni":
        assert point.sum() > 0      # (unknown MCVs, as in the zoo trace, keep region 0: NoOp)
    sloc, oloc = sdefs.tables["locations"], odefs.tables["locations"]
    to_out = dict(zip(sloc["id"].tolist(), [dict(zip(oloc["name"], oloc["id"].tolist()))[n] for n in sloc["name"]]))
    sreg = dict(zip(sdefs.tables["regions"]["id"].tolist(), map(str, sdefs.tables["regions"]["name"])))
    mdefs = odefs.tables.get("marker_defs")
    oname = dict(zip(mdefs["id"].tolist(), map(str, mdefs["name"]))) if mdefs is not None else {}
    assert sorted(oname) == sorted(set(sev["region"][point].tolist()))
    keys = dict(zip(odefs.tables["keys"]["name"], odefs.tables["keys"]["id"].tolist()))
    cols = [c for c in sev.names if c in keys and c != "region"]
    got = _kv_by_record(kv, MARKER_TABLE)

    def text(i):
        parts = []
        for c in cols:
            v = sev[c][i]
            if v.ndim:
                b = bytes(v).rstrip(b"\0")
                if b:
                    parts.append(f"{c}={b.hex()}")
            elif v:
                parts.append(f"{c}={v.item()}")
        return " ".join(parts)

    scalars = [c for c in cols if sev[c].ndim == 1]
    s = _by_location(sev, point, ["time", lambda i: sreg[int(sev["region"][i])], lambda i: int(sev["region"][i]),
                                  text] + [lambda i, c=c: sev[c][i].item() for c in scalars])
    o = _by_location(mk, np.ones(len(mk), bool), ["time", lambda i: oname[int(mk["marker"][i])], "marker",
                                                    lambda i: str(mk["text"][i])]
                     + [lambda i, c=c: _kv_value(got, mk, i, keys[c]) for c in scalars])
    assert {to_out[loc]: v for loc, v in s.items()} == o
    # byte-array columns: one KV per 100 bytes, the whole column read back
    arrays = [c for c in cols if sev[c].ndim == 2]
    ab = defaultdict(bytes)
    sel = kv["ref_table"] == MARKER_TABLE
    for loc, seq, key, raw in zip(kv["location"][sel].tolist(), kv["ref_seq"][sel].tolist(), kv["key"][sel].tolist(),
                                  kv["bytes"][sel]):
        ab[(loc, seq, key)] += raw or b""
    for c in arrays:
        s = _by_location(sev, point, [lambda i: bytes(sev[c][i]) if sev[c][i].any() else b""])
        o = _by_location(mk, np.ones(len(mk), bool),
                         [lambda i: ab[(int(mk["location"][i]), int(mk["seq"][i]), keys[c])]])
        assert {to_out[loc]: v for loc, v in s.items()} == o, c


def _check_sample_counters(source, oev, odefs, to_out):
    """Each numeric column of a sample table: one counter 'TABLE.COLUMN', values at the row's time."""
    cnt = dict(zip(odefs.tables["counters"]["name"], odefs.tables["counters"]["id"].tolist()))
    for name in source.tables:
        t = source.table(name)
        if name in FILE_TABLES or any(c in t.names for c in ("call", "event_seq", "ref_seq")):
            continue
        for c in t.names:
            if c in ("time", "location", "seq") or t[c].dtype == object or t[c].ndim != 1:
                continue
            want = _by_location(t, np.ones(len(t), bool), ["time", lambda i: float(t[c][i])
                                                          if t[c].dtype.kind == "f" else int(t[c][i])])
            sel = (oev["kind"] == Kind.COUNTER) & (oev["counter"] == cnt[f"{name}.{c}"])
            raw = oev["value"]
            conv = ((lambda i: float(raw[i:i + 1].view(np.float64)[0])) if t[c].dtype.kind == "f"
                    else (lambda i: int(raw[i:i + 1].view(np.int64)[0])))
            got = _by_location(oev, sel, ["time", conv])
            assert {to_out[loc]: v for loc, v in want.items()} == got, (name, c)

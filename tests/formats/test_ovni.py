"""ovni reader against the real traces and ovni's own ovnidump output beside them."""
from __future__ import annotations

import json
import re
import shutil
import struct
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.ovni import Ovni
from partrace.formats.ovni import reader as ovni_reader
from partrace.formats.ovni import scan
from partrace.model import Kind, Table

DATA = Path(__file__).resolve().parents[1] / "data" / "ovni"
V1 = DATA / "v1-zoo-small"
V3 = DATA / "v3-mpisim-small"
REL = re.compile(r"loom\.(.+)/proc\.(\d+)/thread\.(\d+)(?:\.obs)?$")


# -- reference: ovnidump text ---------------------------------------------------
def _thread(relpath: str) -> tuple[str, int, int]:
    m = REL.match(relpath)
    assert m, relpath
    return m.group(1), int(m.group(2)), int(m.group(3))


def _hex(field: str) -> bytes:
    assert field.startswith(":"), field
    return bytes.fromhex(field[1:].replace(":", ""))


def dump_141(path: Path) -> dict:
    """ovnidump 1.4.1: ``relpath clock +delta MCV [:hex]`` -> per thread [(clock, mcv, bytes)].

    delta is the clock minus that of the stream's previous event (0 before the first).
    """
    out = defaultdict(list)
    for line in path.read_text().splitlines():
        f = line.split()
        clock, delta, rows = int(f[1]), int(f[2]), out[_thread(f[0])]
        assert delta == clock - (rows[-1][0] if rows else 0)
        rows.append((clock, f[3], _hex(f[4]) if len(f) > 4 else b""))
    return out


def dump_x(path: Path) -> dict:
    """ovnidump -x 1.14.0: ``clock MCV relpath [:hex]``."""
    out = defaultdict(list)
    for line in path.read_text().splitlines():
        f = line.split()
        out[_thread(f[2])].append((int(f[0]), f[1], _hex(f[3]) if len(f) > 3 else b""))
    return out


def dump_text(path: Path) -> dict:
    """ovnidump 1.14.0 text mode: per thread [(clock, mcv, description)]."""
    out = defaultdict(list)
    for line in path.read_text().splitlines():
        clock, mcv, rel, text = line.split(None, 3)
        out[_thread(rel)].append((int(clock), mcv, text))
    return out


# -- our decode -----------------------------------------------------------------
def decode_all(path: Path, **_):
    r = Ovni.open(path)
    defs = r.read_definitions()
    schema = r.schema(defs)
    out = {}
    for u in r.units():
        chunks = list(r.decode(u, defs))
        for c in chunks:
            for name, t in c.items():
                assert t.names == [col.name for col in schema[name]]
        out[u.key] = {name: Table.concat([c[name] for c in chunks], schema[name]) for name in schema}
    return r, defs, out


def raw_clock(ev: Table, defs) -> np.ndarray:
    """The stream clock of each event: its time less its thread's clock offset."""
    threads = defs.tables["threads"]
    at = np.searchsorted(threads["location"], ev["location"])
    return (ev["time"] - threads["clock_offset"][at]).astype(np.uint64)


def as_dump(decoded: dict, defs) -> dict:
    """Our rows in ovnidump's terms: payload bytes, jumbo length + data for jumbo events."""
    out = {}
    for key, t in decoded.items():
        ev, jb = t["events"], t["jumbo"]
        jdata = dict(zip(jb["event_seq"].tolist(), jb["data"]))
        clock = raw_clock(ev, defs)
        rows = []
        for i in range(len(ev)):
            mcv = bytes([ev["model"][i], ev["category"][i], ev["value"][i]]).decode()
            pay = bytes(ev["payload"][i][:ev["payload_size"][i]])
            if ev["flags"][i] & 0x10:
                pay += jdata[int(ev["seq"][i])]
            rows.append((int(clock[i]), mcv, pay))
        loom, pid, tid = key.split("/")
        out[(loom, int(pid), int(tid))] = rows
    return out


@pytest.fixture(scope="module")
def v1():
    return decode_all(V1)


@pytest.fixture(scope="module")
def v3():
    return decode_all(V3 / "ovni")


# -- the fixtures against ovnidump ----------------------------------------------
@pytest.mark.parametrize("trace, dump, events", [("v1", lambda: dump_141(V1 / "ovnidump.txt"), 604),
                                                  ("v3", lambda: dump_x(V3 / "ovnidump-x.txt"), 714)])
def test_matches_ovnidump_event_by_event(request, trace, dump, events):
    """v1: ovnidump 1.4.1's output; v3: ovnidump -x (hex payloads)."""
    ref = dump()
    _, defs, dec = request.getfixturevalue(trace)
    ours = as_dump(dec, defs)
    assert sorted(ours) == sorted(ref)
    for k in ref:
        assert ours[k] == ref[k], k
    assert sum(map(len, ref.values())) == events


def test_v3_semantics_match_ovnidump_text(v3):
    """CPU, enter/leave regions and jumbo labels agree with ovnidump's descriptions."""
    _, defs, dec = v3
    regions = dict(zip(defs.tables["regions"]["id"].tolist(), defs.tables["regions"]["name"]))
    ref = dump_text(V3 / "ovnidump.txt")
    checked = defaultdict(int)
    for key, t in dec.items():
        loom, pid, tid = key.split("/")
        ev, jb = t["events"], t["jumbo"]
        jdata = dict(zip(jb["event_seq"].tolist(), jb["data"]))
        rows = ref[(loom, int(pid), int(tid))]
        assert len(rows) == len(ev)
        ours = raw_clock(ev, defs)
        for i, (clock, mcv, text) in enumerate(rows):
            assert int(ours[i]) == clock
            m = re.match(r"(enters|leaves) (\S+)$", text)
            if m:
                want = Kind.ENTER if m.group(1) == "enters" else Kind.LEAVE
                assert ev["kind"][i] == want and regions[int(ev["region"][i])] == "mpi: " + m.group(2)
                checked["region"] += 1
            else:
                # a point event is a region of its own, named after its MCV
                assert ev["kind"][i] == Kind.EVENT and regions[int(ev["region"][i])].endswith(f"({mcv})"), text
                checked["point"] += 1
            m = re.match(r"begins the execution on CPU (\d+) created from (-?\d+) with tag (\S+)", text)
            if m:
                assert ev["cpu"][i] == int(m.group(1))
                p = bytes(ev["payload"][i])
                assert struct.unpack("<iiQ", p) == (int(m.group(1)), int(m.group(2)), int(m.group(3), 16))
                checked["cpu"] += 1
            m = re.match(r'creates task type (\d+) with label "(.*)"', text)
            if m:
                d = jdata[i]
                assert struct.unpack("<I", d[:4])[0] == int(m.group(1))
                assert d[4:] == m.group(2).encode() + b"\0"
                checked["jumbo"] += 1
            if mcv == "OHe":
                assert i == len(rows) - 1 and ev["cpu"][i] >= 0
    assert checked == {"region": 2 * (2 * 2 + 6 * 12 * 3 + 6 * 3), "point": 714 - 476, "cpu": 6, "jumbo": 6}


def test_mcvs_of_no_known_model_are_point_events_of_region_0(v1):
    """The v1 fixture's MCVs: 'X..' (a test model ovni does not define) are point events of
    region 0 (unknown); every other is in the MCV table with its kind and region."""
    _, defs, dec = v1
    mcv = defs.tables["mcv"]
    known = dict(zip(mcv["mcv"].tolist(), zip(mcv["kind"].tolist(), mcv["region"].tolist())))
    seen = defaultdict(int)
    for t in dec.values():
        ev = t["events"]
        for m, c, v, kind, region in zip(*(ev[k].tolist() for k in (
                "model", "category", "value", "kind", "region"))):
            name = bytes([m, c, v]).decode()
            want = (int(Kind.EVENT), 0) if name[0] == "X" else known[name]
            assert (kind, region) == want, name
            seen[name[0] == "X"] += 1
    assert seen[True] > 0 and seen[False] > 0


def test_definitions_from_metadata(v1, v3):
    for (_, defs, dec), trace, version in ((v1, V1, 1), (v3, V3, 3)):
        assert defs.attrs["layout_versions"] == [version]
        loc = defs.tables["locations"]
        names = dict(zip(loc["id"].tolist(), loc["name"]))
        parent = dict(zip(loc["id"].tolist(), loc["parent"].tolist()))
        for key, t in dec.items():
            lm, pid, tid = key.split("/")
            lid = int(t["events"]["location"][0])
            assert names[lid] == f"{lm}/{int(pid)}/{int(tid)}"
            assert names[parent[lid]] == f"{lm}/{int(pid)}"
            assert names[parent[parent[lid]]] == lm
            threads = defs.tables["threads"]
            row = threads["location"].tolist().index(lid)
            assert (threads["tid"][row], threads["pid"][row]) == (int(tid), int(pid))
            assert names[threads["process"][row]] == f"{lm}/{int(pid)}"
            assert names[threads["loom"][row]] == lm
        procs = defs.tables["processes"]
        for i, pid in enumerate(procs["pid"].tolist()):
            lm = names[int(procs["loom"][i])]
            pdir = trace / "ovni" / f"loom.{lm}" / f"proc.{pid}"
            if version == 1:
                docs = [json.loads((pdir / "metadata.json").read_text())]
            else:
                docs = [json.loads(p.read_text())["ovni"] for p in pdir.glob("thread.*/stream.json")]
            for k in ("app_id", "rank", "nranks"):
                assert procs[k][i] == next(d[k] for d in docs if k in d)
        cpus = defs.tables["cpus"]
        ref = []
        for p in (trace / "ovni").glob("loom.*/proc.*/**/*.json"):
            d = json.loads(p.read_text())
            ref += d.get("cpus", []) + d.get("ovni", {}).get("loom_cpus", [])
        assert sorted((c["index"], c["phyid"]) for c in ref) == list(
            zip(cpus["index"].tolist(), cpus["phyid"].tolist()))


def test_units_sorted_deterministic_and_sniff(tmp_path):
    r = Ovni.open(V3 / "ovni")
    keys = [u.key for u in r.units()]
    assert keys == sorted(keys) == [u.key for u in Ovni.open(V3).units()]
    assert [u.size for u in r.units()] == [Path(u.info["path"]).stat().st_size for u in r.units()]
    assert Ovni.sniff(V1) and Ovni.sniff(V1 / "ovni") and Ovni.sniff(V3 / "ovni")
    assert not Ovni.sniff(tmp_path) and not Ovni.sniff(V1 / "ovnidump.txt")


def test_chunking_keeps_seq_and_cpu(monkeypatch, v3):
    monkeypatch.setattr(ovni_reader, "CHUNK", 7)
    _, _, small = decode_all(V3 / "ovni")
    for key, t in v3[2].items():
        for name in ("events", "jumbo"):
            for col in t[name].names:
                a, b = t[name][col], small[key][name][col]
                assert (a == b).all() if a.dtype != object else list(a) == list(b)
        assert (t["events"]["seq"] == np.arange(len(t["events"]))).all()


# -- other layouts and byte order, converted from the v1 fixture -------------------
def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


def test_v2_and_v3_layouts_of_the_same_streams(tmp_path, v1):
    v2 = _copy(V1, tmp_path / "v2")
    for md in (v2 / "ovni").glob("loom.*/proc.*/metadata.json"):
        doc = json.loads(md.read_text())
        doc.pop("model_version")
        md.write_text(json.dumps({**doc, "version": 2}))
        for obs in md.parent.glob("thread.*.obs"):
            obs.with_suffix(".json").write_text(json.dumps(
                {"version": 2, "ovni": {"lib": {"version": "1.10.0"}, "finished": 1}}))
    v3 = _copy(V1, tmp_path / "v3")
    for md in (v3 / "ovni").glob("loom.*/proc.*/metadata.json"):
        doc = json.loads(md.read_text())
        pid = int(md.parent.name.split(".")[1])
        for obs in sorted(md.parent.glob("thread.*.obs")):
            tid = int(obs.stem.split(".")[1])
            tdir = obs.with_suffix("")
            tdir.mkdir()
            obs.rename(tdir / "stream.obs")
            o = {"part": "thread", "tid": tid, "pid": pid, "loom": "zoo0", "app_id": doc["app_id"],
                 "require": {"ovni": "1.1.0"}, "finished": 1}
            if tid == pid:      # only the main thread carries the process facts
                o.update(rank=doc["rank"], nranks=doc["nranks"], loom_cpus=doc.get("cpus", []))
            (tdir / "stream.json").write_text(json.dumps({"version": 3, "ovni": o}))
        md.unlink()
    ref = as_dump(v1[2], v1[1])
    for trace, version in ((v2, 2), (v3, 3)):
        _, defs, dec = decode_all(trace)
        assert defs.attrs["layout_versions"] == [version]
        assert as_dump(dec, defs) == ref
        for name in ("processes", "cpus", "locations"):
            for col in defs.tables[name].names:
                want = [version] * 2 if col == "layout" else list(v1[1].tables[name][col])
                assert list(defs.tables[name][col]) == want


def test_big_endian_stream(tmp_path, v1):
    """A stream written by a big-endian host: header version, clocks and jumbo lengths swapped."""
    trace = _copy(V1, tmp_path)
    ref = dump_141(V1 / "ovnidump.txt")
    for (lm, pid, tid), rows in ref.items():
        out = bytearray(b"ovni" + struct.pack(">I", 1))
        for clock, mcv, pay in rows:
            jumbo = mcv.startswith("XJ")
            first = 0x13 if jumbo else (len(pay) - 1 if pay else 0)
            body = struct.pack(">I", len(pay) - 4) + pay[4:] if jumbo else pay
            out += bytes([first]) + mcv.encode() + struct.pack(">Q", clock) + body
        (trace / "ovni" / f"loom.{lm}" / f"proc.{pid}" / f"thread.{tid}.obs").write_bytes(out)
    _, defs, dec = decode_all(trace)
    ours = as_dump(dec, defs)
    for k, rows in ref.items():
        want = [(c, m, pay[3::-1] + pay[4:] if m.startswith("XJ") else pay) for c, m, pay in rows]
        assert ours[k] == want


# -- clock offsets ----------------------------------------------------------------
def test_clock_offsets_applied_and_kept(tmp_path, v3):
    trace = _copy(V3, tmp_path)
    example = (DATA / "ovnisync-example-clock-offsets.txt").read_text().splitlines()
    (trace / "ovni" / "clock-offsets.txt").write_text(
        example[0] + "\n" + "0          mpi0                 -12345               -12345.2      3.0\n")
    _, defs, dec = decode_all(trace)
    assert defs.attrs["clock_offsets"] == {"mpi0": -12345} and defs.attrs["clock_offsets_applied"]
    for key, t in dec.items():
        ev = t["events"]
        assert (ev["time"] == v3[2][key]["events"]["time"] - 12345).all()
        assert (raw_clock(ev, defs) == raw_clock(v3[2][key]["events"], v3[1])).all()
        assert (t["jumbo"]["time"] == v3[2][key]["jumbo"]["time"] - 12345).all()
    assert defs.tables["threads"]["clock_offset"].tolist() == [-12345] * len(dec)
    # the example file names host "vm" only: no offset for loom mpi0 is an error
    shutil.copy(DATA / "ovnisync-example-clock-offsets.txt", trace / "ovni" / "clock-offsets.txt")
    with pytest.raises(TraceError, match="clock-offsets.txt.*no clock offset for host 'mpi0'"):
        Ovni.open(trace).read_definitions()


# -- damage -----------------------------------------------------------------------
def _stream(trace: Path, tid: int) -> Path:
    return next((trace / "ovni").glob(f"loom.*/proc.*/thread.{tid}*obs"), None) or next(
        (trace / "ovni").glob(f"loom.*/proc.*/thread.{tid}/stream.obs"))


def _decode_unit(trace: Path, tid: int):
    r = Ovni.open(trace)
    defs = r.read_definitions()
    u = next(u for u in r.units() if u.info["tid"] == tid)
    return list(r.decode(u, defs))


@pytest.mark.parametrize("chunk, few", [(ovni_reader.CHUNK, scan.FEW), (7, scan.FEW),
                                        (ovni_reader.CHUNK, 1)])
def test_cpu_set_cleared_and_set_again_in_one_stream(tmp_path, monkeypatch, chunk, few):
    """Two of the v1 fixture's streams one after the other (31003 then 31002, as a thread
    that ends and starts again on another CPU): the CPU is OHx's payload i32 (ovnidump's
    bytes; OHe clears it for the event after it, which sets it again here).  A chunk on
    one CPU throughout holds it as one repeated value (stride 0); a chunk where it changes
    holds it per event.  With room for one CPU change a chunk (``few``), the fill pass runs
    again with room for all."""
    trace = _copy(V1, tmp_path)
    first, second = _stream(trace, 31003), _stream(trace, 31002)
    first.write_bytes(first.read_bytes() + second.read_bytes()[8:])     # without its header
    second.unlink()
    ref = dump_141(V1 / "ovnidump.txt")
    rows = ref[("zoo0", 31001, 31003)] + ref[("zoo0", 31001, 31002)]
    want, cur, clear = [], -1, False
    for _, mcv, payload in rows:
        cur = -1 if clear else cur
        if mcv in ("OHx", "OAs"):
            cur = struct.unpack("<i", payload[:4])[0]
        want.append(cur)
        clear = mcv == "OHe"
    assert sorted(set(want)) == [1, 2]
    monkeypatch.setattr(ovni_reader, "CHUNK", chunk)
    monkeypatch.setattr(scan, "FEW", few)
    cpus = [c["events"]["cpu"] for c in _decode_unit(trace, 31003)]
    assert np.concatenate(cpus).tolist() == want
    held_once = [c.strides[0] == 0 for c in cpus]
    assert held_once == [len(set(c.tolist())) == 1 for c in cpus]
    assert not all(held_once) and (any(held_once) or len(cpus) == 1)


@pytest.mark.parametrize("cut", [1, 5, 11, 20, 200, 600])
def test_half_written_last_event_warns_and_keeps_the_rest(tmp_path, v1, cut):
    """v1: no metadata says the stream was closed, and each cut leaves a plausible start
    of an event (ovni_cut tests the tails that are not)."""
    trace = _copy(V1, tmp_path)
    path = _stream(trace, 31001)
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    with pytest.warns(UserWarning) as rec:
        chunks = _decode_unit(trace, 31001)
    ev = chunks[0]["events"]
    full = v1[2]["zoo0/0000031001/0000031001"]["events"]
    # the last event (OHe, 12 bytes) or the jumbo/normal events that the cut reaches are dropped
    n = len(ev)
    assert n < len(full) and (ev["time"] == full["time"][:n]).all()
    assert (ev["payload"] == full["payload"][:n]).all()
    msg = str(rec[0].message)
    m = re.search(r"byte (\d+): stream ends inside an event.*dropped its (\d+) bytes.*kept the (\d+)", msg)
    assert str(path) in msg and m and int(m.group(3)) == n
    assert int(m.group(1)) + int(m.group(2)) == len(data) - cut


def test_stream_cut_inside_header_is_an_error(tmp_path):
    trace = _copy(V3, tmp_path)
    path = _stream(trace, 27415)
    path.write_bytes(path.read_bytes()[:5])
    with pytest.raises(TraceError, match=r"stream.obs:byte 5: stream ends inside the 8-byte header"):
        _decode_unit(trace, 27415)


def test_bad_magic_is_an_error(tmp_path):
    trace = _copy(V3, tmp_path)
    path = _stream(trace, 27415)
    data = bytearray(path.read_bytes())
    path.write_bytes(b"ovnX" + data[4:])
    with pytest.raises(TraceError, match=r"byte 0: expected magic b'ovni'"):
        _decode_unit(trace, 27415)


def test_bad_metadata_json_is_an_error(tmp_path):
    trace = _copy(V1, tmp_path)
    md = trace / "ovni" / "loom.zoo0" / "proc.31004" / "metadata.json"
    md.write_text('{\n  "version": 1,\n  "app_id": 7,,\n}')
    with pytest.raises(TraceError, match=r"proc.31004/metadata.json:line 3: expected valid JSON"):
        Ovni.open(trace).read_definitions()
    md.write_text('{"version": 9}')
    with pytest.raises(TraceError, match=r'metadata.json:line 1: expected "version" 1 or 2, got 9'):
        Ovni.open(trace).read_definitions()


def test_thread_file_without_process_metadata_is_an_error(tmp_path):
    trace = _copy(V1, tmp_path)
    (trace / "ovni" / "loom.zoo0" / "proc.31004" / "metadata.json").unlink()
    with pytest.raises(TraceError, match=r"proc.31004/metadata.json: missing: the process metadata of thread stream thread.3100\d.obs"):
        Ovni.open(trace).units()
    trace = _copy(V3, tmp_path / "b")
    (trace / "ovni" / "loom.mpi0" / "proc.27414" / "thread.27417" / "stream.json").unlink()
    with pytest.raises(TraceError, match=r"thread.27417/stream.json: missing: the metadata of thread stream"):
        Ovni.open(trace).units()


def test_unfinished_v3_stream_warns(tmp_path):
    trace = _copy(V3, tmp_path)
    sj = trace / "ovni" / "loom.mpi0" / "proc.27414" / "thread.27417" / "stream.json"
    doc = json.loads(sj.read_text())
    del doc["ovni"]["finished"]
    sj.write_text(json.dumps(doc))
    with pytest.warns(UserWarning, match=r"thread.27417/stream.json: stream not marked finished"):
        Ovni.open(trace).read_definitions()


# -- the synthetic generator (scripts/gen_ovni.py) --------------------------------------
def _gen():
    import importlib.util
    path = Path(__file__).resolve().parents[2] / "scripts" / "gen_ovni.py"
    spec = importlib.util.spec_from_file_location("gen_ovni", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_trace_decodes(tmp_path):
    root = _gen().write_trace(tmp_path, looms=2, procs=2, threads=2, events=3000, offsets=True)
    r, defs, dec = decode_all(root)
    assert defs.attrs["layout_versions"] == [3] and len(r.units()) == 8
    assert defs.attrs["clock_offsets"] == {"node0.synthetic": 0, "node1.synthetic": -10**9}
    procs = defs.tables["processes"]
    assert sorted(procs["rank"].tolist()) == [0, 1, 2, 3] and set(procs["nranks"].tolist()) == {4}
    assert len(defs.tables["cpus"]) == 2 * 4
    for key, t in dec.items():
        ev = t["events"]
        assert len(ev) == 3000
        mcv = [bytes(x).decode() for x in np.stack([ev["model"], ev["category"], ev["value"]], 1)]
        assert mcv[0] == "OHx" and mcv[-1] == "OHe" and (np.diff(ev["time"]) > 0).all()
        # every enter is closed by the leave of the same region right after it
        enter = np.flatnonzero(ev["kind"] == Kind.ENTER)
        assert (ev["kind"][enter + 1] == Kind.LEAVE).all()
        assert (ev["region"][enter] == ev["region"][enter + 1]).all() and (ev["region"][enter] > 0).all()
        assert len(np.flatnonzero(ev["kind"] == Kind.LEAVE)) == len(enter)
        loom = key.split("/")[0]
        threads = defs.tables["threads"]
        at = threads["location"].tolist().index(int(ev["location"][0]))
        assert threads["clock_offset"][at] == defs.attrs["clock_offsets"][loom]
        assert all(d.endswith(b"synthetic task type\0") for d in t["jumbo"]["data"])


def test_a_selection_of_event_keys_equals_the_full_decode(tmp_path):
    """The folds' selections (time, location, kind, region: a lighter kernel) give a full
    decode's values, clock offsets applied (one loom's is -1 s); a selection of the jumbo
    table alone gives its rows; a selection of neither decodes nothing."""
    root = _gen().write_trace(tmp_path, looms=2, procs=1, threads=2, events=3000, offsets=True)
    _, defs, dec = decode_all(root)
    for selection in ({"events": ("time", "location", "kind", "region")},
                      {"events": ("kind", "location", "peer", "size", "region")},
                      {"jumbo": ("event_seq", "data")}, {"other": None}):
        r = Ovni.open(root)
        r.selection = selection
        r.chunk_bytes = 1 << 14             # several chunks per stream
        for u in r.units():
            chunks = list(r.decode(u, defs))
            assert all(set(c) == set(selection) & {"events", "jumbo"} for c in chunks)
            for table, cols in selection.items():
                if table not in dec[u.key]:
                    assert not chunks
                    continue
                full = dec[u.key][table]
                names = [c for c in full.names if c in cols]
                assert len(chunks) > 1 and all(c[table].names == names for c in chunks)
                for c in names:
                    assert np.array_equal(np.concatenate([ch[table][c] for ch in chunks]), full[c])
        ev = dec[u.key]["events"]
        raw = raw_clock(ev, defs).astype(np.int64)
        assert len(dec[u.key]["jumbo"]) and (ev["time"] != raw).any()


def test_several_looms_without_offsets_warn(tmp_path):
    root = _gen().write_trace(tmp_path, looms=2, procs=1, threads=1, events=10)
    with pytest.warns(UserWarning, match=r"2 looms but no clock-offsets.txt"):
        Ovni.open(root).read_definitions()


def test_v2_thread_without_its_json_warns(tmp_path):
    trace = _copy(V1, tmp_path)
    for md in (trace / "ovni").glob("loom.*/proc.*/metadata.json"):
        md.write_text(json.dumps({**json.loads(md.read_text()), "version": 2}))
        for obs in md.parent.glob("thread.*.obs"):
            if obs.name != "thread.31002.obs":
                obs.with_suffix(".json").write_text('{"version": 2, "ovni": {"finished": 1}}')
    with pytest.warns(UserWarning) as rec:
        defs = Ovni.open(trace).read_definitions()
    assert [str(w.message).split("/")[-1] for w in rec] == [
        "thread.31002.obs: no thread.31002.json beside it (layout v2 writes it when the thread "
        "finishes); the stream may be incomplete"]
    assert defs.attrs["layout_versions"] == [2]


def test_header_only_stream_has_no_events(tmp_path):
    trace = _copy(V3, tmp_path)
    path = _stream(trace, 27416)
    path.write_bytes(path.read_bytes()[:8])
    # ovni's emulator warns "stream has zero events" and goes on: so does partrace
    with pytest.warns(UserWarning, match=rf"{re.escape(str(path))}: byte 8: no events after"):
        chunks = _decode_unit(trace, 27416)
    assert sum(len(c["events"]) for c in chunks) == 0 and sum(len(c["jumbo"]) for c in chunks) == 0

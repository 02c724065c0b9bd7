"""OTF reader vs the real otfprint dumps, record by record, per process."""
from __future__ import annotations

import struct
from pathlib import Path
from collections import defaultdict

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.otf import OTF
from partrace.formats.otf import grammar as G
from partrace.model import Kind
from tests.formats.test_otf_helpers import DATA, decode_all, otfprint, per_location

FILEOPS = {"OPEN": 0, "CLOSE": 1, "READ": 2, "WRITE": 3, "SEEK": 4, "UNLINK": 5, "RENAME": 6, "DUP": 7,
           "SYNC": 8, "LOCK": 9, "UNLOCK": 10}

# otfprint record -> (table, Kind, location label, [(our column, otfprint label)])
MAP = {
    "Enter": ("events", Kind.ENTER, "process", [("region", "function"), ("scl", "source")]),
    "Leave": ("events", Kind.LEAVE, "process", [("region", "function"), ("scl", "source")]),
    "Counter": ("events", Kind.COUNTER, "process", [("counter", "counter"), ("value", "value")]),
    "SendMessage": ("events", Kind.SEND, "sender", [("peer", "receiver"), ("comm", "group"), ("tag", "type"),
                                                    ("size", "length"), ("scl", "source")]),
    "ReceiveMessage": ("events", Kind.RECV, "receiver", [("peer", "sender"), ("comm", "group"), ("tag", "type"),
                                                         ("size", "length"), ("scl", "source")]),
    "Collective": ("events", Kind.COLLECTIVE, "process", [("collop", "collective"), ("comm", "group"),
                   ("root", "root"), ("size", "sent"), ("received", "received"), ("duration", "duration"),
                   ("scl", "source")]),
    "BeginCollective": ("events", Kind.COLLECTIVE_BEGIN, "process", [("collop", "collective"), ("comm", "group"),
                        ("match_id", "matchingId"), ("root", "root"), ("size", "sent"), ("received", "received"),
                        ("scl", "source")]),
    "EndCollective": ("events", Kind.COLLECTIVE_END, "process", [("match_id", "matchingId")]),
    "BeginProcess": ("events", Kind.PROCESS_BEGIN, "process", []),
    "EndProcess": ("events", Kind.PROCESS_END, "process", []),
    "BeginFileOperation": ("events", Kind.FILE_BEGIN, "process", [("match_id", "matching ID"), ("scl", "source")]),
    "EndFileOperation": ("events", Kind.FILE_END, "process", [("file", "file ID"), ("match_id", "matching ID"),
                         ("handle", "handle ID"), ("operation", "operation"), ("size", "bytes"), ("scl", "source")]),
    "FileOperation": ("events", Kind.FILE_OP, "process", [("file", "file ID"), ("handle", "handle ID"),
                      ("operation", "operation"), ("size", "bytes"), ("duration", "duration"), ("scl", "source")]),
    "RMAPut": ("events", Kind.RMA_PUT, "initiator", [("origin", "origin"), ("peer", "target"),
               ("comm", "communicator"), ("tag", "tag"), ("size", "bytes"), ("scl", "source")]),
    "RMAEnd": ("events", Kind.RMA_END, "initiator", [("peer", "remote"), ("comm", "communicator"), ("tag", "tag"),
               ("scl", "source")]),
    "EventComment": ("events", Kind.COMMENT, "process", [("text", "comment")]),
    "SnapComment": ("snapshots", Kind.SNAP_COMMENT, "process", [("text", "comment")]),
    "SnapEnter": ("snapshots", Kind.SNAP_ENTER, "process", [("otime", "otime"), ("region", "function"),
                  ("scl", "source")]),
    "SnapSend": ("snapshots", Kind.SNAP_SEND, "sender", [("otime", "otime"), ("peer", "receiver"),
                 ("comm", "group"), ("tag", "tag"), ("size", "length"), ("scl", "source")]),
    "SnapOpenFile": ("snapshots", Kind.SNAP_OPEN_FILE, "process", [("otime", "otime"), ("file", "fileid"),
                     ("handle", "handle ID"), ("scl", "source")]),
    # otfprint swaps the labels of SnapCounter: "otime" is the process, "process" the original time
    "SnapCounter": ("snapshots", Kind.SNAP_COUNTER, "otime", [("otime", "process"), ("counter", "counter"),
                    ("value", "value")]),
    "SnapCollopCount": ("snapshots", Kind.SNAP_COLLOP_COUNT, "process", [("comm", "communicator"),
                        ("count", "count")]),
    "StatFunction": ("statistics", Kind.STAT_FUNCTION, "process", [("region", "function"),
                     ("count", "invocations"), ("excl_time", "excltime"), ("incl_time", "incltime")]),
    "StatFunctionGroup": ("statistics", Kind.STAT_FUNCTION_GROUP, "process", [("function_group", "group"),
                          ("count", "invocations"), ("excl_time", "excltime"), ("incl_time", "incltime")]),
    "StatMessage": ("statistics", Kind.STAT_MESSAGE, "process", [("peer", "peer"), ("comm", "group"),
                    ("tag", "type"), ("n_sent", "numsent"), ("n_recv", "numreceived"), ("size", "bytessent"),
                    ("received", "bytesreceived")]),
    "StatCollOp": ("statistics", Kind.STAT_COLLOP, "process", [("comm", "group"), ("collop", "col"),
                   ("n_sent", "numsent"), ("n_recv", "numreceived"), ("size", "bytessent"),
                   ("received", "bytesreceived")]),
    "Marker": ("markers", None, "process", [("marker", "ID"), ("text", "text")]),
}


def _val(label, v):
    if label == "operation":
        return FILEOPS[v]
    return v if label in ("comment", "text") else int(v)


def _kv_text(typ: int, raw: int, data: bytes) -> str:
    """A key-value as otfprint shows it."""
    if typ == 0xB:
        return f"byte-array({len(data)})"
    if typ == 0xA:
        return repr(struct.unpack("<d", struct.pack("<Q", raw))[0])
    if typ == 0x9:
        return repr(struct.unpack("<f", struct.pack("<I", raw))[0])
    bits = {0: 8, 1: 8, 2: 8, 3: 16, 4: 16, 5: 32, 6: 32, 7: 64, 8: 64}[typ]
    if typ in (1, 3, 5, 7) and raw >> (bits - 1):
        raw -= 1 << bits
    return str(raw)


def _same_kv(ref: list, ours: list) -> bool:
    if [k for k, _ in ref] != [k for k, _ in ours]:
        return False
    for (_, a), (_, b) in zip(ref, ours):
        if "byte-array" in a or "byte-array" in b:
            if a != b:
                return False
        elif abs(float(a) - float(b)) > 1e-3 * max(1.0, abs(float(a))):   # otfprint rounds doubles
            return False
    return True


def _check_against_otfprint(trace, dump):
    _, defs, tabs = decode_all(trace)
    recs, _ = otfprint(dump)
    kvs = defaultdict(list)
    kvt = tabs["keyvalues"]
    for i in np.lexsort((kvt["seq"], kvt["location"])).tolist():
        kvs[(int(kvt["ref_table"][i]), int(kvt["location"][i]), int(kvt["ref_seq"][i]))].append(
            (str(kvt["key"][i]), _kv_text(int(kvt["type"][i]), int(kvt["value"][i]), kvt["bytes"][i])))
    texts = {(int(a), int(b), int(c)): t for a, b, c, t in zip(
        tabs["text"]["ref_table"], tabs["text"]["location"], tabs["text"]["ref_seq"], tabs["text"]["text"])}
    ref = defaultdict(list)
    seen = set()
    for ticks, typ, f, kv in recs:
        table, kind, locl, cols = MAP[typ]          # KeyError = a record type the test does not know
        seen.add(typ)
        ref[(table, int(f[locl]))].append(
            (ticks, int(kind) if kind else -1) + tuple(_val(lab, f[lab]) for _, lab in cols) + (tuple(kv),))
    ours = defaultdict(list)
    for table in ("events", "snapshots", "statistics", "markers"):
        tab = tabs[table]
        kinds = sorted({int(k) for k in tab["kind"]}) if "kind" in tab else [None]
        # otfprint does not print summary comments and file (group) statistics: checked against the .stats text instead
        kinds = [k for k in kinds if k is None or k not in (Kind.STAT_FILE, Kind.STAT_FILE_GROUP, Kind.STAT_COMMENT)]
        for kind in kinds:
            sel = np.flatnonzero(tab["kind"] == kind) if kind is not None else np.arange(len(tab))
            typ = next(t for t, m in MAP.items() if m[0] == table and (m[1] == kind or kind is None))
            cols = [c for c, _ in MAP[typ][3] if c != "text"]
            sub = tab.take(sel)
            for loc, rows in per_location(sub, ["ticks", "seq"] + cols).items():
                for ticks, seq, *vals in rows:
                    key = (G.TABLE_CODE[table], loc, seq)
                    if any(c == "text" for c, _ in MAP[typ][3]):
                        vals.append(texts[key] if table != "markers" else
                                    str(sub["text"][np.flatnonzero((sub["location"] == loc) & (sub["seq"] == seq))[0]]))
                    ours[(table, loc)].append((seq, (ticks, kind if kind is not None else -1) + tuple(vals),
                                               tuple(kvs.get(key, []))))
    assert set(ref) == set(ours)
    total = 0
    for key, rows in ref.items():
        mine = [r for r in sorted(ours[key])]
        if key[0] == "markers":      # seq is the marker-file order
            mine.sort()
        assert len(mine) == len(rows), key
        # per location: same records in the same order (kinds of one table interleaved in seq order)
        for want, (_, got, kv) in zip(rows, mine):
            assert got == want[:-1], (key, want, got)
            assert _same_kv(list(want[-1]), list(kv)), (key, want, kv)
            total += 1
    assert total == len(recs)
    return defs, tabs, seen


def test_ring8_matches_otfprint():
    defs, tabs, seen = _check_against_otfprint(DATA / "ring8/trace", DATA / "ring8/reference/ring8.otfprint.txt")
    assert {"Enter", "Leave", "SendMessage", "RMAPut", "EndFileOperation", "Marker", "EventComment"} <= seen
    assert len(tabs["keyvalues"]) > 0


def test_hybrid16_matches_otfprint():
    defs, tabs, seen = _check_against_otfprint(DATA / "hybrid16/trace",
                                               DATA / "hybrid16/reference/hybrid16.otfprint.txt")
    assert {"SnapCounter", "SnapSend", "StatFunction", "StatCollOp"} <= seen


def test_file_statistics_match_the_stats_text():
    import re
    _, _, tabs = decode_all(DATA / "hybrid16/trace")
    st = tabs["statistics"]
    got = sorted(tuple(int(st[c][i]) for c in ("kind", "location", "file", "file_group", "n_open", "n_close",
                 "n_read", "n_write", "n_seek", "bytes_read", "bytes_written"))
                 for i in np.flatnonzero(np.isin(st["kind"], [Kind.STAT_FILE, Kind.STAT_FILE_GROUP])))
    want = []
    for f in sorted((DATA / "hybrid16/trace").glob("*.stats")):
        proc = None
        for line in f.read_text().splitlines():
            if line.startswith("*"):
                proc = int(line[1:], 16)
            m = re.fullmatch(r"SFL(G?)(\w+?)NO(\w+)NC(\w+)NRD(\w+)NW(\w+)NSK(\w+)BR(\w+)BW(\w+)", line)
            if m:
                g, tok, *n = m.groups()
                want.append((int(Kind.STAT_FILE_GROUP if g else Kind.STAT_FILE), proc,
                             0 if g else int(tok, 16), int(tok, 16) if g else 0) + tuple(int(x, 16) for x in n))
    assert want and got == sorted(want)
    comments = [l[3:-1] for f in sorted((DATA / "hybrid16/trace").glob("*.stats"))
                for l in f.read_text().splitlines() if l.startswith('SC"')]
    tx = tabs["text"]
    assert sorted(comments) == sorted(tx["text"][tx["ref_table"] == G.TABLE_CODE["statistics"]].tolist())


def test_merged_layout_decodes_to_the_same_dump():
    _check_against_otfprint(DATA / "ring8/merged_n3", DATA / "ring8/reference/ring8_n3.otfprint.txt")
    _check_against_otfprint(DATA / "hybrid16/merged_n5", DATA / "hybrid16/reference/hybrid16_n5.otfprint.txt")


def test_small_chunks_give_the_same_tables():
    _, _, whole = decode_all(DATA / "hybrid16/trace")
    _, _, small = decode_all(DATA / "hybrid16/trace", chunk=997)
    for t in whole:
        for c in whole[t].names:
            assert np.array_equal(whole[t][c], small[t][c]), (t, c)


def test_blocks_are_chunk_sized_and_no_read_asks_for_more_than_the_file_holds(monkeypatch):
    """read_blocks: blocks of `chunk` bytes but the last, the file's bytes in order, and each
    read asks for at most what is left (a chunk-sized read of a small file costs CPU)."""
    from partrace.formats.otf import files
    path = DATA / "hybrid16/trace/hybrid16.1.events"
    data = path.read_bytes()
    asked = []

    class Spy:
        """The opened file, its read sizes noted."""
        def __init__(self, *args):
            self.f = open(*args)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def fileno(self):
            return self.f.fileno()

        def read(self, n=-1):
            asked.append(n)
            return self.f.read(n)
    monkeypatch.setattr(files, "open", Spy, raising=False)     # the module's builtin open
    for chunk in (997, len(data) - 1, len(data), len(data) + 1, files.CHUNK):
        asked.clear()
        blocks = list(files.read_blocks(path, chunk))
        assert b"".join(blocks) == data
        assert [len(b) for b in blocks] == [chunk] * (len(data) // chunk) + [len(data) % chunk] * bool(
            len(data) % chunk)
        assert max(asked) <= max(min(chunk, len(data)), files._LEAST_READ)


@pytest.mark.parametrize("name", ["ring8", "hybrid16"])
def test_definitions_match_otfprint(name):
    defs = OTF.open(DATA / name / "trace").read_definitions()
    _, ref = otfprint(DATA / name / "reference" / f"{name}.otfprint.txt")
    by = defaultdict(list)
    for typ, f, kv, _ in ref:
        by[typ].append((f, kv))
    loc = defs.tables["locations"]
    assert [(int(f["process"]), f["name"], int(f.get("parent", 0))) for f, _ in by["DefProcess"]] == list(
        zip(loc["id"].tolist(), loc["name"].tolist(), loc["parent"].tolist()))
    reg = defs.tables["regions"]
    assert [(int(f["function"]), f["name"], int(f["group"])) for f, _ in by["DefFunction"]] == list(
        zip(reg["id"].tolist(), reg["name"].tolist(), reg["group"].tolist()))
    first_df = next(r for r in defs.source if r["type"] == "DefFunction")
    assert [k for k, _ in by["DefFunction"][0][1]] == [str(k[0]) for k in first_df["kv"]]
    fg = defs.tables["function_groups"]
    assert [(int(f["group"]), f["name"]) for f, _ in by["DefFunctionGroup"]] == list(
        zip(fg["id"].tolist(), fg["name"].tolist()))
    cnt = defs.tables["counters"]
    assert [(int(f["counter"]), f["name"], int(f["group"]), f["unit"]) for f, _ in by["DefCounter"]] == list(
        zip(cnt["id"].tolist(), cnt["name"].tolist(), cnt["group"].tolist(), cnt["unit"].tolist()))
    groups = [r["fields"] for r in defs.source if r["type"] == "DefProcessGroup"]
    assert [(int(f["group"]), f["name"]) for f, _ in by["DefProcessGroup"]] == [(g["token"], g["name"]) for g in groups]
    # the procs list is the last field: the pair regex splits it, so parse the raw text
    raw = [t for typ, _, _, t in ref if typ == "DefProcessGroup"]
    assert [[int(x) for x in t.split("procs ")[1].split(", ")] for t in raw] == [g["members"] for g in groups]
    col = defs.tables["collectives"]
    assert [(int(f["collective"]), f["name"]) for f, _ in by["DefCollective"]] == list(
        zip(col["id"].tolist(), col["name"].tolist()))
    (tr, _), = by["DefTimerResolution"]
    assert defs.attrs["ticks_per_second"] == int(tr["TicksPerSecond"])
    (rng, _), = by["DefTimeRange"]
    assert "[" in rng["stream"] or True
    text = [t for typ, _, _, t in ref if typ == "DefTimeRange"][0]
    lo, hi = text.split("[")[1].rstrip("]").split(", ")
    assert defs.attrs["time_range"] == [int(lo), int(hi)]
    keys = defs.tables["keys"]
    assert [(int(f["token"]), f["name"], f["desc"]) for f, _ in by["DefKeyValue"]] == list(
        zip(keys["id"].tolist(), keys["name"].tolist(), keys["description"].tolist()))
    md = defs.tables["marker_defs"]
    assert [(int(f["ID"]), f["name"]) for f, _ in by["DefMarker"]] == list(zip(md["id"].tolist(), md["name"].tolist()))
    sp = defs.tables["sample_points"]
    assert [int(f["time"]) for f, _ in by["DefAuxSamplePoint"]] == sp["ticks"].tolist()
    uid = [t for typ, _, _, t in ref if typ == "DefUniqueId"][0]
    assert defs.attrs["unique_id"] == int(uid.split("uid: ")[1])


def test_time_is_exact_integer_ns():
    _, defs, tabs = decode_all(DATA / "hybrid16/trace")
    tps = defs.attrs["ticks_per_second"]
    ev = tabs["events"]
    want = [t * 10**9 // tps for t in ev["ticks"][:500].tolist()]
    assert ev["time"][:500].tolist() == want


def test_sniff(tmp_path):
    assert OTF.sniff(DATA / "ring8/trace")
    assert OTF.sniff(DATA / "ring8/trace/ring8.otf")
    assert not OTF.sniff(DATA / "ring8/trace/ring8.0.def")
    (tmp_path / "x.otf").write_text("garbage\n")
    assert not OTF.sniff(tmp_path / "x.otf")


# ---- errors -------------------------------------------------------------------------------------------

def _copy(tmp_path, name="ring8"):
    import shutil
    dst = tmp_path / name
    shutil.copytree(DATA / name / "trace", dst)
    return dst


def _decode(path):
    r = OTF.open(path)
    d = r.read_definitions()
    for u in r.units():
        for _ in r.decode(u, d):
            pass


def _edit(path, old: bytes, new: bytes):
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new, 1))
    return data[:data.index(old)].count(b"\n") + 1


@pytest.mark.parametrize("old,new,expect", [
    (b"\nS2L400T64Cf4241\n", b"\nS2L400T64\n", "expected field tag 'C' (comm) of SendMsg"),
    (b"\nE6\n", b"\nQZ6\n", "expected a known record keyword"),
    (b"\nE6\n", b"\nE6 junk\n", "expected end of line"),
    (b"\n#\"run", b"\n#\"run\n", "expected a quoted string"),
    (b"\nf4c27\n", b"\nf4c27x\n", "expected a time line"),
])
def test_garbled_line_names_file_and_line(tmp_path, old, new, expect):
    d = _copy(tmp_path)
    f = d / "ring8.1.events"
    line = _edit(f, old, new) + 1
    with pytest.raises(TraceError) as e:
        _decode(d)
    assert e.value.path == str(f) and e.value.where == f"line {line}" and expect in e.value.message


def test_truncated_file_drops_the_cut_line_with_a_warning(tmp_path):
    """Cut inside a send record: its line has no newline, which OTF's reader takes as the
    end of the file (no record); dropped, and said, naming the byte the line starts at."""
    d = _copy(tmp_path)
    f = d / "ring8.3.events"
    data = f.read_bytes()
    start = data.index(b"\nS", 2000) + 1
    f.write_bytes(data[:start + 3])             # inside a send record
    with pytest.warns(UserWarning) as caught:
        _decode(d)
    assert [str(w.message) for w in caught][0].startswith(
        f"{f}: byte {start}: last line has no newline")


def test_missing_stream_file(tmp_path):
    d = _copy(tmp_path)
    (d / "ring8.5.events").unlink()
    with pytest.raises(TraceError) as e:
        OTF.open(d).units()
    assert e.value.path.endswith("ring8.otf") and e.value.where == "line 5" and "ring8.5.events" in e.value.message


def test_bad_definition_line(tmp_path):
    d = _copy(tmp_path)
    line = _edit(d / "ring8.0.def", b'DP3NM"Process 2"', b'DP3NM"Process 2')
    with pytest.raises(TraceError) as e:
        OTF.open(d).read_definitions()
    assert e.value.where == f"line {line}" and "closing quote" in e.value.message


def test_zlib_stream_without_end_block(tmp_path):
    """.z files: zlib data flushed but never finished (FORMAT-NOTES 1); made here, no real sample."""
    import zlib
    d = _copy(tmp_path)
    for f in list(d.glob("*.events")) + [d / "ring8.0.def"]:
        c = zlib.compressobj()
        Path(str(f) + ".z").write_bytes(c.compress(f.read_bytes()) + c.flush(zlib.Z_SYNC_FLUSH))
        f.unlink()
    _, _, plain = decode_all(DATA / "ring8/trace")
    _, _, packed = decode_all(d, chunk=4096)
    for t in plain:
        for c in plain[t].names:
            assert np.array_equal(plain[t][c], packed[t][c]), (t, c)


def test_long_format_lines(tmp_path):
    """Long records as in FORMAT-NOTES 3/6/7 (no real long sample in the fixtures)."""
    d = _copy(tmp_path)
    (d / "ring8.2.events").write_text(
        "64\n*2\nKEY 1 TYPE 6 VALUE 2a\nENTER 5 SCL 2\nCOLLOP 3 COMM f4241 ROOT 0 SENT 8 RECVD 8 DUR 11\n"
        "LEAVE \nPROCESSBEGIN \nNOOP \n#EVTCOMMENT \"hi\"\n64\n*2\n")
    _, _, t = decode_all(d)
    ev = t["events"].take(np.flatnonzero(t["events"]["location"] == 2))
    assert ev["kind"].tolist() == [Kind.ENTER, Kind.COLLECTIVE, Kind.LEAVE, Kind.PROCESS_BEGIN, Kind.NOOP, Kind.COMMENT]
    assert ev["region"].tolist()[:3] == [5, 0, 0] and ev["scl"][0] == 2 and ev["duration"][1] == 0x11
    assert ev["comm"][1] == 0xF4241 and ev["size"][1] == 8
    kv = t["keyvalues"].take(np.flatnonzero(t["keyvalues"]["location"] == 2))
    assert kv["value"].tolist() == [0x2A] and kv["ref_seq"].tolist() == [0]


# ---- key-value lines: values, and a cost that does not grow with their number ----------------------

_KV_LINES = [b"K1Y6V2a", b"K5YbVdeadbeefL4", b"K5YbVabcL2", b"K2YaV3fe4000000000000", b"K5YbV0L1",
             b"K1Y6V123456789abcdef0123", b"K3Y8Vffffffffffffffff", b"K5YbV" + b"0123456789abcdef" * 9 + b"L48",
             b"KEY 4 TYPE 5 VALUE 7 LEN 0"]


def _with_keyvalues(tmp_path, times: int):
    """ring8 with the _KV_LINES (times over) before every Enter/Leave of every stream."""
    d = _copy(tmp_path, "ring8")
    for f in d.glob("*.events"):
        out = []
        for line in f.read_bytes().split(b"\n"):
            if line.startswith((b"E", b"L")):
                out += _KV_LINES * times
            out.append(line)
        f.write_bytes(b"\n".join(out))
    return d


@pytest.mark.parametrize("chunk", [None, 1000])
def test_keyvalue_values_match_their_hex_text(tmp_path, chunk):
    """Numbers: the last 16 hex digits (the OTF library shifts them into a uint64); byte arrays:
    bytes.fromhex, a leading 0 for an odd digit count; checked against Python on the line texts."""
    import re
    d = _with_keyvalues(tmp_path, 1)
    _, _, t = decode_all(d, chunk)
    kv = t["keyvalues"]
    want = []
    for line in _KV_LINES:
        short = line.replace(b"KEY ", b"K").replace(b" TYPE ", b"Y").replace(b" VALUE ", b"V").replace(b" LEN ", b"L")
        m = re.fullmatch(rb"K([0-9a-f]+)Y([0-9a-f]+)V([0-9a-f]+)(?:L([0-9a-f]+))?", short)
        key, typ, text, length = int(m[1], 16), int(m[2], 16), m[3].decode(), int(m[4] or b"0", 16)
        if typ == 0xB:
            want.append((key, typ, 0, length, bytes.fromhex(text if len(text) % 2 == 0 else "0" + text)))
        else:
            want.append((key, typ, int(text[-16:], 16), length, b""))
    rows = list(zip(kv["key"].tolist(), kv["type"].tolist(), kv["value"].tolist(), kv["length"].tolist(),
                    kv["bytes"].tolist()))
    n_records = sum(1 for f in d.glob("*.events") for l in f.read_bytes().split(b"\n") if l.startswith((b"E", b"L")))
    plain = len(decode_all(DATA / "ring8/trace")[2]["keyvalues"])
    assert len(rows) == plain + n_records * len(_KV_LINES)
    got = {}
    for r in rows:
        got[r] = got.get(r, 0) + 1
    for w in want:
        assert got.get(w, 0) >= n_records, w


def test_keyvalue_decoding_makes_no_python_call_per_keyvalue(tmp_path):
    """cProfile: the same number of Python-level calls for 10x the key-value lines (no timing)."""
    import cProfile
    import pstats
    calls = []
    for times in (1, 10):
        d = _with_keyvalues(tmp_path / str(times), times)
        decode_all(d)                              # numba compile / cache load outside the count
        pr = cProfile.Profile()
        pr.enable()
        _, _, t = decode_all(d)
        pr.disable()
        calls.append((len(t["keyvalues"]), pstats.Stats(pr).total_calls))
    (n1, c1), (n10, c10) = calls
    assert n10 > 9 * n1 > 90000
    assert c10 == c1, calls


def test_an_empty_member_list_is_read_as_the_library_reads_it():
    """OTF writes a group without members as 'M' and then the next field's tag at once
    (each member is written with its ','); the library's reader reads 'MNM' as the two tags
    together, an empty list (OTF_Reader_readDefProcessGroup); 'MN' it rejects."""
    from partrace.formats.otf.textline import keyword_index, parse_line
    index = keyword_index(G.DEF_RECORDS)
    for line, members in ((b'DPG3MNM"MPI_COMM_SELF"', []), (b'DPG4M1,2,NM"pair"', [1, 2]),
                          (b'DEFPROCESSGROUP 3 MEMBERS NAME "none"', [])):
        rec, vals = parse_line(line, index, Path("x.0.def"), 1)
        assert rec.name == "DefProcessGroup" and vals["members"] == members
    rec, vals = parse_line(b'DPG3MNM"MPI_COMM_SELF"', index, Path("x.0.def"), 1)
    assert (vals["token"], vals["name"]) == (3, "MPI_COMM_SELF")
    with pytest.raises(TraceError, match="line 1: expected field tag 'M'"):
        parse_line(b'DPG3MN"x"', index, Path("x.0.def"), 1)

"""OTF writer: otfmerge's stream map, byte-identical rewrite, merged layouts, round trip."""
from __future__ import annotations

import numpy as np
import pytest

from partrace.formats.otf import writer as W
from partrace.formats.otf.files import parse_master
from tests.formats.test_otf_helpers import DATA, decode_all, per_location
from tests.support.otf_write import write_stream

CASES = [("ring8", "merged_n3", 3), ("ring8", "merged_n1", 1), ("hybrid16", "merged_n5", 5),
         ("hybrid16", "merged_n16", 16)]


@pytest.mark.parametrize("name,merged,m", CASES)
def test_stream_map_equals_otfmerge(name, merged, m):
    order = parse_master(DATA / name / "trace" / f"{name}.otf")
    procs = [p for ps in order.values() for p in ps]
    want = parse_master(next((DATA / name / merged).glob("*.otf")))
    assert W.stream_map(procs, m) == want
    if m == 16:
        assert W.stream_map(procs, 0) == want


def _write(tabs, defs, stub, streams):
    W.write_global(stub, defs, streams, tabs["markers"], tabs["keyvalues"])
    for s, procs in streams.items():
        sub = {}
        for t, tab in tabs.items():
            if t == "markers":
                continue
            tt = tab.take(np.flatnonzero(np.isin(tab["location"], procs)))
            sub[t] = tt.take(np.lexsort((tt["seq"], tt["location"], tt["time"])))
        write_stream(stub, s, sub, defs)


@pytest.mark.parametrize("name", ["ring8", "hybrid16"])
def test_original_layout_is_byte_identical(tmp_path, name):
    _, defs, tabs = decode_all(DATA / name / "trace")
    _write(tabs, defs, tmp_path / name, defs.attrs["streams"])
    src = sorted(p.name for p in (DATA / name / "trace").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == src
    for f in src:
        assert (tmp_path / f).read_bytes() == (DATA / name / "trace" / f).read_bytes(), f


def _records(tabs):
    out = {}
    for t, tab in tabs.items():
        cols = [c for c in tab.names if c not in ("seq", "src_order", "time")]
        out[t] = per_location(tab, cols)
    return out


@pytest.mark.parametrize("name,merged,m", CASES)
def test_merged_layout_matches_otfmerge(tmp_path, name, merged, m):
    _, defs, tabs = decode_all(DATA / name / "trace")
    streams = W.stream_map(defs.attrs["process_order"], m)
    stub = tmp_path / f"{name}_x"
    _write(tabs, defs, stub, streams)
    _, _, mine = decode_all(tmp_path)
    _, _, real = decode_all(DATA / name / merged)
    assert _records(mine) == _records(real)
    # the definitions differ from otfmerge's only by the unique id line; the marker file is identical
    ours = (tmp_path / f"{name}_x.0.def").read_text().splitlines()
    theirs = next((DATA / name / merged).glob("*.0.def")).read_text().splitlines()
    assert [l for l in ours if not l.startswith("DUI")] == [l for l in theirs if not l.startswith("DUI")]
    assert (tmp_path / f"{name}_x.0.marker").read_bytes() == next((DATA / name / merged).glob("*.0.marker")).read_bytes()
    # per stream: same processes and the same records in the same file kinds
    assert parse_master(stub.with_suffix(".otf")) == parse_master(next((DATA / name / merged).glob("*.otf")))


def test_read_write_read_gives_identical_tables(tmp_path):
    _, defs, tabs = decode_all(DATA / "hybrid16/trace")
    _write(tabs, defs, tmp_path / "h", W.stream_map(defs.attrs["process_order"], 2))
    _, defs2, tabs2 = decode_all(tmp_path)
    for t in tabs:
        a, b = tabs[t], tabs2[t]
        assert len(a) == len(b), t
        oa = np.lexsort((a["seq"], a["location"]))
        ob = np.lexsort((b["seq"], b["location"]))
        for c in a.names:
            if c != "src_order":
                assert a[c][oa].tolist() == b[c][ob].tolist(), (t, c)
    assert defs2.source[2:] == defs.source[2:] or [r for r in defs2.source if r["type"] != "DefUniqueId"] == \
        [r for r in defs.source if r["type"] != "DefUniqueId"]


def test_strings_are_sanitized_like_the_library():
    from partrace.formats.otf.grammar import BY_NAME, format_record
    line = format_record(BY_NAME["DefProcess"], {"token": 0x10001, "name": 'a "b"\nc', "parent": 1})
    assert line == 'DP10001NM"a  b  c"PT1\n'
    assert format_record(BY_NAME["DefProcess"], {"token": 1, "name": "x", "parent": 0}) == 'DP1NM"x"\n'


def test_records_formatted_by_column_equal_each_formatted_alone():
    """grammar.format_records (the definitions per location, region or communicator) gives
    format_record's lines: every field type, optional fields at 0 and left out, strings the
    library sanitizes."""
    import random
    from partrace.formats.otf import grammar as G
    rng = random.Random(2)
    for name in ("DefProcess", "DefFunction", "DefProcessGroup", "DefCounter", "DefFile",
                 "DefVersion", "DefKeyValue", "DefCollectiveOperation", "DefFunctionGroup"):
        rec = G.BY_NAME[name]
        for _ in range(40):
            n = rng.randint(0, 12)
            cols = {}
            for f in rec.fields:
                if f.ftype == G.STRING:
                    cols[f.col] = [rng.choice(["", 'a "b"', "x\ny", "PE 3", "é"]) for _ in range(n)]
                elif f.ftype == G.MEMBERS:
                    cols[f.col] = [[rng.randint(0, 99) for _ in range(rng.randint(0, 3))] for _ in range(n)]
                elif f.ftype == G.VERSION:
                    cols[f.col] = [[1, 12, 4, "salmon"]] * n
                elif rng.random() < 0.8:    # a number column left out is 0, as format_record's
                    cols[f.col] = [rng.choice([0, 1, 255, 2 ** 40]) for _ in range(n)]
            alone = [G.format_record(rec, {c: v[i] for c, v in cols.items()}) for i in range(n)]
            assert G.format_records(rec, cols, n) == "".join(alone), (name, cols)


def test_default_streams_one_per_location_up_to_the_cap(monkeypatch):
    """Without --streams a non-OTF input gets a stream per location, and beyond
    DEFAULT_MAX_STREAMS locations that many streams in otfmerge's contiguous blocks."""
    from partrace.formats.ross import ROSS
    from partrace.output import otf_sink
    defs = ROSS.open(DATA.parent / "ross" / "pi-np1-seq-allmodes" / "stats").read_definitions()
    ids = [int(x) for x in defs.tables["locations"]["id"]]
    n = len(ids)
    assert n > 3
    monkeypatch.setattr(otf_sink, "DEFAULT_MAX_STREAMS", n)
    assert otf_sink.OTFSink("x.otf")._stream_map(defs) == {s + 1: [p] for s, p in enumerate(ids)}
    monkeypatch.setattr(otf_sink, "DEFAULT_MAX_STREAMS", n - 2)
    capped = otf_sink.OTFSink("x.otf")._stream_map(defs)
    assert capped == W.stream_map(ids, n - 2) and len(capped) == n - 2
    assert otf_sink.OTFSink("x.otf", streams=0)._stream_map(defs) == W.stream_map(ids, 0)


EDGES = [0, 1, 9, 10, 15, 16, 99, 100, 255, 256, 4095, 4096, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1]


def _integers() -> list[int]:
    """Edge values, every power of 2 and 10 and its neighbours, and random ones of every length."""
    rng = np.random.default_rng(5)
    powers = [b**k + d for b, top in ((2, 64), (10, 20), (16, 16)) for k in range(top) for d in (-1, 0, 1)]
    rand = rng.integers(0, 2**63, 3000, dtype=np.int64) >> rng.integers(0, 63, 3000)
    return EDGES + [v for v in powers if 0 <= v < 2**64] + [int(v) * 2 + 1 for v in rand]


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "python"])
def test_hex_and_decimal_digits_are_pythons(compiled):
    """The formatter's integers: hex as format(v, 'x') (every OTF field), decimal as str() (marker
    text), compiled and as plain Python (the kernels' py_func: the writer's kernels are numba's own,
    PARTRACE_JIT does not reach them)."""
    from partrace.formats.otf import writekernel as K
    hex_, dec = (K._hex, K._decimal) if compiled else (K._hex.py_func, K._decimal.py_func)
    out = np.empty(64, np.uint8)
    signed = np.array(_integers(), np.uint64).view(np.int64).tolist()
    for v, s in zip(_integers(), signed):
        for write, want in ((lambda: hex_(out, 5, np.uint64(v)), format(v, "x")),
                            (lambda: dec(out, 5, np.uint64(v), False), str(v)),
                            (lambda: dec(out, 5, np.uint64(v), True), str(s))):
            out[:] = 120                      # 'x': the bytes around the value stay
            end = write()
            assert bytes(out[5:end]) == want.encode(), (v, want)
            assert out[4] == 120 and out[end] == 120, (v, want)


def test_source_order_equals_lexsort_of_ticks_then_source_order():
    """The writer's order of an OTF input's rows (equal ticks in their files' order) sorts
    only the groups of equal ticks whose source order goes down: the same permutation as
    np.lexsort((src_order, ticks)), None exactly when that is the identity."""
    rng = np.random.default_rng(7)
    seen = set()
    for trial in range(600):
        n = int(rng.integers(0, 40))
        ticks = rng.integers(0, int(rng.choice([2, 6, 1000])), n).astype(np.uint64)
        if trial % 4:       # usually in ticks order, as the writer gets them
            ticks = np.sort(ticks)
        src = rng.integers(0, int(rng.choice([2, 50])), n).astype(np.int64)
        if trial % 3 == 0:  # often in order already
            src = src[np.lexsort((src, ticks))]
            ticks = np.sort(ticks)
        want = np.lexsort((src, ticks))
        got = W.source_order(ticks, src)
        if got is None:
            assert np.array_equal(want, np.arange(n))
        else:
            assert np.array_equal(got, want)
        seen.add(got is None)
    assert seen == {True, False}

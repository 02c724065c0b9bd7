"""ROSS reader: real ROSS 8.1.1 output vs the reference decodes and ROSS's own totals."""
from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.ross import ROSS
from partrace.model import Kind, Table

DATA = Path(__file__).resolve().parents[1] / "data" / "ross"
GVT_RUN, EVT_RUN, SEQ_RUN = ("phold-np2-opt-gvt-pekplp", "pi-np2-opt-evtrace-full-model-gvt",
                             "pi-np1-seq-allmodes")
RUNS = (GVT_RUN, EVT_RUN, SEQ_RUN)

# pi model layouts, as the fixture README describes them
PI_DTYPES = {"evtrace": np.dtype([("hops", "<i4"), ("count", "<i4"), ("last_time", "<f4")]),
             "model": np.dtype([("count", "<i8"), ("last_time", "<f8")]),
             "vt_model": np.dtype([("count", "<i8"), ("vt", "<f8")])}


def decode_all(path, **options) -> tuple[dict[str, Table], object, object]:
    reader = ROSS.open(path, **options)
    defs = reader.read_definitions()
    schema = reader.schema(defs)
    parts: dict[str, list] = {t: [] for t in schema}
    for unit in reader.units():
        for chunk in reader.decode(unit, defs):
            for name, table in chunk.items():
                assert table.names == [c.name for c in schema[name]]
                parts[name].append(table)
    return {t: Table.concat(parts[t], schema[t]) for t in schema}, defs, reader


def read_csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# reference CSV column -> our column, where the names differ
RENAME = {"flag": "sample_type", "sample_sz": "sample_size", "model_sz": "model_size",
          "process_event_cycles_UNINITIALIZED": "process_event_cycles"}
REF_TABLES = {"gvt-pe.csv": "gvt_pe", "gvt-kp.csv": "gvt_kp", "gvt-lp.csv": "gvt_lp",
              "evtrace-events.csv": "events", "model-model.csv": None,
              "analysis-lps-vtmodel.csv": "vt_model"}


def check_against_reference(table: Table, rows: list[dict], name: str):
    assert len(table) == len(rows), name
    order = np.argsort(table["offset"])
    t = table.take(order)
    assert t["offset"].tolist() == [int(r["offset"]) for r in rows]
    for ref_col in rows[0]:
        if ref_col == "offset":
            continue
        texts = [r[ref_col] for r in rows]
        if ref_col == "model_data_hex":
            sizes = t["model_data_sz"] if "model_data_sz" in t else (
                t["model_size"] if "model_size" in t else t["sample_size"])
            got = [bytes(row[:n]).hex() for row, n in zip(t["model_data"], sizes)]
            assert got == texts, (name, ref_col)
            continue
        if ref_col == "real_time_UNINITIALIZED_hex":
            got = [v.tobytes().hex() for v in t["real_time"].astype("<f8")]
            assert got == texts, (name, ref_col)
            continue
        col = t[ref_col if ref_col in t else RENAME[ref_col]]
        if col.dtype.kind == "f":
            want = np.array([float(x) for x in texts]).astype(col.dtype)
            np.testing.assert_array_equal(col, want, err_msg=f"{name}:{ref_col}")
        else:
            assert col.tolist() == [int(x) for x in texts], (name, ref_col)


@pytest.mark.parametrize("run", RUNS)
def test_values_match_reference_decodes(run):
    tables, defs, _ = decode_all(DATA / run)
    seen = 0
    for ref in sorted((DATA / run / "reference").glob("*.csv")):
        rows = read_csv(ref)
        name = REF_TABLES[ref.name]
        if name is None:            # the model file holds GVT and RT samples: two tables
            name = {"1": "model_gvt", "2": "model_rt"}[rows[0]["stats_type"]]
            assert {r["stats_type"] for r in rows} == {rows[0]["stats_type"]}
        table = tables[name]
        if name == "events":        # a record is a message: compare its SEND rows
            table = table.take(np.flatnonzero(table["kind"] == Kind.SEND))
        check_against_reference(table, rows, f"{run}/{ref.name}")
        seen += 1
    assert seen >= 2
    # every table we produce is covered by a reference file
    produced = {t for t, tab in tables.items() if len(tab)}
    assert all(any(REF_TABLES.get(r.name) in (t, None) for r in (DATA / run / "reference")
                   .glob("*.csv")) for t in produced)


def stdout_totals(run) -> dict[str, int]:
    text = (DATA / run / "ross-stdout.txt").read_text()
    out = {}
    for key in ("Total Events Processed", "Events Rolled Back", "Total Roll Backs",
                "Secondary Roll Backs", "Fossil Collect Attempts", "Total GVT Computations",
                "Remote sends", "Remote recvs", "Net Events Processed"):
        m = re.search(rf"^\s*{key}\s+(\d+)\s*$", text, re.M)
        if m:
            out[key] = int(m.group(1))
    return out


def lp_processed(run) -> dict[int, int]:
    out = {}
    for f in sorted((DATA / run / "ross_all_lp_stats").glob("pe_*.txt")):
        for m in re.finditer(r"LPID: (\d+)\s.*Events processed: (\d+)", f.read_text()):
            out[int(m.group(1))] = int(m.group(2))
    return out


def test_gvt_samples_agree_with_ross_totals():
    t, defs, _ = decode_all(DATA / GVT_RUN)
    tot = stdout_totals(GVT_RUN)
    summary = read_csv(DATA / GVT_RUN / "ross-summary.csv")[0]
    pe, kp, lp = t["gvt_pe"], t["gvt_kp"], t["gvt_lp"]
    assert int(summary["events_processed"]) == tot["Total Events Processed"]
    # work after the last sampled GVT is not sampled: sums are at most ROSS's totals ...
    assert pe["events_processed"].sum() <= tot["Total Events Processed"]
    assert pe["fossil_collect_attempts"].sum() <= tot["Fossil Collect Attempts"]
    # ... and in this run the rollbacks and remote messages all fell before it
    assert pe["events_rolled_back"].sum() == tot["Events Rolled Back"] == int(summary["events_rb"])
    assert pe["total_rollbacks"].sum() == tot["Total Roll Backs"] == int(summary["rb_total"])
    assert pe["secondary_rollbacks"].sum() == tot["Secondary Roll Backs"]
    assert pe["network_sends"].sum() == tot["Remote sends"] == int(summary["remote_sends"])
    assert pe["network_receives"].sum() == tot["Remote recvs"]
    assert pe["num_gvts"].max() < tot["Total GVT Computations"]      # running total of GVTs
    # PE, KP and LP samples of one round count the same events
    for field in ("events_processed", "events_rolled_back", "network_sends"):
        assert pe[field].sum() == kp[field].sum() == lp[field].sum()
    per_lp = lp_processed(GVT_RUN)
    sums = np.bincount(lp["lp_id"], weights=lp["events_processed"], minlength=len(per_lp))
    assert all(sums[g] <= n for g, n in per_lp.items())
    assert sums.sum() == pe["events_processed"].sum()
    # all samples of one GVT round carry the same virtual_time -> same time key
    assert set(np.unique(pe["time"])) == set(np.unique(lp["time"]))


@pytest.mark.parametrize("run", (EVT_RUN, SEQ_RUN))
def test_event_trace_agrees_with_ross_totals(run):
    t, defs, _ = decode_all(DATA / run, model_dtypes=PI_DTYPES)
    both = t["events"]
    ev = both.take(np.flatnonzero(both["kind"] == Kind.SEND))
    recv = both.take(np.flatnonzero(both["kind"] == Kind.RECV))
    tot = stdout_totals(run)
    assert len(ev) == len(recv) == tot["Total Events Processed"]   # --event-trace=1: every execution
    assert len(both) == 2 * len(ev)
    per_lp = lp_processed(run)
    counts = np.bincount(ev["dest_lp"], minlength=max(per_lp) + 1)
    assert {g: int(counts[g]) for g in per_lp} == per_lp
    lp_loc = dict(zip(defs.tables["lps"]["lp_id"].tolist(), defs.tables["lps"]["location"].tolist()))
    # each record's RECV row: on the destination LP at the receive time; ROSS's
    # per-LP processed counts are the receives each LP handled
    by_offset = np.argsort(recv["offset"], kind="stable")
    assert np.array_equal(recv["offset"][by_offset], np.sort(ev["offset"]))
    recv_per_loc = dict(zip(*np.unique(recv["location"], return_counts=True)))
    assert {g: int(recv_per_loc.get(lp_loc[g], 0)) for g in per_lp} == per_lp
    assert recv["location"].tolist() == [lp_loc[g] for g in recv["dest_lp"].tolist()]
    assert recv["peer"].tolist() == [lp_loc[g] for g in recv["src_lp"].tolist()]
    assert np.array_equal(recv["time"], np.rint(recv["recv_vts"].astype(np.float64) * 1e9))
    assert ev["location"].tolist() == [lp_loc[g] for g in ev["src_lp"].tolist()]
    assert ev["peer"].tolist() == [lp_loc[g] for g in ev["dest_lp"].tolist()]
    assert np.array_equal(ev["time"], np.rint(ev["send_vts"].astype(np.float64) * 1e9))
    # the pi model's event data: last_time is the event's receive time
    has = ev["model_data_sz"] == 12
    np.testing.assert_array_equal(ev["model_last_time"][has], ev["recv_vts"][has])
    if run == SEQ_RUN:      # no rollback: the LP's event count after its last event = its total
        text = (DATA / run / "ross-stdout.txt").read_text()
        model_lp = int(re.search(r"Model LPs.*?Total Events Processed\s+(\d+)", text, re.S).group(1))
        assert has.sum() == model_lp
        for g in np.unique(ev["dest_lp"][has]):
            assert ev["model_count"][has & (ev["dest_lp"] == g)].max() == per_lp[int(g)]


def test_model_samples_decode_with_user_dtype():
    t, _, _ = decode_all(DATA / SEQ_RUN, model_dtypes=PI_DTYPES)
    vt = t["vt_model"]
    np.testing.assert_array_equal(vt["model_vt"], vt["virtual_time"])
    assert np.array_equal(vt["time"], np.rint(vt["virtual_time"] * 1e9))
    rt = t["model_rt"]
    assert np.array_equal(rt["time"], np.rint(rt["real_time"] * 1e9))
    t2, _, _ = decode_all(DATA / EVT_RUN, model_dtypes=PI_DTYPES)
    mg = t2["model_gvt"]
    raw = mg["model_data"].copy().view([("c", "<i8"), ("t", "<f8")]).ravel()
    assert np.array_equal(mg["model_count"], raw["c"]) and np.array_equal(mg["model_last_time"], raw["t"])
    # the final round is taken with GVT = inf: clamped to the largest key
    assert mg["time"][np.isinf(mg["gvt"])].tolist() == [np.iinfo(np.int64).max] * int(np.isinf(mg["gvt"]).sum())


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("region", (24, 100, 1000))
def test_tiny_regions_give_the_same_tables(run, region):
    one, _, r1 = decode_all(DATA / run, region_size=1 << 30)
    many, _, rn = decode_all(DATA / run, region_size=region)
    assert len(r1.units()) == len(r1.files)
    assert len(rn.units()) > len(r1.units())
    _same_tables(in_key_order(one), in_key_order(many))


def in_key_order(tables: dict[str, Table]) -> dict[str, Table]:
    """Each table's rows by (time, location, seq): a region's rows come in the order its
    decode chose (an event region: its SEND rows, then its RECV rows, each in key order),
    so only the set of rows is the same whatever the regions."""
    return {name: t.take(np.lexsort((t["seq"], t["location"], t["time"])))
            for name, t in tables.items()}


def _same_tables(one, other):
    assert list(one) == list(other)
    for name in one:
        assert one[name].names == other[name].names
        for col in one[name].names:
            a, b = one[name][col], other[name][col]
            assert a.dtype == b.dtype and np.array_equal(a, b) if a.dtype != object \
                else list(a) == list(b), (name, col)


def _concat(chunks, schema) -> dict[str, Table]:
    """Decoded chunks, each table's rows one after another."""
    return {t: Table.concat([c[t] for c in chunks if t in c], schema[t]) for t in schema}


def _decoded_shares(reader_of, shares, surveys, defs) -> dict[str, Table]:
    """The engine's decode on len(shares) ranks, in one process: rank r's reader
    (``reader_of(r)``) starts after the surveys of the shares before it and decodes its
    share; every rank's rows, per table."""
    chunks = []
    for r, share in enumerate(shares):
        reader = reader_of(r)
        reader.start_after(_fold(reader, surveys[:r]))
        chunks += [c for u in share for c in reader.decode(u, defs)]
    return _concat(chunks, reader.schema(defs))


def _fold(reader, surveys):
    out = None
    for s in surveys:
        out = s if out is None else reader.combine(out, s)
    return out


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("nranks", (2, 3, 7))
def test_contiguous_shares_decoded_apart_give_the_same_tables(run, nranks):
    """The engine's protocol on N ranks, in one process: each 'rank' surveys its contiguous
    share of small regions, definitions come from the combined surveys, and each rank's
    reader starts after the survey of the shares before it.  Same tables and definitions
    as one reader decoding every unit in order."""
    from partrace.engine.plan import assign_contiguous
    one, defs1, _ = decode_all(DATA / run, region_size=64)
    lister = ROSS.open(DATA / run, region_size=64)
    shares = assign_contiguous(lister.units(), nranks)
    assert sum(map(len, shares)) > nranks          # several regions per file
    surveys = [_fold(lister, [lister.survey(u) for u in share]) for share in shares]
    defs = lister.read_definitions(_fold(lister, reversed(surveys)))   # any grouping
    assert defs.attrs == defs1.attrs and defs.source == defs1.source
    for name, table in defs1.tables.items():
        _same_tables({name: table}, {name: defs.tables[name]})
    got = _decoded_shares(lambda r: ROSS.open(DATA / run, region_size=64), shares, surveys, defs)
    _same_tables(in_key_order(one), in_key_order(got))


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("span", (700, 4096))
def test_joined_shares_decode_to_their_regions_rows(run, span, monkeypatch):
    """Each rank joins its share's consecutive regions of a file into units of at most
    DECODE_SPAN bytes (a region larger than that stays alone); the joined units are
    surveyed and decoded without hopping again (the listing's hops, joined) and give the
    tables of the regions decoded one by one, on each of 3 ranks."""
    from partrace.engine.plan import assign_contiguous
    from partrace.formats.ross import reader as R
    from partrace.formats.ross import scan
    monkeypatch.setattr(R, "DECODE_SPAN", span)
    one, defs, _ = decode_all(DATA / run, region_size=256)
    lister = ROSS.open(DATA / run, region_size=256)
    shares = assign_contiguous(lister.units(), 3)
    hops = []
    real = scan.hop_checked
    monkeypatch.setattr(scan, "hop_checked", lambda *a: hops.append(a[2]) or real(*a))
    joined = [lister.joined(share) for share in shares]
    for share, units in zip(shares, joined):
        assert len(units) < len(share)
        for path in {u.info["path"] for u in share}:
            regions = [(u.info["start"], u.info["end"]) for u in share if u.info["path"] == path]
            spans = [(u.info["start"], u.info["end"], u.size) for u in units
                     if u.info["path"] == path]
            assert spans[0][0] == regions[0][0] and spans[-1][1] == regions[-1][1]
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))     # end to end
            for start, end, size in spans:
                held = sum(start <= a < end for a, _ in regions)
                assert size == end - start and (size <= span or held == 1)
    surveys = [_fold(lister, [lister.survey(u) for u in units]) for units in joined]
    got = _decoded_shares(lambda r: lister, joined, surveys, defs)
    assert hops == []
    _same_tables(in_key_order(one), in_key_order(got))


def test_a_joined_unit_missing_a_regions_hop_hops_once(monkeypatch):
    """Where the listing kept the hops of only some of a joined unit's regions (its cache
    was full), the joined unit hops its whole range once, for its survey and decode."""
    from partrace.formats.ross import scan
    lister = ROSS.open(DATA / EVT_RUN, region_size=512)
    units = lister.units()
    defs = ROSS.open(DATA / EVT_RUN, region_size=512).read_definitions()
    dropped = next(u for u in units[1:] if u.info["start"] > 0)
    del lister._hops[(dropped.info["path"], dropped.info["start"])]
    joined = lister.joined(units)
    hops = []
    real = scan.hop_checked
    monkeypatch.setattr(scan, "hop_checked", lambda *a: hops.append(a[2:4]) or real(*a))
    for u in joined:
        lister.survey(u)
    lister.start_after(None)
    got = [chunk for u in joined for chunk in lister.decode(u, defs)]
    holder = next(u for u in joined if u.info["path"] == dropped.info["path"]
                  and u.info["start"] <= dropped.info["start"] < u.info["end"])
    assert hops == [(holder.info["start"], holder.info["end"])]
    monkeypatch.undo()
    fresh = ROSS.open(DATA / EVT_RUN, region_size=512)
    fresh.start_after(None)
    want = [chunk for u in units for chunk in fresh.decode(u, defs)]
    schema = fresh.schema(defs)
    _same_tables(in_key_order(_concat(got, schema)), in_key_order(_concat(want, schema)))


@pytest.mark.parametrize("run", (EVT_RUN, SEQ_RUN))
def test_contiguous_shares_hold_the_same_stretch_of_every_file(run):
    """Unit keys interleave the files by how far into its file a region lies: a rank's
    contiguous share is a stretch of every file (its time, for files written in time
    order), not whole files; each file's regions stay in file order."""
    from partrace.engine.plan import assign_contiguous
    reader = ROSS.open(DATA / run, region_size=256)
    units = reader.units()
    assert len(reader.files) >= 2
    for path in reader.files:       # each file's regions in file order
        starts = [u.info["start"] for u in units if u.info["path"] == str(path)]
        assert starts == sorted(starts) and len(starts) > 4
    first, second = assign_contiguous(units, 2)
    for path in map(str, reader.files):
        mine = [u.info["start"] for u in first if u.info["path"] == path]
        rest = [u.info["start"] for u in second if u.info["path"] == path]
        assert mine and rest and max(mine) < min(rest)      # the file's first part, the rest
        size = Path(path).stat().st_size
        assert abs(max(mine) - size // 2) <= size // 4          # about half of every file


def test_a_region_surveyed_here_is_hopped_once(monkeypatch):
    """A rank that did not list the units hops each of its regions once, for both its
    survey and its decode (the hop is kept), and decodes what a fresh reader does."""
    from partrace.formats.ross import scan
    lister = ROSS.open(DATA / EVT_RUN, region_size=512)
    units = lister.units()
    defs = lister.read_definitions()
    hops = []
    real = scan.hop_checked
    monkeypatch.setattr(scan, "hop_checked", lambda *a: hops.append(a[2]) or real(*a))
    rank = ROSS.open(DATA / EVT_RUN, region_size=512)
    for u in units:
        rank.survey(u)
    rank.start_after(None)      # its share is every unit: none before it
    got = [chunk for u in units for chunk in rank.decode(u, defs)]
    assert sorted(hops) == sorted(u.info["start"] for u in units)
    monkeypatch.undo()
    fresh = ROSS.open(DATA / EVT_RUN, region_size=512)
    fresh.start_after(None)
    want = [chunk for u in units for chunk in fresh.decode(u, defs)]
    assert len(got) == len(want)
    for a, b in zip(got, want):
        _same_tables(a, b)


@pytest.mark.parametrize("run", (GVT_RUN, SEQ_RUN))
def test_units_decoded_out_of_order_number_their_records_alike(run):
    reader = ROSS.open(DATA / run, region_size=200)
    defs = reader.read_definitions()
    units = reader.units()
    in_order = [next(reader.decode(u, defs)) for u in units]
    fresh = ROSS.open(DATA / run, region_size=200)
    backwards = [next(fresh.decode(u, defs)) for u in reversed(units)][::-1]
    for a, b in zip(in_order, backwards):
        _same_tables(a, b)


def met_log(monkeypatch) -> list:
    """Whether each hop of the ROSS listing from a true entry met the piece's own chain (the
    index it met at; None: never)."""
    from partrace.formats.ross import listing
    met, real = [], listing.walk

    def walk(*a, **k):
        got = real(*a, **k)
        if k.get("join") is not None:
            met.append(got[1])
        return got
    monkeypatch.setattr(listing, "walk", walk)
    return met


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("nranks", (1, 2, 3, 7, 16))
@pytest.mark.parametrize("region", (97, 256, 4096))
def test_listing_in_parts_gives_the_serial_listing(run, nranks, region, monkeypatch):
    """Each rank hops the regions the engine will most likely deal it from a plausible
    record start (list_part); the parts, checked in file order (units_from), are the units
    one reader lists by hopping every file from byte 0."""
    from partrace.formats.ross import listing
    whole = [(u.key, u.size, u.info) for u in ROSS.open(DATA / run, region_size=region).units()]
    readers = [ROSS.open(DATA / run, region_size=region) for _ in range(nranks)]
    parts = [r.list_part(rank, nranks) for rank, r in enumerate(readers)]
    for r in readers:
        got = r.units_from(parts)
        assert [(u.key, u.size, u.info) for u in got] == whole
    # each rank's pieces in file order; each file's regions once, in rank order
    files = [str(f) for f in readers[0].files]
    for part in parts:
        assert [p.path for p in part] == sorted((p.path for p in part), key=files.index)
    for f in files:
        mine = [(p.first, p.stop) for part in parts for p in part if p.path == f]
        assert mine[0][0] == 0 and all(x[1] == y[0] for x, y in zip(mine, mine[1:]))
        assert mine[-1][1] * region >= Path(f).stat().st_size > (mine[-1][1] - 1) * region
    # real ROSS output: where a speculative chain does not run through the true entry, the
    # true chain meets it within its head (no piece is hopped again whole)
    met = met_log(monkeypatch)
    list(listing.verified_files(parts, region))
    assert None not in met


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("nranks", (2, 3))
@pytest.mark.parametrize("region", (97, 256))
def test_a_rank_lists_about_the_regions_it_decodes(run, nranks, region):
    """The listing deals the regions as the engine deals the units (dealing.py): only
    regions at a rank's edge, which the units' true sizes move, were listed by a
    neighbour of their owner (and are handed over)."""
    from partrace.engine.plan import share_of
    readers = [ROSS.open(DATA / run, region_size=region) for _ in range(nranks)]
    parts = [r.list_part(rank, nranks) for rank, r in enumerate(readers)]
    units = readers[0].units_from(parts)
    lister = {(p.path, k): rank for rank, part in enumerate(parts) for p in part
              for k in range(p.first, p.stop)}
    pairs = [(lister[u.info["path"], int(u.key.rsplit(":", 1)[1])], owner)
             for owner, share in enumerate(share_of(readers[0], units, nranks)) for u in share]
    moved = [(a, b) for a, b in pairs if a != b]
    assert len(pairs) == len(units) and len(moved) <= 2 * (nranks - 1)
    assert all(abs(a - b) == 1 for a, b in moved)


def test_hops_listed_on_every_rank_go_to_the_regions_owners(monkeypatch):
    """Two ranks list one part each, here the part the other decodes (a rank lists about
    its own: listing.pieces_of); each hands the other the hops of the other's share (the
    engine's alltoall), so neither hops again to survey or decode, and each decodes what
    a reader that hopped itself does."""
    from partrace.engine.plan import share_of
    from partrace.formats.ross import scan
    readers = [ROSS.open(DATA / EVT_RUN, region_size=512) for _ in range(2)]
    parts = [readers[1].list_part(0, 2), readers[0].list_part(1, 2)]
    assert parts[0] and parts[1]
    units = readers[0].units_from(parts)
    shares = share_of(readers[0], units, 2)
    handed = [[r.hand_over(share) if rank != me else None for rank, share in enumerate(shares)]
              for me, r in enumerate(readers)]
    for me, r in enumerate(readers):
        for sender in range(2):
            if handed[sender][me] is not None:
                r.take_over(handed[sender][me])
    assert handed[0][1] and handed[1][0]        # each rank listed regions the other owns
    defs = ROSS.open(DATA / EVT_RUN).read_definitions()
    hops = []
    real = scan.hop_checked
    monkeypatch.setattr(scan, "hop_checked", lambda *a: hops.append(a[2]) or real(*a))
    surveys = [[r.survey(u) for u in share] for r, share in zip(readers, shares)]
    readers[0].start_after(None)
    readers[1].start_after(_fold(readers[1], surveys[0]))
    got = [chunk for r, share in zip(readers, shares) for u in share for chunk in r.decode(u, defs)]
    assert hops == []
    monkeypatch.undo()
    want = []
    for rank, share in enumerate(shares):
        fresh = ROSS.open(DATA / EVT_RUN, region_size=512)
        fresh.start_after(_fold(fresh, surveys[0]) if rank else None)
        want += [chunk for u in share for chunk in fresh.decode(u, defs)]
    assert len(got) == len(want) > 0
    for a, b in zip(got, want):
        _same_tables(a, b)


def test_the_listing_ranks_hops_go_to_the_regions_owners(monkeypatch):
    """Rank 0 hops every region to list them; it hands each other rank the hops of that
    rank's share (and forgets them), so the owner surveys and decodes without hopping,
    and decodes what a reader that hopped itself does."""
    from partrace.engine.plan import share_of
    from partrace.formats.ross import scan
    lister = ROSS.open(DATA / EVT_RUN, region_size=512)
    units = lister.units()
    defs = ROSS.open(DATA / EVT_RUN, region_size=512).read_definitions()   # lister's hops kept
    shares = share_of(lister, units, 2)
    assert shares[1]
    before = None
    for u in shares[0]:     # the survey of every unit before the share (the engine's exscan)
        s = ROSS.open(DATA / EVT_RUN, region_size=512).survey(u)
        before = s if before is None else lister.combine(before, s)
    handed = lister.hand_over(shares[1])
    assert sorted(handed) == sorted((u.info["path"], u.info["start"]) for u in shares[1])
    assert not set(handed) & set(lister._hops)
    hops = []
    real = scan.hop_checked
    monkeypatch.setattr(scan, "hop_checked", lambda *a: hops.append(a[2]) or real(*a))
    owner = ROSS.open(DATA / EVT_RUN, region_size=512)
    owner.take_over(handed)
    surveys = [owner.survey(u) for u in shares[1]]
    owner.start_after(before)
    got = [chunk for u in shares[1] for chunk in owner.decode(u, defs)]
    assert hops == [] and len(surveys) == len(shares[1])
    monkeypatch.undo()
    fresh = ROSS.open(DATA / EVT_RUN, region_size=512)
    fresh.start_after(before)
    want = [chunk for u in shares[1] for chunk in fresh.decode(u, defs)]
    assert len(got) == len(want) > 0
    for a, b in zip(got, want):
        _same_tables(a, b)


@pytest.mark.parametrize("run", RUNS)
def test_seq_counts_per_location_in_file_order(run):
    tables, _, _ = decode_all(DATA / run, region_size=64)
    for name, t in tables.items():
        order = np.argsort(t["offset"], kind="stable")
        loc, seq = t["location"][order], t["seq"][order]
        for l in np.unique(loc):
            assert seq[loc == l].tolist() == list(range(int((loc == l).sum()))), name


def _ascending_keys(t: Table) -> bool:
    """Rows strictly ascending by (time, location, seq)."""
    order = np.lexsort((t["seq"], t["location"], t["time"]))
    return np.array_equal(order, np.arange(len(t))) and not (
        (np.diff(t["time"]) == 0) & (np.diff(t["location"]) == 0) & (np.diff(t["seq"]) == 0)).any()


@pytest.mark.parametrize("run", (EVT_RUN, SEQ_RUN))
@pytest.mark.parametrize("region", (1 << 30, 1000))
def test_event_regions_decode_into_one_sorted_run_per_side(run, region):
    """An event-trace region is two chunks, its SEND rows then its RECV rows, each
    already in key order (the engine then keeps each as one run, with no sort)."""
    reader = ROSS.open(DATA / run, region_size=region)
    defs = reader.read_definitions()
    sides = []
    for unit in reader.units():
        chunks = [c["events"] for c in reader.decode(unit, defs) if "events" in c]
        if not chunks:
            continue
        assert [set(c["kind"].tolist()) for c in chunks] == [{Kind.SEND}, {Kind.RECV}]
        assert all(_ascending_keys(c) for c in chunks)
        # the two sides hold the same records
        assert np.array_equal(np.sort(chunks[0]["offset"]), np.sort(chunks[1]["offset"]))
        sides.append(len(chunks[0]))
    assert sum(sides) == len(decode_all(DATA / run)[0]["events"]) // 2


def test_event_times_clamped_to_the_largest_key_sort_last(tmp_path):
    """A receive time of inf (the key's largest value) makes the side's time range too
    wide for one combined sort key: the rows are still in key order, that row last."""
    from partrace.formats.ross.decode import key_order
    f = _copy(tmp_path, EVT_RUN, "ross-stats-evtrace.bin")
    clean, _, _ = decode_all(DATA / EVT_RUN)
    send = clean["events"].take(np.flatnonzero(clean["events"]["kind"] == Kind.SEND))
    first = send.take(np.argsort(send["offset"])[:2])       # two records, by their offsets
    b = bytearray(f.read_bytes())
    for off in first["offset"].tolist():                     # recv_vts at byte 12: inf
        b[off + 12:off + 16] = np.array([np.inf], "<f4").tobytes()
    f.write_bytes(bytes(b))
    reader = ROSS.open(f)
    defs = reader.read_definitions()
    (unit,) = reader.units()
    send_rows, recv_rows = (c["events"] for c in reader.decode(unit, defs))
    assert _ascending_keys(send_rows) and _ascending_keys(recv_rows)
    top = np.iinfo(np.int64).max
    assert recv_rows["time"][-2:].tolist() == [top, top]
    assert sorted(recv_rows["offset"][-2:].tolist()) == sorted(first["offset"].tolist())
    # the same order as a lexsort over (time, LP, file order), with and without the clamp
    times = np.rint(send["send_vts"].astype(np.float64) * 1e9).astype(np.int64)[
        np.argsort(send["offset"])]
    lps = send["src_lp"][np.argsort(send["offset"])]
    for t in (times, np.where(np.arange(len(times)) == 5, top, times)):
        assert np.array_equal(key_order(t, lps), np.lexsort((np.arange(len(t)), lps, t)))


def test_definitions_locations():
    _, defs, _ = decode_all(DATA / EVT_RUN)
    loc = defs.tables["locations"]
    ids = loc["id"]
    assert len(set(ids.tolist())) == len(ids) and ids.min() == 1
    a = defs.attrs
    assert (a["npe"], a["nkp"], a["nlp"]) == (2, 8, 16)     # 2 PEs x 4 KPs each, 16 LPs
    assert len(ids) == a["npe"] + a["nkp"] + a["nlp"]
    parent = dict(zip(loc["name"].tolist(), loc["parent"].tolist()))
    by_name = dict(zip(loc["name"].tolist(), ids.tolist()))
    for g in range(16):          # linear mapping: LP g lives on rank g // 8 (fixture README)
        assert parent[f"LP {g}"] == by_name[f"PE {g // 8}"]
    assert parent["KP 1.3"] == by_name["PE 1"] and parent["PE 0"] == 0
    assert a["files"]["evtrace"]["records"] == {"events": 499}
    assert a["files"]["model"]["records"] == {"model_gvt": 48}


def test_run_without_event_trace_has_empty_events():
    t, defs, reader = decode_all(DATA / GVT_RUN)
    assert len(t["events"]) == 0 and list(reader.schema(defs))[0] == "events"
    assert defs.attrs["modes"] == {"gvt": "GVT-based engine sampling"}


def test_variable_model_sizes_become_bytes(tmp_path):
    # two evtrace records with 12 and 4 bytes of model data (to LPs of two model types:
    # ROSS writes one size per destination LP)
    rec = lambda n, dest: (np.array([1, dest], "<u4").tobytes()
                           + np.array([0.5, 1.5, 7.0], "<f4").tobytes()
                           + np.array([n], "<u4").tobytes() + bytes(range(n)))
    (tmp_path / "x-evtrace.bin").write_bytes(rec(12, 2) + rec(4, 3))
    t, defs, _ = decode_all(tmp_path)
    assert defs.attrs["model_data_width"]["events"] == "variable"
    ev = t["events"]
    assert list(ev["model_data"][ev["kind"] == Kind.SEND]) == [bytes(range(12)), bytes(range(4))]


def test_sniff():
    for run in RUNS:
        assert ROSS.sniff(DATA / run) and ROSS.sniff(DATA / run / "stats")
        for f in (DATA / run / "stats").glob("*.bin"):
            assert ROSS.sniff(f)
    assert not ROSS.sniff(DATA / GVT_RUN / "reference")
    assert not ROSS.sniff(DATA / GVT_RUN / "ross-stdout.txt")


def _copy(tmp_path, run, name) -> Path:
    dst = tmp_path / name
    shutil.copy(DATA / run / "stats" / name, dst)
    dst.chmod(0o644)
    return dst


def _error(path, **options) -> TraceError:
    with pytest.raises(TraceError) as e:
        decode_all(path, **options)
    return e.value


def test_truncated_file(tmp_path):
    f = _copy(tmp_path, EVT_RUN, "ross-stats-evtrace.bin")
    f.write_bytes(f.read_bytes()[:-10])                  # last record (36 B at 17928) cut
    e = _error(f)
    assert e.path == str(f) and e.where == "byte 17928" and "past the end" in e.message
    f.write_bytes(f.read_bytes()[:17928 + 10])           # header itself cut
    e = _error(f)
    assert e.where == "byte 17928" and "truncated" in e.message


def test_size_field_past_end(tmp_path):
    f = _copy(tmp_path, EVT_RUN, "ross-stats-evtrace.bin")
    b = bytearray(f.read_bytes())
    b[36 + 20:36 + 24] = np.array([1 << 20], "<u4").tobytes()     # 2nd record's model_data_sz
    f.write_bytes(bytes(b))
    e = _error(f, region_size=100)
    assert e.where == "byte 36" and "past the end" in e.message


def test_unknown_sample_type(tmp_path):
    f = _copy(tmp_path, GVT_RUN, "ross-stats-gvt.bin")
    b = bytearray(f.read_bytes())
    b[128:132] = np.array([7], "<i4").tobytes()          # the first KP sample's type
    f.write_bytes(bytes(b))
    e = _error(f)
    assert e.path == str(f) and e.where == "byte 128" and "unknown sample type 7" in e.message
    g = _copy(tmp_path, SEQ_RUN, "ross-stats-model.bin")
    b = bytearray(g.read_bytes())
    b[64 + 40:64 + 44] = np.array([9], "<i4").tobytes()  # 2nd model record's stats_type
    g.write_bytes(bytes(b))
    e = _error(g)
    assert e.where == "byte 104" and "stats_type 9" in e.message


def test_rt_file_and_mixed_analysis_lps_file(tmp_path):
    """No fixture run writes an rt file or engine samples in analysis-lps (sequential
    ROSS does not): build them from real records and check they decode the same."""
    gvt = (DATA / GVT_RUN / "stats" / "ross-stats-gvt.bin").read_bytes()
    vt = (DATA / SEQ_RUN / "stats" / "ross-stats-analysis-lps.bin").read_bytes()
    (tmp_path / "r-rt.bin").write_bytes(gvt)
    # PE sample, 2 VT model samples, KP sample, LP sample, VT model sample
    (tmp_path / "r-analysis-lps.bin").write_bytes(
        gvt[0:128] + vt[0:128] + gvt[128:196] + gvt[400:472] + vt[128:192])
    ref, _, _ = decode_all(DATA / GVT_RUN)
    vref, _, _ = decode_all(DATA / SEQ_RUN)
    t, defs, _ = decode_all(tmp_path, region_size=50)
    assert set(defs.attrs["modes"]) == {"rt", "analysis-lps"}
    for part in ("pe", "kp", "lp"):
        rt = t[f"rt_{part}"]
        for col in ("offset", "pe_id", "events_processed", "efficiency", "virtual_time"):
            assert np.array_equal(rt[col], ref[f"gvt_{part}"][col])
        assert np.array_equal(rt["time"], np.rint(rt["real_time"] * 1e9))
        v = t[f"vt_{part}"]
        assert len(v) == 1 and v["pe_id"][0] == ref[f"gvt_{part}"]["pe_id"][0]
        assert v["events_processed"][0] == ref[f"gvt_{part}"]["events_processed"][0]
        assert v["time"][0] == ref[f"gvt_{part}"]["time"][0]
    assert t["vt_model"]["offset"].tolist() == [128, 192, 396]
    assert np.array_equal(t["vt_model"]["model_data"], vref["vt_model"]["model_data"][:3])
    assert t["vt_model"]["lp_id"].tolist() == vref["vt_model"]["lp_id"][:3].tolist()


def test_disabled_output_run_and_bad_option(tmp_path):
    # --disable-output=1: ROSS creates the files but writes nothing
    for kind in ("gvt", "evtrace", "model"):
        (tmp_path / f"ross-stats-{kind}.bin").write_bytes(b"")
    assert ROSS.sniff(tmp_path)
    t, defs, reader = decode_all(tmp_path)
    assert reader.units() == [] and list(t) == ["events"] and len(t["events"]) == 0
    assert len(defs.tables["locations"]) == 0
    with pytest.raises(ValueError, match="unknown table"):
        ROSS.open(DATA / EVT_RUN, model_dtypes={"evtrce": PI_DTYPES["evtrace"]})


def test_bad_vt_model_flag(tmp_path):
    f = _copy(tmp_path, SEQ_RUN, "ross-stats-analysis-lps.bin")
    b = bytearray(f.read_bytes())
    b[64 + 44:64 + 48] = np.array([5], "<i4").tobytes()
    f.write_bytes(bytes(b))
    e = _error(f)
    assert e.where == "byte 108" and "flag 5" in e.message

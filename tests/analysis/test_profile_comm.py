"""`partrace profile` and `partrace comm` against independent computations:
- dumpi2ascii's own text beside the DUMPI fixtures (call times, send destinations);
- a plain-Python walk over the events of partrace's HDF5 output (pandas), for every format;
on 1 and 3 ranks (the CLI under mpiexec), exactly."""
from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter, defaultdict

import h5py
import numpy as np
import pytest

from partrace import analysis
from tests.conftest import DATA, run_cli

TRACES = {
    "otf-ring8": DATA / "otf" / "ring8" / "trace" / "ring8.otf",
    "otf-hybrid16": DATA / "otf" / "hybrid16" / "trace" / "hybrid16.otf",
    "dumpi-p2p": DATA / "dumpi" / "p2p-4rank",
    "dumpi-coll": DATA / "dumpi" / "coll-4rank",
    "ovni-v3": DATA / "ovni" / "v3-mpisim-small" / "ovni",
    "ovni-v1": DATA / "ovni" / "v1-zoo-small" / "ovni",
    "ross-evtrace": DATA / "ross" / "pi-np2-opt-evtrace-full-model-gvt" / "stats",
}
SEND_CALLS = {"MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Isend", "MPI_Issend",
              "MPI_Ibsend", "MPI_Irsend", "MPI_Sendrecv", "MPI_Sendrecv_replace"}
ENTER, LEAVE, SEND = 1, 2, 3


def _ns(text: str) -> int:
    sec, frac = text.split(".")
    return int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])


def _dumpi_ascii_calls(folder):
    """(rank, function) -> (calls, summed inclusive ns); (rank, dest) -> sends; from dumpi2ascii."""
    calls, sends = defaultdict(lambda: [0, 0]), Counter()
    for txt in sorted(folder.glob("*.txt")):
        rank = int(txt.stem.rsplit("-", 1)[1])
        open_call = None
        for line in txt.read_text().splitlines():
            m = re.match(r"(MPI_\w+) (entering|returning) at walltime ([\d.]+)", line)
            if m:
                if m.group(2) == "entering":
                    open_call = (m.group(1), _ns(m.group(3)))
                else:
                    name, t0 = open_call
                    c = calls[(rank, name)]
                    c[0] += 1
                    c[1] += _ns(m.group(3)) - t0
                    open_call = None
                continue
            m = re.match(r"int dest=(-?\d+)", line)
            if m and open_call and open_call[0] in SEND_CALLS and int(m.group(1)) >= 0:
                sends[(rank, int(m.group(1)))] += 1
    return calls, sends


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    """The HDF5 merge of each trace (made once)."""
    out = {}
    d = tmp_path_factory.mktemp("h5")
    for name, path in TRACES.items():
        r = run_cli(["merge", str(path), "-o", str(d / f"{name}.h5"), "-q"])
        assert r.returncode == 0, r.stderr
        out[name] = d / f"{name}.h5"
    return out


def _events(h5):
    with h5py.File(h5, "r") as f:
        ev = {c: f["events"][c][()] for c in ("time", "location", "seq", "kind", "region")}
        extra = {c: f["events"][c][()] for c in ("peer", "size") if c in f["events"]}
        names = dict(zip(f["regions"]["id"][()].tolist(),
                         [n.decode() if isinstance(n, bytes) else n for n in f["regions"]["name"][()]]))
    return {**ev, **extra}, names


def _walk_profile(ev):
    """Per region id: [calls, inclusive, exclusive], walking each location's rows in
    (time, seq) order with a list as the stack."""
    out = defaultdict(lambda: [0, 0, 0])
    order = np.lexsort((ev["seq"], ev["time"], ev["location"]))
    stacks = defaultdict(list)
    unmatched = 0
    for i in order.tolist():
        k, loc, t = int(ev["kind"][i]), int(ev["location"][i]), int(ev["time"][i])
        st = stacks[loc]
        if k == ENTER:
            st.append([int(ev["region"][i]), t, 0])
        elif k == LEAVE:
            if not st:
                unmatched += 1
                continue
            reg, t0, child = st.pop()
            inc = t - t0
            o = out[reg]
            o[0] += 1
            o[1] += inc
            o[2] += inc - child
            if st:
                st[-1][2] += inc
    return out, unmatched, sum(len(s) for s in stacks.values())


@pytest.mark.parametrize("name", list(TRACES))
def test_profile_equals_a_plain_walk_of_the_merged_events(name, merged):
    ev, names = _events(merged[name])
    want, unmatched, still_open = _walk_profile(ev)
    got = analysis.profile(TRACES[name])
    assert got["unmatched"] == {"leave": unmatched, "enter": still_open}
    table = {r["region_id"]: (r["calls"], r["inclusive_ns"], r["exclusive_ns"]) for r in got["regions"]}
    assert table == {reg: tuple(v) for reg, v in want.items()}
    for r in got["regions"]:
        assert r["region"] == names.get(r["region_id"], r["region"])
    if name.startswith("ross"):
        assert table == {}          # ROSS records messages, not regions


@pytest.mark.parametrize("name", list(TRACES))
def test_comm_equals_pandas_on_the_merged_events(name, merged):
    pd = pytest.importorskip("pandas")
    ev, _ = _events(merged[name])
    df = pd.DataFrame({"kind": ev["kind"], "sender": ev["location"], "receiver": ev.get("peer", 0),
                       "bytes": ev["size"].astype(np.int64) if "size" in ev else 0})
    df = df[(df.kind == SEND) & (df.receiver != 0)]
    want = df.groupby(["sender", "receiver"]).agg(messages=("kind", "size"), bytes=("bytes", "sum"))
    got = analysis.communication(TRACES[name])
    table = {(p["sender_id"], p["receiver_id"]): (p["messages"], p["bytes"]) for p in got["pairs"]}
    assert table == {k: (int(v.messages), int(v.bytes)) for k, v in want.iterrows()}
    assert sum(h["messages"] for h in got["histogram"]) == len(df)
    for h in got["histogram"]:
        sel = df[(df.bytes >= h["low"]) & (df.bytes < h["high"])]
        assert (h["messages"], h["bytes"]) == (len(sel), int(sel.bytes.sum()))


@pytest.mark.parametrize("name", ["dumpi-p2p", "dumpi-coll"])
def test_dumpi_profile_and_messages_equal_dumpi2ascii(name):
    calls, sends = _dumpi_ascii_calls(TRACES[name])
    got = analysis.profile(TRACES[name], per_location=True)
    mine = {(r["location_id"] - 1, r["region"]): (r["calls"], r["inclusive_ns"]) for r in got["locations"]}
    assert mine == {k: tuple(v) for k, v in calls.items()}
    pairs = analysis.communication(TRACES[name])["pairs"]
    assert {(p["sender_id"] - 1, p["receiver_id"] - 1): p["messages"] for p in pairs} == dict(sends)


def _cli_rows(args, nranks):
    r = run_cli(args, nranks=nranks)
    assert r.returncode == 0, r.stderr
    return list(csv.DictReader(io.StringIO(r.stdout)))


@pytest.mark.mpi
@pytest.mark.parametrize("name", ["otf-hybrid16", "dumpi-p2p", "ovni-v3"])
def test_cli_csv_is_the_same_on_1_and_3_ranks(name):
    path = str(TRACES[name])
    prof = [_cli_rows(["profile", path, "--csv"], n) for n in (None, 3)]
    assert prof[0] == prof[1] and prof[0]
    assert {"region", "calls", "inclusive_ns", "exclusive_ns"} <= set(prof[0][0])
    want = {r["region_id"]: r for r in analysis.profile(path)["regions"]}
    for row in prof[0]:
        w = want[int(row["region_id"])]
        assert (row["region"], int(row["calls"]), int(row["inclusive_ns"]), int(row["exclusive_ns"])) == \
            (w["region"], w["calls"], w["inclusive_ns"], w["exclusive_ns"])
    comm = [_cli_rows(["comm", path, "--csv"], n) for n in (None, 3)]
    assert comm[0] == comm[1]
    if comm[0]:
        assert list(comm[0][0]) == ["sender_id", "receiver_id", "sender", "receiver", "messages", "bytes"]


def test_json_output_and_text_output():
    path = str(TRACES["otf-ring8"])
    r = run_cli(["profile", path, "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["regions"] == sorted(doc["regions"], key=lambda x: (-x["exclusive_ns"], x["region"]))
    r = run_cli(["comm", path])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("messages: 320 in 8 sender/receiver pairs")


@pytest.mark.parametrize("name", ["ross-evtrace", "otf-hybrid16"])
def test_comm_by_process_sums_the_pairs_of_their_locations(name):
    by_loc = analysis.communication(TRACES[name])
    by_proc = analysis.communication(TRACES[name], by="process")
    import partrace
    locs = partrace.open(TRACES[name]).definitions.tables["locations"]
    parent = dict(zip(locs["id"].tolist(), locs["parent"].tolist()))

    def top(x):
        while parent.get(x, 0):
            x = parent[x]
        return x
    want = Counter()
    for p in by_loc["pairs"]:
        want[(top(p["sender_id"]), top(p["receiver_id"]))] += p["messages"]
    assert {(p["sender_id"], p["receiver_id"]): p["messages"] for p in by_proc["pairs"]} == dict(want)
    assert sum(want.values()) == sum(p["messages"] for p in by_loc["pairs"]) > 0


def test_python_api_gives_dataframes_with_names():
    pytest.importorskip("pandas")
    import partrace
    t = partrace.open(TRACES["dumpi-p2p"])
    prof = t.profile()
    want = analysis.profile(TRACES["dumpi-p2p"])["regions"]
    assert set(prof["region"]) == {r["region"] for r in want}
    assert int(prof["calls"].sum()) == sum(r["calls"] for r in want)
    assert list(prof["exclusive_ns"]) == sorted(prof["exclusive_ns"], reverse=True)
    m = t.comm_matrix()
    pairs = analysis.communication(TRACES["dumpi-p2p"])["pairs"]
    assert list(m.columns) == ["sender_id", "receiver_id", "sender", "receiver", "messages", "bytes"]
    assert m.to_dict("records") == pairs
    h = t.message_histogram()
    assert int(h["messages"].sum()) == sum(p["messages"] for p in pairs)
    assert list(t.collectives()["collective"]) == ["MPI_Barrier"]
    assert len(t.profile(per_location=True)) >= len(prof)


@pytest.mark.parametrize("name", list(TRACES))
def test_profile_by_fold_equals_profile_by_exchange(name):
    """The fold (no exchange, no global order) gives the figures of the routed walk."""
    folded = analysis.profile(TRACES[name], per_location=True)
    routed = analysis.profile(TRACES[name], per_location=True, exchange=True)
    assert folded == routed
    assert bool(routed["regions"]) == (not name.startswith("ross"))


@pytest.mark.parametrize("name", ["otf-hybrid16", "dumpi-coll", "ovni-v1", "ovni-v3"])
def test_profile_of_hdf5_cut_in_small_units_joins_them(name, merged, monkeypatch):
    """A partrace HDF5 file cut into units of a few rows: every location's stacks cross
    unit edges (the units' fragments are joined); the figures are those of the trace and of
    a plain walk of the file's rows."""
    import partrace.formats.hdf5 as H
    ev, _ = _events(merged[name])
    want, unmatched, still_open = _walk_profile(ev)
    monkeypatch.setattr(H, "ROWS_PER_UNIT", 7)
    assert len(H.HDF5.open(merged[name]).units()) > 10
    got = analysis.profile(merged[name], per_location=True)
    assert got == analysis.profile(TRACES[name], per_location=True)
    assert got["unmatched"] == {"leave": unmatched, "enter": still_open}
    assert {r["region_id"]: (r["calls"], r["inclusive_ns"], r["exclusive_ns"]) for r in got["regions"]} \
        == {reg: tuple(v) for reg, v in want.items()}


@pytest.mark.mpi
def test_ross_comm_in_small_regions_is_the_same_on_1_and_3_ranks(merged):
    """ROSS byte regions of 4 KiB (a location's rows in many units, spread over ranks)."""
    pd = pytest.importorskip("pandas")
    path = str(TRACES["ross-evtrace"])
    args = ["comm", path, "--csv", "--reader-option", "region_size=4096"]
    rows = [_cli_rows(args, n) for n in (None, 3)]
    assert rows[0] == rows[1]
    ev, _ = _events(merged["ross-evtrace"])
    df = pd.DataFrame({"kind": ev["kind"], "s": ev["location"], "r": ev["peer"]})
    want = df[(df.kind == SEND) & (df.r != 0)].groupby(["s", "r"]).size()
    assert {(int(r["sender_id"]), int(r["receiver_id"])): int(r["messages"]) for r in rows[0]} == \
        {k: int(v) for k, v in want.items()}
    assert _cli_rows(["profile", path, "--csv", "--reader-option", "region_size=4096"], 3) == []


def _h5_names(h5, table):
    with h5py.File(h5, "r") as f:
        return {int(i): (n.decode() if isinstance(n, bytes) else str(n))
                for i, n in zip(f[table]["id"][()], f[table]["name"][()])}


@pytest.mark.parametrize("name", ["otf-hybrid16", "dumpi-p2p", "ovni-v3"])
def test_to_pandas_with_names_joins_the_definitions(name, merged):
    """names=True: location, peer and region names beside their ids, from the trace and
    from its HDF5 merge, as a dict lookup of the HDF5 file's own definitions gives them."""
    pytest.importorskip("pandas")
    import partrace
    locs, regs = _h5_names(merged[name], "locations"), _h5_names(merged[name], "regions")
    for src in (TRACES[name], merged[name]):
        df = partrace.open(src).to_pandas("events", names=True)
        assert list(df.columns).index("location_name") == list(df.columns).index("location") + 1
        for col, names in (("location", locs), ("region", regs), ("peer", locs)):
            if col not in df:
                continue
            want = [names.get(i) for i in df[col].tolist()]
            got = [None if isinstance(x, float) else x for x in df[f"{col}_name"].astype(object).tolist()]
            assert got == want
        assert df["region_name"].notna().any() and df["location_name"].notna().all()
    plain = partrace.open(TRACES[name]).to_pandas("events")
    assert "location_name" not in plain and list(plain.columns) == \
        [c for c in df.columns if not c.endswith("_name")]


@pytest.mark.parametrize("name", ["otf-hybrid16", "dumpi-coll", "ovni-v1", "ross-evtrace"])
def test_api_answers_equal_pandas_on_the_merged_events(name, merged):
    """t.profile(), t.comm_matrix(), t.message_histogram(): DataFrames with names, equal to
    a plain walk / pandas groupby over the HDF5 merge with the file's own names."""
    pd = pytest.importorskip("pandas")
    import partrace
    ev, _ = _events(merged[name])
    locs, regs = _h5_names(merged[name], "locations"), _h5_names(merged[name], "regions")
    t = partrace.open(TRACES[name])

    want, _, _ = _walk_profile(ev)
    prof = t.profile()
    assert {(r.region, r.calls, r.inclusive_ns, r.exclusive_ns) for r in prof.itertuples()} == \
        {(regs.get(k, f"region {k}"), *v) for k, v in want.items()}
    assert list(prof["exclusive_ns"]) == sorted(prof["exclusive_ns"], reverse=True)

    df = pd.DataFrame({"kind": ev["kind"], "s": ev["location"], "r": ev.get("peer", 0),
                       "size": ev["size"].astype(object) if "size" in ev else 0})
    df = df[(df.kind == SEND) & (df.r != 0)]
    m = t.comm_matrix()
    assert list(m.columns) == ["sender_id", "receiver_id", "sender", "receiver", "messages", "bytes"]
    got = {(r.sender_id, r.receiver_id, r.sender, r.receiver): (r.messages, r.bytes) for r in m.itertuples()}
    pairs = df.groupby(["s", "r"]).agg(n=("kind", "size"), b=("size", "sum"))
    assert got == {(s, r, locs[s], locs[r]): (int(v.n), int(v.b)) for (s, r), v in pairs.iterrows()}

    h = t.message_histogram()
    bins = Counter()
    for size in df["size"].tolist():
        b = int(size).bit_length()      # [2^(b-1), 2^b); 0 bytes: bin [0, 1)
        lo, hi = (0, 1) if b == 0 else (1 << (b - 1), 1 << b)
        bins[(lo, hi)] += 1
    assert {(r.low, r.high): r.messages for r in h.itertuples()} == dict(bins)


@pytest.mark.parametrize("name,options", [("ovni-v1", None), ("ovni-v3", None),
                                          ("ross-evtrace", {"region_size": 4096}),
                                          ("dumpi-coll", None)])
def test_answers_with_a_selection_equal_those_of_a_full_decode(name, options, monkeypatch):
    """profile and comm ask the reader for a few columns of events (TraceReader.selection);
    the ovni, ROSS and DUMPI readers then skip the rest (checked: a column not asked for is
    not decoded); the answers are the same as those of a full decode."""
    from partrace.formats import open_trace
    from partrace.model import Table
    reader = open_trace(TRACES[name], **(options or {}))
    reader.selection = {"events": ("time", "location", "kind", "region")}
    defs = reader.read_definitions(reader.survey_all()) if reader.surveyed else reader.read_definitions()
    if reader.ordered:
        reader.start_after(None)
    chunks = [c for u in reader.units() for c in reader.decode(u, defs)]
    skipped = all(set(c) <= {"events"} and "seq" not in c.get("events", Table({})).names
                  for c in chunks)
    assert skipped and any("events" in c for c in chunks)
    picked = (analysis.profile(TRACES[name], per_location=True, reader_options=options),
              analysis.communication(TRACES[name], reader_options=options))
    opened = analysis._reader
    monkeypatch.setattr(analysis, "_reader", lambda *a: setattr(r := opened(*a), "selection", None) or r)
    full = (analysis.profile(TRACES[name], per_location=True, reader_options=options),
            analysis.communication(TRACES[name], reader_options=options))
    assert picked == full
    assert picked[0]["locations"] or picked[1]["pairs"]


def test_pairs_are_columns_until_a_row_is_asked_for():
    """communication() keeps the pairs as numpy columns (no dict per pair); its rows, its
    JSON and its DataFrame all say the same."""
    import json

    from partrace.analysis.render import as_json
    from partrace.analysis.rows import Rows
    pairs = analysis.communication(TRACES["dumpi-p2p"])["pairs"]
    assert isinstance(pairs, Rows) and len(pairs) > 0
    cols = pairs.columns
    assert all(isinstance(v, np.ndarray) and len(v) == len(pairs) for v in cols.values())
    rows = list(pairs)
    assert rows == pairs.to_records() == json.loads(as_json(pairs))
    assert [pairs[i] for i in range(len(pairs))] == rows and pairs[-1] == rows[-1]
    assert list(pairs[1:3]) == rows[1:3]
    assert [r["messages"] for r in rows] == cols["messages"].tolist()
    assert all(type(r["bytes"]) is int and type(r["sender"]) is str for r in rows)


def test_pairs_csv_is_what_the_csv_module_writes_of_the_rows():
    """Rows.to_csv (columns fed to the csv writer as tuples) equals csv.DictWriter over the
    dict rows: names that need quoting, signed, unsigned 64-bit and float columns."""
    from partrace.analysis.render import as_csv
    from partrace.analysis.rows import BATCH, Rows
    rng = np.random.default_rng(7)
    n = BATCH + 5          # more than one batch
    names = np.array(["rank 0", "a,b", 'say "hi"', "two\nlines", "", "ü"], object)
    rows = Rows({"sender_id": rng.integers(-3, 2**40, n), "sender": names[rng.integers(0, 6, n)],
                 "bytes": rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2),
                 "messages": rng.integers(0, 9, n).astype(np.int32), "share": rng.random(n)})
    cols = ["sender_id", "sender", "bytes", "messages", "share"]
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    w.writerows(list(rows))
    assert as_csv(rows, cols) == out.getvalue().rstrip("\n")
    assert list(csv.DictReader(io.StringIO(as_csv(rows, cols))))[3]["sender"] == rows[3]["sender"]


def test_comm_text_shows_the_heaviest_pairs_first():
    path = str(TRACES["dumpi-p2p"])
    pairs = list(csv.DictReader(io.StringIO(run_cli(["comm", path, "--csv"]).stdout)))
    want = sorted(pairs, key=lambda p: (-int(p["bytes"]), -int(p["messages"]),
                                        int(p["sender_id"]), int(p["receiver_id"])))[:3]
    r = run_cli(["comm", path, "--top", "3"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    shown = [ln.split() for ln in lines[3:6]]
    assert [[p["sender"].split()[-1], p["receiver"].split()[-1], p["messages"], p["bytes"]]
            for p in want] == [[s[1], s[3], s[4], s[5]] for s in shown]
    assert lines[6] == f"({len(pairs) - 3:,} more pairs: --top 0 for all)"


def test_keyed_sums_equal_a_dict_through_growth_merges_and_pickling():
    import pickle

    from partrace.analysis.sparse import KeyedSums
    rng = np.random.default_rng(3)
    a, b, want = KeyedSums(2, 2, capacity=16), KeyedSums(2, 2), Counter()
    for sums in (a, b):
        keys = np.stack([rng.integers(-2**40, 2**40, 5000) % 97 - 40,
                         rng.integers(-2**62, 2**62, 5000) % 1013], axis=1)
        vals = rng.integers(-2**40, 2**40, (5000, 2))
        sums.add(keys, vals)
        for k, v in zip(map(tuple, keys.tolist()), vals.tolist()):
            want[k, 0] += v[0]
            want[k, 1] += v[1]
    a.merge(pickle.loads(pickle.dumps(b)))
    keys, vals = a.items()
    assert list(map(tuple, keys.tolist())) == sorted({k for k, _ in want})
    assert [[want[tuple(k), 0], want[tuple(k), 1]] for k in keys.tolist()] == vals.tolist()
    with pytest.raises(ValueError):
        a.add(np.array([[np.iinfo(np.int64).min, 0]]), np.zeros((1, 2), np.int64))

"""OTF2 input: every record partrace decodes equals what the library's own Python reader
reads (value by value), on archives written by the library (tests/data/otf2, made by
make_archives.py) and on partrace's own OTF2 output of other formats' fixtures; the round
trip archive -> partrace convert -> OTF2 on 1 and 3 ranks; damaged archives."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from partrace.formats.otf2 import OTF2
from partrace.formats.otf2 import records as R
from partrace.model import Table
from tests.conftest import run_cli
from tests.support import damage
from tests.support.damage import decode_units

otf2 = pytest.importorskip("otf2")
DATA = Path(__file__).resolve().parents[1] / "data"
ARCHIVES = [DATA / "otf2" / "mpi3" / "traces.otf2", DATA / "otf2" / "threads2" / "traces.otf2"]
METRIC, PROGRAM_BEGIN = (1 + [n for n, _ in R.RECORDS].index(x) for x in ("Metric", "ProgramBegin"))


def _plain(v):
    """A field as the library's Python reader gives it, as an integer (refs, enums)."""
    if hasattr(v, "_ref"):
        return v._ref
    if hasattr(type(v), "_names"):
        return int(v.value)
    if isinstance(v, (str, float)):
        return v
    return int(v)


def _bits(value: int, typ: int, strings) -> object:
    """A value's bits as the Python reader shows the value."""
    if typ in (9, 10):
        return float(np.uint64(value).view(np.float64))
    if typ in (5, 6, 7, 8):
        return int(np.uint64(value).view(np.int64))
    if typ == 11:
        return str(strings[value])
    return int(value)


def library_events(anchor: Path) -> dict[int, list]:
    """Per location ref: [(time, record name, fields, values, attributes)] by the Python reader."""
    out = {}
    with otf2.reader.open(str(anchor)) as trace:
        for loc, ev in trace.events:
            name = type(ev).__name__
            spec = dict(R.RECORDS)[name]
            if name == "Metric":
                fields = [_plain(ev.metric), len(ev.values)]
                values = [float(v) if isinstance(v, float) else int(v) for v in ev.values]
            elif name == "ProgramBegin":      # the arguments' count (their strings not compared)
                fields = [str(ev.program_name), len(ev.program_arguments)]
                values = []
            else:
                fields = [_plain(getattr(ev, f)) for f, _, _ in spec]
                values = []
            attrs = sorted((a._ref, _plain(v)) for a, v in (ev.attributes or {}).items())
            out.setdefault(loc._ref, []).append((ev.time, name, fields, values, attrs))
    return out


def partrace_events(anchor: Path) -> dict[int, list]:
    """The same, from partrace's decode."""
    reader = OTF2.open(anchor)
    defs = reader.read_definitions()
    with otf2.reader.open(str(anchor)) as trace:
        strings = trace.definitions.strings
        types = {m._ref: [x.value_type for x in (m.members if hasattr(m, "members") else
                                                   m.metric_class.members)]
                 for m in trace.definitions.metrics}
    out = {}
    locs = defs.tables["otf2_locations"]
    ref_of = dict(zip(locs["id"].tolist(), locs["ref"].tolist()))
    units = decode_units(reader, every_table=True).values()
    every = {n: Table.concat([u[n] for u in units], schema) for n, schema in
             reader.schema(defs).items()}
    for lid in np.unique(every["events"]["location"]).tolist():
        tables = {n: t.take(np.flatnonzero(t["location"] == lid)) for n, t in every.items()}
        ref = ref_of[lid]
        ev, vals, attrs = tables["events"], tables["values"], tables["attributes"]
        rows = []
        for i in range(len(ev)):
            code = int(ev["record"][i])
            name, spec = R.RECORDS[code - 1]
            args = [int(a) for a in ev["args"][i][:len(spec)]]
            args = [int(np.uint64(a).view(np.int64)) if s else a
                    for a, (_, _, s) in zip(args, spec)]
            values = []
            if code == PROGRAM_BEGIN:
                args = [str(strings[args[0]]), args[1]]
            if code == METRIC:
                args = args[:2]
                v = vals["event_seq"] == ev["seq"][i]
                values = [_bits(int(x), int(t), strings) for x, t in
                          zip(vals["value"][v], vals["type"][v])]
                assert [int(t) for t in vals["type"][v]] == [int(t.value) for t in types[args[0]]]
            a = attrs["event_seq"] == ev["seq"][i]
            kv = sorted((int(r), _bits(int(x), int(t), strings)) for r, x, t in
                        zip(attrs["attribute"][a], attrs["value"][a], attrs["type"][a]))
            rows.append((int(ev["ticks"][i]), name, args, values, kv))
        assert (ev["location"] == lid).all()
        assert (ev["seq"] == np.arange(len(ev))).all()
        out[ref] = rows
    return out


@pytest.mark.parametrize("anchor", ARCHIVES, ids=lambda p: p.parent.name)
def test_every_record_equals_the_library_reader(anchor):
    want = library_events(anchor)
    got = partrace_events(anchor)
    assert got == want
    assert sum(map(len, got.values())) > 30


@pytest.mark.parametrize("batch", [1, 3, 7])
def test_any_batch_size_decodes_the_same(batch):
    """Small batches of the library's reader (records, values and attributes cut anywhere,
    a collective's begin and end in different chunks) give the same rows."""
    whole = decode_units(OTF2.open(ARCHIVES[0], unit_bytes=1), every_table=True)
    reader = OTF2.open(ARCHIVES[0], unit_bytes=1)
    reader.batch_events = batch
    cut = decode_units(reader, every_table=True)
    assert cut.keys() == whole.keys()
    for unit, tables in whole.items():
        for name, t in tables.items():
            for col in t.names:
                assert np.array_equal(cut[unit][name][col], t[col]), (unit, name, col)


def test_common_columns_of_the_mpi_archive():
    """What the common model says of the records: peers as locations through the
    communicator's ranks, roots, collective operations, counters."""
    reader = OTF2.open(ARCHIVES[0].parent)          # the folder opens too
    defs = reader.read_definitions()
    names = dict(zip(defs.tables["locations"]["id"].tolist(), defs.tables["locations"]["name"]))
    (one_unit,) = decode_units(reader).values()      # small locations go in one unit
    ev = one_unit["events"]
    ev = ev.take(np.flatnonzero(ev["location"] == 1))
    sends = ev.take(np.flatnonzero(ev["kind"] == 3))
    assert [names[p] for p in sends["peer"].tolist()] == ["MPI Rank 1/Master thread 1"] * 3
    assert sends["match_id"].tolist() == [0, 901, 0]
    assert sends["tag"].tolist() == [40, 41, 42] and sends["size"].tolist() == [8, 16, 24]
    ends = ev.take(np.flatnonzero(ev["kind"] == 8))
    assert [names[r] if r else None for r in ends["root"].tolist()] == \
        ["MPI Rank 1/Master thread 1", None]
    collops = dict(zip(defs.tables["collectives"]["id"].tolist(),
                       defs.tables["collectives"]["name"]))
    assert [collops[c] for c in ends["collop"].tolist()] == ["BCAST", "ALLREDUCE"]
    comms = dict(zip(defs.tables["communicators"]["id"].tolist(),
                     defs.tables["communicators"]["name"]))
    assert [comms[c] for c in ends["comm"].tolist()] == ["MPI_COMM_WORLD", "MPI_COMM_EVEN"]
    # a collective's begin row carries what its end says (analyses name collectives by it)
    begins = ev.take(np.flatnonzero(ev["kind"] == 7))
    for c in ("collop", "comm", "root", "size", "received"):
        assert begins[c].tolist() == ends[c].tolist(), c
    counters = ev.take(np.flatnonzero(ev["kind"] == 5))
    assert counters["value"][:2].tolist() == [1000, (-4096) & 0xFFFFFFFFFFFFFFFF]
    # every location hangs under a row of its location group (make_archives.py: "MPI Rank r"
    # holds "Master thread r", rank 0 also the two OpenMP threads); groups have no parent
    parent = dict(zip(defs.tables["locations"]["id"].tolist(),
                      defs.tables["locations"]["parent"].tolist()))
    assert [(names[i], names.get(parent[i])) for i in sorted(parent)] == [
        ("MPI Rank 0/Master thread 0", "MPI Rank 0"), ("MPI Rank 1/Master thread 1", "MPI Rank 1"),
        ("MPI Rank 2/Master thread 2", "MPI Rank 2"), ("MPI Rank 0/OMP thread 1", "MPI Rank 0"),
        ("MPI Rank 0/OMP thread 2", "MPI Rank 0"),
        ("MPI Rank 0", None), ("MPI Rank 1", None), ("MPI Rank 2", None)]


def test_decoded_on_3_ranks_equals_the_decode_checked_above(tmp_path):
    """The rows an HDF5 merge on 3 ranks holds are those the reader decodes here (which
    test_every_record_equals_the_library_reader compares with the library's reader)."""
    import partrace
    # a unit per location (unit_bytes=1), so the 3 ranks share them
    h5 = _convert(ARCHIVES[0], tmp_path / "m.h5", nranks=3,
                  options=["--reader-option", "unit_bytes=1"])
    reader = OTF2.open(ARCHIVES[0], unit_bytes=1)
    assert len(reader.units()) == 5
    here = decode_units(reader, every_table=True)
    merged = partrace.open(h5)
    for name in ("events", "values", "attributes"):
        got = merged.table(name)
        order = np.lexsort((np.asarray(got["seq"]), np.asarray(got["location"])))
        want = [t[name] for _, t in sorted(here.items())]
        for col in want[0].names:
            expect = np.concatenate([t[col] for t in want])
            assert np.array_equal(np.asarray(got[col])[order], expect), (name, col)
        assert len(got) == sum(len(t) for t in want) > 0


def _convert(src: Path, out: Path, nranks=None, options=()) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    r = run_cli(["convert", str(src), "-o", str(out), "-q", *options], nranks=nranks)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def own_outputs(tmp_path_factory):
    """partrace's OTF2 output of one fixture of each other format."""
    d = tmp_path_factory.mktemp("own")
    srcs = {"dumpi": DATA / "dumpi" / "p2p-4rank",
            "otf": DATA / "otf" / "ring8" / "trace" / "ring8.otf"}
    return {k: _convert(p, d / f"{k}.otf2") for k, p in srcs.items()}


@pytest.mark.parametrize("name", ["dumpi", "otf"])
def test_partrace_own_output_equals_the_library_reader(own_outputs, name):
    anchor = own_outputs[name]
    want = library_events(anchor)
    assert partrace_events(anchor) == want
    assert sum(map(len, want.values())) > 50


# -- the round trip: archive -> partrace convert -> OTF2, on 1 and 3 ranks ------------------
# OTF2 input is written back record by record (formats/otf2/replay.py): every record as its
# own type with its arguments, arrays and attributes, every definition as the source had it;
# the Metric records a thread cannot keep for Pipit go to the thread's metric location.
def named_records(anchor: Path, keep=None) -> dict:
    """Per location name: records with refs resolved to names (regions, communicators), in
    time order; a metric location's records (a thread's that the replay moved there) are
    its thread's, and metric locations are not listed."""
    out = {}
    with otf2.reader.open(str(anchor)) as trace:
        moved = {loc.name: loc.name[:-len(" metrics")] for loc in trace.definitions.locations
                 if str(loc.type).endswith("METRIC") and loc.name.endswith(" metrics")}
        for loc, ev in trace.events:
            name = type(ev).__name__
            if keep is not None and name not in keep:
                continue
            fields = []
            for f, _, _ in dict(R.RECORDS)[name] if name != "Metric" else ():
                v = getattr(ev, f)
                fields.append(v.name if hasattr(v, "name") and hasattr(v, "_ref") else _plain(v))
            if name == "Metric":
                fields = [[m.name for m in ev.metric.members], list(ev.values)]
            attrs = sorted((a.name, v) for a, v in (ev.attributes or {}).items())
            out.setdefault(moved.get(loc.name, loc.name), []).append((ev.time, name, fields,
                                                                      attrs))
        defs = trace.definitions
        regions = sorted((r.name, int(r.paradigm.value)) for r in defs.regions)
        comms = sorted((c.name, tuple(m.name for m in c.group.members)) for c in defs.comms
                       if c.name != "all locations")
        locations = sorted(loc.name for loc in defs.locations if loc.name not in moved)
    # a moved record's place among its thread's records of the same time is not kept
    out = {k: sorted(v, key=lambda r: (r[0], repr(r))) for k, v in out.items()}
    return {"events": out, "regions": regions, "comms": comms, "locations": locations}


def _metric_locations(back: Path, src: Path) -> dict:
    """The output's global definitions without the metric locations the replay added (their
    names, and their records counted as their thread's), and those as {name: (thread name,
    group ref)}."""
    defs = _definitions(back)
    source = _definitions(src)
    refs = {r["ref"] for r in source["locations"]}
    added = [r for r in defs["locations"] if r["ref"] not in refs]
    names = {r["name"] for r in source["strings"]}
    defs["locations"] = [r for r in defs["locations"] if r["ref"] in refs]
    for r in added:         # a thread's records moved there are the thread's
        thread = next(t for t in defs["locations"] if t["name"] + " metrics" == r["name"])
        thread["number_of_events"] += r["number_of_events"]
    defs["strings"] = [r for r in defs["strings"] if r["name"] in names]
    by_ref = {r["ref"]: r for r in source["locations"]}
    thread = {r["name"] + " metrics": r for r in source["locations"]}
    assert all(r["type"] == 3 and thread[r["name"]]["group"] == r["group"] for r in added)
    assert min((r["ref"] for r in added), default=max(refs) + 1) > max(refs)
    return defs, {r["name"]: (thread[r["name"]]["name"], by_ref[thread[r["name"]]["ref"]]
                              ["group"]) for r in added}


def _definitions(anchor: Path) -> dict:
    """Every global definition, as the reader's source form (refs, fields, clock)."""
    return OTF2.open(anchor).read_definitions().source


def _files(anchor: Path) -> dict:
    """{name: bytes} of an archive's anchor, global definitions and folder."""
    folder = anchor.with_suffix("")
    out = {".otf2": anchor.read_bytes(), ".def": anchor.with_suffix(".def").read_bytes()}
    out.update({p.name: p.read_bytes() for p in sorted(folder.iterdir())})
    return out


@pytest.fixture(scope="module")
def round_trips(tmp_path_factory):
    d = tmp_path_factory.mktemp("round")
    out = {n: _convert(ARCHIVES[0], d / f"r{n}" / "back.otf2", nranks=n,
                       options=["--reader-option", "unit_bytes=1"]) for n in (1, 3)}
    out["threads2"] = _convert(ARCHIVES[1], d / "t3" / "back.otf2", nranks=3,
                               options=["--reader-option", "unit_bytes=1"])
    return out


@pytest.mark.parametrize("nranks", [1, 3])
def test_round_trip_keeps_every_record(round_trips, nranks):
    """Isend/Irecv and their requests, OpenMP fork/join, the parameter, attributes (int,
    double, string), metrics of two members: every record as itself, every definition."""
    back, src = named_records(round_trips[nranks]), named_records(ARCHIVES[0])
    assert back == src
    names = {n for rows in back["events"].values() for _, n, _, _ in rows}
    assert {"MpiIsend", "MpiIrecv", "MpiIrecvRequest", "OmpFork", "ParameterInt",
            "Metric"} <= names
    assert sum(len(a) > 0 for rows in back["events"].values() for *_, a in rows) == 11
    assert sum(map(len, back["events"].values())) == 47 + 39 + 43 + 5 + 5
    defs, added = _metric_locations(round_trips[nranks], ARCHIVES[0])
    assert defs == _definitions(ARCHIVES[0])
    # every thread has metrics at times of no other record of its (mpi3 writes them so)
    assert sorted(t for t, _ in added.values()) == sorted(back["events"])
    with otf2.reader.open(str(round_trips[nranks])) as trace:
        where = {(loc.name in added, type(ev).__name__ == "Metric") for loc, ev in trace.events}
    assert where == {(True, True), (False, False)}


def _metrics_before_events(folder: Path) -> Path:
    """Two threads whose Metric records (of the first class, two members) each stand right
    before the record of their time, as Score-P writes synchronous metrics."""
    from otf2.enums import Paradigm, RegionRole, Type
    with otf2.writer.open(str(folder), timer_resolution=1_000_000_000) as trace:
        d = trace.definitions
        group = d.location_group("process", system_tree_parent=d.system_tree_node("node"))
        region = d.region("f", region_role=RegionRole.FUNCTION, paradigm=Paradigm.USER)
        both = d.metric_class([d.metric_member("cycles", unit="#", value_type=Type.UINT64),
                               d.metric_member("misses", unit="#", value_type=Type.INT64)])
        for k in range(2):
            w = trace.event_writer_from_location(d.location(f"thread {k}", group=group))
            for i in range(4):
                t = 100 * i + k
                w.metric(t, both, [1000 * i + k, -i])
                w.enter(t, region)
                w.metric(t + 50, both, [1000 * i + 500, -i - k])
                w.leave(t + 50, region)
    return folder / "traces.otf2"


def test_round_trip_keeps_the_source_bytes_where_metrics_stay(tmp_path):
    """The library's own encoding of each record: Metric records of the first class, each
    right before the event of its time, stay on the thread; event files byte for byte,
    definitions as they were."""
    src = _metrics_before_events(tmp_path / "src")
    back = _convert(src, tmp_path / "back.otf2")
    assert named_records(back) == named_records(src)
    assert _definitions(back) == _definitions(src)      # no metric location added
    src_folder, back_folder = src.with_suffix(""), back.with_suffix("")
    evts = sorted(p.name for p in src_folder.glob("*.evt"))
    assert evts == sorted(p.name for p in back_folder.glob("*.evt")) and len(evts) == 2
    for name in evts:
        assert (back_folder / name).read_bytes() == (src_folder / name).read_bytes(), name


def test_round_trip_of_threads_keeps_every_record(round_trips):
    back = round_trips["threads2"]
    assert named_records(back) == named_records(ARCHIVES[1])
    defs, added = _metric_locations(back, ARCHIVES[1])
    assert defs == _definitions(ARCHIVES[1]) and len(added) == 3
    assert "ThreadCreate" in {n for rows in named_records(back)["events"].values()
                              for _, n, _, _ in rows}


def test_round_trip_same_bytes_on_1_and_3_ranks(round_trips):
    assert _files(round_trips[1]) == _files(round_trips[3])


def _replay_windows(tables, schema, defs, out: Path, cuts: list) -> dict:
    """The OTF2 sink fed ``tables`` in windows ending before each of ``cuts`` (keys), with
    ``next_keys`` set as the engine sets them."""
    from partrace.engine.mpi import serial
    from partrace.output.otf2_sink import OTF2Sink
    comm, sink = serial(), OTF2Sink(out)
    out.parent.mkdir()
    sink.prepare(comm, defs, schema)
    keys = {n: [tuple(int(x) for x in k) for k in zip(t["time"], t["location"], t["seq"])]
            for n, t in tables.items()}
    bounds = {n: [0] + [sum(k < c for k in keys[n]) for c in cuts] + [len(t)]
              for n, t in tables.items()}
    for w in range(len(cuts) + 1):
        sink.next_keys = {n: cuts[w] if w < len(cuts) else None for n in tables}
        sink.write(comm, {n: t.rows(bounds[n][w], bounds[n][w + 1]) for n, t in tables.items()})
    sink.commit(comm)
    return _files(out)


def test_round_trip_through_hdf5_keeps_every_record(tmp_path):
    """partrace's HDF5 merge of an OTF2 archive keeps what the replay needs: converted to
    OTF2, every record and definition again."""
    h5 = _convert(ARCHIVES[0], tmp_path / "m.h5")
    back = _convert(h5, tmp_path / "back.otf2")
    assert named_records(back) == named_records(ARCHIVES[0])
    assert _metric_locations(back, ARCHIVES[0])[0] == _definitions(ARCHIVES[0])


def _decoded_tables(anchor: Path):
    """Every table of the archive in key order, with its definitions and schema."""
    reader = OTF2.open(anchor)
    defs = reader.read_definitions()
    schema = reader.schema(defs)
    units = decode_units(reader, every_table=True).values()
    tables = {}
    for n, cols in schema.items():
        t = Table.concat([u[n] for u in units], cols)
        tables[n] = t.take(np.lexsort((t["seq"], t["location"], t["time"])))
    return tables, schema, defs


def test_a_metric_missing_a_value_is_an_error(tmp_path):
    """A Metric record whose values table lacks a value is refused, never written short."""
    from partrace.engine.mpi import RankFailed
    tables, schema, defs = _decoded_tables(ARCHIVES[0])
    v = tables["values"]
    tables["values"] = v.take(np.arange(1, len(v)))
    with pytest.raises(RankFailed, match=r"location 1, event \d+: Metric of 2 values, 1 in the "
                       r"values table"):
        _replay_windows(tables, schema, defs, tmp_path / "x" / "x.otf2", [])


def test_replay_windows_cut_between_a_record_and_its_values(tmp_path):
    """Windows cut at each Metric's and each attributed record's own key: its values and
    attributes (same time and location, seqs of their own tables) fall on both sides of the
    cut; the replay holds them for the next window, and the files are those of one window."""
    tables, schema, defs = _decoded_tables(ARCHIVES[0])
    ev = tables["events"]
    attributed = np.isin(ev["seq"] + (ev["location"].astype(np.int64) << 32),
                         tables["attributes"]["event_seq"]
                         + (tables["attributes"]["location"].astype(np.int64) << 32))
    at = np.flatnonzero((ev["record"] == METRIC) | attributed)
    cuts = sorted({(int(ev["time"][i]), int(ev["location"][i]), int(ev["seq"][i])) for i in at})
    assert len(cuts) > 20
    want = _replay_windows(tables, schema, defs, tmp_path / "one" / "x.otf2", [])
    got = _replay_windows(tables, schema, defs, tmp_path / "cut" / "x.otf2", cuts)
    assert got == want


# -- damage ----------------------------------------------------------------------------------
def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "in" / "mpi3"
    shutil.copytree(ARCHIVES[0].parent, dst)
    return dst / "traces.otf2"


def _decode(anchor: Path):
    return decode_units(OTF2.open(anchor))


def test_truncated_event_file(tmp_path):
    anchor = _copy(tmp_path)
    evt = anchor.parent / "traces" / "1.evt"
    evt.write_bytes(evt.read_bytes()[:300])
    # Cut inside its only chunk, the library either fails to load a next chunk or ends the
    # chunk quietly, as its buffer past the cut happens to hold (both seen, on different
    # machines); either way the error names record 14 and the chunk headers' count.
    damage.check(_decode, anchor, tmp_path, evt, "event 14", "its chunk headers count 39")


def _many_chunks(folder: Path, pairs: int = 30000) -> Path:
    """One location of ``pairs`` Enter/Leave pairs in event chunks of 256 KiB (3 chunks)."""
    from otf2.enums import Paradigm, RegionRole
    with otf2.writer.open(str(folder), timer_resolution=1_000_000_000,
                          chunk_size_events=256 * 1024) as trace:
        d = trace.definitions
        loc = d.location("thread", group=d.location_group(
            "process", system_tree_parent=d.system_tree_node("node")))
        region = d.region("f", region_role=RegionRole.FUNCTION, paradigm=Paradigm.USER)
        w = trace.event_writer_from_location(loc)
        for i in range(pairs):
            w.enter(10 * i, region)
            w.leave(10 * i + 5, region)
    return folder / "traces.otf2"


@pytest.mark.parametrize("cut", ["in the last chunk", "in a chunk header", "at a chunk's end"])
def test_event_file_of_several_chunks_cut_short(tmp_path, cut):
    """The library reads a file cut inside the last of several chunks on into its buffer's
    stale bytes without end; the chunk headers' count stops it, as it does a file cut at a
    chunk's end.  A file cut inside a chunk header is refused before the library reads it."""
    anchor = _many_chunks(tmp_path / "in" / "chunks")
    evt = anchor.parent / "traces" / "0.evt"
    data = evt.read_bytes()
    chunk = 256 * 1024
    assert len(data) > 2 * chunk and data[chunk] == 3 and data[2 * chunk] == 3
    # the second chunk's header: its last record is number 47658 (of 60000)
    last = int.from_bytes(data[chunk + 10:chunk + 18], "little")
    if cut == "in the last chunk":
        evt.write_bytes(data[:chunk + 40000])
        where, match = f"event {last}", f"past the {last} event records"
    elif cut == "in a chunk header":
        evt.write_bytes(data[:2 * chunk + 9])
        where, match = f"byte {2 * chunk + 9}", "inside the header of the chunk"
    else:
        evt.write_bytes(data[:2 * chunk])
        where, match = f"event {last}", f"{last} event records"
    damage.check(_decode, anchor, tmp_path, evt, where, match)


def test_missing_event_file(tmp_path):
    anchor = _copy(tmp_path)
    evt = anchor.parent / "traces" / "2.evt"
    evt.unlink()
    damage.check(_decode, anchor, tmp_path, evt, None, "is missing")


def test_missing_local_definitions(tmp_path):
    anchor = _copy(tmp_path)
    local = anchor.parent / "traces" / "1.def"
    local.unlink()
    damage.check(_decode, anchor, tmp_path, local, None, "is missing")


def test_missing_and_cut_global_definitions(tmp_path):
    anchor = _copy(tmp_path)
    gdef = anchor.with_suffix(".def")
    data = gdef.read_bytes()
    gdef.write_bytes(data[:500])
    damage.check(_decode, anchor, tmp_path / "cut", gdef, None, "INVALID_DATA")
    gdef.unlink()
    damage.check(_decode, anchor, tmp_path / "missing", gdef, None, "is missing")


def test_record_of_an_unknown_type(tmp_path):
    """A record id the library does not know (a newer OTF2's; OTF2 gives such records a
    length so readers can skip them) is an error, never skipped: an archive of one MpiSend
    written by the library, its record id (14) changed to 240."""
    from otf2.enums import GroupType, Paradigm
    folder = tmp_path / "in" / "unknown"
    with otf2.writer.open(str(folder), timer_resolution=1_000_000_000) as trace:
        d = trace.definitions
        loc = d.location("rank 0", group=d.location_group(
            "process", system_tree_parent=d.system_tree_node("node")))
        d.group("locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                members=[loc])
        world = d.comm("world", group=d.group("world", group_type=GroupType.COMM_GROUP,
                                              paradigm=Paradigm.MPI, members=[0]))
        trace.event_writer_from_location(loc).mpi_send(5, 0, world, 7, 3)
    evt = folder / "traces" / "0.evt"
    data = bytearray(evt.read_bytes())
    at = data.index(b"\x0e\x06")            # MPI_SEND, then the record's length (6)
    data[at] = 240
    evt.write_bytes(bytes(data))
    damage.check(_decode, folder / "traces.otf2", tmp_path, evt, "event 0",
                 "a type the bundled OTF2 library does not know")


def _archive_with_properties(folder: Path) -> Path:
    """An archive the library writes with a property of each kind partrace writes back
    (numbers, a string, a definition) and an I/O paradigm with a property."""
    from otf2.enums import (IoParadigmClass, IoParadigmFlag, IoParadigmProperty,
                            LocationGroupType, LocationType, Paradigm, ParadigmProperty,
                            RegionRole, Type)
    with otf2.writer.open(str(folder), timer_resolution=1_000_000) as trace:
        d = trace.definitions
        node = d.system_tree_node("node0", class_name="node")
        group = d.location_group("rank 0", location_group_type=LocationGroupType.PROCESS,
                                 system_tree_parent=node)
        loc = d.location("Master thread", type=LocationType.CPU_THREAD, group=group)
        main = d.region("main", region_role=RegionRole.FUNCTION, paradigm=Paradigm.USER)
        d.system_tree_node_property(node, "cores", value=48, type_id=Type.UINT32)
        d.system_tree_node_property(node, "platform", value="Linux")
        d.location_group_property(group, "load", value=0.75, type_id=Type.DOUBLE)
        d.location_property(loc, "numa", value=-3, type_id=Type.INT64)
        d.paradigm_property(Paradigm.MPI, ParadigmProperty.COMM_NAME_TEMPLATE,
                            value="Comm ${id}")
        d.io_paradigm("POSIX", "POSIX I/O", IoParadigmClass.SERIAL, IoParadigmFlag.NONE,
                      {IoParadigmProperty.VERSION: "2008"})
        writer = trace.event_writer_from_location(loc)
        writer.enter(10, main)
        writer.leave(20, main)
    return folder / "traces.otf2"


def test_property_definitions_written_back_as_the_library_wrote_them(tmp_path):
    """OTF2 in, OTF2 out: properties of every kind and value type, and an I/O paradigm, are
    the definitions the library reads from the source archive."""
    src = _archive_with_properties(tmp_path / "src")
    out = _convert(src, tmp_path / "back.otf2")
    want = OTF2.open(src).read_definitions().source
    got = OTF2.open(out).read_definitions().source
    kinds = ("system_tree_node_properties", "location_group_properties", "location_properties",
             "paradigm_properties", "io_paradigms")
    assert all(want.get(k) for k in kinds)
    # (the package's reader drops an I/O paradigm's properties: IoParadigm._construct hands
    # them on past its 4 fields, so the source form holds none; the paradigm itself is kept)
    for kind in want:
        if kind != "locations":
            assert got[kind] == want[kind], kind
    with otf2.reader.open(str(out)) as trace:
        props = {p.name: p.value for p in trace.definitions.system_tree_node_properties}
    assert props == {"cores": 48, "platform": "Linux"}

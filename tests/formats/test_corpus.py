"""The corpus: real traces written by other projects' tools (tests/data/corpus, sources and
licences in SOURCES.md), each through every command: ``info``, ``merge`` to HDF5 on 1 and 3
ranks (identical), to OTF, OTF2 and Perfetto, ``profile`` and ``comm``; OTF2 inputs record by
record against the otf2 package's own reader, and written back to OTF2 whole.

A trace failing for a cause being fixed elsewhere carries a strict xfail naming that cause
(KNOWN below), so the mark goes when the fix lands."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from partrace.model import Kind
from tests.conftest import run_cli
from tests.support.compare import assert_same_content, h5_content

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"

# name -> the path given to partrace (a folder, or the rank file of a one-file DUMPI trace)
TRACES = {
    "sstdumpi-testtrace": "dumpi/sstdumpi-testtrace",
    "sstmacro-testbgp": "dumpi/sstmacro-testbgp",
    "sstmacro-unit-1rank": "dumpi/sstmacro-unit-1rank",
    "d2g-alltoall-run0": "dumpi/d2g-alltoall-run0",
    "d2g-alltoall-run1": "dumpi/d2g-alltoall-run1",
    "mpinet-imb-pingpong": "dumpi/mpinet-imb-pingpong",
    "cortex-BigFFT": "dumpi/cortex-BigFFT/BigFFT.bin",
    "cortex-AMG": "dumpi/cortex-AMG/AMG.bin",
    "cortex-MultiGrid": "dumpi/cortex-MultiGrid/MultiGrid.bin",
    "cortex-MiniDFT": "dumpi/cortex-MiniDFT/MiniDFT.bin",
    "cortex-CrystalRouter": "dumpi/cortex-CrystalRouter/CrystalRouter.bin",
    "otfvis-hello": "otf/otfvis-hello",
    "otfvis-philosophers": "otf/otfvis-philosophers",
    "otfvis-out": "otf/otfvis-out",
    "otfvis-wrf": "otf/otfvis-wrf",
    "pipit-ping-pong": "otf2/pipit-ping-pong",
    "pipit-ping-pong-papi": "otf2/pipit-ping-pong-papi",
    "ember-4rank": "otf2/ember-4rank",
    "sstmacro-10rank": "otf2/sstmacro-10rank",
    "apex-archive": "otf2/apex-archive",
    "apex-movielens": "otf2/apex-movielens",
    "apex-movielens-first": "otf2/apex-movielens-first",
    "fastotf2-mi300": "otf2/fastotf2-mi300",
    "netmaestro-esnet": "ross/netmaestro-esnet",
    "netmaestro-stats-gvt": "ross/netmaestro-stats-gvt",
    "mobilegrid-weak-10": "ross/mobilegrid-weak-10",
    "mobilegrid-strong-rcta-10": "ross/mobilegrid-strong-rcta-10",
}
# the biggest ones (several seconds per command on 2 cores)
SLOW = {"otfvis-out", "otfvis-wrf", "cortex-MiniDFT", "cortex-CrystalRouter", "fastotf2-mi300",
        "netmaestro-stats-gvt"}
# ROSS engine samples only (GVT sampling of PEs, KPs, LPs): rows in other tables, no events
SAMPLES_ONLY = {"netmaestro-stats-gvt"}
OTF2_TRACES = [n for n, p in TRACES.items() if p.startswith("otf2/")]

STEPS = ("info", "h5", "otf", "otf2", "pftrace", "profile", "comm", "library")
EVERY = {s: None for s in STEPS}
# trace -> step -> the cause of a known failure
KNOWN: dict[str, dict[str, str]] = {}


def _cases(step: str, names=None):
    out = []
    for name in names or TRACES:
        marks = []
        if name in SLOW:
            marks.append(pytest.mark.slow)
        if step == "h5":
            marks.append(pytest.mark.mpi)
        cause = KNOWN.get(name, {}).get(step)
        if cause:
            marks.append(pytest.mark.xfail(reason=cause, strict=True))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


def _path(name: str) -> Path:
    return CORPUS / TRACES[name]


def _ok(args, nranks=None) -> str:
    r = run_cli(args, nranks=nranks, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    """name -> its HDF5 merge on one plain process (made once)."""
    done = {}

    def get(name: str) -> Path:
        if name not in done:
            out = tmp_path_factory.mktemp(name) / "one.h5"
            _ok(["merge", str(_path(name)), "-o", str(out), "-q"])
            done[name] = out
        return done[name]
    return get


@pytest.fixture(scope="module")
def otf2_merged(tmp_path_factory):
    """name -> its OTF2 merge on one plain process (made once, for the tests that read it back
    in different ways); an OTF2 trace is given by its anchor file (the others by their path,
    as every other test of this file gives it)."""
    done = {}

    def get(name: str) -> Path:
        if name not in done:
            out = tmp_path_factory.mktemp(name) / "m.otf2"
            given = _anchor(name) if name in OTF2_TRACES else _path(name)
            _ok(["merge", str(given), "-o", str(out), "-q"])
            done[name] = out
        return done[name]
    return get


@pytest.fixture(scope="module")
def said(tmp_path_factory):
    """args -> what ``partrace ARGS`` (exit 0) printed, run once per module for the tests that
    compare the same command's answer with different things."""
    done = {}

    def get(args: list[str]) -> str:
        key = tuple(args)
        if key not in done:
            done[key] = _ok(args)
        return done[key]
    return get


def _kinds(h5: Path) -> dict[int, int]:
    kinds, counts = np.unique(h5_content(h5)["events"]["kind"], return_counts=True)
    return dict(zip(kinds.tolist(), counts.tolist()))


@pytest.mark.parametrize("name", _cases("info"))
def test_info_counts_what_the_merge_holds(name, merged):
    facts = json.loads(_ok(["info", str(_path(name)), "--json"]))
    assert facts["events"] == sum(_kinds(merged(name)).values())
    assert facts["rows_in_all_tables" if name in SAMPLES_ONLY else "events"] > 0


@pytest.mark.parametrize("name", _cases("h5"))
def test_hdf5_the_same_on_1_and_3_ranks(name, merged, tmp_path):
    three = tmp_path / "three.h5"
    _ok(["merge", str(_path(name)), "-o", str(three), "-q"], nranks=3)
    assert_same_content(merged(name), three)


@pytest.mark.parametrize("name", _cases("otf"))
def test_otf_output_reads_back_with_the_merge_s_regions_and_messages(name, merged, tmp_path):
    out = tmp_path / "m.otf"
    _ok(["merge", str(_path(name)), "-o", str(out), "-q"])
    back = json.loads(_ok(["info", str(out), "--json"]))["events_per_kind"]
    kinds = _kinds(merged(name))
    for k in (Kind.ENTER, Kind.LEAVE, Kind.SEND, Kind.RECV):
        assert back.get(k.name, 0) == kinds.get(k, 0), k.name
    assert sum(back.values()) > 0


@pytest.mark.parametrize("name", _cases("h5", OTF2_TRACES))
def test_otf2_messages_name_their_peer(name, merged):
    """Every send and receive names its peer location (rank 0 of a communicator whose group
    is COMM_SELF is the event's own location: Score-P 2.0.2's sstmacro-10rank has 576)."""
    ev = h5_content(merged(name))["events"]
    msg = np.isin(ev["kind"], [Kind.SEND, Kind.RECV])
    assert (ev["peer"][msg] != 0).all()


@pytest.mark.parametrize("name", _cases("otf2"))
def test_otf2_output_reads_whole_in_the_library(name, merged, otf2_merged):
    """The otf2 package reads every event of the output; it holds the merge's region entries
    and leaves."""
    otf2 = pytest.importorskip("otf2")
    out = otf2_merged(name)
    enters = leaves = 0
    with otf2.reader.open(str(out)) as trace:
        for _, ev in trace.events:
            enters += isinstance(ev, otf2.events.Enter)
            leaves += isinstance(ev, otf2.events.Leave)
    kinds = _kinds(merged(name))
    assert (enters, leaves) == (kinds.get(Kind.ENTER, 0), kinds.get(Kind.LEAVE, 0))


@pytest.mark.parametrize("name", _cases("otf2", OTF2_TRACES))
def test_otf2_written_back_has_the_source_s_groups(name, otf2_merged):
    """OTF2 written back from OTF2: the otf2 package reads the same groups from it as from the
    source (a COMM_GROUP's members are ranks in its paradigm's COMM_LOCATIONS group: written
    as location refs, the package could not find them there)."""
    otf2 = pytest.importorskip("otf2")
    out = otf2_merged(name)

    def groups(anchor):
        with otf2.reader.open(str(anchor)) as trace:
            return [(g.name, g.group_type, g.paradigm, [m._ref for m in g.members])
                    for g in trace.definitions.groups]
    source = next(_path(name).rglob("*.otf2"))
    assert groups(out) == groups(source)


@pytest.mark.parametrize("name", _cases("otf2", ["otfvis-wrf"]))
def test_profile_of_the_otf2_output_is_the_trace_s(name, otf2_merged, said):
    """VampirTrace 5.4 writes every Leave without a function ("leave the innermost open
    region"): the OTF2 output names the region each leaves, and the profile is the same."""
    got = _ok(["profile", str(otf2_merged(name))])
    assert got.strip() and got == said(["profile", str(_path(name))])


@pytest.mark.parametrize("name", _cases("pftrace"))
def test_perfetto_output(name, merged, tmp_path):
    """A Perfetto trace whose events all lie on declared tracks."""
    pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    out = tmp_path / "m.pftrace"
    _ok(["merge", str(_path(name)), "-o", str(out), "-q"])
    trace = pb.Trace()
    trace.ParseFromString(out.read_bytes())
    tracks = {p.track_descriptor.uuid for p in trace.packet if p.HasField("track_descriptor")}
    used = {p.track_event.track_uuid for p in trace.packet if p.HasField("track_event")}
    assert used and used <= tracks


@pytest.mark.parametrize("name", _cases("profile"))
def test_profile_of_the_trace_is_that_of_its_merge(name, merged, said):
    got = said(["profile", str(_path(name))])
    assert got.strip() and got == _ok(["profile", str(merged(name))])


@pytest.mark.parametrize("name", _cases("comm"))
def test_comm_of_the_trace_is_that_of_its_merge(name, merged):
    got = _ok(["comm", str(_path(name))])
    assert got.strip() and got == _ok(["comm", str(merged(name))])


def _anchor(name: str) -> Path:
    (anchor,) = _path(name).glob("*.otf2")
    return anchor


@pytest.mark.parametrize("name", _cases("library", OTF2_TRACES))
def test_otf2_every_record_equals_the_library_reader(name):
    from tests.formats.test_otf2_input import library_events, partrace_events
    want = library_events(_anchor(name))
    assert partrace_events(_anchor(name)) == want
    assert sum(map(len, want.values())) > 0


def _folded_events(anchor: Path) -> dict:
    """The otf2 package's records per location, those of each metric location the replay
    adds (LOCATION_TYPE_METRIC "<thread> metrics" in the thread's group: a thread's Metric
    records that Pipit cannot take, formats/otf2/replay.py) counted as the thread's; in time
    order, as a moved record's place among its thread's same-time records is not kept."""
    import otf2
    from tests.formats.test_otf2_input import library_events
    with otf2.reader.open(str(anchor)) as trace:
        locs = list(trace.definitions.locations)
        thread = {(loc.name, loc.group._ref): loc._ref for loc in locs}
        home = {loc._ref: thread[(loc.name[:-len(" metrics")], loc.group._ref)] for loc in locs
                if str(loc.type).endswith("METRIC") and loc.name.endswith(" metrics")
                and (loc.name[:-len(" metrics")], loc.group._ref) in thread}
    out: dict[int, list] = {}
    for ref, rows in library_events(anchor).items():
        out.setdefault(home.get(ref, ref), []).extend(rows)
    return {ref: sorted(rows, key=lambda r: (r[0], repr(r))) for ref, rows in out.items()}


@pytest.mark.parametrize("name", _cases("otf2", OTF2_TRACES))
def test_otf2_written_back_holds_the_same_records_and_definitions(name, otf2_merged):
    """OTF2 in, OTF2 out: every record as the library reads it (a thread's metrics that the
    replay moved to its metric location counted as the thread's), and every definition
    (properties of system tree nodes, paradigms, I/O paradigms included)."""
    from partrace.formats.otf2 import OTF2
    out = otf2_merged(name)
    assert _folded_events(out) == _folded_events(_anchor(name))
    src = OTF2.open(_anchor(name)).read_definitions().source
    back = OTF2.open(out).read_definitions().source
    assert back.keys() == src.keys()
    for kind in src:
        if kind == "strings":           # + the names of the metric locations added
            assert [r for r in back[kind] if r in src[kind]] == src[kind]
            extra = [r for r in back[kind] if r not in src[kind]]
            assert all(r["name"].endswith(" metrics") for r in extra), extra
        elif kind != "locations":       # their event counts are those written
            assert back[kind] == src[kind], kind
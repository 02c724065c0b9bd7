"""PAPI counters of a DUMPI trace written by libdumpi's writer (tests/data/dumpi/papi-3rank):
the counters defined from the perf labels and every call's values at entry and exit, value
by value as dumpi2ascii prints them, and the same in every output."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from partrace.formats.dumpi import DUMPI
from partrace.model import Kind
from tests.conftest import run_cli
from tests.support.compare import merge_on_rank_counts
from tests.support.counters import counter_defs, counter_rows

DATA = Path(__file__).resolve().parent.parent / "data" / "dumpi"
PAPI = DATA / "papi-3rank"
STAMP = re.compile(r"^(MPI\w+) (entering|returning) at walltime (\d+)\.(\d{9}), ")
PERF = re.compile(r"^Perfcounters: \[(.*)\]$")


def ascii_counters(txt: Path) -> tuple[list[str], list[tuple[int, str, int]]]:
    """dumpi2ascii -P output: the perf labels, and per call's entry then exit, in call
    order, (wall time ns, label, value) of each counter, in the order printed."""
    lines = txt.read_text().splitlines()
    labels, rows, time = [], [], None
    for no, line in enumerate(lines):
        if (m := STAMP.match(line)):
            time = int(m[3]) * 10**9 + int(m[4])
        elif (m := PERF.match(line)):
            for item in m[1].split(", "):
                name, _, value = item.rpartition("=")
                rows.append((time, name, int(value)))
        elif (m := re.match(r"^Performance counters: (\d+)$", line)):
            labels = [x.strip() for x in lines[no + 1:no + 1 + int(m[1])]]
    return labels, rows


def test_counter_values_equal_dumpi2ascii():
    reader = DUMPI.open(PAPI)
    defs = reader.read_definitions()
    cnt = defs.tables["counters"]
    names = dict(zip(np.asarray(cnt["id"]).tolist(), cnt["name"]))
    assert set(cnt["value_type"]) == {"int64"} and set(cnt["mode"]) == {"accumulated_start"}
    assert len(set(np.asarray(cnt["group"]).tolist())) == 1     # sampled together
    units = reader.units()
    assert len(units) == 3
    for unit in units:
        rank = unit.info[1]
        labels, want = ascii_counters(PAPI / f"papi3-{rank:04d}.txt")
        assert labels and list(names.values()) == labels
        ev = {k: np.concatenate([c["events"][k] for c in reader.decode(unit, defs)])
              for k in ("time", "kind", "counter", "value", "location", "call", "thread")}
        rows = ev["kind"] == Kind.COUNTER
        got = [(int(t), names[int(c)], int(v)) for t, c, v in
               zip(ev["time"][rows], ev["counter"][rows], ev["value"][rows].view(np.int64))]
        assert got == want
        assert len(want) == 2 * len(labels) * int((ev["kind"] == Kind.ENTER).sum())
        assert set(ev["location"][rows].tolist()) == {rank + 1}
        # on the call they were read around: between its ENTER and LEAVE
        call = ev["call"]
        for c in np.unique(call[rows]):
            mine = np.flatnonzero(call == c)
            kinds = ev["kind"][mine].tolist()
            assert kinds[0] == Kind.ENTER and kinds[-1] == Kind.LEAVE
            assert kinds.count(Kind.COUNTER) == 2 * len(labels)


def _want() -> tuple[list[str], dict[tuple[int, str], list[tuple[int, int]]]]:
    """dumpi2ascii's counters of every rank: the labels, and (location, label) -> [(ns,
    value)] in call order (entry, then exit)."""
    out: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for txt in sorted(PAPI.glob("papi3-*.txt")):
        rank = int(txt.stem.rsplit("-", 1)[1])
        labels, rows = ascii_counters(txt)
        for t, name, v in rows:
            out.setdefault((rank + 1, name), []).append((t, v))
    return labels, out


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    """The HDF5 merge (the same on 1 and 3 ranks), and the OTF2 and OTF merges."""
    tmp = tmp_path_factory.mktemp("papi")
    h5 = merge_on_rank_counts(PAPI, tmp, ranks=(None, 3))
    outs = {"h5": h5}
    for suffix in (".otf2", ".otf"):
        (tmp / suffix[1:]).mkdir()
        out = tmp / suffix[1:] / f"m{suffix}"
        r = run_cli(["merge", str(PAPI), "-o", str(out), "-q"])
        assert r.returncode == 0, r.stderr
        outs[suffix] = out
    return outs


@pytest.mark.mpi         # the merge fixture runs on 3 ranks too
def test_hdf5_merge_holds_dumpi2ascii_values(merged):
    labels, want = _want()
    defs = counter_defs(merged["h5"])
    assert [d[0] for _, d in sorted(defs.items())] == labels
    assert {d[2] for d in defs.values()} == {"int64"}
    rows, _ = counter_rows(merged["h5"])
    assert {(loc, defs[c][0]): v for (loc, c), v in rows.items()} == want


@pytest.mark.mpi         # the merge fixture runs on 3 ranks too
def test_otf2_metrics_in_score_p_shape(merged):
    """One metric class holds the counters (its members in label order, accumulated since
    the start, int64), a Metric record of all of them at each call's entry and exit."""
    otf2 = pytest.importorskip("otf2")
    labels, want = _want()
    got: dict[tuple[int, str], list[tuple[int, int]]] = {}
    with otf2.reader.open(str(merged[".otf2"])) as t:
        classes = [c for c in t.definitions.metric_classes if len(c.members) > 1]
        assert len(classes) == 1
        members = classes[0].members
        assert [m.name for m in members] == labels
        assert {str(m.metric_mode) for m in members} == {"MetricMode.ACCUMULATED_START"}
        assert str(classes[0].occurrence) == "MetricOccurrence.SYNCHRONOUS"
        assert {str(m.value_type) for m in members} == {"Type.INT64"}
        res = t.definitions.clock_properties.timer_resolution
        for loc, ev in t.events:
            if type(ev).__name__ == "Metric":
                assert ev.metric._ref == classes[0]._ref
                for m, v in zip(members, ev.values):
                    # Metric records of a thread stand on it (no metric locations here)
                    got.setdefault((loc._ref, m.name), []).append(
                        (ev.time * 10**9 // res, v))
    assert got == want


@pytest.mark.mpi         # the merge fixture runs on 3 ranks too
@pytest.mark.skipif(shutil.which("otfprint") is None, reason="otfprint (otf-trace) not installed")
def test_otf_counter_records(merged):
    """otfprint's Counter records of the OTF merge: each counter's values per process, as
    dumpi2ascii printed them, and the DefCounter properties say accumulated, signed."""
    labels, want = _want()
    text = subprocess.run(["otfprint", str(merged[".otf"])], capture_output=True, text=True,
                          check=True).stdout
    names = {int(m[1]): m[2] for m in re.finditer(
        r'DefCounter: stream 0, counter (\d+), name "([^"]+)", properties ACC/START/SIGNED8',
        text)}
    assert sorted(names.values()) == sorted(labels)
    got: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for m in re.finditer(r"\t(\d+) Counter: process (\d+), counter (\d+), value (-?\d+)", text):
        got.setdefault((int(m[2]), names[int(m[3])]), []).append((int(m[1]), int(m[4])))
    assert got == want


def test_info_shows_the_counters():
    """`partrace info`: each counter by name with its COUNTER events (dumpi2ascii's values
    of it), unit, what a value is and its type."""
    import json
    labels, want = _want()
    r = run_cli(["info", str(PAPI), "--json"])
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)["counters"]
    assert [(c["name"], c["events"]) for c in shown] == \
        [(n, sum(len(v) for (_, name), v in want.items() if name == n)) for n in labels]
    assert {(c["unit"], c["mode"], c["value_type"]) for c in shown} == \
        {("#", "accumulated_start", "int64")}
    text = run_cli(["info", str(PAPI)]).stdout
    assert f"counters ({len(labels)}): " in text
    for c in shown:
        assert re.search(rf"^  {re.escape(c['name'])} +{c['events']:,}  #  accumulated_start"
                         rf"  int64$", text, re.M), c["name"]


def test_counters_are_matched_by_label_across_ranks(tmp_path):
    """Ranks listing their labels in another order: each value is drawn as the counter its
    own rank's label names (ids by first appearance over the ranks); a value past a rank's
    labels stays in the perf table only (libdumpi writes as many values as labels)."""
    from tests.support.dumpi_encode import Call, rank_path, write_meta, write_rank
    write_meta(tmp_path, "lab", 2)
    labels = {0: ["A", "B"], 1: ["B", "A", "C"]}
    perf = {0: ((1, 2), (3, 4), (99, 98)), 1: ((5, 6), (7, 8), (9, 10))}
    for r in (0, 1):
        calls = [Call("MPI_Comm_rank", {"comm": 2, "rank": r}, wall=(100 + r, 200 + r),
                      perf=perf[r])]
        write_rank(rank_path(tmp_path, "lab", r), calls, mask=0xC8, perf_labels=labels[r])
    reader = DUMPI.open(tmp_path)
    defs = reader.read_definitions()
    assert list(defs.tables["counters"]["name"]) == ["A", "B", "C"]
    got = {}
    for unit in reader.units():
        (chunk,) = reader.decode(unit, defs)
        ev = chunk["events"]
        rows = ev["kind"] == Kind.COUNTER
        for loc, t, c, v in zip(ev["location"][rows], ev["time"][rows], ev["counter"][rows],
                                ev["value"][rows]):
            got.setdefault((int(loc), "ABC"[int(c) - 1]), []).append((int(t), int(v)))
        assert len(chunk["perf"]) == 3
    assert got == {(1, "A"): [(100, 1), (200, 2)], (1, "B"): [(100, 3), (200, 4)],
                   (2, "B"): [(101, 5), (201, 6)], (2, "A"): [(101, 7), (201, 8)],
                   (2, "C"): [(101, 9), (201, 10)]}


@pytest.mark.mpi
@pytest.mark.parametrize("suffix", [".otf2", ".otf", ".json", ".pftrace"])
def test_outputs_same_on_1_and_3_ranks(tmp_path, suffix):
    """Every file of the output, byte for byte, whatever the rank count."""
    written = []
    for n in (None, 3):
        folder = tmp_path / f"n{n}"
        folder.mkdir()
        r = run_cli(["merge", str(PAPI), "-o", str(folder / f"m{suffix}"), "-q"], nranks=n)
        assert r.returncode == 0, r.stderr
        written.append({str(p.relative_to(folder)): p.read_bytes()
                        for p in sorted(folder.rglob("*")) if p.is_file()})
    assert len(written[0]) >= 1 and written[0] == written[1]

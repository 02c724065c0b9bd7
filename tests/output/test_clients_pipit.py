"""Pipit reads the OTF2 output of every fixture whole, and what it computes equals partrace's
own analyses of the source: ``flat_profile()`` (exclusive time per region name, the mean over
processes of each process's sum) equals ``partrace profile``, ``comm_matrix()`` (bytes
between processes) equals ``partrace comm``.  Pipit's reader and analyses are followed step
by step in tests/support/pipit_like.py (PyPI's ``pipit`` is an empty placeholder).

Where Pipit's rules and partrace's differ, the test says which and compares with Pipit's
rule applied to the source's own rows: a Leave that does not name the innermost open region
(ring8's crossing MPI_Bcast/MPI_Allreduce) closes the innermost one in partrace (as
otfprofile) and the innermost of its name in Pipit; Pipit takes a message's receiver rank
as its process, which holds where messages go between processes only.
An OTF2 input is written back record by record, with the Metric records that Pipit cannot
take from a thread on metric locations (the fixtures mpi3 and threads2, which Pipit cannot
read as they are: two metric classes on a thread, metrics before no event of their time)."""
from __future__ import annotations

import csv
import io
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from partrace.model import Kind
from tests.conftest import run_cli
from tests.formats.test_contract import FIXTURES, _label
from tests.support import pipit_like

otf2 = pytest.importorskip("otf2")

CASES = [pytest.param(path, id=f"{fmt}-{_label(path)}") for fmt, paths in FIXTURES.items()
         for path in paths]


def _csv(args) -> list[dict]:
    r = run_cli([*args, "--csv"])
    assert r.returncode == 0, r.stderr
    return list(csv.DictReader(io.StringIO(r.stdout)))


@pytest.fixture(scope="module", params=CASES)
def read(request, tmp_path_factory):
    """(the source, Pipit's DataFrame of its OTF2 output, the archive, each partrace
    location's process)."""
    trace = request.param
    folder = tmp_path_factory.mktemp("pipit")
    r = run_cli(["merge", str(trace), "-o", str(folder / "traces.otf2"), "-q"])
    assert r.returncode == 0, r.stderr
    # OTF2 input too (written back record by record), whether or not Pipit reads the source:
    # the replay moves the Metric records Pipit cannot take from a thread to metric locations
    df, _ = pipit_like.read(folder)
    with otf2.reader.open(str(folder / "traces.otf2")) as t:
        process_of = {loc._ref: loc.group._ref for loc in t.definitions.locations}
    # partrace's location ids are the output's refs, but for OTF2 input (the source's refs)
    # and a location group's row (its locations' parent: partrace comm --by process) is the
    # process of its locations
    import partrace
    tables = partrace.open(trace).definitions.tables
    locs = tables.get("otf2_locations")
    if locs is None:
        return trace, df, folder / "traces.otf2", process_of
    ref_of = dict(zip(locs["id"].tolist(), locs["ref"].tolist()))
    ours = {i: process_of[r] for i, r in ref_of.items()}
    rows = tables["locations"]
    ours.update({int(p): ours[int(i)] for i, p in zip(rows["id"], rows["parent"])
                 if int(i) in ours and int(p)})
    return trace, df, folder / "traces.otf2", ours


def test_reads_every_event(read):
    _, df, archive, _ = read
    # every thread's records but Metric ones are rows (the archive's own counts)
    with otf2.reader.open(str(archive)) as t:
        metric = sum(1 for loc, ev in t.events if type(ev).__name__ == "Metric"
                     and str(loc.type).endswith("CPU_THREAD"))
        threads = sum(loc.number_of_events for loc in t.definitions.locations
                      if str(loc.type).endswith("CPU_THREAD"))
    assert len(df) == threads - metric


def _source_rows(trace, process_of):
    """Pipit's DataFrame of the source's Enter/Leave rows (partrace's reading of them), each
    location's in its order."""
    import partrace
    t = partrace.open(trace)
    ev = t.columns("events")
    regs = t.definitions.tables["regions"]
    names = {int(i): str(n) for i, n in zip(regs["id"], regs["name"])}
    kind = np.asarray(ev["kind"]).astype(np.int64)
    rows = np.flatnonzero(((kind == Kind.ENTER) | (kind == Kind.LEAVE))
                          & np.isin(np.asarray(ev["region"]).astype(np.int64), list(names)))
    rows = rows[np.lexsort((np.asarray(ev["seq"])[rows], np.asarray(ev["location"])[rows],
                            np.asarray(ev["time"])[rows]))]
    loc = np.asarray(ev["location"]).astype(np.int64)[rows]
    return pd.DataFrame({
        "Timestamp (ns)": np.asarray(ev["time"]).astype(np.float64)[rows],
        "Event Type": np.where(kind[rows] == Kind.ENTER, "Enter", "Leave"),
        "Name": [names[int(r)] for r in np.asarray(ev["region"])[rows]],
        "Process": [process_of[int(x)] for x in loc], "Thread": loc})


def _crossing(df) -> bool:
    """Whether some Leave does not name the innermost open region of its thread."""
    for _, rows in df.groupby(["Process", "Thread"]):
        stack = []
        for typ, name in zip(rows["Event Type"], rows["Name"]):
            if typ == "Enter":
                stack.append(name)
            elif not stack or stack.pop() != name:
                return True
    return False


def test_flat_profile_equals_partrace_profile(read):
    trace, df, _, process_of = read
    got = pipit_like.flat_profile(df)
    source = _source_rows(trace, process_of)
    # the archive holds what Pipit needs: its rule on the source's rows gives the same
    same = pipit_like.flat_profile(source)
    assert got.keys() == same.keys()
    for name, ns in same.items():
        assert got[name] == pytest.approx(ns, rel=1e-12, abs=1e-6), name
    if _crossing(source):
        pytest.skip("a Leave that does not name the innermost open region: Pipit and "
                    "partrace profile close different regions (compared with Pipit's rule "
                    "on the source above)")
    sums = defaultdict(float)          # (region name, process) -> exclusive ns
    for row in _csv(["profile", str(trace), "--per-location"]):
        sums[(row["region"], process_of[int(row["location_id"])])] += int(row["exclusive_ns"])
    per_name = defaultdict(list)
    for (name, _), ns in sums.items():
        per_name[name].append(ns)
    want = {name: float(np.mean(v)) for name, v in per_name.items()}
    assert got.keys() == want.keys()
    for name, ns in want.items():
        assert got[name] == pytest.approx(ns, rel=1e-12, abs=1e-6), name


def test_comm_matrix_equals_partrace_comm(read):
    trace, df, archive, process_of = read
    with otf2.reader.open(str(archive)) as t:
        group_of = {loc._ref: loc.group._ref for loc in t.definitions.locations}
        # Pipit takes the rank a message names as the receiver's process
        ends = {(ev.communicator.group.members[ev.receiver]._ref, loc._ref)
                for loc, ev in t.events if type(ev).__name__ in ("MpiSend", "MpiIsend")}
        world = [c for c in t.definitions.comms if c._ref == 0]
        ranks = {loc._ref: r for r, loc in enumerate(world[0].group.members)} if world else {}
    if any(ranks.get(x) != group_of.get(x) for pair in ends for x in pair):
        pytest.skip("messages between locations that are not processes (Pipit's "
                    "comm_matrix takes the receiver's rank as its process)")
    got = pipit_like.comm_matrix(df)
    want = np.zeros_like(got)
    for row in _csv(["comm", str(trace), "--by", "process"]):
        want[process_of[int(row["sender_id"])], process_of[int(row["receiver_id"])]] += \
            int(row["bytes"])
    assert (got == want).all()

"""PAPI counters of a DUMPI trace written by libdumpi's writer (tests/data/dumpi/papi-3rank):
the counters defined from the perf labels and every call's values at entry and exit, value
by value as dumpi2ascii prints them, and the same in every output."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from partrace.formats.dumpi import DUMPI
from partrace.model import Kind

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

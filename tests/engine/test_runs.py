"""Sorted runs within a budget: kept in memory while the process fits its share, else spilled."""
import numpy as np

from partrace.engine.runs import Run, RunStore, SpilledRun, resident_bytes
from partrace.model import Table, column

SCHEMA = {"events": [column("time"), column("location"), column("seq")]}


def _rows(n=10_000):
    rng = np.random.default_rng(8)
    return Table({"time": rng.integers(0, 10**6, n), "location": rng.integers(1, 9, n),
                  "seq": np.arange(n)})


def test_runs_spill_once_the_process_is_resident_beyond_its_share(tmp_path):
    assert resident_bytes() > 10 << 20          # Linux: this process, libraries included
    t = _rows()
    roomy = RunStore(SCHEMA, 1 << 40, tmp_path, keep_fraction=0.5)
    tight = RunStore(SCHEMA, 1 << 40, tmp_path, keep_fraction=0.5, resident_fraction=1e-7)
    try:
        roomy.add("events", t)
        tight.add("events", t)      # a 100 KiB share: the interpreter alone is beyond it
        assert isinstance(roomy.runs["events"][0], Run) and roomy.spilled_bytes == 0
        spilled = tight.runs["events"][0]
        assert isinstance(spilled, SpilledRun) and tight.spilled_bytes > 0
        kept = roomy.runs["events"][0].rows(0, len(t))
        back = spilled.rows(0, len(t))
        for c in ("time", "location", "seq"):
            assert np.array_equal(back[c], kept[c])
        order = np.lexsort((t["seq"], t["location"], t["time"]))
        assert np.array_equal(kept["seq"], t["seq"][order])
    finally:
        roomy.close()
        tight.close()

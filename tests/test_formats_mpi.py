"""Every binary fixture merged to HDF5 gives the same data on 1, 2 and 4 ranks."""
import pytest

from tests.conftest import DATA, run_cli
from tests.support.compare import assert_same_content

pytestmark = pytest.mark.mpi

TRACES = [
    DATA / "ovni" / "v1-zoo-small" / "ovni",
    DATA / "ovni" / "v3-mpisim-small" / "ovni",
    DATA / "ross" / "phold-np2-opt-gvt-pekplp" / "stats",
    DATA / "ross" / "pi-np2-opt-evtrace-full-model-gvt" / "stats",
    DATA / "ross" / "pi-np1-seq-allmodes" / "stats",
]


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.parent.name)
def test_same_hdf5_for_any_rank_count(tmp_path, trace):
    outs = []
    for n in (None, 2, 4):
        out = tmp_path / f"o{n}.h5"
        r = run_cli(["merge", str(trace), "-o", str(out), "-q"], nranks=n)
        assert r.returncode == 0, r.stderr
        outs.append(out)
    for out in outs[1:]:
        assert_same_content(outs[0], out)

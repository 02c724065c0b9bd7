"""The ovni and ROSS fixtures merged to HDF5 give the same data on 1, 2 and 4 ranks
(DUMPI: tests/formats/test_dumpi_mpi.py; OTF: tests/test_cli_otf.py)."""
import pytest

from tests.conftest import DATA
from tests.support.compare import merge_on_rank_counts

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
    merge_on_rank_counts(trace, tmp_path)


def test_ross_regions_split_across_ranks(tmp_path):
    """A generated ROSS run of several 4 MB regions per file: ranks take contiguous
    regions mid-file, so a location's seq runs on across ranks (the survey scan)."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, str(root / "scripts" / "gen_ross.py"), str(tmp_path / "run"),
                    "--mb", "9", "--kinds", "gvt,evtrace,model", "--pes", "4", "--nkp", "2",
                    "--lps-per-pe", "16"], check=True, capture_output=True)
    merge_on_rank_counts(tmp_path / "run", tmp_path, ranks=(None, 2, 3))

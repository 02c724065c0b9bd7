"""A trace of a few hundred bytes merged to every output at 1..8 ranks: most ranks
get no rows, and a table may have rows whose text is all empty (a dataset with no
element is stored without chunks).  Every output must come out, the same at every
rank count, holding the trace's events."""
from __future__ import annotations

import filecmp
import sys

import h5py
import numpy as np
import pytest

from tests.conftest import ROOT, mpiexec
from tests.support.compare import assert_same_content
from tests.support.merge_outputs import OUTPUTS

# Two streams, one process each, written as the OTF library writes them (hex numbers, a
# time line and a process line before each record, the last state repeated at the end).
# The comments are empty: the text table has rows but its text has no byte.
MASTER = "1:1\n2:2\n"
DEFS = 'DV1.c.4"salmon"\nDTR3b9aca00\nDP1NM"P0"\nDP2NM"P1"\nDFG1NM"g"\nDF1G1NM"main"\n'
STREAMS = {1: '10\n*1\nE1\n#""\n20\n*1\nL1\n20\n*1\n',
           2: '15\n*2\nE1\n#""\n25\n*2\nL1\n25\n*2\n'}
# (time, process, region) of the Enter and Leave records above, in time order
EXPECTED = [(0x10, 1, 1), (0x15, 2, 1), (0x20, 1, 1), (0x25, 2, 1)]


def write_tiny(folder):
    folder.mkdir()
    (folder / "t.otf").write_text(MASTER)
    (folder / "t.0.def").write_text(DEFS)
    for s, text in STREAMS.items():
        (folder / f"t.{s}.events").write_text(text)
    return folder / "t.otf"


def merge_all(trace, out, nranks: int):
    import os
    import subprocess
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PARTRACE_MPI", None)
    r = subprocess.run([mpiexec(), "-n", str(nranks), sys.executable, "-m",
                        "tests.support.merge_outputs", str(trace), str(out)],
                       capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return out


def same_files(a, b) -> None:
    """Folders a and b hold the same files, byte for byte (HDF5: the same content)."""
    # the parts layout's per-rank files (NAME.parts/): one folder per rank count above 1
    cmp = filecmp.dircmp(a, b, ignore=[f"{n}.parts" for n in OUTPUTS])
    assert not cmp.left_only and not cmp.right_only, (cmp.left_only, cmp.right_only)
    for name in cmp.common_files:
        if name.endswith(".h5"):
            assert_same_content(a / name, b / name)
        else:
            assert filecmp.cmp(a / name, b / name, shallow=False), name
    for name in cmp.common_dirs:
        same_files(a / name, b / name)


@pytest.mark.mpi
@pytest.mark.slow
def test_a_tiny_two_stream_trace_merges_to_every_output_at_1_to_8_ranks(tmp_path):
    """At 2 ranks each has a stream; at 3 one rank has none; at 8 six have none."""
    trace = write_tiny(tmp_path / "trace")
    first = merge_all(trace, tmp_path / "n1", 1)
    for name in OUTPUTS:
        assert (first / name).exists(), name
    with h5py.File(first / "merged.h5", "r") as f:
        ev = f["events"]
        enter_leave = np.isin(ev["kind"][:], [1, 2])
        got = list(zip(ev["ticks"][:][enter_leave].tolist(), ev["location"][:][enter_leave].tolist(),
                       ev["region"][:][enter_leave].tolist()))
        assert got == EXPECTED
        assert f["text"]["location"][:].tolist() == [1, 2]
    for n in (2, 3, 8):
        same_files(first, merge_all(trace, tmp_path / f"n{n}", n))

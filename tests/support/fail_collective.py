"""``python -m tests.support.fail_collective ARGS``: the CLI, with one rank failing in the
collective HDF5 write (tests/output/test_hdf5_collective.py).

``PARTRACE_TEST_FAIL_COLLECTIVE=RANK:N``: rank RANK raises on its N-th dataset write
(1 = the first), before the collective call the other ranks are about to make."""
from __future__ import annotations

import os

from partrace.engine.mpi import world
from partrace.output import hdf5_collective

_original = hdf5_collective._selection
_calls = 0


def _failing(ds, *args):
    global _calls
    rank, nth = map(int, os.environ["PARTRACE_TEST_FAIL_COLLECTIVE"].split(":"))
    if world().rank == rank:
        _calls += 1
        if _calls == nth:
            raise OSError(f"injected failure in the collective write of {ds.name}")
    return _original(ds, *args)


hdf5_collective._selection = _failing

if __name__ == "__main__":
    from partrace.cli import entry
    entry()

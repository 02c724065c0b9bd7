"""Merge one trace to every output partrace writes, in one MPI job.

Run under mpiexec (tests/output/test_tiny_traces.py):

    python -m tests.support.merge_outputs TRACE OUT_FOLDER

writes OUT_FOLDER/merged{.h5, -parts.h5, .otf, .otf2, .pftrace, .json}; one job instead of one
per output keeps a test over many rank counts short.
"""
from __future__ import annotations

import sys
from pathlib import Path

from partrace import api

# file name -> api.merge keywords
OUTPUTS = {
    "merged.h5": {},
    "merged-parts.h5": {"layout": "parts"},
    "merged.otf": {},
    "merged.otf2": {},
    "merged.pftrace": {},
    "merged.json": {},
}


def main(trace: str, out: str) -> None:
    from partrace.engine.mpi import world
    try:
        for name, options in OUTPUTS.items():
            api.merge(trace, Path(out) / name, **options)
    except BaseException:
        # one rank's error must not leave the others waiting in a collective
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        world().abort(1)


if __name__ == "__main__":
    main(*sys.argv[1:])

"""Listing the units: on rank 0 (TraceReader.units), or in parts on every rank at once
(TraceReader.list_part, met by an allgather and TraceReader.units_from)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from partrace.engine.mpi import serial
from partrace.engine.pipeline import read_plan
from partrace.formats.base import TraceReader, Unit
from partrace.formats.ross import ROSS
from partrace.formats.ross.reader import ROSSReader
from tests.conftest import DATA, ROOT, mpiexec

SEQ_RUN = DATA / "ross" / "pi-np1-seq-allmodes" / "stats"


class Counted(ROSSReader):
    """The ROSS reader, counting how the engine lists its units."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.calls = []

    def units(self):
        self.calls.append("units")
        return super().units()

    def list_part(self, rank, size):
        self.calls.append(("list_part", rank, size))
        return super().list_part(rank, size)


class Serial(Counted):
    """The same reader without the hook (to the engine): listed by units() on rank 0."""
    list_part, units_from = TraceReader.list_part, TraceReader.units_from

    def units(self):
        self.calls.append("units")
        return ROSSReader.units_from(self, [ROSSReader.list_part(self, 0, 1)])


def test_a_reader_with_list_part_is_listed_in_parts_and_gets_the_same_plan():
    parted = Counted(SEQ_RUN, region_size=512)
    units, mine, defs = read_plan(serial(), parted)
    assert parted.calls == [("list_part", 0, 1)]
    plain = Serial(SEQ_RUN, region_size=512)
    units0, mine0, defs0 = read_plan(serial(), plain)
    assert plain.calls == ["units"]
    assert [(u.key, u.size, u.info) for u in units] == [(u.key, u.size, u.info) for u in units0]
    assert parts_of(mine, units) == [u.key for u in units] and len(units) > 3
    assert len(mine) < len(units)       # a file's consecutive regions joined (one rank)
    assert defs.attrs == defs0.attrs


def parts_of(joined, units) -> list[str]:
    """The keys of the ``units`` that the ``joined`` units hold (read_plan's share is
    joined: ROSSReader.joined), in key order."""
    return sorted(u.key for u in units if any(
        j.info["path"] == u.info["path"] and j.info["start"] <= u.info["start"] < j.info["end"]
        for j in joined))


# Under mpiexec: which files each rank hopped to list the regions, and the plan it got.
SCRIPT = """
import json, sys
from partrace.engine.mpi import world
from partrace.engine.pipeline import read_plan
from partrace.formats.ross import ROSS, listing
hopped = []
real = listing.list_piece
listing.list_piece = lambda piece, *a, **k: hopped.append(
    [piece.path.rsplit("/", 1)[1], piece.first, piece.stop]) or real(piece, *a, **k)
comm = world()
units, mine, defs = read_plan(comm, ROSS.open(sys.argv[1], region_size=512))
with open(f"{sys.argv[2]}/{comm.rank}.json", "w") as f:
    json.dump([comm.rank, hopped, [u.key for u in units],
               [[u.info["path"], u.info["start"], u.info["end"]] for u in mine],
               defs.attrs["nlp"]], f)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("nranks", [2, 3])
def test_every_rank_hops_its_stretch_and_learns_every_unit(nranks, tmp_path):
    r = subprocess.run([mpiexec(), "-n", str(nranks), sys.executable, "-c", SCRIPT, str(SEQ_RUN),
                        str(tmp_path)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    got = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(nranks)]
    assert [g[0] for g in got] == list(range(nranks))
    units = ROSS.open(SEQ_RUN, region_size=512).units()
    whole = [u.key for u in units]
    files = sorted(SEQ_RUN.iterdir())
    hopped = [tuple(piece) for g in got for piece in g[1]]    # in rank order
    # each region of each file hopped once, in all; a file's stretches in rank order
    want = []
    for f in files:
        want += [(f.name, k) for k in range(-(-f.stat().st_size // 512))]
    listed = [(name, k) for name, a, b in hopped for k in range(a, b)]
    assert sorted(listed) == sorted(want)
    for f in files:
        mine = [k for name, k in listed if name == f.name]
        assert mine == sorted(mine)
    assert all(g[1] for g in got)                             # by every rank
    assert all(g[2] == whole for g in got)                    # every rank knows every unit
    shares = [parts_of([Unit("", 0, dict(zip(("path", "start", "end"), j))) for j in g[3]],
                       units) for g in got]
    assert sorted(k for share in shares for k in share) == whole    # shares: each unit once
    assert len({g[4] for g in got}) == 1

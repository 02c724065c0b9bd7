"""The base of outputs whose every location is written by one rank, its owner.

Locations are dealt to ranks in contiguous blocks of the id order, so the rows of a
location reach one rank (destination mode) and each rank writes its own locations'
pieces: no byte then depends on the rank count.  The blocks are balanced by the bytes of
the locations' rows where the engine weighed them (``location_bytes``), else by count.
A sink on this base sets its sorted location ids with ``own`` and names the tables it
writes in ``routed``; every other table's rows stay where they are.
"""
from __future__ import annotations

import numpy as np

from ..engine.mpi import Comm
from ..dealing import contiguous_owners
from ..errors import PartraceError
from ..model import Table
from .staged import StagedSink

EVENTS = "events"


def weights_of(ids: np.ndarray, location_bytes) -> np.ndarray:
    """The weighed bytes of each of ``ids`` (0 where none were weighed)."""
    known, weight = location_bytes
    if not len(known):
        return np.zeros(len(ids), np.int64)
    at = np.minimum(np.searchsorted(known, ids), len(known) - 1)
    return np.where(known[at] == ids, weight[at], 0)


class LocationOwnedSink(StagedSink):
    mode = "destination"
    weighs_locations = True
    #: what a location becomes in this output, for the error of a trace with none
    location_role = "to write events of"

    def own(self, comm: Comm, loc_ids: np.ndarray, routed=()) -> None:
        """Deal the locations (``loc_ids``, sorted) to the ranks; ``routed``: the tables
        written besides the events, each row to its location's owner."""
        self.loc_ids = loc_ids
        n = len(loc_ids)
        weights = (np.ones(n, np.int64) if self.location_bytes is None
                   else weights_of(loc_ids, self.location_bytes))
        self.owner = contiguous_owners(weights, comm.size)
        self.routed = {EVENTS, *routed}

    def location_index(self, locations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's place in ``loc_ids``, and whether its location is there."""
        i = np.minimum(np.searchsorted(self.loc_ids, locations), len(self.loc_ids) - 1)
        return i, self.loc_ids[i] == locations

    def _index(self, locations: np.ndarray, table: str) -> np.ndarray:
        """Each row's location index; a location the definitions lack fails the run."""
        if not len(self.loc_ids):
            raise PartraceError(f"{table}: the trace defines no location {self.location_role}")
        i, ok = self.location_index(locations)
        if not ok.all():
            loc = int(locations[np.flatnonzero(~ok)[0]])
            raise PartraceError(f"{table}: location {loc} is not in the trace's locations table")
        return i

    def destinations(self, comm: Comm, name: str, table: Table) -> np.ndarray:
        if name not in self.routed:
            return np.full(len(table), comm.rank, dtype=np.int64)     # not written
        return self.owner[self._index(np.asarray(table["location"]), name)]

"""An OTF2 input written back as OTF2, in its own form (formats/otf2/replay.py).

Every record goes back as its own record type with its raw arguments, arrays and
attribute list, and the source's global definitions are written again.  The OTF2 sink
(otf2_sink.py) becomes this one at prepare when the definitions are OTF2's own.  What
differs from it, on their shared base (otf2_archive.py): the locations are the source's
refs, the value and attribute tables go with their events to the location's owner, and
the records are written window by window through event writers held open for the run
(the library keeps a chunk per location), not spilled and drained at commit.  Each
location has a slot for its metric location's file (the layout's stride, as the OTF2
sink's): a thread's Metric records that Pipit cannot take go there (replay.py), the
replay opening that location's writer through the archive when it first needs it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
from ..model import Definitions, Schema, Table
from .otf2_archive import CREATOR, OTF2ArchiveSink


class OTF2ReplaySink(OTF2ArchiveSink):
    wants_next_keys = True      # rows a window cut splits are held for the next window

    def plan(self, defs: Definitions, schema: Schema, samples: list):
        from ..formats.otf2.replay import Replay
        self.replay = Replay(defs, super().plan(defs, schema, samples))
        return self.replay.layout

    def written_tables(self) -> set[str]:
        return super().written_tables() | self.replay.tables

    def open_writers(self, folder: Path) -> None:
        self.archive.locations = []
        self.replay.archive = self.archive      # metric locations' writers, as needed
        self.writers = np.asarray([self.archive.writer(int(i)) if self.has_files(int(i)) else 0
                                   for i in self.layout.loc_ids[self.mine]], dtype=np.uint64)

    def write(self, comm: Comm, tables: dict[str, Table]) -> None:
        with comm.guard():
            self.replay.write(tables, self.next_keys, self.writers, self.first_mine, self.counts)
        comm.check()

    def finish_events(self) -> None:
        self.archive.close()
        self.replay.finish()        # nothing may be held back at the end

    def write_global(self, counts: np.ndarray, first: int, last: int) -> None:
        self.replay.write_global(self.staging.dir, self.name, counts, CREATOR)

    def has_files(self, location: int) -> bool:
        return self.replay.has_location(location)    # else a row standing for a group

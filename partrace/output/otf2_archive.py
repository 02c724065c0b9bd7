"""What both OTF2 sinks share: an OTF2 archive (NAME.otf2 anchor file, NAME.def global
definitions, NAME/<location>.evt event files) written by the owners of its locations.

Locations are dealt to ranks as every location-owned output deals them (owned.py).
Each rank writes its locations' event files in an archive of its own under the staging
folder; at commit rank 0 writes the anchor file and the global definitions (with each
location's record count) and every rank moves its event files into the archive's
folder.  How the records reach the library is the sink's: spilled and drained at commit
(otf2_sink.py), or written back window by window (otf2_replay_sink.py).
"""
from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import numpy as np

from ..engine.mpi import Comm
from ..errors import UsageError
from ..model import Definitions, Schema, not_utf8_warning
from .counters import counter_columns
from .owned import LocationOwnedSink

SUFFIX = ".otf2"
CREATOR = "partrace"
MAX_MEMBERS = 255           # values one OTF2 Metric record holds


class OTF2ArchiveSink(LocationOwnedSink):
    windows = True

    def __init__(self, path, overwrite: bool = False):
        super().__init__(path, overwrite)
        if self.final.suffix != SUFFIX:
            raise UsageError(f"{path}: an OTF2 anchor file is named NAME.otf2")
        self.name = self.final.stem
        self.archive = None
        self.lost = 0                       # LEAVE rows of no region with none open

    def outputs(self) -> list[Path]:
        return [self.final, self.final.with_suffix(".def"), self.final.with_suffix("")]

    def location_index(self, locations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.layout.location_index(locations)

    # -- definitions ---------------------------------------------------------
    def start(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        """The refusals that need no decode, before it: the otf2 package, the schema."""
        with comm.guard():
            self._refusals(schema)
        comm.check()
        super().start(comm, defs, schema)

    @staticmethod
    def _refusals(schema: Schema) -> list:
        """The sample tables' columns, once the otf2 package loads and each table's fit."""
        from ..formats.otf2.library import load
        load()          # one clear line on every rank if the otf2 package is missing
        samples = counter_columns(schema)
        wide = [t for t, cols in samples if len(cols) > MAX_MEMBERS]
        if wide:
            raise UsageError(f"{wide[0]}: more than {MAX_MEMBERS} sampled columns, more "
                             "than one OTF2 metric record holds")
        return samples

    def prepare(self, comm: Comm, defs: Definitions, schema: Schema) -> None:
        with comm.guard():
            self.layout = self.plan(defs, schema, self._refusals(schema))
        comm.check()
        L = self.layout
        changed = L.names_not_utf8()
        if changed and comm.rank == 0:
            warnings.warn(f"{self.final}: {not_utf8_warning(changed)} (OTF2 strings are UTF-8)")
        self.own(comm, L.loc_ids, routed=self.written_tables())
        self.mine = np.flatnonzero(self.owner == comm.rank)     # contiguous
        self.first_mine = int(self.mine[0]) if len(self.mine) else 0
        self.span = [np.iinfo(np.int64).max, np.iinfo(np.int64).min]     # records' times
        self.stride = self.files_per_location()
        self.counts = np.zeros(len(self.mine) * self.stride, np.int64)  # records per file
        self.stage(comm)
        with comm.guard():
            from ..formats.otf2.library import EventArchive
            folder = self.staging.path(f"rank-{comm.rank}")
            folder.mkdir()
            self.archive = EventArchive(folder)
            self.open_writers(folder)
        comm.check()

    def plan(self, defs: Definitions, schema: Schema, samples: list):
        """The OTF2 definitions the rows map to (formats/otf2/definitions.py)."""
        from ..formats.otf2.definitions import plan
        return plan(defs, schema, samples)

    def files_per_location(self) -> int:
        """Event files per location: its own and (metrics) its metric location's."""
        return self.layout.stride

    def written_tables(self) -> set[str]:
        """The tables written besides the events (each row to its location's owner)."""
        return {t for t, _, _ in self.layout.sample_tables}

    def open_writers(self, folder: Path) -> None:
        """Local, once staged: what this rank writes its records through."""
        raise NotImplementedError

    def _writer_ids(self) -> np.ndarray:
        """The OTF2 location of each event file this rank writes: each of its locations',
        then (metrics) its metric location's."""
        ids = self.layout.loc_ids[self.mine].astype(np.int64)
        if self.stride == 1:
            return ids
        return np.stack([ids, self.layout.metric_ids[self.mine]], axis=1).reshape(-1)

    # -- end ------------------------------------------------------------------
    def commit(self, comm: Comm) -> None:
        with comm.guard():
            self.finish_events()
        comm.check()
        lost = sum(comm.allgather(self.lost))
        if lost and comm.rank == 0:
            warnings.warn(f"{self.final}: {lost} LEAVE event(s) naming no region (leave the "
                          "innermost open one) with no region open on their location: not "
                          "written (an OTF2 Leave names its region)")
        counts = np.concatenate(comm.allgather(self.counts))
        spans = comm.allgather(self.span)
        first = min(s[0] for s in spans)
        last = max(s[1] for s in spans)
        if first > last:
            first = last = 0        # no record at all
        folder = self.staging.path(self.name)
        with comm.guard():
            if comm.rank == 0:
                self.write_global(counts, first, last)
                folder.mkdir(exist_ok=True)
        comm.check()
        comm.barrier()
        with comm.guard():      # every rank moves its own locations' files into the archive
            events = self.staging.path(f"rank-{comm.rank}") / "events"
            for k, lid in enumerate(self._writer_ids().tolist()):
                if not self.has_files(lid):
                    continue
                # a metric location without records is not defined: its files go
                keep = k % self.stride == 0 or self.counts[k] > 0
                for suffix in (".evt", ".def"):
                    if keep:
                        os.replace(events / f"{lid}{suffix}", folder / f"{lid}{suffix}")
                    else:
                        os.unlink(events / f"{lid}{suffix}")
        comm.check()
        comm.barrier()
        with comm.guard():
            if comm.rank == 0:
                for r in range(comm.size):
                    shutil.rmtree(self.staging.path(f"rank-{r}"))
        comm.check()
        self.publish(comm, [p.name for p in self.outputs()])

    def finish_events(self) -> None:
        """Local: the last records through the library, then the archive closed."""
        raise NotImplementedError

    def write_global(self, counts: np.ndarray, first: int, last: int) -> None:
        """Rank 0: the anchor file and the global definitions (each location's record
        count, the records' time span)."""
        raise NotImplementedError

    def has_files(self, location: int) -> bool:
        """Whether an OTF2 location (a writer's id) has event files."""
        return True

    def release(self) -> None:
        if self.archive is not None:
            try:
                self.archive.close()
            except OSError:
                pass            # the staging folder goes anyway

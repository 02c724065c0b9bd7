"""The base of every file output: written under a hidden staging folder, published whole.

A sink on this base says which paths its output takes (``outputs``); ``stage`` makes the
run's staging folder (staging.py) once rank 0 has checked those paths are free, or may be
replaced; ``publish`` moves the finished names into place; ``discard`` throws the folder
away.  What a format writes in between, and how its ranks share the work, is the sink's.
"""
from __future__ import annotations

from pathlib import Path

from ..engine.leftovers import run_name
from ..engine.mpi import Comm
from ..engine.sink import Sink
from .staging import Staging


class StagedSink(Sink):
    """A sink writing ``path`` (and the names beside it that ``outputs`` lists)."""

    def __init__(self, path, overwrite: bool = False):
        self.final = Path(path)
        self.overwrite = overwrite
        self.staging: Staging | None = None

    def outputs(self) -> list[Path]:
        """The paths the output takes: refused if they exist (replaced with overwrite)."""
        return [self.final]

    def start(self, comm: Comm, defs, schema) -> None:
        """Before the decode: an output path that is taken is refused now, not after it."""
        self.stage(comm)

    def stage(self, comm: Comm) -> None:
        """Collective: the run's staging folder, made by rank 0 once the output's paths are
        free; every rank may write into it when this returns.  Once per run: a sink that
        was started has its folder when prepare asks again."""
        if self.staging is not None:
            return
        run_id = comm.bcast(run_name())     # rank 0's: one folder for every rank
        self.staging = Staging(self.final, run_id)
        with comm.guard():
            if comm.rank == 0:
                self.staging.check_free(self.outputs(), self.overwrite)
                self.staging.create()
        comm.check()
        comm.barrier()

    def publish(self, comm: Comm, names: list[str]) -> None:
        """Collective: rank 0 moves the staged ``names`` into the output's folder."""
        with comm.guard():
            if comm.rank == 0:
                self.staging.publish(names)
        comm.check()

    def release(self) -> None:
        """Local, on a failure: close what this rank holds open in the staging folder."""

    def discard(self, comm: Comm) -> None:
        self.release()
        comm.barrier()
        if comm.rank == 0 and self.staging is not None:
            self.staging.discard()

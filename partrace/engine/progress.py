"""Progress on long runs: one line on rank 0, summed over all ranks.

Ranks add the bytes they finished into a counter on rank 0 with a one-sided
MPI accumulate (at most twice a second per rank), so no rank waits for
another to report.  Off unless rank 0's stderr is a terminal and not --quiet;
then nothing is created and it costs nothing.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .mpi import Comm

_INTERVAL = 0.5


class Progress:
    def __init__(self, comm: Comm, enabled: bool | None = None, stream=None):
        self.comm = comm
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = comm.rank == 0 and self.stream.isatty()
        self.enabled = bool(comm.bcast(enabled))
        self._win = None
        self._pending = 0
        self._last = 0.0
        self._total = 0
        self._name = ""
        self._t0 = time.perf_counter()

    def start(self, name: str, total_bytes: int) -> None:
        """Collective: begin counting ``total_bytes`` of work."""
        self._name, self._total, self._t0 = name, max(int(total_bytes), 1), time.perf_counter()
        if not self.enabled:
            return
        if self.comm.parallel and self._win is None:
            from mpi4py import MPI
            self._win = MPI.Win.Allocate(8 if self.comm.rank == 0 else 0, 8, comm=self.comm._c)
            if self.comm.rank == 0:
                np.frombuffer(self._win.tomemory(), dtype=np.int64)[:] = 0
            self.comm.barrier()
        self._done_local = 0

    def advance(self, nbytes: int) -> None:
        if not self.enabled:
            return
        self._pending += int(nbytes)
        now = time.perf_counter()
        if now - self._last < _INTERVAL:
            return
        self._last = now
        self._flush()
        if self.comm.rank == 0:
            self._draw(self._read_total())

    def _flush(self) -> None:
        if self._win is None:
            self._done_local += self._pending
        else:
            from mpi4py import MPI
            self._win.Lock(0)
            self._win.Accumulate(np.array([self._pending], dtype=np.int64), 0, op=MPI.SUM)
            self._win.Unlock(0)
        self._pending = 0

    def _read_total(self) -> int:
        if self._win is None:
            return self._done_local
        self._win.Lock(0)
        value = int(np.frombuffer(self._win.tomemory(), dtype=np.int64)[0])
        self._win.Unlock(0)
        return value

    def _draw(self, done: int) -> None:
        elapsed = time.perf_counter() - self._t0
        rate = done / elapsed / 1e6 if elapsed > 0 else 0.0
        pct = 100.0 * done / self._total
        self.stream.write(f"\r{self._name}: {pct:5.1f}% {done / 1e6:,.1f} MB "
                          f"{rate:,.1f} MB/s on {self.comm.size} rank(s)   ")
        self.stream.flush()

    def phase(self, name: str) -> None:
        """Rank 0 notes the end of a phase and the start of the next."""
        if self.enabled and self.comm.rank == 0:
            elapsed = time.perf_counter() - self._t0
            self.stream.write(f"\r{self._name}: done in {elapsed:.2f} s{' ' * 40}\n{name} ...")
            self.stream.flush()
            self._name, self._t0 = name, time.perf_counter()

    def done(self) -> None:
        if self.enabled and self.comm.rank == 0:
            elapsed = time.perf_counter() - self._t0
            self.stream.write(f"\r{self._name}: done in {elapsed:.2f} s{' ' * 40}\n")
            self.stream.flush()
        if self._win is not None:
            self._win.Free()
            self._win = None

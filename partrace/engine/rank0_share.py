"""Rank 0's share of a window's rows, when it also works for all the ranks.

In time mode each window's rows are cut into P pieces, one a rank.  A sink may give rank 0
work for every rank besides its own rows (``Sink.serial_seconds``: the HDF5 serial join
places the other ranks' chunks in the one file, during the next window, while they write
theirs).  With even pieces rank 0 would end each window that much later than the others,
and they would wait for it.  So from the second window on rank 0 takes ``share`` of an even
piece, the other ranks the rest evenly, such that its rows and that work take as long as
another rank's rows: from the last window, where rank 0's own rows took ``rows_s`` seconds
of its CPU for ``share`` of an even piece and the work for all ``serial_s``,

    share' = 1 - serial_s x (P - 1) / (P x rows_s / share),

within 0 and 1 (0: rank 0 takes no rows; the work for all is then the window's slowest
part).  The pieces only move rows between ranks: the output is the same whatever the
shares.  Rank 0 measures its own CPU (the process's, less its time in MPI calls, where a
rank waiting for the others spins); it alone decides, and sends the window's cuts
(windows.py ``window_cuts``).

PARTRACE_RANK0_SHARE fixes the share from the second window on (tests, experiments), for
any time-mode sink.
"""
from __future__ import annotations

import os
import time

from ..errors import UsageError
from . import accounts

ENV = "PARTRACE_RANK0_SHARE"


def forced() -> float | None:
    """The share PARTRACE_RANK0_SHARE fixes (None: measured)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        raise UsageError(f"{ENV}={text!r}: a number from 0 to 1 (rank 0's part of an even "
                         f"share of each window's rows)")
    return share


def _own_cpu() -> float:
    return time.process_time() - accounts.mpi_cpu_seconds()


class Rank0Share:
    """Rank 0's bookkeeping: :meth:`begin` as a window starts, :meth:`after` when it has been
    written, giving the share of the next."""

    def __init__(self, sink, size: int, fixed: float | None = None):
        self.sink, self.size, self.fixed = sink, size, fixed
        self.share = 1.0        # of the window under way
        self.shares: list[float] = []   # every window's, for the account
        self._even = None       # seconds of an even piece's rows, as last measured
        self._cpu0 = self._serial0 = 0.0

    def begin(self) -> None:
        self.shares.append(self.share)
        self._cpu0, self._serial0 = _own_cpu(), self.sink.serial_seconds or 0.0

    def after(self) -> float:
        """The share of the next window."""
        if self.fixed is not None:
            self.share = self.fixed
            return self.share
        serial = (self.sink.serial_seconds or 0.0) - self._serial0
        rows = max(_own_cpu() - self._cpu0 - serial, 0.0)
        if self.share > 0 and rows > 0:
            self._even = rows / self.share
        if self._even:
            self.share = min(1.0, max(0.0, 1.0 - serial * (self.size - 1)
                                      / (self.size * self._even)))
        return self.share

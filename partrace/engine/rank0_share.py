"""Rank 0's share of a window's rows, when it also works for all the ranks.

In time mode each window's rows are cut into P pieces, one a rank.  A sink may give rank 0
work for every rank besides its own rows (``Sink.serial_seconds``: the HDF5 serial join
places the other ranks' chunks in the one file, during the next window, while they write
theirs, and the last window's at the commit).  With even pieces rank 0 would end each
window that much later than the others, and they would wait for it.  So from the second
window on rank 0 takes ``share`` of an even piece, the other ranks the rest evenly, such
that its rows and its other work take as long as another rank's rows.

Every rank measures its own CPU over each window (the process's, less its time in MPI
calls, where a rank waiting for the others spins) and rank 0 gathers them.  The others'
mean, for their ``(P - share) / (P - 1)`` of an even piece, gives ``even``: the seconds of
an even piece's rows.  Rank 0's own seconds less ``share x even`` are its work beyond its
rows, ``extra`` (the chunks it placed, and whatever else it alone does: all of it, not
only what the sink reports); and before the last window, the chunks its commit will
place (as many as it placed in this window: the sink's serial seconds of it) are added.
Then

    share' = 1 - extra x (P - 1) / (P x even),

within 0 and 1 (0: rank 0 takes no rows; its other work is then the window's slowest
part).  The pieces only move rows between ranks: the output is the same whatever the
shares.  Rank 0 alone decides, and sends the window's cuts (windows.py ``window_cuts``).

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
    """Every rank's bookkeeping of a window: :meth:`begin` as a window starts and
    :meth:`spent` when it has been written; rank 0's :meth:`after`, given every rank's
    spent seconds, gives the share of the next."""

    def __init__(self, sink, size: int, fixed: float | None = None):
        self.sink, self.size, self.fixed = sink, size, fixed
        self.share = 1.0        # of the window under way (rank 0's to decide)
        self.shares: list[float] = []   # every window's, for the account
        self._cpu0 = self._serial0 = 0.0

    def begin(self) -> None:
        self.shares.append(self.share)
        self._cpu0, self._serial0 = _own_cpu(), self.sink.serial_seconds or 0.0

    def spent(self) -> float:
        """This rank's own CPU seconds since :meth:`begin`."""
        return max(_own_cpu() - self._cpu0, 0.0)

    def after(self, spent: list[float], last: bool = False) -> float:
        """The share of the next window (``last``: the run's last one), from every rank's
        seconds of this one (``spent[r]``: rank r's)."""
        if self.fixed is not None:
            self.share = self.fixed
            return self.share
        others = (self.size - self.share) / (self.size - 1)     # of an even piece each
        spent_by_others = sum(spent[1:]) / (self.size - 1)
        if others <= 0 or spent_by_others <= 0:
            return self.share
        even = spent_by_others / others
        extra = max(spent[0] - self.share * even, 0.0)
        if last:    # the commit places the last window's chunks: about this window's
            extra += max((self.sink.serial_seconds or 0.0) - self._serial0, 0.0)
        self.share = min(1.0, max(0.0, 1.0 - extra * (self.size - 1) / (self.size * even)))
        return self.share

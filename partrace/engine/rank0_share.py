"""Rank 0's share of a window's rows, when it also works for all the ranks.

In time mode each window's rows are cut into P pieces, one a rank.  A sink may give rank 0
work for every rank besides its own rows (``Sink.serial_seconds``: the HDF5 serial join
places the other ranks' chunks in the one file, during the next window, while they write
theirs, and the last window's at the commit), and rank 0 alone lists the input and picks
the cuts.  With even pieces rank 0 would end each window that much later than the others,
and they would wait for it.  So from the second window on rank 0 takes ``share`` of an
even piece, the other ranks the rest evenly, such that every rank's own CPU over the
whole run comes out the same.

At each window's start every rank sends rank 0 its own CPU (the process's, less its time
in MPI calls, where a rank waiting for the others spins) over the last window and since
it started.  From the windows so far rank 0 knows ``even``, the seconds of an even
piece's rows (the others' mean seconds over their ``(P - share) / (P - 1)`` of an even
piece each, summed over the windows), and ``behind``, how much more CPU it has spent than
the others' mean since the start (its chores, the chunks it placed, and chance: all of
it, not only what the sink reports).  The next window will place about as many chunks as
the last (``serial``, the sink's seconds of it), and before the last window the commit's
placing counts once more.  Then

    share' = 1 - (behind + serial) x (P - 1) / (P x even),

within 0 and ``MOST``: rank 0 makes up in one window what it is behind, and takes more
than an even piece where it is ahead.  The pieces only move rows between ranks: the
output is the same whatever the shares.  Rank 0 alone decides, and sends the window's
cuts (windows.py ``window_cuts``).

PARTRACE_RANK0_SHARE fixes the share from the second window on (tests, experiments), for
any time-mode sink.
"""
from __future__ import annotations

import os
import time

from ..errors import UsageError
from . import accounts

ENV = "PARTRACE_RANK0_SHARE"
# At most this many even pieces for rank 0 where it is ahead: one window's chance, not a
# trend, must not leave another rank (the only other one, on 2 ranks) a window's crumbs.
MOST = 1.5


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
        self._others = self._pieces = 0.0   # the others' seconds and even pieces, summed

    def begin(self) -> None:
        self.shares.append(self.share)
        self._cpu0, self._serial0 = _own_cpu(), self.sink.serial_seconds or 0.0

    def spent(self) -> tuple[float, float]:
        """This rank's own CPU seconds since :meth:`begin` and since it started."""
        now = _own_cpu()
        return max(now - self._cpu0, 0.0), now

    def after(self, spent: list[tuple[float, float]], last: bool = False) -> float:
        """The share of the next window (``last``: the run's last one), from every rank's
        :meth:`spent` (``spent[r]``: rank r's)."""
        if self.fixed is not None:
            self.share = self.fixed
            return self.share
        window = [s[0] for s in spent]
        total = [s[1] for s in spent]
        self._others += sum(window[1:]) / (self.size - 1)
        self._pieces += (self.size - self.share) / (self.size - 1)
        if self._others <= 0 or self._pieces <= 0:
            return self.share
        even = self._others / self._pieces
        behind = total[0] - sum(total[1:]) / (self.size - 1)
        serial = max((self.sink.serial_seconds or 0.0) - self._serial0, 0.0)
        ahead = behind + serial * (2 if last else 1)    # the commit places the last's
        self.share = min(MOST, max(0.0, 1.0 - ahead * (self.size - 1) / (self.size * even)))
        return self.share

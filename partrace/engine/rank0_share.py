"""Rank 0's share of a window's rows, when it also works for all the ranks.

In time mode each window's rows are cut into P pieces, one a rank.  A sink may give rank 0
work for every rank besides its own rows (``Sink.serial_seconds``: the HDF5 serial join
places the other ranks' chunks in the one file during the next window, in the step where
they write theirs).  With even pieces rank 0 would end each window that much later than
the others, and they would wait for it.  So rank 0 takes ``share`` of an even piece, the
other ranks the rest evenly, such that its rows and its other work take as long as
another rank's rows.

In the first two windows (in a run of one or two, all of it) rank 0 has not yet measured
a window like the others, and guesses: it gives each other rank ``GIVE`` of an even piece
(``share = 1 - GIVE x (P - 1)``, at least 0).  Its work for all the ranks there (the
output file and its header, the first chunk of each dataset, the first window's placing)
runs in the steps where the others write their rows, so rows it gives up are time it
has for that work; a guess too large costs another rank ``GIVE`` of a piece at most.
With many ranks the guess gives all of rank 0's rows away, where its work for all of
them (a chunk index entry for every chunk) outgrows an even piece anyway.

At each window's start every rank sends rank 0 its own CPU over the last window (the
process's, less its time in MPI calls, where a rank waiting for the others spins).  From
the windows so far rank 0 knows ``even``, the seconds of an even piece's rows (the
others' mean seconds over their ``(P - share) / (P - 1)`` of an even piece each, summed
over the windows) and ``extra``, its own seconds beyond ``share x even`` in the mean
window: the chunks it placed and whatever else it alone does each window, not only what
the sink reports.  The first window is left out of both: rank 0 makes the output file in
it and places nothing yet, and the others write their chunks' bytes only from the second
on.  From the third window on the share is measured, the last window's too: the commit's
placing of its chunks runs while the other ranks do their own part of the commit, and
fewer rows for rank 0 in it would only make them wait at its end.  Then

    share' = 1 - extra x (P - 1) / (P x even),

within 0 and ``MOST``: where rank 0 is faster per window, it takes more than an even piece.
What a rank spent before the windows, or in a window that went worse than the mean, is
not paid back: the ranks met at the window's end and the others waited then; giving rank 0
less now would only make them wait again.  The pieces only move rows between ranks: the
output is the same whatever the shares.  Rank 0 alone decides, and sends the window's
cuts (windows.py ``window_cuts``).

PARTRACE_RANK0_SHARE fixes the share of every window (tests, experiments), for any
time-mode sink.
"""
from __future__ import annotations

import os
import time

from ..errors import UsageError
from . import accounts

ENV = "PARTRACE_RANK0_SHARE"
# At most this many even pieces for rank 0 where it is faster: a mean of a few windows is
# still a guess, and must not leave another rank (the only other one, on 2 ranks) crumbs.
MOST = 1.5
# Before rank 0 has measured a window, each other rank takes this much of an even piece
# more for it: all a wrong guess may cost them.
GIVE = 0.03


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

    def __init__(self, size: int, fixed: float | None = None):
        self.size, self.fixed = size, fixed
        # of the window under way (rank 0's to decide): a guess until it has measured
        self.share = fixed if fixed is not None else max(0.0, 1.0 - GIVE * (size - 1))
        self.shares: list[float] = []   # every window's, for the account
        self._cpu0 = 0.0
        # per window: rank 0's seconds, its share, the others' mean seconds
        self._windows: list[tuple[float, float, float]] = []

    def begin(self) -> None:
        self.shares.append(self.share)
        self._cpu0 = _own_cpu()

    def spent(self) -> float:
        """This rank's own CPU seconds since :meth:`begin`."""
        return max(_own_cpu() - self._cpu0, 0.0)

    def after(self, spent: list[float]) -> float:
        """The share of the next window, from every rank's :meth:`spent` of this one
        (``spent[r]``: rank r's)."""
        if self.fixed is not None:
            self.share = self.fixed
            return self.share
        self._windows.append((spent[0], self.share, sum(spent[1:]) / (self.size - 1)))
        typical = self._windows[1:]     # the first window is not like the others
        others = sum(w[2] for w in typical)
        pieces = sum((self.size - w[1]) / (self.size - 1) for w in typical)
        if not typical or others <= 0 or pieces <= 0:
            return self.share
        even = others / pieces
        extra = sum(own - share * even for own, share, _ in typical) / len(typical)
        self.share = min(MOST, max(0.0, 1.0 - extra * (self.size - 1) / (self.size * even)))
        return self.share

"""A logical clock correction for ``merge --sync clc``: the receives that still come before
their sends (after the offsets) are moved forward, and every later event of their
location with them, so each location keeps all its local intervals but the one before
each such receive.

Each row's time becomes ``t + shift``, where a location's shift is a step function: it
rises only at a receive that needs it, to ``send time + shift of the send + LATENCY -
receive time``, and never falls (a forward controlled logical clock, as Rabenseifner's
and Scalasca's, without their amortisation of the jump over the events before it).  The
shifts depend on each other across locations (a moved receive moves the sends after
it), so they are found as the least fixpoint of these rules, in rounds, in parallel:

1. every message's send and receive event goes to the rank that owns its location;
2. per location, in order, the shift is the running maximum of what its receives need;
3. the sends whose shift changed tell their receives (one alltoallv a round), until no
   shift changes on any rank (rounds: the longest chain of receives that push each other).

Only the steps (location, time, seq, shift) travel to every rank: their number grows
with the receives that had to move, not with the trace.  The least fixpoint does not
depend on the rank count.
"""
from __future__ import annotations

import numpy as np

from ..engine.mpi import Comm
from ..errors import UsageError
from ..formats.jit import njit   # lazy: numba only for inputs that are not small
from . import clocks as C

LATENCY = 1     # ns a receive must end after its send starts: the global order then agrees
MAX_ROUNDS = 100_000
# fields of a message event
E_LOC, E_TIME, E_SEQ, E_RECV, E_ID, E_OTHER, E_SENT = range(7)


@njit(cache=True)
def _running_max(first, values):     # pragma: no cover - compiled
    """The running maximum of ``values``, restarted where ``first``."""
    out = np.empty_like(values)
    m = values[0] if len(values) else 0
    for i in range(len(values)):
        if first[i] or values[i] > m:
            m = values[i]
        out[i] = m
    return out


@njit(cache=True)
def last_step(step_loc, step_time, step_seq, loc, time, seq):   # pragma: no cover - compiled
    """For each row, the last step of its location at or before its (time, seq), or -1
    (steps sorted by location, time, seq)."""
    out = np.empty(len(loc), np.int64)
    for i in range(len(loc)):
        lo, hi = 0, len(step_loc)
        while lo < hi:      # the first step after the row
            mid = (lo + hi) // 2
            if step_loc[mid] < loc[i] or (step_loc[mid] == loc[i] and (
                    step_time[mid] < time[i] or (step_time[mid] == time[i]
                                                 and step_seq[mid] <= seq[i]))):
                lo = mid + 1
            else:
                hi = mid
        j = lo - 1
        out[i] = j if j >= 0 and step_loc[j] == loc[i] else -1
    return out


def _to_owner(comm: Comm, rows: np.ndarray, loc: np.ndarray) -> np.ndarray:
    if comm.size == 1:
        return rows
    dest = (loc % comm.size).astype(np.int64)
    order = np.argsort(dest, kind="stable")
    return comm.alltoallv(rows[order], np.bincount(dest, minlength=comm.size))


def steps(comm: Comm, msgs: np.ndarray) -> tuple[np.ndarray, ...]:
    """(location, time, seq, shift) of every step, sorted, on every rank (collective);
    ``msgs``: this rank's matched messages (clocks.match), in the times to correct."""
    n = len(msgs)
    first_id = comm.exscan(n, lambda a, b: a + b) or 0
    ids = first_id + np.arange(n, dtype=np.int64)
    ev = np.zeros((2 * n, 7), np.int64)
    ev[:n, E_LOC], ev[:n, E_TIME], ev[:n, E_SEQ] = (msgs[:, C.M_SENDER], msgs[:, C.M_SEND_TIME],
                                                   msgs[:, C.M_SEND_SEQ])
    ev[:n, E_ID], ev[:n, E_OTHER] = ids, msgs[:, C.M_RECEIVER]
    ev[n:, E_LOC], ev[n:, E_TIME], ev[n:, E_SEQ] = (msgs[:, C.M_RECEIVER], msgs[:, C.M_RECV_TIME],
                                                   msgs[:, C.M_RECV_SEQ])
    ev[n:, E_RECV], ev[n:, E_ID], ev[n:, E_OTHER] = 1, ids, msgs[:, C.M_SENDER]
    ev[n:, E_SENT] = msgs[:, C.M_SEND_TIME]
    ev = _to_owner(comm, ev, ev[:, E_LOC])
    ev = ev[np.lexsort((ev[:, E_RECV], ev[:, E_SEQ], ev[:, E_TIME], ev[:, E_LOC]))]
    first = np.r_[True, ev[1:, E_LOC] != ev[:-1, E_LOC]] if len(ev) else np.zeros(0, bool)
    recv = ev[:, E_RECV] == 1
    sends = np.flatnonzero(~recv)
    by_id = np.flatnonzero(recv)[np.argsort(ev[recv, E_ID])]    # receive events by message id
    recv_ids = ev[by_id, E_ID]
    send_shift = np.zeros(len(ev), np.int64)    # at a receive: its send's shift so far
    told = np.zeros(len(sends), np.int64)
    for _ in range(MAX_ROUNDS):
        need = np.where(recv, ev[:, E_SENT] + send_shift + LATENCY - ev[:, E_TIME], 0)
        shift = _running_max(first, np.maximum(need, 0)) if len(ev) else need
        now = shift[sends]
        changed = np.flatnonzero(now != told)
        if not comm.allreduce_sum(len(changed)):
            break
        told[changed] = now[changed]
        news = np.stack([ev[sends[changed], E_ID], now[changed],
                         ev[sends[changed], E_OTHER]], axis=1)
        news = _to_owner(comm, news, news[:, 2])
        send_shift[by_id[np.searchsorted(recv_ids, news[:, 0])]] = news[:, 1]
    else:
        raise UsageError(f"--sync clc: the receives still push each other after {MAX_ROUNDS:,} "
                         f"rounds")
    rise = recv & (shift > np.where(first, 0, np.r_[0, shift[:-1]]))
    mine = np.stack([ev[rise, E_LOC], ev[rise, E_TIME], ev[rise, E_SEQ], shift[rise]], axis=1)
    every = np.concatenate(comm.allgather(mine)) if comm.size > 1 else mine
    every = every[np.lexsort((every[:, 2], every[:, 1], every[:, 0]))]
    return tuple(np.ascontiguousarray(every[:, i]) for i in range(4))

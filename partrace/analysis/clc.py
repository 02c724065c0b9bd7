"""A logical clock correction for ``merge --sync clc``: the receives that still come before
their sends (after the offsets) are moved forward, and every later event of their
location with them, so each location keeps all its local intervals but the one before
each such receive.  Collective calls count as the many-to-many messages they are
(clock_collectives): a member that waits (every member of a barrier or an all-to-all for
all of them, of a one-to-all for its root, the root of an all-to-one for all) leaves no
earlier than the last it waits for entered; a one-record collective (a duration, no end
row) moves whole.

Each row's time becomes ``t + shift``, where a location's shift is a step function: it
rises only at a receive that needs it, to ``send time + shift of the send + LATENCY -
receive time`` (or at a collective's end, as above), and never falls (a forward
controlled logical clock, as Rabenseifner's and Scalasca's, without their amortisation
of the jump over the events before it).  The
shifts depend on each other across locations (a moved receive moves the sends after
it), so they are found as the least fixpoint of these rules, in rounds, in parallel:

1. every message's send and receive event and every collective call's start and end goes
   to the rank that owns its location; each call also to the rank that owns its instance;
2. per location, in order, the shift is the running maximum of what its receives and
   ends need;
3. the sends whose shift changed tell their receives, the starts whose shift changed
   their instance, which tells its waiting members' ends when the earliest end it allows
   moved (alltoallvs a round), until no shift changes on any rank (rounds: the longest
   chain of events that push each other).

Only the steps (location, time, seq, shift) travel to every rank: their number grows
with the receives that had to move, not with the trace.  The least fixpoint does not
depend on the rank count.
"""
from __future__ import annotations

import numpy as np

from ..engine.mpi import Comm
from ..errors import UsageError
from ..kernels.jit import njit   # lazy: numba only for inputs that are not small
from . import clocks as C

LATENCY = 1     # ns a receive must end after its send starts: the global order then agrees
MAX_ROUNDS = 100_000
# fields of a location's event; its role: a message's send or receive, a collective call's
# start or end.  A one-record collective's end is no row: it moves with its row (its start),
# so its END event sits at the row, before its START, and needs its duration more
E_LOC, E_TIME, E_SEQ, E_ROLE, E_A, E_B, E_VALUE, E_LEN = range(8)
SEND, RECV, END, START = range(4)
# SEND: A message id, B receiver; RECV: A message id, B sender, VALUE send time;
# START, END: A communicator, B the call's k; END: VALUE the time it may leave at the
# earliest, LEN the time from the event to the call's end (a one-record collective's duration)
EARLIEST = -(1 << 62)       # an END not told yet: no need


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


def _keys(*columns) -> np.ndarray:
    """Rows of int64 columns as one structured array: sorts and searches lexicographically."""
    out = np.empty(len(columns[0]), [(f"k{i}", np.int64) for i in range(len(columns))])
    for i, c in enumerate(columns):
        out[f"k{i}"] = c
    return out


def _where(table: np.ndarray, order: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Positions in ``table`` (a structured key array; ``order`` sorts it) of ``keys``."""
    return order[np.searchsorted(table[order], keys)]


class Instances:
    """The collective instances a rank owns (by communicator and k): each member's start,
    whether its start lets the others leave (gives) and whether it waits (waits), and the
    earliest end each instance allows, from the members' starts and their shifts."""

    def __init__(self, calls: np.ndarray, types: dict, sizes: dict):
        from . import clock_collectives as CC
        c = calls[np.lexsort((calls[:, CC.C_LOC], calls[:, CC.C_K], calls[:, CC.C_COMM]))]
        self.comm, self.k, self.loc = c[:, CC.C_COMM], c[:, CC.C_K], c[:, CC.C_LOC]
        self.start = c[:, CC.C_START]
        self.shift = np.zeros(len(c), np.int64)
        self.run_starts = np.flatnonzero(np.r_[True, (self.comm[1:] != self.comm[:-1])
                                               | (self.k[1:] != self.k[:-1])]) if len(c) else \
            np.zeros(0, np.int64)
        run = np.repeat(np.arange(len(self.run_starts)), np.diff(np.r_[self.run_starts, len(c)]))
        whole = CC.complete(c[self.run_starts, CC.C_COMM],
                            np.diff(np.r_[self.run_starts, len(c)]), sizes)
        kind = np.where(whole, CC.type_of(c[self.run_starts, CC.C_OP], types), 0)[run] \
            if len(c) else run
        is_root = self.loc == c[:, CC.C_ROOT][self.run_starts][run] if len(c) else run == 0
        everyone = (kind == CC.BARRIER) | (kind == CC.ALL_TO_ALL)
        self.gives = everyone | (kind == CC.ALL_TO_ONE) | ((kind == CC.ONE_TO_ALL) & is_root)
        self.waits = everyone | (kind == CC.ONE_TO_ALL) | ((kind == CC.ALL_TO_ONE) & is_root)
        self.run = run
        self.table = _keys(self.comm, self.k, self.loc)
        self.order = np.argsort(self.table, kind="stable")
        self.told = np.full(len(self.run_starts), EARLIEST, np.int64)

    def update(self, news: np.ndarray) -> np.ndarray:
        """``news``: (comm, k, location, shift) of starts that moved.  Returns (location, comm,
        k, earliest end) for the waiting members of instances whose earliest end moved."""
        if len(news):
            self.shift[_where(self.table, self.order, _keys(*news[:, :3].T))] = news[:, 3]
        if not len(self.start):
            return np.zeros((0, 4), np.int64)
        given = np.where(self.gives, self.start + self.shift, EARLIEST)
        earliest = np.maximum.reduceat(given, self.run_starts)
        moved = earliest != self.told
        self.told = earliest
        tell = self.waits & moved[self.run]
        return np.stack([self.loc[tell], self.comm[tell], self.k[tell],
                         earliest[self.run][tell]], axis=1)


def _events(comm: Comm, msgs: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """The events of the messages and calls (calls already on their location's owner), on
    the rank that owns their location, in each location's order."""
    from . import clock_collectives as CC
    n = len(msgs)
    first_id = comm.exscan(n, lambda a, b: a + b) or 0
    ids = first_id + np.arange(n, dtype=np.int64)
    ev = np.zeros((2 * n, 8), np.int64)
    send, recv = ev[:n], ev[n:]
    send[:, E_LOC], send[:, E_TIME], send[:, E_SEQ] = (msgs[:, C.M_SENDER], msgs[:, C.M_SEND_TIME],
                                                       msgs[:, C.M_SEND_SEQ])
    send[:, E_ROLE], send[:, E_A], send[:, E_B] = SEND, ids, msgs[:, C.M_RECEIVER]
    recv[:, E_LOC], recv[:, E_TIME] = msgs[:, C.M_RECEIVER], msgs[:, C.M_RECV_TIME]
    recv[:, E_SEQ] = msgs[:, C.M_RECV_SEQ]
    recv[:, E_ROLE], recv[:, E_A], recv[:, E_B] = RECV, ids, msgs[:, C.M_SENDER]
    recv[:, E_VALUE] = msgs[:, C.M_SEND_TIME]
    ev = _to_owner(comm, ev, ev[:, E_LOC])
    m = len(calls)
    call_ev = np.zeros((2 * m, 8), np.int64)
    for part, role, time, seq in ((call_ev[:m], START, CC.C_START, CC.C_SEQ),
                                  (call_ev[m:], END, CC.C_END, CC.C_END_SEQ)):
        part[:, E_LOC], part[:, E_TIME], part[:, E_SEQ] = calls[:, CC.C_LOC], calls[:, time], \
            calls[:, seq]
        part[:, E_ROLE], part[:, E_A], part[:, E_B] = role, calls[:, CC.C_COMM], calls[:, CC.C_K]
    ends = call_ev[m:]
    one = calls[:, CC.C_END_SEQ] == CC.NO_ROW
    ends[one, E_TIME], ends[one, E_SEQ] = calls[one, CC.C_START], calls[one, CC.C_SEQ]
    ends[one, E_LEN] = calls[one, CC.C_END] - calls[one, CC.C_START]
    ends[:, E_VALUE] = EARLIEST
    ev = np.concatenate([ev, call_ev])
    return ev[np.lexsort((ev[:, E_ROLE], ev[:, E_SEQ], ev[:, E_TIME], ev[:, E_LOC]))]


def steps(comm: Comm, msgs: np.ndarray, rows: np.ndarray | None = None,
          types: dict | None = None, sizes: dict | None = None) -> tuple[np.ndarray, ...]:
    """(location, time, seq, shift) of every step, sorted, on every rank (collective);
    ``msgs``: this rank's matched messages (clocks.match), ``rows``: its collective rows
    (clock_collectives.rows, durations in ns), in the times to correct; ``types``: each
    collective operation's type; ``sizes``: each communicator's member count, where known."""
    from . import clock_collectives as CC
    rows = np.zeros((0, 8), np.int64) if rows is None else rows
    calls, _ = CC.calls(_to_owner(comm, rows, rows[:, CC.LOC]))
    ev = _events(comm, msgs, calls)
    owned = Instances(_to_owner(comm, calls, _instance_owner(comm, calls)), types or {},
                      sizes or {})
    first = np.r_[True, ev[1:, E_LOC] != ev[:-1, E_LOC]] if len(ev) else np.zeros(0, bool)
    role = ev[:, E_ROLE]
    recv, end = role == RECV, role == END
    sources = np.flatnonzero((role == SEND) | (role == START))
    by_id = np.flatnonzero(recv)[np.argsort(ev[recv, E_A], kind="stable")]
    recv_ids = ev[by_id, E_A]
    ends = np.flatnonzero(end)
    end_table = _keys(ev[ends, E_LOC], ev[ends, E_A], ev[ends, E_B])
    end_order = np.argsort(end_table, kind="stable")
    send_shift = np.zeros(len(ev), np.int64)    # at a receive: its send's shift so far
    told = np.full(len(sources), -1, np.int64)  # every start tells its instance once
    for _ in range(MAX_ROUNDS):
        need = np.where(recv, ev[:, E_VALUE] + send_shift + LATENCY - ev[:, E_TIME],
                        np.where(end, ev[:, E_VALUE] - ev[:, E_TIME] - ev[:, E_LEN], 0))
        shift = _running_max(first, np.maximum(need, 0)) if len(ev) else need
        now = shift[sources]
        differs = now != told
        changed = sources[differs]
        if not comm.allreduce_sum(len(changed)):
            break
        told[differs] = now[differs]
        sent = changed[role[changed] == SEND]
        news = np.stack([ev[sent, E_A], shift[sent], ev[sent, E_B]], axis=1)
        news = _to_owner(comm, news, news[:, 2])
        send_shift[by_id[np.searchsorted(recv_ids, news[:, 0])]] = news[:, 1]
        started = changed[role[changed] == START]
        moved = np.stack([ev[started, E_A], ev[started, E_B], ev[started, E_LOC],
                          shift[started]], axis=1)
        leave = owned.update(_to_owner(comm, moved, _instance_owner(comm, moved, 0, 1)))
        leave = _to_owner(comm, leave, leave[:, 0])
        if len(leave):
            at = ends[_where(end_table, end_order, _keys(*leave[:, :3].T))]
            ev[at, E_VALUE] = leave[:, 3]
    else:
        raise UsageError(f"--sync clc: the receives still push each other after {MAX_ROUNDS:,} "
                         f"rounds")
    rise = (recv | end) & (shift > np.where(first, 0, np.r_[0, shift[:-1]]))
    mine = np.stack([ev[rise, E_LOC], ev[rise, E_TIME], ev[rise, E_SEQ], shift[rise]], axis=1)
    every = np.concatenate(comm.allgather(mine)) if comm.size > 1 else mine
    every = every[np.lexsort((every[:, 2], every[:, 1], every[:, 0]))]
    return tuple(np.ascontiguousarray(every[:, i]) for i in range(4))


def _instance_owner(comm: Comm, recs: np.ndarray, comm_field: int | None = None,
                    k_field: int | None = None) -> np.ndarray:
    """The rank owning each record's instance (its communicator and k)."""
    from . import clock_collectives as CC
    a = recs[:, CC.C_COMM if comm_field is None else comm_field]
    b = recs[:, CC.C_K if k_field is None else k_field]
    return ((a * 1_000_003 + b) % comm.size).astype(np.int64) if comm.size > 1 else \
        np.zeros(len(recs), np.int64)

"""Each rank's account of its run: where its time went, phase by phase.

A phase (start-up, plan, decode, cuts, each window's exchange, merge and write,
commit) runs from one :func:`phase` call to the next.  Making a numba kernel (importing
numba, loading a kernel from its cache or compiling it: kernels/jit.py says when) breaks
into whatever phase needs the kernel first: that time is the phase ``kernels``, a fixed
cost of each process however large its share of the trace, and the phase it interrupted
resumes after it (in the same window).  For each the account keeps

- ``wall_s``: its wall time; ``mpi_wait_s``: wall time inside MPI calls made through
  :class:`~partrace.engine.mpi.Comm` (collectives, and waits for all ranks);
- ``busy_s``: the process's CPU time minus the CPU time spent inside those MPI
  calls.  MPICH busy-polls in a collective, so a rank waiting for the slowest
  burns CPU that is no work of partrace's: it is measured (thread CPU time around
  each call) and taken out;
- ``sent_bytes``, ``recv_bytes``, ``sent_messages``, ``recv_messages``: data moved
  to and from other ranks (never to itself).  Rows of an alltoallv count exactly,
  a message per peer with rows; an object collective counts a message per peer it
  reaches and bytes estimated from the objects (see :func:`estimate`).  Reductions
  (counts, maxima, surveys) and barriers count in ``mpi_calls`` and time only;
- ``files_opened``: files opened through Python (``open``, ``io.open``,
  ``os.open``: readers, spill files, text sinks), counted by a wrapper around
  each while an account is kept; HDF5's and OTF2's C libraries open theirs
  unseen;
- ``peak_rss_bytes``: the process's resident high-water mark at the phase's end.

Besides the phases, a sink may say how it wrote its output (:func:`note_output`:
which write path ran, the bytes one rank carried for the others), in its own words:
the engine passes it on, it does not read it.

All of it is counted per call and per phase, never per row.  Nothing is
counted until :func:`begin`, which a job calls when its command asks for the accounts
(``--stats``, ``--self-trace``, or the same keywords of ``partrace.merge``).
"""
from __future__ import annotations

import functools
import os
import resource
import threading
import time

import numpy as np

from ..kernels import jit

COUNTS = ("sent_bytes", "recv_bytes", "sent_messages", "recv_messages", "mpi_calls",
          "files_opened")
FIELDS = ("wall_s", "busy_s", "mpi_wait_s", "mpi_cpu_s", *COUNTS, "peak_rss_bytes")
WINDOW_PHASES = ("exchange", "merge", "write")
KERNELS = "kernels"     # the phase of making kernels, inside any other
MAX_SLICES = 20_000     # slices kept for the self-trace per rank (later MPI calls: only counted)


class Account:
    """One rank's phases: totals per phase name, and per window for the window phases."""

    def __init__(self, rank: int = 0, keep_slices: bool = False):
        self.rank = rank
        self.phases: dict[str, dict] = {}
        self.windows: dict[int, dict[str, dict]] = {}
        # (name, is_mpi, start ns, end ns, a phase's tally or None) for the self-trace,
        # on the wall clock
        self.slices: list | None = [] if keep_slices else None
        self.files_opened = 0
        self.output: dict = {}      # what the sink said of how it wrote (note_output)
        self.window_notes: dict[int, dict] = {}     # what the engine said of a window
        self._epoch = time.time_ns() - time.perf_counter_ns()
        self._in_mpi = False
        self._name: str | None = "start-up"
        self._window: int | None = None
        self._interrupted: tuple | None = None  # the phase (name, window) a make broke into
        self._thread = threading.get_ident()    # makes on other threads stay in their phase
        self._t0 = time.perf_counter_ns() - _process_age_ns()
        self._cpu0 = 0.0        # process CPU is counted from the process's start
        self._open0 = 0
        self._reset()

    def _reset(self) -> None:
        self._mpi_wall = 0
        self._mpi_cpu = 0.0
        self._counts = dict.fromkeys(COUNTS, 0)

    @property
    def open(self) -> bool:
        return self._name is not None

    def phase(self, name: str | None, window: int | None = None) -> None:
        """The current phase ends; ``name`` (None: none, the account is closed) begins.
        Inside a make (:meth:`interrupt`) the switch is the make's own work (rank 0's
        warm-up runs commands to compile kernels): the make goes on."""
        if name is not None and self._interrupted is not None:
            return
        self._interrupted = None
        self._switch(name, window)

    def interrupt(self, name: str) -> None:
        """``name`` breaks into the current phase until :meth:`resume` (on this account's
        thread, and not inside another interruption)."""
        if (self._name is not None and self._interrupted is None
                and threading.get_ident() == self._thread):
            self._interrupted = self._name, self._window
            self._switch(name, None)

    def resume(self) -> None:
        """The phase :meth:`interrupt` broke into goes on."""
        if self._interrupted is not None and threading.get_ident() == self._thread:
            (name, window), self._interrupted = self._interrupted, None
            self._switch(name, window)

    def _switch(self, name: str | None, window: int | None) -> None:
        if self._name is None:
            return
        now, cpu = time.perf_counter_ns(), time.process_time()
        mpi_cpu = min(self._mpi_cpu, cpu - self._cpu0)
        tally = {"wall_s": (now - self._t0) / 1e9,
                 "busy_s": round(max(0.0, cpu - self._cpu0 - mpi_cpu), 9),
                 "mpi_wait_s": self._mpi_wall / 1e9, "mpi_cpu_s": round(mpi_cpu, 9),
                 **self._counts, "files_opened": self.files_opened - self._open0,
                 "peak_rss_bytes": peak_rss()}
        _add(self.phases.setdefault(self._name, {}), tally)
        if self._window is not None:
            _add(self.windows.setdefault(self._window, {}).setdefault(self._name, {}), tally)
        if self.slices is not None:
            label = self._name if self._window is None else f"{self._name} {self._window}"
            self.slices.append((label, False, self._t0 + self._epoch, now + self._epoch,
                                tally))
        self._name, self._window = name, window
        self._t0, self._cpu0, self._open0 = now, cpu, self.files_opened
        self._reset()

    def mpi_call(self, name: str, wall0: int, cpu0: float) -> None:
        """A call into MPI that began at ``wall0`` (perf ns) and ``cpu0`` (thread CPU) ended."""
        now = time.perf_counter_ns()
        self._mpi_wall += now - wall0
        self._mpi_cpu += time.thread_time() - cpu0
        self._counts["mpi_calls"] += 1
        if self.slices is not None and len(self.slices) < MAX_SLICES:
            self.slices.append((name, True, wall0 + self._epoch, now + self._epoch, None))

    def traffic(self, sent: int, recv: int, sent_messages: int, recv_messages: int) -> None:
        c = self._counts
        c["sent_bytes"] += int(sent)
        c["recv_bytes"] += int(recv)
        c["sent_messages"] += int(sent_messages)
        c["recv_messages"] += int(recv_messages)

    def report(self) -> dict:
        """This rank's account as plain data: totals, phases, windows (and slices if kept)."""
        out = {"rank": self.rank, "host": os.uname().nodename, "pid": os.getpid(),
               **totals(self.phases.values()),
               "phases": self.phases,
               "windows": [{"window": w, **self.window_notes.get(w, {}),
                            "phases": self.windows[w]} for w in sorted(self.windows)],
               "output": self.output}
        if self.slices is not None:
            out["slices"] = self.slices
        return out


def _add(into: dict, tally: dict) -> None:
    for key, value in tally.items():
        if key == "peak_rss_bytes":
            into[key] = max(into.get(key, 0), value)
        elif isinstance(value, float):      # seconds to the ns: no float noise in the JSON
            into[key] = round(into.get(key, 0) + value, 9)
        else:
            into[key] = into.get(key, 0) + value


def totals(tallies) -> dict:
    """The sum of phase tallies (the peak of their peaks)."""
    out = dict.fromkeys(FIELDS, 0)
    for t in tallies:
        _add(out, {k: t.get(k, 0) for k in FIELDS})
    return out


def peak_rss() -> int:
    """This process's resident high-water mark in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _process_age_ns() -> int:
    """How long ago this process started (from /proc; else since this module loaded)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")    # field 22 of stat
        return max(0, int((uptime - started) * 1e9))
    except (OSError, ValueError, IndexError):
        return time.perf_counter_ns() - _LOADED


_LOADED = time.perf_counter_ns()
_current: Account | None = None


def begin(rank: int, keep_slices: bool = False) -> Account:
    """Start this process's account (its start-up phase began with the process)."""
    global _current
    _current = Account(rank, keep_slices)
    _watch_opens()
    jit.account_makes(_make_begins, _make_ends)
    return _current


def current() -> Account | None:
    return _current


def end() -> Account | None:
    """Close the current phase and the account; later calls are not counted."""
    global _current
    account, _current = _current, None
    _unwatch_opens()
    jit.account_makes(None, None)
    if account is not None:
        account.phase(None)
    return account


def phase(name: str, window: int | None = None) -> None:
    """Switch this rank's phase (nothing when no account is kept)."""
    if _current is not None:
        _current.phase(name, window)


def _make_begins() -> None:
    if _current is not None:
        _current.interrupt(KERNELS)


def _make_ends() -> None:
    if _current is not None:
        _current.resume()


def note_output(**fields) -> None:
    """The sink's word on how this rank wrote the output (``path``: which write path ran;
    ``summary``: a phrase for the closing summary; any counts), kept in the report."""
    if _current is not None:
        _current.output.update(fields)


def note_window(window: int, **fields) -> None:
    """What the engine says of a window (rank 0's share of its rows), in its account."""
    if _current is not None:
        _current.window_notes.setdefault(window, {}).update(fields)


def phase_in_window(name: str) -> None:
    """Switch this rank's phase within the current window (exchange -> merge)."""
    if _current is not None:
        _current.phase(name, _current._window)


# --- files opened -----------------------------------------------------------------------
# Python's openers, each replaced by a counting wrapper while an account is kept.  (An audit
# hook sees every open too, but Python calls it for every audited event, ``builtins.id``
# among them, which some kernels call per row.)
_watched: dict = {}     # module -> (its opener, our wrapper)


def _watch_opens() -> None:
    import builtins
    import io
    for module in (builtins, io, os):
        if module not in _watched:
            _watched[module] = (module.open, _counting(module.open))
            module.open = _watched[module][1]


def _unwatch_opens() -> None:
    for module, (opener, wrapper) in _watched.items():
        if module.open is wrapper:      # else someone replaced it since: theirs stays
            module.open = opener
    _watched.clear()


def _counting(opener):
    @functools.wraps(opener)
    def opened(file, *args, **kwargs):
        if _current is not None and not isinstance(file, int):   # an int: a descriptor
            _current.files_opened += 1
        return opener(file, *args, **kwargs)
    return opened


# --- the MPI layer's side -------------------------------------------------------------
_mpi_cpu = [0.0, 0]     # thread CPU seconds inside metered MPI calls, account or not; depth


def mpi_cpu_seconds() -> float:
    """This process's thread CPU seconds inside MPI calls so far (kept with or without an
    account: the engine weighs rank 0's own work by it, rank0_share.py)."""
    return _mpi_cpu[0]


def metered(rule=None):
    """Decorate a :class:`Comm` method: its wall and thread CPU time are MPI time, and
    ``rule(comm, result, *args, **kwargs)`` -> (sent, recv, sent_msgs, recv_msgs) its
    traffic.  A call inside another metered call is timed as part of the outer one."""
    def wrap(method):
        @functools.wraps(method)
        def call(comm, *args, **kwargs):
            account = _current
            if comm.mpi is None:
                return method(comm, *args, **kwargs)
            if account is None or not account.open:
                if _mpi_cpu[1]:
                    return method(comm, *args, **kwargs)
                _mpi_cpu[1] = 1
                cpu0 = time.thread_time()
                try:
                    return method(comm, *args, **kwargs)
                finally:
                    _mpi_cpu[0] += time.thread_time() - cpu0
                    _mpi_cpu[1] = 0
            if account._in_mpi:
                result = method(comm, *args, **kwargs)
            else:
                account._in_mpi = True
                wall0, cpu0 = time.perf_counter_ns(), time.thread_time()
                try:
                    result = method(comm, *args, **kwargs)
                finally:
                    account._in_mpi = False
                    _mpi_cpu[0] += time.thread_time() - cpu0
                    account.mpi_call(method.__name__, wall0, cpu0)
            if rule is not None:
                account.traffic(*rule(comm, result, *args, **kwargs))
            return result
        return call
    return wrap


def bulk(sent_per_peer, recv_per_peer, rank: int) -> None:
    """Bytes of a bulk exchange per peer (this rank's own share left out); a message
    per peer with bytes."""
    if _current is None or not _current._in_mpi:
        return
    sent = np.asarray(sent_per_peer, dtype=np.int64).copy()
    recv = np.asarray(recv_per_peer, dtype=np.int64).copy()
    sent[rank] = recv[rank] = 0
    _current.traffic(sent.sum(), recv.sum(), np.count_nonzero(sent), np.count_nonzero(recv))


def _others(comm, objs) -> int:
    return sum(estimate(o) for r, o in enumerate(objs) if r != comm.rank)


def bcast_traffic(comm, result, obj, root=0):
    if comm.rank == root:
        return estimate(obj) * (comm.size - 1), 0, comm.size - 1, 0
    return 0, estimate(result), 0, 1


def allgather_traffic(comm, result, obj):
    return estimate(obj) * (comm.size - 1), _others(comm, result), comm.size - 1, comm.size - 1


def gather_traffic(comm, result, obj, root=0):
    if comm.rank == root:
        return 0, _others(comm, result), 0, comm.size - 1
    return estimate(obj), 0, 1, 0


def scatter_traffic(comm, result, objs, root=0):
    if comm.rank == root:
        return _others(comm, objs), 0, comm.size - 1, 0
    return 0, estimate(result), 0, 1


def alltoall_traffic(comm, result, objs):
    return _others(comm, objs), _others(comm, result), comm.size - 1, comm.size - 1


SAMPLE = 4      # items of a container looked at by estimate()
ALL_OF_A_SET = 1024


def estimate(obj, depth: int = 3) -> int:
    """About the bytes ``obj`` takes pickled: an array's bytes, a string's length, 8 a
    number, a container's first SAMPLE items scaled to its length (nesting beyond
    ``depth``: 64).  Cheap whatever the object's size: an estimate, not a pickling."""
    if obj is None or isinstance(obj, (bool, int, float, np.generic)):
        return 8
    if isinstance(obj, (bytes, bytearray, str)):
        return len(obj)
    if isinstance(obj, np.ndarray):
        if obj.dtype != object:
            return obj.nbytes
        obj = obj.ravel()
    if depth <= 0:
        return 64
    if isinstance(obj, dict):
        return 8 + _scaled(obj.items(), len(obj), depth)
    if isinstance(obj, (set, frozenset)) and len(obj) <= ALL_OF_A_SET:
        # a set's order differs between processes (string hashes): every item, so that the
        # receiver's estimate is the sender's
        return 8 + sum(estimate(item, depth - 1) for item in obj)
    if isinstance(obj, (list, tuple, set, frozenset, np.ndarray)):
        return 8 + _scaled(obj, len(obj), depth)
    state = getattr(obj, "__dict__", None)
    if state is None and hasattr(obj, "__slots__"):
        state = {s: getattr(obj, s, None) for s in obj.__slots__}
    return 64 if state is None else 16 + estimate(state, depth - 1)


def _scaled(items, n: int, depth: int) -> int:
    if not n:
        return 0
    seen, k = 0, 0
    for item in items:
        seen += estimate(item, depth - 1)
        k += 1
        if k == SAMPLE:
            break
    return seen * n // k

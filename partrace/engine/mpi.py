"""The MPI layer: mpi4py when launched by an MPI launcher, else one serial rank.

Only the handful of collectives the engine uses are exposed, so the serial
fallback stays tiny and the engine never imports mpi4py itself.

Failure protocol: work between collectives runs inside :meth:`Comm.guard`;
an exception there is caught and every rank learns of it at the next
:meth:`Comm.check`, so all ranks stop together, clean up and exit non-zero
instead of one rank dying while the others wait in a collective forever.
An error that escapes anyway reaches the CLI, which aborts the whole job (as
mpi4py's ``-m mpi4py`` runner does).  A stop signal (SIGTERM, Ctrl-C) travels
the same way: see :mod:`partrace.engine.stop`.
"""
from __future__ import annotations

import os
import sys
import traceback
from contextlib import contextmanager

import numpy as np

from . import stop
from .accounts import (allgather_traffic, alltoall_traffic, bcast_traffic, bulk, estimate,
                       gather_traffic, metered, scatter_traffic)

# Environment variables that MPI launchers (Hydra, Open MPI, PMIx, Slurm's
# srun with PMI) set in every process they start.
_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE",
                  "MPI_LOCALNRANKS", "HYDI_CONTROL_FD", "MPIR_CVAR_CH3_INTERFACE_HOSTNAME",
                  "PALS_RANKID", "ALPS_APP_PE", "MV2_COMM_WORLD_SIZE")   # Cray PALS, ALPS, MVAPICH


def launched_by_mpi() -> bool:
    """True if this process was started by an MPI launcher (or PARTRACE_MPI=1)."""
    forced = os.environ.get("PARTRACE_MPI")
    if forced is not None:
        return forced not in ("0", "", "no", "false")
    return any(v in os.environ for v in _LAUNCHER_VARS)


class Comm:
    """A communicator: the subset of MPI partrace needs."""

    def __init__(self, mpi_comm=None):
        self._c = mpi_comm
        self.rank = mpi_comm.Get_rank() if mpi_comm is not None else 0
        self.size = mpi_comm.Get_size() if mpi_comm is not None else 1
        self._error: str | None = None
        self._exception: BaseException | None = None    # the error behind _error, if ours
        self._guard_depth = 0
        self._notices: list = []        # our stop notices to the other ranks, not yet matched
        self._sent_up = False           # this rank told rank 0 of its own signal (once, ever)
        self._sent_down = False         # this rank passed a stop down the tree (once, ever)
        self._heard: set[int] = set()   # ranks whose stop notice we received

    @property
    def parallel(self) -> bool:
        return self.size > 1

    @property
    def mpi(self):
        """The mpi4py communicator (None when serial), for the few who need MPI itself
        (h5py's mpio driver, progress's own communicator)."""
        return self._c

    # --- object collectives (small data: plans, counts, samples, messages) ---
    @metered(bcast_traffic)
    def bcast(self, obj, root: int = 0):
        return obj if self._c is None else self._c.bcast(obj, root=root)

    @metered(allgather_traffic)
    def allgather(self, obj) -> list:
        return [obj] if self._c is None else self._c.allgather(obj)

    @metered(scatter_traffic)
    def scatter(self, objs: list | None, root: int = 0):
        """Rank r gets objs[r] (``objs`` given on ``root``, ignored elsewhere)."""
        return objs[0] if self._c is None else self._c.scatter(objs, root=root)

    @metered(gather_traffic)
    def gather(self, obj, root: int = 0):
        return [obj] if self._c is None else self._c.gather(obj, root=root)

    @metered(alltoall_traffic)
    def alltoall(self, objs: list) -> list:
        return list(objs) if self._c is None else self._c.alltoall(objs)

    @metered()
    def allreduce_sum(self, value):
        return value if self._c is None else self._c.allreduce(value)

    @metered()
    def allreduce_max(self, value):
        if self._c is None:
            return value
        from mpi4py import MPI
        return self._c.allreduce(value, op=MPI.MAX)

    @metered()
    def reduce(self, obj, op, root: int = 0):
        """``op``-combination of every rank's ``obj`` on ``root`` (None elsewhere).
        ``op`` must be associative and commutative; None is its identity."""
        if self._c is None:
            return obj
        return self._c.reduce(obj, op=_skip_none(op), root=root)

    @metered()
    def exscan(self, obj, op):
        """``op``-combination of the ``obj`` of all lower ranks (None on rank 0)."""
        if self._c is None:
            return None
        return self._c.exscan(obj, op=_skip_none(op))

    @metered()
    def barrier(self) -> None:
        if self._c is not None:
            self._c.Barrier()

    # --- bulk data ---
    @metered()
    def alltoallv(self, send: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Send ``send[...]`` rows in contiguous blocks of ``counts[r]`` rows to rank r.

        Numeric arrays of any row shape go as raw bytes with MPI's Alltoallv
        (no pickling); object arrays (strings, bytes) go pickled.
        """
        counts = np.asarray(counts, dtype=np.int64)
        if self._c is None:
            return send
        if send.dtype == object:
            bounds = np.concatenate([[0], np.cumsum(counts)])
            parts = [send[bounds[r]:bounds[r + 1]] for r in range(self.size)]
            got = self._c.alltoall(parts)
            bulk([estimate(p) for p in parts], [estimate(g) for g in got], self.rank)
            return np.concatenate(got) if got else send[:0]
        from mpi4py import MPI
        row = int(np.prod(send.shape[1:], dtype=np.int64)) * send.dtype.itemsize
        recv_counts = np.empty(self.size, dtype=np.int64)
        self._c.Alltoall(counts, recv_counts)
        sbytes = counts * row
        rbytes = recv_counts * row
        sdispl = np.concatenate([[0], np.cumsum(sbytes)[:-1]])
        rdispl = np.concatenate([[0], np.cumsum(rbytes)[:-1]])
        bulk(sbytes, rbytes, self.rank)
        out = np.empty((int(recv_counts.sum()),) + send.shape[1:], dtype=send.dtype)
        sbuf = np.ascontiguousarray(send).view(np.uint8).reshape(-1)
        rbuf = out.view(np.uint8).reshape(-1)
        if max(sbytes.max(initial=0), rbytes.max(initial=0), sdispl.max(initial=0),
               rdispl.max(initial=0)) < 2**31 - 1:
            self._c.Alltoallv([sbuf, (sbytes, sdispl), MPI.BYTE],
                              [rbuf, (rbytes, rdispl), MPI.BYTE])
        else:   # beyond 32-bit counts: pairwise, in pieces
            self._alltoallv_large(sbuf, sbytes, sdispl, rbuf, rbytes, rdispl)
        return out

    def _alltoallv_large(self, sbuf, sbytes, sdispl, rbuf, rbytes, rdispl, piece=1 << 30):
        """Alltoallv for more than 2 GiB per peer: non-blocking pieces of 1 GiB."""
        from mpi4py import MPI
        reqs = []
        for r in range(self.size):
            for a in range(0, int(rbytes[r]), piece):
                lo = int(rdispl[r]) + a
                reqs.append(self._c.Irecv(rbuf[lo:lo + min(piece, int(rbytes[r]) - a)], r, 17))
        for r in range(self.size):
            for a in range(0, int(sbytes[r]), piece):
                lo = int(sdispl[r]) + a
                reqs.append(self._c.Isend(sbuf[lo:lo + min(piece, int(sbytes[r]) - a)], r, 17))
        MPI.Request.Waitall(reqs)

    # --- failure protocol ---
    @contextmanager
    def guard(self):
        """Run local work; remember (not raise) an error for the next check()."""
        if self._error is not None:
            yield
            return
        self._guard_depth += 1
        try:
            yield
        except stop.StopRequested:
            self._error = STOPPED
        except Exception as exc:  # noqa: BLE001 - reported at check()
            self._error = _one_line(exc)
            self._exception = exc
            if os.environ.get("PARTRACE_DEBUG"):
                traceback.print_exc()
        finally:
            self._guard_depth -= 1

    def in_guard(self) -> bool:
        """Inside local work whose error would be reported at the next check()."""
        return self._guard_depth > 0 and self._error is None

    def poll(self) -> None:
        """Call in long local work: stop it if this rank or another one was told to stop."""
        if self._c is None:
            return
        self._exchange_notices()
        if (stop.signum is not None or self._heard) and self.in_guard():
            raise stop.StopRequested(stop.signum)

    # Stop notices travel through a tree, not from every signalled rank to every other
    # (P x (P-1) messages when a launcher signals them all): a signalled rank tells rank 0;
    # rank 0, once signalled or told, tells its two children in a binary tree (2r+1, 2r+2),
    # and each rank passes the notice on to its own children when it hears it.  At most
    # 3 messages a rank; a notice reaches every rank in log2(P) hops of their polls.
    def _children(self) -> list[int]:
        return [c for c in (2 * self.rank + 1, 2 * self.rank + 2) if c < self.size]

    def _send_notice(self, dest: int) -> None:
        from mpi4py import MPI
        note = np.array([stop.signum or 0], dtype=np.int32)
        self._notices.append((self._c.Isend([note, MPI.INT], dest=dest, tag=STOP_TAG), note))

    def _exchange_notices(self) -> None:
        """Tell rank 0 of our signal (once); receive notices; pass a stop down the tree."""
        from mpi4py import MPI
        if stop.signum is not None and self.rank != 0 and not self._sent_up:
            self._sent_up = True
            self._send_notice(0)
        status = MPI.Status()
        while self._c.Iprobe(source=MPI.ANY_SOURCE, tag=STOP_TAG, status=status):
            got = np.empty(1, dtype=np.int32)
            self._c.Recv([got, MPI.INT], source=status.Get_source(), tag=STOP_TAG)
            self._heard.add(status.Get_source())
        if (stop.signum is not None and self.rank == 0 or self._heard) and not self._sent_down:
            self._sent_down = True
            for child in self._children():
                self._send_notice(child)

    def _settle_notices(self, sent: list[tuple[bool, bool]]) -> None:
        """Collective: match every stop notice sent (``sent``: each rank's flags, up and
        down), so none is pending at exit; no rank sends one after this."""
        from mpi4py import MPI
        if self.rank == 0:
            senders = [r for r, (up, _) in enumerate(sent) if up and r != 0]
        else:
            parent = (self.rank - 1) // 2
            senders = [parent] if sent[parent][1] else []
        for r in senders:
            if r not in self._heard:
                got = np.empty(1, dtype=np.int32)
                self._c.Recv([got, MPI.INT], source=r, tag=STOP_TAG)
                self._heard.add(r)
        MPI.Request.Waitall([req for req, _ in self._notices if req is not None])
        self._notices = []
        self._sent_up = self._sent_down = True

    def check(self) -> None:
        """Collective: raise the lowest failing rank's error on every rank (a stop first).

        The ranks meet in one reduction of an int saying which rank to hear, not an
        allgather of every rank's state (P x P objects a check); only the rank named
        sends more: its error in a broadcast, or, on a stop, the ranks' notice flags."""
        self.wait_for_all()
        n = self.size
        if self._c is not None:
            self._exchange_notices()
        # the highest class wins (2: signalled, 1: failed), then the lowest rank
        cls = 2 if stop.signum is not None else 1 if self._error is not None else 0
        mine = cls * n + n - 1 - self.rank if cls else 0
        top = mine if self._c is None else self.allreduce_max(mine)
        if not top:
            return
        first = n - 1 - top % n
        if top >= 2 * n:
            signum = stop.signum
            if self._c is not None:
                states = self.allgather((stop.signum, (self._sent_up, self._sent_down)))
                self._settle_notices([sent for _, sent in states])
                signum = states[first][0]
            raise Terminated(first, signum)
        error = self._error if self._c is None else self.bcast(self._error, root=first)
        # every rank has learnt of it: a later run on this communicator (the Python API's
        # world) starts clean instead of meeting this error again
        original = self._exception if first == self.rank else None
        self._error = self._exception = None
        raise RankFailed(error, first, original)

    @metered()
    def wait_for_all(self, pause: float = 0.0005, spin: float = 0.0001) -> None:
        """Wait at a non-blocking barrier, sleeping between tests.

        Ranks that finish early wait here for the slowest: polling keeps them
        off the CPU (oversubscribed nodes) and lets Python run a SIGTERM
        handler, so a killed job cleans up instead of hanging in a collective.
        Called before a blocking collective too: MPICH busy-polls in one (a
        sched_yield every 1000 polls), so a rank arriving first would spin a
        CPU until the last arrives.

        The barrier is tested without a pause for ``spin`` seconds first, then
        between sleeps that double up to ``pause``: ranks that arrive together
        (most checks of a balanced window) meet in a message's round trip, where
        a first sleep of ``pause`` cost every rank that long at every check.
        """
        if self._c is None:
            return
        import time
        request = self._c.Ibarrier()
        until, nap = time.perf_counter() + spin, pause / 8
        while not request.Test():
            if time.perf_counter() < until:
                continue
            self._exchange_notices()
            time.sleep(nap)
            nap = min(pause, 2 * nap)

    def abort(self, code: int = 1) -> None:
        """End the whole job with ``code``.  The caller has said why in one line: MPICH's
        own "Abort(2) on node ... MPI_Abort(...)" line would only repeat it, so stderr
        goes to /dev/null first."""
        if self._c is not None and self.size > 1:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):   # a closed pipe: nothing more to say there
                    pass
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            self._c.Abort(code)
        sys.exit(code)


def _skip_none(op):
    def combine(a, b):
        return b if a is None else a if b is None else op(a, b)
    return combine


class RankFailed(Exception):
    """An error on one rank, known to all ranks after Comm.check().

    ``original``: the exception itself on the rank it was raised on (None elsewhere)."""

    def __init__(self, message: str, rank: int, original: BaseException | None = None):
        super().__init__(message)
        self.message = message
        self.rank = rank
        self.original = original


class Terminated(RankFailed):
    """A rank was told to stop (SIGTERM, Ctrl-C), known to all ranks after Comm.check()."""

    def __init__(self, rank: int, signum: int):
        super().__init__(f"terminated ({stop.signal_name(signum)} on rank {rank})", rank)
        self.signum = signum
        self.exit_code = stop.exit_code(signum)


STOP_TAG = 0x5354       # point-to-point tag of stop notices (collectives never match it)
STOPPED = "\0stopped"   # Comm._error of a rank whose local work a stop interrupted


def _one_line(exc: BaseException) -> str:
    from ..errors import one_line
    return one_line(exc)


_world: Comm | None = None


# Launcher variables giving the number of ranks on this node (Hydra, Open MPI, Slurm).
_LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def sleep_when_oversubscribed() -> None:
    """More ranks on this node than cores: let MPICH's waits sleep (nanosleep) rather
    than spin, unless the user chose.  A spinning rank takes the core from one with work:
    8 ranks on 2 cores spent their waits at full CPU.  MPICH reads the variable at
    MPI_Init; other MPIs ignore it (Open MPI yields by itself when oversubscribed)."""
    for var in _LOCAL_SIZE_VARS:
        try:
            local = int(os.environ.get(var, "").split("(")[0])
        except ValueError:
            continue
        if local > _usable_cores():
            os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
        return


def world() -> Comm:
    """The world communicator, or a serial one when not launched by MPI."""
    global _world
    if _world is None:
        if launched_by_mpi():
            sleep_when_oversubscribed()
            from mpi4py import MPI
            _world = Comm(MPI.COMM_WORLD)
        else:
            _world = Comm(None)
    return _world


def serial() -> Comm:
    """A one-rank communicator (for the Python API, whatever the launcher)."""
    return Comm(None)

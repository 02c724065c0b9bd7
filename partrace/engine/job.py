"""One job: what every command that runs the engine needs around its work, the same for
the command line and the Python API.

A :class:`Job` holds the communicator and, from entering to leaving it,

- the stop protocol (engine/stop.py): signals noted before start-up are said by the
  first check, and a failure on one rank alone ends every rank with its files removed;
- the kernels' mode (kernels/jit.py): chosen once from the input's size, set for the
  job and restored after it (the plan may still turn a small guess to compiled);
- for a job that decodes, the allocator told to keep freed buffers for the next chunk
  and window (engine/heap.py: once a process, on glibc);
- the warm-up of a cold cache before a parallel run (a callable of the layer above:
  warming runs commands, which the engine does not know);
- the account of every rank's time when ``--stats`` or ``--self-trace`` asks for it.

Inside it, :meth:`open_sink` makes the output under the guard (a refusal on one rank
is every rank's), :meth:`progress` reports on rank 0 and :meth:`report` meets the
accounts on rank 0.  What a failure becomes for the user (an exit status and one line,
or an exception) is the caller's: :meth:`describe` words it once for both.
"""
from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass

from ..errors import PartraceError, one_line
from ..kernels import jit
from . import accounts, heap, stop
from .mpi import Comm, RankFailed, Terminated


INTERNAL = 3     # the exit status of a bug (2: bad input or usage, 128+N: signal N)


@dataclass(frozen=True)
class Failure:
    """What a failure means for the job: the exit status, the line to say (None: nothing),
    and whether this rank failed alone (the others are not told: the job must end)."""

    code: int
    line: str | None
    alone: bool


class Job:
    """The frame of one command that runs the engine (see the module doc).

    ``trace``: the input, whose size chooses the kernels' mode; ``kernels``: "python" or
    "numba" to fix it instead (warming compiles whatever the size); ``decodes``: False
    for a job that decodes nothing (no mode to choose, no warm-up); ``checks(comm)``:
    local checks of the options, run under the guard before any work; ``warm_up(comm)``: run
    before a parallel decoding job; ``account``: keep every rank's account (``keep_slices``:
    with the slices a self-trace draws)."""

    def __init__(self, comm: Comm | None = None, *, trace=None, kernels: str | None = None,
                 decodes: bool = True, checks=None, warm_up=None, account: bool = False,
                 keep_slices: bool = False):
        self.comm = comm
        self.trace = trace
        self.decodes = decodes
        self._mode = kernels
        self._checks = checks
        self._warm_up = warm_up
        self._account = account
        self._keep_slices = keep_slices
        self._scope: jit.Scope | None = None

    # -- the frame ---------------------------------------------------------------------
    def __enter__(self) -> "Job":
        if self.comm is None:
            from .mpi import world
            self.comm = world()
        stop.begin(self.comm)
        if self.decodes:    # before the first chunk's columns are allocated
            heap.keep_freed_pages()
        if self._account:   # every rank's time accounted, from its start (engine/accounts)
            accounts.begin(self.comm.rank, keep_slices=self._keep_slices)
        try:
            if self._checks is not None:
                with self.comm.guard():
                    self._checks(self.comm)
                self.comm.check()
            self._scope = jit.Scope(self._input_bytes(), mode=self._mode).__enter__()
            if self.comm.parallel and self.decodes and self._warm_up is not None:
                self._warm_up(self.comm)
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def _input_bytes(self) -> int | None:
        """Collective: the input's bytes as the kernels' mode weighs them; rank 0 alone walks
        the input's files (a stat of each), the others take its sum."""
        if not self.decodes or self.trace is None:
            return None
        return self.comm.bcast(jit.input_bytes(self.trace) if self.comm.rank == 0 else None)

    def __exit__(self, kind, exc, tb) -> None:
        if self._scope is not None:
            self._scope.__exit__(kind, exc, tb)
            self._scope = None
        if self._account and accounts.current() is not None and exc is not None:
            accounts.end()      # a failed job's account is nobody's: the next starts anew
        if exc is None or isinstance(exc, (BrokenPipeError, SystemExit, GeneratorExit)):
            return
        if isinstance(exc, Terminated):     # every rank knows; each removes its files
            stop.cleanup()
            return
        if isinstance(exc, RankFailed):     # every rank knows; the run discarded its output
            return
        failure = self.describe(exc)
        if failure.code == INTERNAL and os.environ.get("PARTRACE_DEBUG"):
            traceback.print_exception(kind, exc, tb)
        if failure.alone:
            self.leave(failure)

    def leave(self, failure: Failure) -> None:
        """An error on this rank alone: remove all this job's files it can see and, in a
        parallel job, end every rank (the others would wait for this one forever).

        MPI_Abort makes the launcher SIGKILL every other rank, so this rank removes
        what it can see of theirs (spill folders of the same run, the staging folder)."""
        if self.comm.parallel and failure.line:
            print(failure.line, file=sys.stderr)
        stop.cleanup(hard=self.comm.parallel)
        if self.comm.parallel:
            sys.stderr.flush()
            self.comm.abort(failure.code)

    def describe(self, exc: BaseException) -> Failure:
        """``exc`` as the user meets it: exit status and one line (said by rank 0 when every
        rank knows it, by the failing rank when it failed alone)."""
        rank = self.comm.rank if self.comm is not None else 0
        if isinstance(exc, Terminated):
            return Failure(exc.exit_code, f"partrace: {exc.message}: spill files and "
                           f"unfinished output removed" if rank == 0 else None, False)
        if isinstance(exc, RankFailed):
            return Failure(2, f"partrace: error: {exc.message}" if rank == 0 else None, False)
        if isinstance(exc, PartraceError):
            return Failure(2, f"partrace: error: {one_line(exc)}", True)
        if isinstance(exc, stop.StopRequested):
            sig = stop.signum or 2
            return Failure(stop.exit_code(sig), f"partrace: terminated ({stop.signal_name(sig)}"
                           f" on rank {rank}): spill files and unfinished output removed", True)
        if isinstance(exc, KeyboardInterrupt):
            return Failure(stop.exit_code(stop.signum or 2), None, True)
        return Failure(INTERNAL, f"partrace: internal error on rank {rank}: "
                       f"{one_line(exc).removeprefix('internal error: ')} "
                       f"(set PARTRACE_DEBUG=1 for a traceback)", True)

    # -- inside the frame ---------------------------------------------------------------
    def open_sink(self, make):
        """``make()``'s sink, made on every rank under the guard: a refusal (an existing
        output, an option the format does not take) stops every rank alike, and rank 0
        alone says so."""
        sink = None
        with self.comm.guard():
            sink = make()
        self.comm.check()
        return sink

    def progress(self, mode: str = "none"):
        """Progress on rank 0's stderr: "auto", "bar", "log" or "none"."""
        from .progress import Progress
        return Progress(self.comm, mode=mode)

    def report(self, stats: str | None = None, self_trace: str | None = None,
               write_self_trace=None) -> list[str]:
        """Collective: every rank's account met on rank 0, which writes ``stats`` (JSON) and
        ``self_trace`` (through ``write_self_trace(path, reports)``); the summary's lines
        on rank 0 ([] elsewhere, and when no account was kept).  An OSError writing them
        is raised on rank 0 alone, after every rank has met."""
        from . import account_report
        reports = account_report.gather(self.comm)
        if reports is None:
            return []
        if stats:
            account_report.write_stats(stats, reports)
        if self_trace:
            write_self_trace(self_trace, reports)
        return [account_report.summary_line(reports)]

    def signalled_after_output(self) -> int | None:
        """The exit status of a stop signal that came once the output was whole (it is
        kept, and said so), or None."""
        if stop.signum is None:
            return None
        print(f"partrace: {stop.signal_name(stop.signum)} on rank {self.comm.rank} after the "
              f"output was written; it is kept", file=sys.stderr)
        return stop.exit_code()

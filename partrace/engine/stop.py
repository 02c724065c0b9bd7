"""Stopping on SIGTERM or Ctrl-C: every rank removes what it made, no rank hangs.

MPICH's launcher (Hydra) answers a rank that exits early, or calls MPI_Abort,
by sending SIGKILL at once to every other rank (strace of hydra_pmi_proxy:
``kill(-pgid, SIGKILL)``; mpiexec then returns the first exit code, e.g. 143).
So a rank signalled on its own (a node failure, an OOM kill of one task) must
not leave before the others have removed their spill folders.  In a parallel
run, therefore:

* the handler only notes the signal and, if the rank is inside local work
  (``Comm.guard``), interrupts that work with :class:`StopRequested`, which the
  guard records like an error;
* the rank tells the others with non-blocking messages through a tree (it
  tells rank 0, which tells its two children, and so on: at most 3 messages a
  rank, whatever the rank count); they see it in their long loops and while
  they wait at ``Comm.check`` (``Comm.poll``), and pass it on;
* at the next ``Comm.check`` every rank learns of it and raises
  ``Terminated``: the pipeline discards the unpublished output, every rank
  removes its own spill folder, and all exit 128+signal together;
* a watchdog thread, woken through the signal wakeup fd even while the main
  thread is blocked inside MPI, falls back after ``GRACE`` seconds to removing
  all it can see (its spill folder, the same run's spill folders of the other
  ranks, the staging folder) and exiting; the grace does not run while this
  rank is in a held step (``held``: numba compiling a kernel, which no signal
  can cut short).

A serial run, and any run before the engine started, cleans up inside the
handler and exits at once.  This module imports only the standard library and
its handler imports nothing: a signal can arrive in the middle of an import.
"""
from __future__ import annotations

import os
import signal

GRACE = float(os.environ.get("PARTRACE_STOP_GRACE", "20"))   # seconds, < Slurm's KillWait (30)
SIGNALS = (signal.SIGTERM, signal.SIGINT)

signum: int | None = None       # the first stop signal this process received
_comm = None                    # the communicator of a parallel run, once started
_begun = False                  # begin() was called: MPI (if any) is up
_raised = False                 # StopRequested was raised once already
_shield = 0                     # > 0: in a step that must not be cut (publishing the output)
_cleanups: list = []            # (callable, hard): what removes this process's files
_published = False              # this process moved an output into place: a stop keeps it


class StopRequested(BaseException):
    """Raised by the handler inside local work (``Comm.guard`` records it).

    A BaseException, like KeyboardInterrupt, so that an ``except Exception`` in
    a reader or writer does not swallow it.
    """


def on_stop(fn, hard_only: bool = False) -> None:
    """Register a cleanup (``hard_only``: only when leaving without the others)."""
    _cleanups.append((fn, hard_only))


def published() -> None:
    """The output is in place and whole: a signal from now on must not say it was removed."""
    global _published
    _published = True


def finished() -> None:
    """The run is over and its exit status decided: ignore the stop signals until the
    process is gone.  (Python restores the default action of its handlers while it
    finalizes, so a SIGTERM in those last milliseconds would kill a run whose output
    is complete, giving -SIGTERM.  Blocking would not do: any thread, e.g. numpy's
    BLAS threads, may take a signal sent to the process; an ignored one is dropped.)"""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def exit_code(sig: int | None = None) -> int:
    return 128 + int(sig if sig is not None else signum)


def signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def cleanup(hard: bool = False) -> None:
    """Remove what this process made (``hard``: also what it can see of other ranks)."""
    for fn, hard_only in list(_cleanups):
        if hard or not hard_only:
            try:
                fn()
            except Exception:   # noqa: BLE001 - best effort while leaving
                pass


def say(line: str) -> None:
    """One line on stderr without Python's buffered streams (safe in a handler)."""
    try:
        os.write(2, (line + "\n").encode(errors="replace"))
    except OSError:
        pass


def install() -> None:
    """Handle SIGTERM and SIGINT (call first thing: imports come after); calls into numba
    hold them until they return (``held``)."""
    from ..kernels import jit       # the standard library only: cheap, and no numba
    jit.hold_signals(held, after_compile)
    for s in SIGNALS:
        signal.signal(s, _handler)


def begin(comm) -> None:
    """From now on a parallel run stops cooperatively (see the module's doc).  A signal
    noted before this call is said by the first ``Comm.check``, on every rank."""
    global _comm, _begun
    _begun = True
    if comm.parallel and _installed() and _comm is None:    # one watchdog, however many jobs
        _comm = comm
        _start_watchdog(comm.rank)


class shielded:
    """A step a signal must not cut in two (moving the output into place): the stop
    waits until it is done."""

    def __enter__(self):
        global _shield
        _shield += 1

    def __exit__(self, *exc):
        global _shield
        _shield -= 1
        if not _shield and signum is not None and _comm is None and _installed():
            _handler(signum, None)


class _Held(shielded):
    """A call into a compiled kernel on the main thread: numba compiles or loads a kernel
    at its first call with new argument types, in Python, and StopRequested raised in
    there escapes through numba's own handlers (a traceback from its cache, or a rank that
    never stops).  The signal waits until the call returns, then acts as it would have
    (a kernel's own run holds it anyway: Python runs handlers between bytecodes only)."""

    def __exit__(self, *exc):
        global _shield
        _shield -= 1
        if not _shield and signum is not None and _installed():
            _handler(signum, None)


class _Open:
    def __enter__(self):
        pass

    def __exit__(self, *exc):
        pass


_HELD, _OPEN = _Held(), _Open()


def held():
    """What a call into numba runs in (kernels/jit.py): held on the main thread, where the
    handler runs; another thread's call (the HDF5 writer's pool) cannot be interrupted."""
    import threading
    return _HELD if threading.current_thread() is threading.main_thread() else _OPEN


def after_compile() -> None:
    """numba has compiled or loaded a kernel (seconds of work that looks at no signal): in
    a parallel run, learn whether a rank was told to stop meanwhile (``Comm.poll``), so
    that every rank stops at its next kernel, not after all its compiles."""
    import threading
    if _comm is not None and threading.current_thread() is threading.main_thread():
        _comm.poll()


def _installed() -> bool:
    return signal.getsignal(signal.SIGTERM) is _handler


def _handler(sig, frame):
    global signum, _raised
    if signum is None:
        signum = sig
    if _shield:
        return
    comm = _comm
    if comm is None and not _begun and _launcher_rank() is not None:
        # started by a launcher, MPI not up yet: the other ranks may be waiting for this
        # one inside MPI_Init, and would wait forever if it left now.  Noted only: the
        # first Comm.check, right after start-up, stops every rank together.
        return
    if comm is None:        # serial, or not started: nothing can be waiting for us
        cleanup(hard=False)
        if not _launcher_rank():    # a launcher signals every rank: the first one speaks
            if _published:  # too late to undo, and undoing would lose a whole output
                say(f"partrace: {signal_name(sig)} after the output was written; it is kept")
            else:
                say(f"partrace: terminated ({signal_name(sig)}): spill files and unfinished "
                    f"output removed")
        os._exit(exit_code(sig))
    if not _raised and comm.in_guard():
        _raised = True
        raise StopRequested(sig)


# The rank an MPI launcher gives a process, in its environment (MPICH's Hydra, Open MPI,
# PMIx, Slurm): known before MPI is started, as a signal may come first.
_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PALS_RANKID")


def _launcher_rank() -> int | None:
    """This process's rank as its launcher set it (None when not launched by one)."""
    for var in _RANK_VARS:
        value = os.environ.get(var, "")
        if value.isdigit():
            return int(value)
    return None


def _start_watchdog(rank: int) -> None:
    import threading
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w)     # written by the C-level handler, whatever the main thread does

    def watch():
        while True:
            data = os.read(r, 1)
            if data and data[0] in SIGNALS:
                break
        import time
        left = GRACE
        while left > 0:     # the grace runs while this rank is not held (numba compiling a
            time.sleep(0.25)    # kernel under load may take longer than GRACE)
            if not _shield:
                left -= 0.25
        say(f"partrace: rank {rank}: the ranks did not stop together within {GRACE:.0f} s; "
            f"removing this run's files and leaving")
        cleanup(hard=True)
        os._exit(exit_code(data[0]))

    threading.Thread(target=watch, name="partrace-stop", daemon=True).start()

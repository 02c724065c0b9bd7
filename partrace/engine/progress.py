"""Progress of a run, phase by phase, summed over all ranks and shown by rank 0.

Phases: ``plan`` (listing and surveying units), ``decode`` (bytes of the
trace) and ``merge+write`` (windows of the global order), each with an ETA.
Shown as a bar redrawn in place on a terminal, or (``log``: the default when
rank 0's stderr is not a terminal, as under mpiexec or srun) as a plain line
every few seconds; once anything was shown, each phase's end is shown too (a
run shorter than one interval shows nothing).

No rank waits for another to report: every rank but 0 sends its count with a
non-blocking send on a private communicator (at most a few times a second),
and a thread on rank 0 takes whatever has arrived when it draws.  Windows are
collective steps, so rank 0's own count of them is everyone's.  With mode
``none`` (``-q``) nothing is created and it costs nothing.
"""
from __future__ import annotations

import os
import sys
import threading
import time

import numpy as np

from .mpi import Comm

MODES = ("auto", "bar", "log", "none")
# seconds between two draws (PARTRACE_PROGRESS_INTERVAL overrides)
_INTERVAL = {"bar": 0.5, "log": 5.0}
_TAG = 7


class Progress:
    """Collective: every rank builds one, and calls :meth:`phase` and :meth:`done`
    at the same points; :meth:`advance` is local and cheap."""

    def __init__(self, comm: Comm, mode: str = "auto", stream=None,
                 interval: float | None = None, enabled: bool | None = None):
        self.comm = comm
        self.stream = stream or sys.stderr
        if enabled is False:
            mode = "none"
        if mode not in MODES:
            raise ValueError(f"progress mode {mode!r}: expected one of {', '.join(MODES)}")
        if comm.rank == 0:
            if mode == "auto":
                mode = "bar" if _isatty(self.stream) else "log"
            if interval is None:
                interval = _env_interval()
            if interval is None:
                interval = _INTERVAL.get(mode, 1.0)
        self.mode, self.interval = comm.bcast((mode, interval))
        self.enabled = self.mode != "none"
        self._number = 0            # phases begun, the tag of a rank's reports
        self._name = ""
        self._total = 0
        self._unit = "bytes"
        self._summed = True
        self._done = 0              # this rank's count in the current phase
        self._t0 = time.perf_counter()
        self._lock = threading.Lock()
        self._pc = None             # private communicator for the reports
        self._sent = 0
        self._request = None
        self._buf = np.zeros(2, dtype=np.int64)
        self._last_send = 0.0
        self._thread = None
        self._width = 0
        # a run shorter than one interval says nothing: ends of phases are held
        # until the first line is shown
        self._spoken = False
        self._held: list[str] = []
        if not self.enabled:
            return
        if comm.parallel:
            self._pc = comm.mpi.Dup()
            self._others = np.zeros(comm.size, dtype=np.int64)
            self._received = np.zeros(comm.size, dtype=np.int64)
            from mpi4py import MPI
            # a thread may call MPI only at THREAD_MULTIPLE; else rank 0's
            # main thread takes the reports as it advances
            self._thread_mpi = MPI.Query_thread() == MPI.THREAD_MULTIPLE
        if comm.rank == 0:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._tick, name="partrace-progress",
                                            daemon=True)
            self._thread.start()

    # --- called by the engine -------------------------------------------------
    def phase(self, name: str, total: int = 0, unit: str = "bytes") -> None:
        """Collective: the previous phase is complete; ``name`` begins.

        ``total`` is the amount of work (0: not known yet, see :meth:`expect`);
        ``unit`` is ``"bytes"`` (summed over ranks) or ``"windows"`` (collective
        steps, counted once)."""
        if not self.enabled:
            return
        with self._lock:
            if self.comm.rank == 0 and self._name:
                self._finish_line()
            self._number += 1
            self._name, self._total, self._unit = name, int(total), unit
            self._summed = unit != "windows"
            self._done = 0
            self._t0 = time.perf_counter()
            if self._pc is not None:
                self._others[:] = 0
            self._last_send = 0.0

    def start(self, name: str, total_bytes: int) -> None:
        """Collective: a phase of ``total_bytes`` summed over ranks (as :meth:`phase`)."""
        self.phase(name, total_bytes)

    def expect(self, total: int) -> None:
        """The current phase's amount of work, once known."""
        if self.enabled:
            with self._lock:
                self._total = int(total)

    def advance(self, amount: int) -> None:
        """This rank did ``amount`` more of the current phase's work."""
        if not self.enabled:
            return
        with self._lock:
            self._done += int(amount)
        if self._pc is None or not self._summed:
            return
        now = time.perf_counter()
        if now - self._last_send < min(self.interval, 1.0) / 2:
            return
        self._last_send = now
        if self.comm.rank == 0:
            if not self._thread_mpi:
                with self._lock:
                    self._take_reports()
        else:
            self._report()

    def done(self) -> None:
        """Collective (unless an error is on its way out of this rank alone):
        say the last phase's end if it completed, and release what was made."""
        if not self.enabled:
            return
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            with self._lock:
                complete = self._unit != "windows" or self._done >= self._total
                if self._name and complete and sys.exc_info()[1] is None:
                    self._finish_line()
                elif self.mode == "bar" and self._width:
                    self.stream.write("\n")
                    self.stream.flush()
                self._name = ""
        if self._pc is not None:
            from .mpi import RankFailed
            error = sys.exc_info()[1]
            if error is None or isinstance(error, RankFailed):   # every rank is here
                self._drain()
                self._pc.Free()
            self._pc = None
        self.enabled = False

    # --- reports between ranks ------------------------------------------------
    def _report(self) -> None:
        """Rank > 0: send this phase's count unless the last send is still on its way."""
        if self._request is not None and not self._request.Test():
            return
        self._buf[:] = (self._number, self._done)
        self._request = self._pc.Isend(self._buf, dest=0, tag=_TAG)
        self._sent += 1

    def _take_reports(self) -> None:
        """Rank 0: take every report that has arrived (current phase only)."""
        from mpi4py import MPI
        status = MPI.Status()
        got = np.zeros(2, dtype=np.int64)
        while self._pc.Iprobe(source=MPI.ANY_SOURCE, tag=_TAG, status=status):
            src = status.Get_source()
            self._pc.Recv(got, source=src, tag=_TAG)
            self._received[src] += 1
            if got[0] == self._number:
                self._others[src] = got[1]

    def _drain(self) -> None:
        """All ranks: every report sent is received, so the communicator frees clean."""
        if self.comm.rank != 0:
            if self._request is not None:
                self._request.Wait()
            self._pc.gather(self._sent, root=0)
            return
        sent = self._pc.gather(0, root=0)
        got = np.zeros(2, dtype=np.int64)
        for src in range(1, self.comm.size):
            while self._received[src] < sent[src]:
                self._pc.Recv(got, source=src, tag=_TAG)
                self._received[src] += 1

    # --- drawing (rank 0) -----------------------------------------------------
    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                if self._pc is not None and self._thread_mpi:
                    self._take_reports()
                if self._name:
                    if not self._spoken:
                        self._spoken = True
                        for text in self._held:
                            self._emit(text, end=True)
                    self._emit(self._line())

    def _count(self) -> int:
        if self._summed and self._pc is not None:
            return self._done + int(self._others[1:].sum())
        return self._done

    def _line(self) -> str:
        elapsed = time.perf_counter() - self._t0
        done, total = self._count(), self._total
        ranks = f" ({self.comm.size} rank{'s' if self.comm.size > 1 else ''})"
        if self._unit == "windows":
            text = f"{self._name} window {min(done + 1, total)}/{total}"
            if done:
                return text + f" ETA {_clock(elapsed / done * (total - done))}"
            return text + f" {_clock(elapsed)} elapsed"
        if total <= 0:
            return f"{self._name} {_clock(elapsed)} elapsed{ranks}"
        done = min(done, total)
        text = f"{self._name} {100 * done // total}% {_size(done)}/{_size(total)}"
        if done and elapsed > 0:
            rate = done / elapsed
            text += f" {_size(rate)}/s ETA {_clock((total - done) / rate)}"
        return text + ranks

    def _finish_line(self) -> None:
        elapsed = time.perf_counter() - self._t0
        ranks = f" ({self.comm.size} rank{'s' if self.comm.size > 1 else ''})"
        if self._unit == "windows":
            n = self._total
            text = f"{self._name} done: {n} window{'s' if n != 1 else ''} in {_clock(elapsed)}"
        elif self._total > 0:
            rate = f", {_size(self._total / elapsed)}/s" if elapsed > 0 else ""
            text = f"{self._name} done: {_size(self._total)} in {_clock(elapsed)}{rate}{ranks}"
        else:
            text = f"{self._name} done in {_clock(elapsed)}"
        if self._spoken:
            self._emit(text, end=True)
        else:
            self._held.append(text)

    def _emit(self, text: str, end: bool = False) -> None:
        text = f"partrace: {text}"
        if self.mode == "bar":
            pad = " " * max(0, self._width - len(text))
            self.stream.write(f"\r{text}{pad}" + ("\n" if end else ""))
            self._width = 0 if end else len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def _env_interval() -> float | None:
    """PARTRACE_PROGRESS_INTERVAL in seconds (at least 0.05); None if unset or not a number
    (read on rank 0 alone, so it must not raise)."""
    try:
        return max(0.05, float(os.environ["PARTRACE_PROGRESS_INTERVAL"]))
    except (KeyError, ValueError):
        return None


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _size(n: float) -> str:
    """Bytes in decimal units: 310 MB, 1.2 GB."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            break
        n /= 1000
    return f"{n:.0f} {unit}" if n >= 10 or unit == "B" else f"{n:.1f} {unit}"


def _clock(seconds: float) -> str:
    """m:ss, or h:mm:ss from an hour."""
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"

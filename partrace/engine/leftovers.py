"""What a killed run leaves, and how a later run tells it from a live run's files.

A rank killed with SIGKILL (the OOM killer, a lost node) runs no cleanup: its job ends
(MPI kills the other ranks) but the hidden staging folder beside the output and the
spill folders under ``--tmpdir`` stay.  Their names carry their maker's owner token
``p<pid>-s<start>-h<host>`` (the process's start, in ms since the epoch, from /proc), so
a later run can tell whether that process is gone: on the same host, a pid that no
process has, or that a process started later has (pids are reused), belongs to a dead
run, whose folders are removed with a warning naming them.  A folder of another host,
or of a process still alive, is left alone: this host cannot see that process.
Standard library only (the signal handler's rooms import this).
"""
from __future__ import annotations

import itertools
import os
import re
import socket
import time

_TOKEN = re.compile(r"p(\d+)-s(\d+)-h(\w+?)(?=-|$)")
_SLACK_MS = 1000            # the start of a process as two readings of /proc may round it
_counter = itertools.count()


def _host() -> str:
    return re.sub(r"\W", "_", socket.gethostname().split(".")[0]) or "host"


def _boot_seconds() -> float | None:
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def process_start_ms(pid: int) -> int | None:
    """When process ``pid`` started (ms since the epoch); None if there is no such process
    (or no /proc to ask)."""
    boot = _boot_seconds()
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    if boot is None:
        return None
    # field 22, counted after the command name (which may hold spaces and parentheses)
    ticks = int(stat[stat.rindex(b")") + 2:].split()[19])
    return int((boot + ticks / os.sysconf("SC_CLK_TCK")) * 1000)


_own_token: str | None = None


def owner_token() -> str:
    """This process's ``p<pid>-s<start>-h<host>``."""
    global _own_token
    pid = os.getpid()
    if _own_token is None or not _own_token.startswith(f"p{pid}-"):   # a forked child
        start = process_start_ms(pid) or int(time.time() * 1000)
        _own_token = f"p{pid}-s{start}-h{_host()}"
    return _own_token


def run_name() -> str:
    """A name for this process's next staging folder: its owner token and a count."""
    return f"{owner_token()}-{next(_counter)}"


def is_dead(name: str) -> tuple[bool, str]:
    """(the process that made folder ``name`` is gone, who it was); the maker's token is
    the last in the name.  False for another host's folder or where /proc cannot tell."""
    found = _TOKEN.findall(name)
    if not found:
        return False, ""
    pid, start, host = found[-1]
    who = f"pid {pid} on {host}"
    if host != _host() or _boot_seconds() is None:
        return False, who
    now = process_start_ms(int(pid))
    return (now is None or now > int(start) + _SLACK_MS), who


def remove_dead(folder, prefix: str) -> list[str]:
    """Remove the folders in ``folder`` whose names start with ``prefix`` and whose maker is
    gone (a killed run's); warn naming each; return their paths."""
    import shutil
    import warnings
    removed = []
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(prefix)]
    except OSError:
        return removed
    for e in entries:
        if not e.is_dir(follow_symlinks=False):
            continue
        dead, who = is_dead(e.name[len(prefix):])
        if not dead:
            continue
        # renamed first: of the ranks of a later run that see it, one removes it and says so
        doomed = f"{e.path}-removing-{owner_token()}"
        try:
            os.rename(e.path, doomed)
        except OSError:
            continue
        shutil.rmtree(doomed, ignore_errors=True)
        removed.append(e.path)
        warnings.warn(f"{e.path}: removed, left by a partrace run that was killed "
                      f"({who}, gone)", stacklevel=2)
    return removed

"""The rank processes a launcher started, found in Linux's /proc (tests that signal them,
or wait until they run)."""
from __future__ import annotations

from pathlib import Path


def children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


def ranks(launcher: int) -> dict[int, int]:
    """{MPI rank: pid} of the python processes under mpiexec (launcher -> proxy -> ranks)."""
    found = {}
    todo = children(launcher)
    while todo:
        pid = todo.pop()
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        rank = [e for e in env if e.startswith(b"PMI_RANK=")]
        if b"partrace" in cmd and rank:
            found[int(rank[0].split(b"=")[1])] = pid
        todo += children(pid)
    return found

"""Damaged and hostile conditions: one rank killed, early signals, outputs that would
destroy inputs, a full disk, HDF5 and Python warnings: one clean line, nothing left."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT, SYNTH, mpiexec, run_cli


def _start(args, env=None, nranks=None):
    cmd = [sys.executable, "-m", "partrace", *args]
    if nranks:
        cmd = [mpiexec(), "-n", str(nranks), *cmd]
    full = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH, **(env or {})}
    full.pop("PARTRACE_MPI", None)
    return subprocess.Popen(cmd, env=full, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


def _ranks(launcher: int) -> dict[int, int]:
    """{MPI rank: pid} of the python processes under mpiexec (launcher -> proxy -> ranks)."""
    found = {}
    todo = _children(launcher)
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
        todo += _children(pid)
    return found


def _switches(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc")


def _held_rank(ranks: dict[int, int]) -> int:
    """The rank asleep in the synth reader's hold: the other one polls at its wait
    (a wake-up every half millisecond), the held one does not wake at all."""
    before = {r: _switches(p) for r, p in ranks.items()}
    time.sleep(0.5)
    woke = {r: _switches(p) - before[r] for r, p in ranks.items()}
    held = min(woke, key=woke.get)
    assert woke[held] < 20 < woke[1 - held], woke
    return held


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.mpi
@pytest.mark.parametrize("suffix", ["h5", "otf"])
@pytest.mark.parametrize("victim", ["held", "waiting"])
def test_sigterm_to_one_rank_leaves_nothing_on_any_rank(synth_trace, tmp_path, suffix, victim):
    """A node failure or an OOM kill of one task: SIGTERM reaches one rank only.

    The held rank is inside local work (the handler interrupts it, all ranks stop
    together at the next check).  The waiting rank cannot reach the held one,
    which never polls: after the grace time it removes every rank's spill folder
    of the run and the staging folder, and leaves; Hydra SIGKILLs the rest.
    """
    trace = synth_trace(locations=6, events=20000, units=6)
    spill = tmp_path / "spill"
    spill.mkdir()
    out = tmp_path / f"out.{suffix}"
    proc = _start(["merge", str(trace), "-o", str(out), "--memory", "1M", "--tmpdir", str(spill)],
                  {"PARTRACE_TEST_HOLD_DECODE": "0005", "PARTRACE_STOP_GRACE": "4"}, nranks=2)
    held = tmp_path / f"{trace.name}.held"
    deadline = time.monotonic() + 120
    while not held.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never reached the held unit"
        time.sleep(0.05)
    time.sleep(0.5)     # let the other rank reach its wait
    ranks = _ranks(proc.pid)
    assert sorted(ranks) == [0, 1], ranks
    spilled = sorted(p.name for p in spill.iterdir())
    assert len(spilled) == 2, f"the test needs both ranks to have spilled: {spilled}"
    assert any(p.name.startswith(f".{out.name}.partrace-") for p in tmp_path.iterdir())
    holder = _held_rank(ranks)
    pid = ranks[holder if victim == "held" else 1 - holder]
    os.kill(pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=90)
    # Hydra passes on the first rank's exit status: 143 (128 + SIGTERM)
    assert proc.returncode == 143, err
    assert not list(spill.iterdir()), err
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([trace.name, held.name, "spill"]), (left, err)
    assert not [p for p in ranks.values() if _alive(p)], "a rank outlived mpiexec"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert any(ln.startswith("partrace: ") and "terminated" in ln or "did not stop" in ln
               for ln in lines), err
    assert "Traceback" not in err, err

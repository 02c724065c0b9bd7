"""SIGKILL of one rank (the OOM killer, a lost node): what is left, and how a later run
treats it (partrace/engine/leftovers.py)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from partrace.engine import leftovers

from .conftest import run_cli
from .support.held_run import wait_until_held
from .test_cli_safety import _alive, _ranks, _start


@pytest.mark.mpi
def test_a_later_run_removes_what_a_killed_run_left(synth_trace, tmp_path):
    trace = synth_trace(locations=6, events=20000, units=6)
    spill = tmp_path / "spill"
    spill.mkdir()
    out = tmp_path / "out.h5"
    proc = _start(["merge", str(trace), "-o", str(out), "--memory", "1M", "--tmpdir", str(spill)],
                  {"PARTRACE_TEST_HOLD_DECODE": "0005"}, nranks=2)
    held = tmp_path / f"{trace.name}.held"
    wait_until_held(proc, held)
    time.sleep(0.5)
    ranks = _ranks(proc.pid)
    assert sorted(ranks) == [0, 1], ranks
    os.kill(ranks[1], 9)
    _, err = proc.communicate(timeout=90)        # the job ends: no rank waits forever
    assert proc.returncode != 0, err
    assert not [p for p in ranks.values() if _alive(p)], "a rank outlived mpiexec"
    staged = [p for p in tmp_path.iterdir() if p.name.startswith(f".{out.name}.partrace-")]
    spilled = sorted(spill.iterdir())
    assert len(staged) == 1 and len(spilled) == 2, (staged, spilled, err)
    # each names its maker: rank 0 made the staging folder, each rank its spill folder
    host = leftovers._host()
    assert f"p{ranks[0]}-" in staged[0].name and f"-h{host}" in staged[0].name
    for rank, folder in zip((0, 1), sorted(spilled, key=lambda p: "-r1-" in p.name)):
        assert folder.name.rsplit(f"-r{rank}-", 1)[1].startswith(f"p{ranks[rank]}-"), folder

    # a folder of a live process and one of another host stay
    live = spill / f"partrace-spill-{leftovers.owner_token()}-0-r0-{leftovers.owner_token()}-x"
    other = spill / f"partrace-spill-p1-s1-hnot_{host}-0-r0-p1-s1-hnot_{host}-x"
    live.mkdir()
    other.mkdir()
    r = run_cli(["merge", str(trace), "-o", str(out), "--tmpdir", str(spill), "-q"])
    assert r.returncode == 0, r.stderr
    warned = sorted(ln.split(": ")[2] for ln in r.stderr.splitlines())
    assert warned == sorted(map(str, [staged[0], *spilled])), r.stderr
    assert all("removed, left by a partrace run that was killed" in ln
               for ln in r.stderr.splitlines())
    assert sorted(spill.iterdir()) == sorted([live, other])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [trace.name, held.name, "spill", out.name])


def test_a_pid_now_held_by_a_later_process_is_a_dead_run(tmp_path):
    me = os.getpid()
    start = leftovers.process_start_ms(me)
    assert start is not None and abs(start - time.time() * 1000) < 86400e3 * 365
    host = leftovers._host()
    assert leftovers.is_dead(f"p{me}-s{start}-h{host}-0")[0] is False
    # the same pid, made by a process that started an hour before this one: reused
    assert leftovers.is_dead(f"p{me}-s{start - 3600_000}-h{host}-0")[0] is True
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert leftovers.is_dead(f"p{gone.pid}-s{start}-h{host}-0")[0] is True
    # another host: this host cannot see its processes
    assert leftovers.is_dead(f"p{gone.pid}-s{start}-hnot_{host}-0")[0] is False
    # the maker is the last token (a spill folder: the run's, then its rank's own)
    assert leftovers.is_dead(f"p{gone.pid}-s{start}-h{host}-0-r1-p{me}-s{start}-h{host}-ab_"
                             )[0] is False
    assert socket.gethostname()


def test_remove_dead_removes_only_dead_folders_with_the_prefix(tmp_path):
    host = leftovers._host()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f".o.h5.partrace-p{gone.pid}-s1-h{host}-0"
    alive = tmp_path / f".o.h5.partrace-{leftovers.owner_token()}-0"
    unrelated = tmp_path / f".p.h5.partrace-p{gone.pid}-s1-h{host}-0"
    for p in (dead, alive, unrelated):
        p.mkdir()
    (dead / "x").write_text("x")
    with pytest.warns(UserWarning, match="removed, left by a partrace run that was killed"):
        assert leftovers.remove_dead(tmp_path, ".o.h5.partrace-") == [str(dead)]
    assert sorted(Path(tmp_path).iterdir()) == sorted([alive, unrelated])

"""Two runs to one output: the output that appeared while a run was writing is never replaced.

The start-up check (output exists -> refused) cannot see a second run that starts later
and finishes first.  Here the first run, just before it publishes, runs a whole second
merge of another trace to the same output (as a second user would); the first must then
refuse with one line, leave the second's output as it is and nothing of its own.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT, SYNTH, mpiexec, run_cli

# the first run's rank 0, about to publish, runs the whole second run first
_SECOND_RUN_FIRST = """
import os, subprocess, sys
from partrace.output import staging
move = staging.Staging._move
second = sys.argv.pop(1).split("|")
def second_run_then_move(self, names):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "HYDRA", "MPI"))}
    env.pop("PARTRACE_MPI", None)
    r = subprocess.run([sys.executable, "-m", "partrace", *second], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    move(self, names)
staging.Staging._move = second_run_then_move
from partrace import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def _events(path) -> int:
    r = run_cli(["info", str(path), "--json"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["rows"]["events"]


@pytest.mark.parametrize("suffix,nranks", [("h5", None), ("otf", None), ("otf2", None),
                                           ("h5", 2)])
def test_an_output_that_appeared_meanwhile_is_not_replaced(synth_trace, tmp_path, suffix,
                                                           nranks):
    first = synth_trace(locations=4, events=2000, units=4)
    second = synth_trace(locations=3, events=1500, units=3)
    outdir = tmp_path / "out"
    outdir.mkdir()
    out = outdir / f"x.{suffix}"
    cmd = [sys.executable, "-c", _SECOND_RUN_FIRST,
           f"merge|{second}|-o|{out}|-q", "merge", str(first), "-o", str(out), "-q"]
    if nranks:
        cmd = [mpiexec(), "-n", str(nranks), *cmd]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH}
    env.pop("PARTRACE_MPI", None)
    r = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"partrace: error: {out}"), r.stderr
    assert "appeared while this run was writing it" in lines[0]
    assert _events(out) == 3 * 1500          # the second run's output, whole
    # nothing of the first run: no staging folder, no file the second did not write
    left = sorted(p.name for p in outdir.iterdir())
    assert not [n for n in left if n.startswith(".")], left
    alone = tmp_path / "alone"
    alone.mkdir()
    r = run_cli(["merge", str(second), "-o", str(alone / out.name), "-q"])
    assert r.returncode == 0, r.stderr
    assert left == sorted(p.name for p in alone.iterdir())


def test_overwrite_still_replaces_an_output_that_appeared_meanwhile(synth_trace, tmp_path):
    first = synth_trace(locations=4, events=2000, units=4)
    second = synth_trace(locations=3, events=1500, units=3)
    out = tmp_path / "x.h5"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH}
    env.pop("PARTRACE_MPI", None)
    r = subprocess.run([sys.executable, "-c", _SECOND_RUN_FIRST, f"merge|{second}|-o|{out}|-q",
                        "merge", str(first), "-o", str(out), "-q", "--overwrite"],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert _events(out) == 4 * 2000


def test_move_no_replace_refuses_a_taken_name_and_keeps_the_source(tmp_path):
    from partrace.output.noreplace import move_no_replace
    src, dst = tmp_path / "a", tmp_path / "b"
    src.write_text("mine")
    dst.write_text("theirs")
    with pytest.raises(FileExistsError):
        move_no_replace(src, dst)
    assert (src.read_text(), dst.read_text()) == ("mine", "theirs")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("x")
    (tmp_path / "e").mkdir()
    with pytest.raises(FileExistsError):      # even an empty folder is taken
        move_no_replace(tmp_path / "d", tmp_path / "e")
    move_no_replace(tmp_path / "d", tmp_path / "g")
    assert (tmp_path / "g" / "f").read_text() == "x" and not (tmp_path / "d").exists()

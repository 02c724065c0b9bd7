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
from .support.held_run import wait_until_held
from .support.mpi_ranks import ranks as _ranks


def _start(args, env=None, nranks=None):
    cmd = [sys.executable, "-m", "partrace", *args]
    if nranks:
        cmd = [mpiexec(), "-n", str(nranks), *cmd]
    full = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH, **(env or {})}
    full.pop("PARTRACE_MPI", None)
    return subprocess.Popen(cmd, env=full, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


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
    wait_until_held(proc, held)
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


def _assert_whole_h5(path: Path, events: int) -> None:
    import h5py
    with h5py.File(path, "r") as f:
        assert f["events/time"].shape == (events,)


# -- a signal while Python is still importing ----------------------------------------------
@pytest.mark.parametrize("delay", [0.02, 0.1, 0.2, 0.35, 0.5, 0.8, 1.2])
def test_sigterm_during_startup_exits_143_cleanly(synth_trace, tmp_path, delay):
    trace = synth_trace(locations=4, events=20000, units=4)
    out = tmp_path / "out.h5"
    proc = _start(["merge", str(trace), "-o", str(out), "--memory", "1M",
                   "--tmpdir", str(tmp_path)])
    time.sleep(delay)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:        # the run won the race: a complete output
        _assert_whole_h5(out, 4 * 20000)
        return
    if "after the output was written; it is kept" in err:   # the signal came after publishing
        assert proc.returncode == 143 and len(err.splitlines()) == 1, err
        _assert_whole_h5(out, 4 * 20000)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([trace.name, out.name])
        return
    # -SIGTERM: killed before Python ran partrace's first line (the shell shows 143 too)
    assert proc.returncode in (143, -signal.SIGTERM), err
    assert "error" not in err and "Traceback" not in err, err
    assert len(err.splitlines()) <= 1, err
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [trace.name], left


# -- a signal that arrives while the output is being moved into place -----------------------
_SIGNAL_AT_PUBLISH = """
import os, signal, sys
from partrace.engine import stop
from partrace.output import staging
stop.install()
move = staging.Staging._move
def move_then_signal(self, names):
    os.kill(os.getpid(), signal.SIGTERM)    # lands inside the shielded step
    move(self, names)
staging.Staging._move = move_then_signal
from partrace import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def test_sigterm_while_publishing_keeps_the_whole_output(synth_trace, tmp_path):
    """The move cannot be cut in two; once done, the output is whole and stays (a
    run that replaced an old file with --overwrite must not end with neither)."""
    trace = synth_trace(locations=4, events=20000, units=4)
    out = tmp_path / "out.h5"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH}
    env.pop("PARTRACE_MPI", None)
    r = subprocess.run([sys.executable, "-c", _SIGNAL_AT_PUBLISH, "merge", str(trace),
                        "-o", str(out), "--tmpdir", str(tmp_path), "-q"],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 143, r.stderr
    assert r.stderr == "partrace: SIGTERM after the output was written; it is kept\n"
    _assert_whole_h5(out, 4 * 20000)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([trace.name, out.name])


_SIGNAL_AT_EXIT = """
import atexit, os, signal, sys
atexit.register(lambda: os.kill(os.getpid(), signal.SIGTERM))   # while Python shuts down
sys.argv[0] = "partrace"
from partrace import cli
cli.entry()
"""


def test_sigterm_while_python_shuts_down_changes_nothing(synth_trace, tmp_path):
    """Once main() has returned the run is over: a signal then (CI saw one land while
    Python finalized, with the default action back: -SIGTERM and a whole output) leaves
    the exit status and the output as they are."""
    trace = synth_trace(locations=4, events=20000, units=4)
    out = tmp_path / "out.h5"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH}
    env.pop("PARTRACE_MPI", None)
    r = subprocess.run([sys.executable, "-c", _SIGNAL_AT_EXIT, "merge", str(trace), "-o",
                        str(out), "-q"], env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
    _assert_whole_h5(out, 4 * 20000)


# -- outputs that would destroy inputs or foreign folders ---------------------------------
OTF_RING8 = Path(__file__).parent / "data" / "otf" / "ring8" / "trace"


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(folder.rglob("*"))}


def _refused(r, *words):
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("partrace: error: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("nranks", [None, 2])
def test_overwrite_output_equal_to_otf_input_is_refused(tmp_path, nranks):
    trace = tmp_path / "trace"
    import shutil
    shutil.copytree(OTF_RING8, trace)
    before = _snapshot(tmp_path)
    r = run_cli(["convert", str(trace / "ring8.otf"), "-o", str(trace / "ring8.otf"),
                 "--overwrite", "-q"], nranks=nranks)
    _refused(r, str(trace / "ring8.otf"), "input")
    assert _snapshot(tmp_path) == before


def test_output_through_a_symlinked_folder_onto_the_input_is_refused(tmp_path):
    import shutil
    trace = tmp_path / "trace"
    shutil.copytree(OTF_RING8, trace)
    (tmp_path / "alias").symlink_to(trace, target_is_directory=True)
    before = _snapshot(trace)
    r = run_cli(["convert", str(trace / "ring8.otf"), "-o", str(tmp_path / "alias" / "ring8.otf"),
                 "--overwrite", "-q"])
    _refused(r, "input")
    assert _snapshot(trace) == before


def test_otf_output_whose_stream_files_are_inputs_is_refused(tmp_path):
    """-o NAME.otf writes NAME.<n>.events beside it: here such a name is the input."""
    trace = tmp_path / "run.1.events"      # a (synth) trace under a name OTF output would take
    trace.write_text('{"synth": {"locations": 2, "events": 100, "units": 2, "seed": 1}}')
    before = _snapshot(tmp_path)
    r = run_cli(["merge", str(trace), "--format", "synth", "-o", str(tmp_path / "run.otf"),
                 "--overwrite", "-q"], nranks=2)
    _refused(r, str(trace), "input")
    assert _snapshot(tmp_path) == before


def test_overwrite_of_hdf5_input_and_of_a_symlink_to_it_is_refused(synth_trace, tmp_path):
    trace = synth_trace(locations=3, events=500, units=3)
    first = tmp_path / "first.h5"
    assert run_cli(["merge", str(trace), "-o", str(first), "-q"]).returncode == 0
    (tmp_path / "link.h5").symlink_to(first)
    before = _snapshot(tmp_path)
    for target in (first, tmp_path / "link.h5"):
        r = run_cli(["convert", str(first), "-o", str(target), "--overwrite", "-q"], nranks=2)
        _refused(r, str(target), "input")
        assert _snapshot(tmp_path) == before
    r = run_cli(["merge", str(trace), "-o", str(trace), "--to", "hdf5", "--overwrite", "-q"])
    _refused(r, str(trace), "input")
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("to", ["hdf5", "otf"])
def test_overwrite_never_deletes_a_folder_that_is_not_partrace_output(synth_trace, tmp_path, to):
    trace = synth_trace(locations=3, events=500, units=3)
    folder = tmp_path / ("precious.otf" if to == "otf" else "precious")
    folder.mkdir()
    (folder / "thesis.tex").write_text("years of work")
    before = _snapshot(tmp_path)
    r = run_cli(["merge", str(trace), "-o", str(folder), "--to", to, "--overwrite", "-q"],
                nranks=2)
    _refused(r, str(folder), "not a partrace output")
    assert _snapshot(tmp_path) == before
    # nor a NAME.h5.parts folder that holds something else than the HDF5 shards
    parts = tmp_path / "out.h5.parts"
    parts.mkdir()
    (parts / "notes.txt").write_text("mine")
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "out.h5"), "--overwrite", "-q"])
    _refused(r, str(parts), "not a partrace output")
    assert (parts / "notes.txt").read_text() == "mine"


def test_input_inside_the_folder_the_output_would_replace_is_refused(synth_trace, tmp_path):
    parts = tmp_path / "out.h5.parts"
    parts.mkdir()
    (parts / "rank-00000.h5").write_bytes(b"")      # looks like shards ...
    trace = parts / "rank-00001.h5"                  # ... and holds the input
    trace.write_text('{"synth": {"locations": 2, "events": 100, "units": 2, "seed": 1}}')
    before = _snapshot(tmp_path)
    r = run_cli(["merge", str(trace), "--format", "synth", "-o", str(tmp_path / "out.h5"),
                 "--overwrite", "-q"])
    _refused(r, str(parts), "input")
    assert _snapshot(tmp_path) == before


def test_output_onto_a_part_of_an_hdf5_input_is_refused(synth_trace, tmp_path):
    """A "parts" HDF5 output read back: the files in its .parts folder are inputs too (its
    reader names them), not only the file the command line names."""
    trace = synth_trace(locations=3, events=500, units=3)
    first = tmp_path / "first.h5"
    assert run_cli(["merge", str(trace), "-o", str(first), "-q", "--layout", "parts"],
                   nranks=2).returncode == 0
    part = tmp_path / "first.h5.parts" / "rank-00001.h5"
    before = _snapshot(tmp_path)
    r = run_cli(["convert", str(first), "-o", str(part), "--overwrite", "-q"])
    _refused(r, str(part), "input")
    assert _snapshot(tmp_path) == before


def test_a_file_beside_an_otf_input_that_is_not_of_the_trace_may_be_overwritten(tmp_path):
    """NAME.h5 beside NAME.otf shares its prefix but is no file of the trace."""
    import shutil
    trace = tmp_path / "trace"
    shutil.copytree(OTF_RING8, trace)
    out = trace / "ring8.h5"
    for _ in range(2):
        r = run_cli(["convert", str(trace / "ring8.otf"), "-o", str(out), "--overwrite", "-q"])
        assert r.returncode == 0, r.stderr


def test_overwrite_of_an_old_partrace_output_still_works(synth_trace, tmp_path):
    trace = synth_trace(locations=3, events=500, units=3)
    out = tmp_path / "out.h5"
    assert run_cli(["merge", str(trace), "-o", str(out), "-q", "--layout", "parts"],
                   nranks=2).returncode == 0
    assert (tmp_path / "out.h5.parts").is_dir()
    r = run_cli(["merge", str(trace), "-o", str(out), "-q", "--overwrite", "--layout", "parts"],
                nranks=3)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "out.h5.parts").iterdir()) == [
        "rank-00000.h5", "rank-00001.h5", "rank-00002.h5"]


# -- a full disk, HDF5's own errors, warnings: one line that names the user's file ------------
@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB tmpfs (needs root, as the test machines run): writes beyond it fail ENOSPC."""
    where = tmp_path / "small"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def _one_error_line(r) -> str:
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("partrace: error: "), r.stderr
    assert ".partrace-" not in lines[0], lines[0]      # never the hidden staging path
    return lines[0]


@pytest.mark.parametrize("nranks", [None, 2])
def test_full_spill_disk_names_the_spill_file(synth_trace, tmp_path, full_disk, nranks):
    trace = synth_trace(locations=6, events=20000, units=6)
    out = tmp_path / "out.h5"
    r = run_cli(["merge", str(trace), "-o", str(out), "--memory", "1M", "--tmpdir",
                 str(full_disk), "-q"], nranks=nranks, timeout=300)
    line = _one_error_line(r)
    assert f"{full_disk}/partrace-spill-" in line and ".bin: no space left on device" in line
    assert "--tmpdir" in line
    assert not list(full_disk.iterdir()), "spill files left on the full disk"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([trace.name, "small"])


@pytest.mark.parametrize("nranks", [None, 2])
@pytest.mark.parametrize("suffix", ["h5", "otf", "otf2"])
def test_full_output_disk_names_the_output(synth_trace, full_disk, nranks, suffix):
    trace = synth_trace(locations=6, events=20000, units=6)
    out = full_disk / f"out.{suffix}"
    r = run_cli(["merge", str(trace), "-o", str(out), "-q"], nranks=nranks, timeout=300)
    line = _one_error_line(r)
    assert "no space left on device" in line, line
    named = line.removeprefix("partrace: error: ").split(":")[0]
    # the output, or (HDF5 on several ranks) one of its shard files
    assert named == str(out) or named.startswith(f"{out}.parts/rank-"), line
    assert not list(full_disk.iterdir()), "a partial output was left"


def test_hdf5_error_is_one_line_naming_the_published_path(tmp_path):
    """A real h5py error on a staged file (two lines, the staging path) -> one line, the output."""
    import h5py

    from partrace.errors import one_line
    from partrace.output.staging import Staging   # registers how staged paths are shown
    ours = Staging(tmp_path / "out.h5", "123-456")      # this process's; the folder is missing
    staging = ours.dir
    try:
        for inside, shown in [("out.h5", "out.h5"), ("out.h5.parts/rank-00001.h5",
                                                      "out.h5.parts/rank-00001.h5"),
                              ("parts/rank-00001.h5", "out.h5")]:   # a part that stays in it
            with pytest.raises(OSError) as info:
                h5py.File(staging / inside, "w")
            assert ".partrace-123-456" in str(info.value)
            assert one_line(info.value) == f"{tmp_path}/{shown}: no such file or directory"
        # another run's staging folder (a killed run's, named in a warning) is shown as it is
        other = tmp_path / ".out.h5.partrace-789-1"
        with pytest.raises(OSError) as info:
            h5py.File(other / "out.h5", "w")
        assert one_line(info.value) == f"{other}/out.h5: no such file or directory"
    finally:
        ours.discard()


def test_warnings_are_one_line_naming_the_file(tmp_path):
    import shutil
    trace = tmp_path / "v1"
    shutil.copytree(Path(__file__).parent / "data" / "ovni" / "v1-zoo-small", trace)
    stream = sorted((trace / "ovni").rglob("*.obs"))[0]
    stream.write_bytes(stream.read_bytes()[:-5])       # a half-written last event
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "out.h5"), "-q"])
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines and all(ln.startswith("partrace: warning: ") for ln in lines), r.stderr
    assert any(ln.startswith(f"partrace: warning: {stream}: byte ") and
               "stream ends inside an event" in ln for ln in lines), r.stderr


# -- the error protocol: no rank hangs, one line, exit 2, nothing left ----------------------
def test_a_failing_rank_that_spilled_leaves_one_line_and_nothing(synth_trace, tmp_path):
    trace = synth_trace(locations=6, events=20000, units=6)
    spill = tmp_path / "spill"
    spill.mkdir()
    # --progress none: a slow run (a loaded machine) logs progress lines on stderr,
    # which are not what this test checks
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "o.otf"), "--memory", "1M",
                 "--tmpdir", str(spill), "--progress", "none"], nranks=2,
                env={"PARTRACE_TEST_FAIL_DECODE": "0005"},
                timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        f"partrace: error: {trace}:unit 0005: injected failure in unit 0005"], r.stderr
    assert not list(spill.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([trace.name, "spill"])


def test_a_usage_error_every_rank_meets_is_said_once(synth_trace, tmp_path):
    trace = synth_trace()
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "o.h5"), "--streams", "2"], nranks=3)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == ["partrace: error: --streams applies to OTF output only"]

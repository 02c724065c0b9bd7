"""The command line and the Python API run the same job (partrace/engine/job.py): the same
error line for the same bad input, the same output bytes and accounts for the same merge,
the same kernels' mode, and the same end on every rank when one rank fails."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import partrace
from partrace.errors import one_line

from .conftest import DATA, ROOT, SYNTH, mpiexec, run_cli

RING = DATA / "otf" / "ring8" / "trace" / "ring8.otf"


def _api_line(call) -> str:
    """The error line the command line would print for what ``call()`` raises."""
    with pytest.raises(Exception) as raised:
        call()
    return f"partrace: error: {one_line(raised.value)}"


def test_the_same_bad_input_gives_the_same_line(tmp_path, synth_trace, monkeypatch):
    missing = tmp_path / "nosuch.otf"
    r = run_cli(["merge", str(missing), "-o", str(tmp_path / "a.h5")])
    assert r.returncode == 2
    assert r.stderr.splitlines() == [_api_line(lambda: partrace.merge(missing, tmp_path / "b.h5"))]
    trace = synth_trace(locations=3, events=100, units=3)
    env = {"PARTRACE_TEST_FAIL_DECODE": "0001"}
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "c.otf"), "--format", "synth"],
                env=env)
    monkeypatch.setenv("PARTRACE_FORMATS", SYNTH)
    monkeypatch.setenv("PARTRACE_TEST_FAIL_DECODE", "0001")
    said = _api_line(lambda: partrace.merge(trace, tmp_path / "d.otf", format="synth"))
    assert r.returncode == 2 and r.stderr.splitlines() == [said]
    assert sorted(p.name for p in tmp_path.iterdir()) == [trace.name]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _fields(value):
    """The shape of a report: its keys, at every depth, and the length of its lists."""
    if isinstance(value, dict):
        return {k: _fields(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fields(v) for v in value]
    return type(value).__name__ if isinstance(value, str) else "number"


def test_the_same_merge_gives_the_same_bytes_and_accounts(tmp_path):
    cli, api = tmp_path / "cli", tmp_path / "api"
    cli.mkdir()
    api.mkdir()
    r = run_cli(["merge", str(RING), "-o", str(cli / "out.otf"), "--streams", "2", "-q",
                 "--stats", str(tmp_path / "cli.json")])
    assert r.returncode == 0, r.stderr
    stats = partrace.merge(RING, api / "out.otf", streams=2, stats=str(tmp_path / "api.json"))
    assert stats.rows_written["events"] == 5972
    assert _files(cli) == _files(api)
    said = json.loads((tmp_path / "cli.json").read_text())
    assert _fields(json.loads((tmp_path / "api.json").read_text())) == _fields(said)


PROBE = """
import sys
import partrace
from partrace.kernels import jit
partrace.merge(sys.argv[1], sys.argv[2])
print(jit.is_small(), "numba" in sys.modules)
"""


def test_the_api_chooses_the_kernels_mode_as_the_cli_does(tmp_path):
    """A small input runs its kernels as Python by either path (numba never imported), and
    the mode ends with the job."""
    env = {k: v for k, v in os.environ.items() if k not in ("PARTRACE_MPI", "PARTRACE_JIT")}
    r = subprocess.run([sys.executable, "-c", PROBE, str(RING), str(tmp_path / "m.otf")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**env, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


# -- one rank fails: every rank ends, one line, nothing left ---------------------------------
FAILING = """
import sys
from partrace.engine import windows
from partrace.engine.mpi import world
from partrace.errors import PartraceError

count = windows.window_count


def failing(comm, *args, **kwargs):     # rank 1 alone, outside any guard: rank 0 waits
    if comm.rank == 1:
        raise PartraceError("injected on rank 1")
    return count(comm, *args, **kwargs)


if sys.argv[1] == "fail-alone":
    windows.window_count = failing
trace, out, spill = sys.argv[2:5]
if sys.argv[5] == "cli":
    from partrace import cli
    sys.exit(cli.main(["merge", trace, "-o", out, "--format", "synth", "--tmpdir", spill,
                       "--memory", "1M", "-q"]))
import partrace
try:
    partrace.merge(trace, out, format="synth", tmpdir=spill, memory="1M")
except PartraceError as exc:    # every rank raises it; rank 0 says it, as the CLI does
    from partrace.errors import one_line
    if world().rank == 0:
        print(f"partrace: error: {one_line(exc)}", file=sys.stderr)
    sys.exit(2)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("how", ["fail-alone", "fail-in-decode"])
def test_a_failing_rank_ends_the_api_run_as_it_ends_the_cli_run(synth_trace, tmp_path, how):
    trace = synth_trace(locations=6, events=20000, units=6)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH}
    env.pop("PARTRACE_MPI", None)
    if how == "fail-in-decode":
        env["PARTRACE_TEST_FAIL_DECODE"] = "0005"
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    ends = {}
    for path in ("cli", "api"):
        work = tmp_path / path
        (work / "spill").mkdir(parents=True)
        r = subprocess.run([mpiexec(), "-n", "2", sys.executable, str(script), how, str(trace),
                            str(work / "out.otf"), str(work / "spill"), path],
                           capture_output=True, text=True, cwd=ROOT, env=env, timeout=180)
        ends[path] = (r.returncode, r.stderr.splitlines())
        assert not list((work / "spill").iterdir()), path
        assert [p.name for p in work.iterdir()] == ["spill"], path
    assert ends["api"] == ends["cli"]
    code, lines = ends["cli"]
    want = ("partrace: error: injected on rank 1" if how == "fail-alone" else
            f"partrace: error: {trace}:unit 0005: injected failure in unit 0005")
    assert code == 2 and lines == [want]


def test_the_api_stands_beside_the_command_line_not_on_it():
    """The API shares the job, not the command line's module: importing it loads no argparse
    parser, and a change to cli.py cannot change what the API does."""
    from .test_layers import PKG, _imports
    for name in ("api.py", "merging.py", "sizes.py", "engine/job.py"):
        assert not {m for m in _imports(PKG / name) if m.startswith("partrace.cli")}, name

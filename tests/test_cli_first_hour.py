"""A new user's first hour: wrong options are refused before the work, in one line, once
whatever the rank count; empty answers are the same answer with or without --plot."""
from __future__ import annotations

import re

import pytest

from tests.conftest import DATA, run_cli

DUMPI = DATA / "dumpi" / "p2p-4rank"
OVNI = DATA / "ovni" / "v1-zoo-small"     # no messages
ROSS = DATA / "ross" / "pi-np1-seq-allmodes"   # no regions
RING = DATA / "otf" / "ring8" / "trace" / "ring8.otf"


def _one_error(r, *parts) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("partrace: error: "), lines
    for part in parts:
        assert part in lines[0], lines
    return lines[0]


@pytest.mark.parametrize("name, why", [("x.bmp", "a .bmp file"), ("x", "no file type"),
                                       ("nosuch/x.png", "no such folder")])
@pytest.mark.parametrize("cmd", ["profile", "comm", "timeline"])
def test_a_plot_that_cannot_be_written_is_refused_before_the_work(cmd, name, why, tmp_path):
    target = tmp_path / name
    r = run_cli([cmd, str(DUMPI), "--plot", str(target)])
    _one_error(r, str(target), why)
    assert r.stdout == ""       # refused first: no table printed, then a failure
    assert list(tmp_path.iterdir()) == []


def test_a_plot_into_a_folder_that_cannot_be_written(tmp_path):
    import os
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.access(locked, os.W_OK):
        pytest.skip("running as a user that writes anywhere (root)")
    _one_error(run_cli(["profile", str(DUMPI), "--plot", str(locked / "p.png")]),
               "permission denied")


@pytest.mark.parametrize("args, said", [
    (["timeline", str(DUMPI), "--time", "5:3", "--plot", "t.png"], "--time 5:3: an empty window"),
    (["dump", str(DUMPI), "--time", "5:3"], "--time 5:3: an empty window"),
    (["dump", str(DUMPI), "--region", "nosuch"], "--region: no region named 'nosuch'"),
    (["dump", str(DUMPI), "--location", "99"], "--location: no location with id 99 (ids 1..4)"),
    (["comm", str(OVNI), "--plot", "x.bmp"], "a .bmp file"),
])
@pytest.mark.parametrize("nranks", [None, pytest.param(3, marks=pytest.mark.mpi)])
def test_a_refusal_is_one_line_at_any_rank_count(args, said, nranks, tmp_path):
    args = [str(tmp_path / a) if a.endswith((".png", ".bmp")) else a for a in args]
    r = run_cli(args, nranks=nranks)
    _one_error(r, said)
    assert "MPI_Abort" not in r.stderr and r.stdout == ""


def test_a_known_location_id_still_selects(tmp_path):
    r = run_cli(["dump", str(DUMPI), "--location", "2"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines and all(ln.split()[1:3] == ["rank", "1"] for ln in lines)


@pytest.mark.parametrize("plot", [None, "c.svg"])
def test_no_messages_is_an_answer_with_or_without_a_plot(plot, tmp_path):
    args = ["comm", str(OVNI)] + (["--plot", str(tmp_path / plot)] if plot else [])
    r = run_cli(args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:2] == ["messages: 0 in 0 sender/receiver pairs, 0 bytes",
                                         "(no messages: this trace records no send/receive "
                                         "events)"]
    if plot:
        texts = re.findall(r">([^<>]+)</text>", (tmp_path / plot).read_text())
        assert "no messages: this trace records no send/receive events" in texts


def test_a_profile_without_regions_says_why(tmp_path):
    out = tmp_path / "p.svg"
    r = run_cli(["profile", str(ROSS), "--plot", str(out)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(no region visits: this trace records no enter/leave events)"
    texts = re.findall(r">([^<>]+)</text>", out.read_text())
    assert "no region visits: this trace records no enter/leave events" in texts
    assert not any(t.strip().startswith("−0.04") or t.strip() == "0.04" for t in texts)


def test_per_location_shows_rows_per_location_as_text():
    from partrace import analysis
    res = analysis.profile(DUMPI, per_location=True)
    r = run_cli(["profile", str(DUMPI), "--per-location", "--top", "0"])
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()[2:]
    assert len(rows) == len(res["locations"])
    top = max(res["locations"], key=lambda x: x["exclusive_ns"])
    assert rows[0].split()[:4] == [*top["location"].split(), top["region"], str(top["calls"])]


def test_format_as_info_names_it_and_small_budgets_are_said(tmp_path):
    r = run_cli(["info", str(RING), "--format", "OTF"])
    assert r.returncode == 0 and "format:     OTF" in r.stdout, r.stderr
    r = run_cli(["merge", str(RING), "-o", str(tmp_path / "m.h5"), "--format", "OtF",
                 "--memory", "1M", "--progress", "none"])
    assert r.returncode == 0, r.stderr
    summary = [ln for ln in r.stderr.splitlines() if ln.startswith("partrace: wrote ")]
    assert len(summary) == 1, r.stderr
    summary = summary[0]
    assert summary.startswith(f"partrace: wrote {tmp_path / 'm.h5'}: 5,972 events"), r.stderr
    assert ("(--memory 1M: under 64M most rows spill and windows are many; the default 2G is "
            "many times faster)") in summary, r.stderr
    r = run_cli(["merge", str(RING), "-o", str(tmp_path / "n.h5"), "--memory", "64M"])
    assert r.returncode == 0 and "--memory" not in r.stderr, r.stderr


def test_more_streams_than_processes_is_said(tmp_path):
    out = tmp_path / "r.otf"
    r = run_cli(["merge", str(RING), "-o", str(out), "--streams", "100", "-q"])
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [f"partrace: warning: {out}: --streams 100: the trace has 8 "
                                     f"processes, so 8 streams (one per process)"]
    assert len(list(tmp_path.glob("r.*.events"))) == 8


ROSS_EVENTS = DATA / "ross" / "pi-np2-opt-evtrace-full-model-gvt"


def test_info_states_every_inputs_time_unit():
    wall = run_cli(["info", str(RING)])
    assert "time unit:  ns of wall clock (the trace's ticks: 1,000,000,000 per second)" \
        in wall.stdout.splitlines(), wall.stdout
    ross = run_cli(["info", str(ROSS_EVENTS)]).stdout.splitlines()
    assert "time unit:  virtual time (stored x 1e+09 in the time column)" in ross
    assert "time span:  events: 0 .. 29.9952545 virtual time" in ross
    # the final GVT of a finished run is infinite, not 9.22e+09
    gvt = [ln for ln in ross if ln.startswith("time span:  model_gvt:")]
    assert gvt and gvt[0].endswith(".. inf virtual time"), ross


def test_time_windows_are_in_the_unit_the_user_sees(tmp_path):
    import numpy as np

    import partrace
    events = partrace.open(ROSS_EVENTS).columns("events", ["time", "kind"])
    inside = (events["time"] >= 5 * 10**9) & (events["time"] < 6 * 10**9)
    assert 0 < inside.sum() < len(inside)
    r = run_cli(["dump", str(ROSS_EVENTS), "--time", "5:6"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == int(inside.sum())
    shown = np.array([float(ln.split()[0]) for ln in lines])
    assert np.allclose(shown, events["time"][inside] / 1e9, rtol=1e-8)
    out = tmp_path / "t.svg"
    r = run_cli(["timeline", str(ROSS_EVENTS), "--time", "5:6", "--plot", str(out)])
    assert r.returncode == 0, r.stderr
    texts = re.findall(r">([^<>]+)</text>", out.read_text())
    assert "virtual time from 5" in texts
    from partrace.analysis.timeline import timeline_data
    from partrace.engine.mpi import serial
    by_key = timeline_data(serial(), ROSS_EVENTS, time=(5 * 10**9, 6 * 10**9))
    sends = len(by_key["messages"]["send_time"])
    assert sends and any(t.startswith("timeline:") and f"{sends:,} messages" in t
                         for t in texts), texts


def test_a_wall_clock_trace_keeps_ns_windows():
    import partrace
    t = partrace.open(DUMPI).columns("events", ["time"])["time"]
    lo, hi = int(t[10]), int(t[40])
    r = run_cli(["dump", str(DUMPI), "--time", f"{lo}:{hi}"])
    assert r.returncode == 0, r.stderr
    assert [int(ln.split()[0]) for ln in r.stdout.splitlines()] == sorted(t[(t >= lo) & (t < hi)])


@pytest.mark.mpi
@pytest.mark.parametrize("when", [0.3, 1.0, "held"])
def test_ctrl_c_to_mpiexec_is_said_once(synth_trace, tmp_path, when):
    """Ctrl-C to mpiexec reaches every rank: one line says so, whichever moment it lands
    (while the ranks import, start MPI, or decode)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT, SYNTH, mpiexec
    from tests.support.mpi_ranks import ranks
    trace = synth_trace(locations=4, events=2000, units=4)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH,
           "PARTRACE_TEST_HOLD_DECODE": "0003", "PARTRACE_STOP_GRACE": "10"}
    env.pop("PARTRACE_MPI", None)
    proc = subprocess.Popen([mpiexec(), "-n", "3", sys.executable, "-m", "partrace", "merge",
                             str(trace), "-o", str(tmp_path / "o.h5")], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if when == "held":
        held = tmp_path / f"{trace.name}.held"
        deadline = time.monotonic() + 120
        while not held.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
    else:   # counted from the ranks' start: on a loaded machine mpiexec itself may take
        # longer than ``when`` to launch them, and a signal that stops it first reaches none
        deadline = time.monotonic() + 120
        while len(ranks(proc.pid)) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        time.sleep(when)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    ours = [ln for ln in err.splitlines() if ln.startswith("partrace:")]
    assert proc.returncode == 130, err
    assert len(ours) == 1 and "SIGINT" in ours[0], err
    assert not (tmp_path / "o.h5").exists()


def test_the_hdf5_output_states_the_time_unit(tmp_path):
    import h5py
    for trace, unit, per_unit in ((ROSS_EVENTS, "virtual time", 1e9), (RING, "ns", None)):
        out = tmp_path / f"{unit.split()[0]}.h5"
        r = run_cli(["merge", str(trace), "-o", str(out), "-q"])
        assert r.returncode == 0, r.stderr
        with h5py.File(out, "r") as f:
            assert f.attrs["time_unit"] == unit
            assert f.attrs.get("time_per_unit") == per_unit
        said = run_cli(["info", str(out)]).stdout.splitlines()
        assert any(ln.startswith("time unit:  " + ("virtual time" if per_unit else "ns of wall"))
                   for ln in said), said

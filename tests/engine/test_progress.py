"""Progress: phases in order with an ETA, as a bar or log lines, silent when off."""
import io
import re
import time

from partrace.engine.mpi import serial
from partrace.engine.pipeline import run
from partrace.engine.progress import Progress
from partrace.output.memory import MemorySink


def _still(mode="log"):
    """A Progress whose own thread never draws (long interval): the test draws."""
    out = io.StringIO()
    p = Progress(serial(), mode=mode, stream=out, interval=3600)
    p._spoken = True        # as if the run had lasted an interval
    return p, out


def test_log_line_has_percent_sizes_rate_and_eta():
    p, out = _still()
    p.phase("decode", 2_800_000_000)
    p.advance(1_200_000_000)
    p._t0 = time.perf_counter() - 4.0       # 1.2 GB in 4 s: 300 MB/s, 1.6 GB to go
    line = p._line()
    m = re.fullmatch(r"decode (\d+)% 1\.2 GB/2\.8 GB (\d+) MB/s ETA 0:(\d\d) \(1 rank\)", line)
    assert m, line
    assert int(m[1]) == 1_200 * 100 // 2_800
    assert abs(int(m[2]) - 300) <= 2 and abs(int(m[3]) - 1_600 / 300) <= 1
    p.done()


def test_windows_count_once_with_eta_from_finished_windows():
    p, out = _still()
    p.phase("merge+write", 7, unit="windows")
    assert p._line().startswith("merge+write window 1/7 ")   # none finished: elapsed only
    p.advance(1)
    p.advance(1)
    p._t0 = time.perf_counter() - 10.0       # 2 windows in 10 s: 5 more take 25 s
    assert p._line() == "merge+write window 3/7 ETA 0:25"
    for _ in range(5):
        p.advance(1)
    p.done()
    assert re.fullmatch(r"partrace: merge\+write done: 7 windows in 0:\d\d\n", out.getvalue())


def test_run_prints_every_phase_in_order(synth_trace, monkeypatch):
    monkeypatch.setenv("PARTRACE_FORMATS", "synth=tests.support.synth:Synth")
    out = io.StringIO()
    progress = Progress(serial(), mode="log", stream=out, interval=0.01)
    run(serial(), synth_trace(events=20000), MemorySink(), format="synth", progress=progress)
    lines = out.getvalue().splitlines()
    done = [line.split(" done")[0] for line in lines if " done" in line]
    assert done == ["partrace: plan", "partrace: decode", "partrace: merge+write"]
    assert all(line.startswith("partrace: ") for line in lines)


def test_bar_redraws_in_place_and_ends_lines():
    p, out = _still(mode="bar")
    p.phase("decode", 1000)
    p.advance(500)
    p._emit(p._line())
    p.phase("merge+write", 1, unit="windows")
    p.advance(1)
    p.done()
    text = out.getvalue()
    assert text.startswith("\rpartrace: decode 50% 500 B/1.0 kB")
    assert "\rpartrace: decode done: 1.0 kB in" in text
    assert text.endswith("\rpartrace: merge+write done: 1 window in 0:00\n")


def test_a_run_shorter_than_an_interval_says_nothing():
    out = io.StringIO()
    p = Progress(serial(), mode="log", stream=out, interval=3600)
    p.phase("plan")
    p.phase("decode", 10)
    p.advance(10)
    p.phase("merge+write", 1, unit="windows")
    p.advance(1)
    p.done()
    assert out.getvalue() == ""


def test_ends_of_phases_before_the_first_line_are_shown_with_it():
    out = io.StringIO()
    p = Progress(serial(), mode="log", stream=out, interval=0.05)
    p.phase("plan")
    p.phase("decode", 10)
    deadline = time.monotonic() + 30
    while "decode" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    p.done()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("partrace: plan done in 0:0")
    assert lines[1] == "partrace: decode 0% 0 B/10 B (1 rank)"


def test_failed_phase_is_not_reported_done():
    p, out = _still()
    p.phase("decode", 1000)
    p.advance(10)
    try:
        try:
            raise RuntimeError("decode failed")
        finally:
            p.done()
    except RuntimeError:
        pass
    assert out.getvalue() == ""


def test_none_creates_nothing_and_prints_nothing():
    out = io.StringIO()
    p = Progress(serial(), mode="none", stream=out)
    p.phase("decode", 100)
    p.advance(50)
    p.done()
    assert not p.enabled and p._thread is None and out.getvalue() == ""


def test_auto_is_log_when_not_a_terminal_and_bar_on_one():
    class Tty(io.StringIO):
        def isatty(self):
            return True
    p = Progress(serial(), stream=io.StringIO(), interval=3600)
    assert p.mode == "log"
    p.done()
    p = Progress(serial(), stream=Tty(), interval=3600)
    assert p.mode == "bar"
    p.done()

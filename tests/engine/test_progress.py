"""Progress: silent unless asked, one line per phase on rank 0 when enabled."""
import io

from partrace.engine.mpi import serial
from partrace.engine.pipeline import run
from partrace.engine.progress import Progress
from partrace.output.memory import MemorySink


def test_progress_reports_phases_and_bytes(synth_trace, monkeypatch):
    monkeypatch.setenv("PARTRACE_FORMATS", "synth=tests.support.synth:Synth")
    monkeypatch.setattr("partrace.engine.progress._INTERVAL", 0.0)
    out = io.StringIO()
    run(serial(), synth_trace(), MemorySink(), format="synth",
        progress=Progress(serial(), enabled=True, stream=out))
    text = out.getvalue()
    assert "decode:" in text and "MB/s on 1 rank(s)" in text
    assert "merge+write: done" in text


def test_progress_is_off_when_not_a_terminal():
    out = io.StringIO()
    p = Progress(serial(), stream=out)
    p.start("decode", 100)
    p.advance(50)
    p.done()
    assert not p.enabled and out.getvalue() == ""

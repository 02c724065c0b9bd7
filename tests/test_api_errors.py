"""The Python API's errors: partrace's own classes, worded for Python, and one failure
never spills into the next call."""
import pytest

import partrace
from partrace.errors import PartraceError, UsageError
from tests.conftest import DATA

RING = DATA / "otf" / "ring8" / "trace" / "ring8.otf"


def test_a_failed_merge_does_not_fail_the_next_one(tmp_path):
    with pytest.raises(UsageError, match="nosuch.otf: no such file"):
        partrace.merge(tmp_path / "nosuch.otf", tmp_path / "a.h5")
    taken = tmp_path / "taken.h5"
    taken.write_bytes(b"not ours")
    with pytest.raises(UsageError) as refused:
        partrace.merge(RING, taken)
    # the API's keyword, not the command line's option
    assert "overwrite=True" in str(refused.value) and "--overwrite" not in str(refused.value)
    assert str(taken) in str(refused.value)
    assert taken.read_bytes() == b"not ours"
    stats = partrace.merge(RING, tmp_path / "fresh.h5")
    assert stats.rows_written["events"] == 5972
    assert len(partrace.open(tmp_path / "fresh.h5").table("events")) == 5972
    partrace.merge(RING, taken, overwrite=True)
    assert len(partrace.open(taken).table("events")) == 5972


def test_engine_failures_reach_the_caller_as_public_errors(tmp_path):
    """No engine-internal class (RankFailed) escapes: a bad format is a PartraceError."""
    with pytest.raises(PartraceError) as bad:
        partrace.merge(RING, tmp_path / "a.h5", format="nosuch")
    assert type(bad.value).__module__ == "partrace.errors"
    with pytest.raises(UsageError, match="memory"):
        partrace.merge(RING, tmp_path / "b.h5", memory="lots")
    assert not (tmp_path / "a.h5").exists() and not (tmp_path / "b.h5").exists()


def test_a_damaged_trace_read_through_the_api_raises_its_trace_error(synth_trace, monkeypatch):
    from partrace.errors import TraceError
    monkeypatch.setenv("PARTRACE_FORMATS", "synth=tests.support.synth:Synth")
    monkeypatch.setenv("PARTRACE_TEST_FAIL_DECODE", "0001")
    trace = synth_trace(locations=3, events=100, units=3)
    t = partrace.open(trace, format="synth")
    for read in (t.columns, t.profile):
        with pytest.raises(TraceError) as bad:
            read()
        assert str(bad.value) == f"{trace}:unit 0001: injected failure in unit 0001"
    monkeypatch.delenv("PARTRACE_TEST_FAIL_DECODE")
    assert len(t.columns()["time"]) == 300      # and the next read is not the last one's failure

"""The Python API gives the same rows as the CLI's HDF5 output."""
import numpy as np

import partrace
from tests.conftest import run_cli


def test_open_trace_and_output_agree(synth_trace, tmp_path, monkeypatch):
    monkeypatch.setenv("PARTRACE_FORMATS", "synth=tests.support.synth:Synth")
    trace = synth_trace(locations=3, events=500, units=2)
    out = tmp_path / "o.h5"
    assert run_cli(["merge", str(trace), "-o", str(out), "--format", "synth", "-q"]).returncode == 0
    decoded = partrace.open(trace, format="synth")
    stored = partrace.open(out)
    assert stored.format == "hdf5"
    assert decoded.tables == stored.tables == ["events", "notes", "vectors"]
    for name in decoded.tables:
        a, b = decoded.columns(name), stored.columns(name)
        assert list(a) == list(b)
        for col in a:
            assert np.array_equal(a[col], b[col]) if a[col].dtype != object \
                else list(a[col]) == list(b[col])
    df = stored.to_pandas()
    assert len(df) == 3 * 500
    assert set(df["kind"].unique()) == {"ENTER", "LEAVE"}
    assert stored.definitions.format == "synth"
    assert list(stored.definitions.tables["locations"]["name"]) == ["loc 1", "loc 2", "loc 3"]

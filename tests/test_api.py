"""The Python API gives the same rows as the CLI's HDF5 output."""
import numpy as np
import pytest

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


def test_reader_options_reach_the_format_from_the_api_and_the_cli(tmp_path):
    """ROSS's model_dtypes: from Python as numpy dtypes, from the command line as JSON lists;
    both give the typed model columns; an unknown option is refused at once."""
    import json

    import numpy as np

    from partrace.errors import UsageError
    from tests.conftest import run_cli
    from tests.formats.test_ross import DATA, EVT_RUN, PI_DTYPES
    trace = DATA / EVT_RUN
    t = partrace.open(trace, model_dtypes=PI_DTYPES, region_size=1 << 12)
    ev = t.table("events")
    assert {"model_hops", "model_count", "model_last_time"} <= set(ev.names)
    descr = {"evtrace": [["hops", "<i4"], ["count", "<i4"], ["last_time", "<f4"]]}
    out = tmp_path / "m.h5"
    r = run_cli(["merge", str(trace), "-o", str(out), "-q",
                 "--reader-option", f"model_dtypes={json.dumps(descr)}"])
    assert r.returncode == 0, r.stderr
    back = partrace.open(out).table("events")
    for c in ("model_hops", "model_count", "model_last_time"):
        assert np.array_equal(back[c], ev[c]), c
    with pytest.raises(UsageError, match="no option 'bogus'"):
        partrace.open(trace, bogus=1)
    r = run_cli(["info", str(trace), "--reader-option", "bogus=1"])
    assert r.returncode == 2 and "no option 'bogus'" in r.stderr


def test_merge_takes_what_the_cli_takes(tmp_path):
    from tests.conftest import DATA
    out = tmp_path / "m.h5"
    stats = partrace.merge(DATA / "otf" / "ring8" / "trace" / "ring8.otf", out, memory="1M",
                           tmpdir=tmp_path, compression="lzf")
    assert stats.windows > 1 and len(partrace.open(out).table("events")) == 5972
    with pytest.raises(KeyError, match="tables: events"):
        partrace.open(out).to_pandas("evnets")


def test_without_pandas_one_clear_line_and_numpy_still_works(tmp_path):
    """A cluster install without the pandas extra: DataFrames say how to get pandas."""
    import subprocess
    import sys

    from .conftest import ROOT
    code = ("import sys; sys.modules['pandas'] = None\n"
            "import partrace\n"
            f"t = partrace.open({str(ROOT / 'tests/data/dumpi/p2p-4rank')!r})\n"
            "assert len(t.columns('events', columns=['time'])['time']) > 0\n"
            "try:\n    t.to_pandas('events')\nexcept ImportError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("partrace: DataFrames need pandas: pip install pandas"), r.stdout

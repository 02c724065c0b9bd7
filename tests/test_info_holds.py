"""``info`` says what a trace holds where nothing in the trace lists it: a deleted ROSS
stats file or ovni v1 thread stream cannot be detected (the trace reads as a smaller
whole one), so files per kind and threads per process are shown for the user to see."""
from __future__ import annotations

import json
import shutil

from .conftest import DATA, run_cli


def _holds(trace) -> dict:
    r = run_cli(["info", str(trace), "--json"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["holds"]


def test_ross_files_per_kind(tmp_path):
    trace = tmp_path / "stats"
    shutil.copytree(DATA / "ross" / "pi-np1-seq-allmodes" / "stats", trace)
    names = sorted(p.name for p in trace.iterdir())
    assert names == ["ross-stats-analysis-lps.bin", "ross-stats-evtrace.bin",
                     "ross-stats-model.bin"]
    assert _holds(trace) == {"files per kind": {"analysis-lps": 1, "evtrace": 1, "model": 1}}
    (trace / "ross-stats-model.bin").unlink()
    assert _holds(trace) == {"files per kind": {"analysis-lps": 1, "evtrace": 1}}
    r = run_cli(["info", str(trace)])
    assert "files per kind: analysis-lps 1, evtrace 1\n" in r.stdout


def test_ovni_v1_threads_per_process(tmp_path):
    trace = tmp_path / "v1"
    shutil.copytree(DATA / "ovni" / "v1-zoo-small", trace)
    procs = sorted((trace / "ovni").glob("loom.*/proc.*"))
    want = {f"{p.parent.name.removeprefix('loom.')}/{p.name.removeprefix('proc.')}":
            len(list(p.glob("thread.*.obs"))) for p in procs}
    assert _holds(trace) == {"threads per process": want}
    victim = sorted(procs[0].glob("thread.*.obs"))[-1]
    victim.unlink()
    first = next(iter(want))
    want[first] -= 1
    assert _holds(trace) == {"threads per process": want}

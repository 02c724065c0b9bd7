"""The garbage collector in partrace's own process: tuned by the command line's entry,
left as it was by the Python API (main() in a caller's process is the API's case too)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import DATA, ROOT

TRACE = DATA / "dumpi" / "p2p-4rank"

# a merge in a fresh interpreter, as the command line (entry) or as a caller (main):
# what the collector looks like afterwards
PROBE = """
import gc, json, sys
from partrace import cli
gc.collect()
before = gc.get_freeze_count()
code = 0
try:
    if sys.argv[1] == "entry":
        sys.argv[1:2] = []
        cli.entry()
    else:
        code = cli.main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
finally:
    print(json.dumps({"code": code, "threshold": gc.get_threshold()[0],
                      "frozen": gc.get_freeze_count() - before, "enabled": gc.isenabled(),
                      "numba": "numba" in sys.modules}))
"""


def _probe(how: str, out) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PARTRACE_MPI", "PARTRACE_FORMATS")}
    r = subprocess.run([sys.executable, "-c", PROBE, how, "merge", str(TRACE), "-o", str(out),
                        "-q"], capture_output=True, text=True, cwd=ROOT,
                       env={**env, "PYTHONPATH": str(ROOT), "PARTRACE_JIT": "numba"}, timeout=600)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_command_line_tunes_its_collector(tmp_path):
    got = _probe("entry", tmp_path / "a.h5")
    assert got["code"] == 0 and got["numba"]
    assert got["threshold"] == 10_000 and got["enabled"]
    assert got["frozen"] > 10_000       # numba's objects and the run's plan, out of its way


def test_a_caller_s_process_keeps_its_collector(tmp_path):
    got = _probe("main", tmp_path / "b.h5")
    assert got["code"] == 0 and got["numba"]
    assert got["threshold"] == 700 and got["enabled"] and got["frozen"] == 0

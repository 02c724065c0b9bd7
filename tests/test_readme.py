"""The README's quick start runs as written from the repository root.

The code block's lines run in one shell, in a scratch folder that looks like
the repository root (tests/ and .venv/ linked), so that the outputs land there.
``scripts/demo`` is left out: it installs into .venv (pip) before running the
same commands; the test suite runs in that .venv already.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, mpiexec


def quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)[1]
    return [line.split("  #")[0].rstrip() for line in block.splitlines() if line.strip()]


def test_quick_start_block_is_found_and_starts_with_the_demo():
    lines = quick_start()
    assert lines[0] == "scripts/demo" and (ROOT / "scripts" / "demo").is_file()
    assert any(line.startswith("mpiexec -n 4 partrace merge") for line in lines)


@pytest.mark.slow
@pytest.mark.mpi
def test_quick_start_commands_run_as_written(tmp_path):
    if mpiexec() is None:
        pytest.fail("mpiexec not found: install the test extras (pip install -e '.[mpich,test]')")
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    # the .venv partrace is this checkout's (an editable install); else run this checkout
    env = {k: v for k, v in os.environ.items() if k not in ("PARTRACE_MPI", "PARTRACE_FORMATS")}
    env["PYTHONPATH"] = str(ROOT)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    script = "set -eu\n" + "\n".join(line for line in quick_start() if line != "scripts/demo")
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "ring8.h5").is_file() and (tmp_path / "back.otf").is_file()
    master = (tmp_path / "r3.otf").read_text()
    assert len(set(re.findall(r"^(\d+):", master, re.M))) == 3, master   # 3 streams

    def info(path):
        p = subprocess.run([sys.executable, "-m", "partrace", "info", str(path), "--json"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)
    original = info(tmp_path / "tests/data/otf/ring8/trace/ring8.otf")
    for out in ("ring8.h5", "back.otf", "r3.otf"):
        got = info(tmp_path / out)
        assert got["events"] == original["events"] > 0, out
        assert got["events_per_kind"] == original["events_per_kind"], out

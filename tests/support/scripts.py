"""The modules of scripts/, imported as the scripts import each other (their folder on the
path while they load), for tests of their functions."""
from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import ROOT


def script(name: str) -> ModuleType:
    """scripts/<name>.py as a module."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def gen_otf(folder: Path, events: int) -> Path:
    """``folder/g.otf``: scripts/gen_otf.py's trace of 8 processes on 3 streams and about
    ``events`` records."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_otf.py"),
                        str(folder / "g.otf"), "--processes", "8", "--streams", "3",
                        "--events", str(events)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return folder / "g.otf"

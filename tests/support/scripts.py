"""The modules of scripts/, imported as the scripts import each other (their folder on the
path while they load), for tests of their functions."""
from __future__ import annotations

import importlib
import sys
from types import ModuleType

from tests.conftest import ROOT


def script(name: str) -> ModuleType:
    """scripts/<name>.py as a module."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "scripts"))

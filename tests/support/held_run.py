"""Waiting for a run held in its decode (PARTRACE_TEST_HOLD_DECODE) to reach the held unit."""
from __future__ import annotations

import time
from pathlib import Path


def wait_until_held(proc, held: Path, timeout: float = 120) -> None:
    """Until the run ``proc`` marks ``held`` (it then waits there); fails if it ends first."""
    deadline = time.monotonic() + timeout
    while not held.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never reached the held unit"
        time.sleep(0.05)

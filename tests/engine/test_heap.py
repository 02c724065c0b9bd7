"""Freed buffers kept warm (engine/heap.py): a freed column's pages serve the next one without
faulting again; each case in a fresh interpreter, since the settings stay for the process."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from partrace.engine import heap

ROOT = Path(__file__).resolve().parents[2]

# Faults of a second column of the first one's size, allocated after the first is freed.
# 3 MiB: above glibc's first mmap threshold (128 KiB), below numpy's huge-page advice (4 MiB),
# so each of its pages faults once when fresh.
ROUNDS = """
import json, resource, sys
import numpy as np
from partrace.engine import heap
kept = heap.keep_freed_pages() if sys.argv[1] == "keep" else None
def faults(n):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    column = np.ones(n, dtype=np.uint8)     # every page written
    column = None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
first = faults(3 << 20)
second = faults(3 << 20)
print(json.dumps({"kept": kept, "first": first, "second": second}))
"""
PAGES = (3 << 20) // 4096


def _rounds(mode: str) -> dict:
    r = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True,
                       cwd=ROOT, timeout=120, check=True)
    return json.loads(r.stdout)


def _thp_always() -> bool:
    try:
        return "[always]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False


@pytest.mark.skipif(heap.glibc_version() is None, reason="glibc's allocator settings only")
def test_a_freed_column_serves_the_next_without_faulting_again():
    kept = _rounds("keep")
    assert kept["kept"] is True
    assert kept["first"] >= PAGES // 2         # fresh pages: the measure sees faults
    assert kept["second"] < PAGES // 16        # the same pages again, from the heap
    if not _thp_always():
        # glibc left alone maps the first column and unmaps it on free: the second faults
        default = _rounds("default")
        assert default["second"] >= PAGES // 2


def test_another_c_library_is_left_alone(monkeypatch):
    def no_glibc(name):
        raise ValueError(name)
    monkeypatch.setattr(heap.os, "confstr", no_glibc)
    monkeypatch.setattr(heap, "_done", None)
    assert heap.glibc_version() is None
    assert heap.keep_freed_pages() is False

"""numba's cache index saved under a lock (kernels/cachelock.py): processes adding
different overloads of one kernel at once each keep their own code."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# one overload of a fresh kernel, compiled into (or loaded from) the cache folder given,
# through partrace's njit; prints what it computes
KERNEL = """
import sys
import numpy as np
from partrace.kernels.jit import njit

@njit(cache=True)
def doubled(values):
    out = np.empty_like(values)
    for i in range(values.shape[0]):
        out[i] = values[i] * 2
    return out

kind = sys.argv[1]
print(kind, int(doubled(np.arange(5, dtype=kind)).sum()))
"""
KINDS = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"]


def _run(folder, kinds, env):
    procs = [subprocess.Popen([sys.executable, str(folder / "kernel.py"), kind], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for kind in kinds]
    return [p.communicate(timeout=300) + (p.returncode,) for p in procs]


def test_processes_compiling_side_by_side_each_load_their_own_code_after(tmp_path):
    (tmp_path / "kernel.py").write_text(KERNEL)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PARTRACE_JIT": "numba"}
    for out, err, code in _run(tmp_path, KINDS, env):     # all at once, a cold cache
        assert code == 0, err
    for out, err, code in _run(tmp_path, KINDS, env):     # then each loads its own
        assert code == 0, err
        kind, total = out.split()
        assert int(total) == 20, (kind, out)


def test_a_save_reads_the_index_under_the_lock(tmp_path):
    from numba.core import caching

    from partrace.kernels import cachelock
    cache = type("Cache", (), {})()
    cache._cache_file = caching.IndexDataCacheFile(str(tmp_path), "k", "stamp")
    cachelock.lock_saves(cache)
    index = cache._cache_file
    held = []

    def load_index():
        fd = os.open(index._index_path + ".lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(True)
        finally:
            os.close(fd)
        return {}
    index._load_index = load_index
    index.save(("sig",), b"data")
    assert held == [True]
    index._load_index = lambda: caching.IndexDataCacheFile._load_index(index)
    assert index.load(("sig",)) == b"data"

"""A kernel found in numba's cache is loaded without numba's context refresh
(kernels/cacheload.py), and runs as the kernel compiled in the process does; a kernel
missing from the cache, compiled after such a load, still gets the full refresh numba's
compiler makes.  Each step in a fresh process: the cache is what one process leaves
the next."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

KERNELS = '''
import numpy as np
from partrace.kernels.jit import njit


@njit(cache=True)
def cumulative_squares(a):
    out = np.zeros(a.shape[0], np.int64)     # allocates: links against the NRT
    s = 0
    for i in range(a.shape[0]):
        s += a[i] * a[i]
        out[i] = s
    return out


@njit(cache=True)
def distinct_small(a):
    seen = np.zeros(256, np.bool_)
    n = 0
    for i in range(a.shape[0]):
        if not seen[a[i]]:
            seen[a[i]] = True
            n += 1
    return n
'''

RUN = '''
import json, sys
import numpy as np
from numba.core import base
calls = []
refresh = base.BaseContext.refresh
def counted(self):
    calls.append(1)
    return refresh(self)
base.BaseContext.refresh = counted
sys.path.insert(0, sys.argv[1])
import lib_kernels as k
a = np.arange(1, 1001, dtype=np.int64)
out = {"squares": k.cumulative_squares(a).tolist(),
       "refreshed_after_first": len(calls)}
if sys.argv[2] == "both":
    out["distinct"] = k.distinct_small(a % 7)
    out["refreshed_after_second"] = len(calls)
out["hits"] = sum(k.cumulative_squares.compiled().stats.cache_hits.values())
print(json.dumps(out))
'''


def _run(tmp_path: Path, which: str) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PARTRACE_JIT": "numba"}
    res = subprocess.run([sys.executable, "-c", RUN, str(tmp_path), which], env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_a_cached_kernel_loads_without_a_refresh_and_a_missing_one_still_compiles(tmp_path):
    (tmp_path / "lib_kernels.py").write_text(textwrap.dedent(KERNELS))
    a = np.arange(1, 1001, dtype=np.int64)
    expected = np.cumsum(a * a).tolist()

    compiled = _run(tmp_path, "first")          # a miss: compiled, saved to the cache
    assert compiled["squares"] == expected
    assert compiled["hits"] == 0
    assert compiled["refreshed_after_first"] > 0

    loaded = _run(tmp_path, "both")             # a hit, then the other kernel's miss
    assert loaded["squares"] == expected
    assert loaded["hits"] == 1
    assert loaded["refreshed_after_first"] == 0
    assert loaded["distinct"] == len(set((a % 7).tolist()))
    assert loaded["refreshed_after_second"] > 0

    again = _run(tmp_path, "both")              # both hits: no refresh at all
    assert again["squares"] == expected and again["distinct"] == 7
    assert again["refreshed_after_second"] == 0

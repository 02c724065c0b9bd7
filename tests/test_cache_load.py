"""A kernel found in numba's cache is loaded without numba's context refresh
(kernels/lightload.py), and runs as the kernel compiled in the process does; a kernel
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


def _run(tmp_path: Path, which: str, script: str = RUN) -> dict:
    """``script`` run with ``which`` in a fresh process on the kernels' cache: its last line's
    JSON."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PARTRACE_JIT": "numba"}
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path), which], env=env,
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


# a kernel compiled in the process that calls a cached one links the cached one's bitcode
LINKING = '''
import numpy as np
from partrace.kernels.jit import njit
from lib_kernels import cumulative_squares


@njit
def last_square_sum(a):
    return cumulative_squares(a)[-1]
'''

LAZY = '''
import json, sys
import llvmlite.binding as ll
parsed = []
parse = ll.parse_bitcode
ll.parse_bitcode = lambda data: parsed.append(len(data)) or parse(data)
sys.path.insert(0, sys.argv[1])
from partrace.kernels import lazylink
if sys.argv[2] == "numba":
    lazylink.VERIFIED = ()          # any other numba version: numba's own loading
elf = []
read_elf = lazylink.elf_defined_symbols
lazylink.elf_defined_symbols = lambda obj: elf.append(read_elf(obj)) or elf[-1]
import numpy as np
import lib_kernels as k
a = np.arange(1, 1001, dtype=np.int64)
out = {"squares": k.cumulative_squares(a).tolist(), "parsed_at_load": len(parsed)}
d = k.cumulative_squares.compiled()
out["hits"] = sum(d.stats.cache_hits.values())
library = d.overloads[d.signatures[0]].library
out["lazy"] = type(library).__name__ == "LazyLinkLibrary"
engine = library._codegen._engine
out["elf_names"] = sorted(elf[0]) if elf else None
import lib_linking
out["last"] = int(lib_linking.last_square_sum(a))
out["parsed_after_link"] = len(parsed)
shared = library._get_module_for_linking()
out["bitcode_names"] = sorted(g.name for gs in (shared.functions, shared.global_variables)
                              for g in gs if not g.is_declaration)
out["defined_after"] = sorted(engine._defined_symbols)
print(json.dumps(out))
'''


def test_a_cached_kernel_parses_its_bitcode_only_when_a_compiled_kernel_links_it(tmp_path):
    import numba
    from partrace.kernels import lazylink
    (tmp_path / "lib_kernels.py").write_text(textwrap.dedent(KERNELS))
    (tmp_path / "lib_linking.py").write_text(textwrap.dedent(LINKING))
    a = np.arange(1, 1001, dtype=np.int64)
    expected = np.cumsum(a * a)
    _run(tmp_path, "first")                     # compiled and saved to the cache

    lazy = _run(tmp_path, "lazy", LAZY)
    own = _run(tmp_path, "numba", LAZY)
    for got in (lazy, own):
        assert got["hits"] == 1 and got["squares"] == expected.tolist()
        assert got["last"] == int(expected[-1])
    assert own["lazy"] is False and own["parsed_at_load"] >= 1 and own["elf_names"] is None
    verified = ".".join(numba.__version__.split(".")[:2]) in lazylink.VERIFIED
    assert lazy["lazy"] is verified
    if verified:
        assert lazy["parsed_at_load"] == 0 and lazy["parsed_after_link"] >= 1
        # every name the object code defines is one numba reads from the bitcode, and the
        # engine ends up knowing every name numba's own loading gives it
        assert any("cumulative_squares" in name for name in lazy["elf_names"])
        assert set(lazy["elf_names"]) <= set(lazy["bitcode_names"])
        assert set(lazy["bitcode_names"]) <= set(lazy["defined_after"])
    assert lazy["bitcode_names"] == own["bitcode_names"]


def test_elf_symbols_refuse_what_is_not_a_64_bit_little_endian_object():
    from partrace.kernels.lazylink import elf_defined_symbols
    assert elf_defined_symbols(b"") is None
    assert elf_defined_symbols(b"\x7fELF\x01\x01" + bytes(100)) is None     # 32-bit
    assert elf_defined_symbols(b"\x7fELF\x02\x02" + bytes(100)) is None     # big-endian

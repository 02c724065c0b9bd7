#!/usr/bin/env python3
"""Start-up cost of partrace commands on small traces, against Python's own start-up.

Runs, interleaved round by round (so a busy machine weighs on all alike):
``python -c pass``, ``python -c "import numpy"``, ``python -c "import numba"``
(the floor of any command that runs a compiled kernel), ``partrace --help``, and
``partrace info`` and ``partrace merge -o OUT.h5`` on a small sample trace of
each format (and on a partrace HDF5 file made from the OTF one).  ``info`` runs
twice: as it chooses (a small input runs its kernels as Python and never imports
numba: partrace/formats/jit.py) and with compiled kernels (``PARTRACE_JIT=numba``),
the way every run went before.  Prints one table: median wall and CPU (user +
system, of the child) seconds, and both as a multiple of the ``import numpy``
baseline measured in the same run.  The compiled kernels are loaded from numba's
cache (run ``partrace warm`` first, or the first round includes compiling: use
--warmup); Python's own bytecode cache is written as an install's is (the
children run without PYTHONDONTWRITEBYTECODE).

    scripts/bench_startup.py [--repeat 5] [--warmup 1] [--python .venv/bin/python] [--info-only]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SAMPLES = {     # format -> a small trace of it (a few KB to 150 KB)
    "OTF": DATA / "otf" / "real-long" / "trace" / "ring8_long.otf",
    "DUMPI": DATA / "dumpi" / "p2p-4rank",
    "ovni": DATA / "ovni" / "v1-zoo-small" / "ovni",
    "ROSS": DATA / "ross" / "pi-np1-seq-allmodes" / "stats",
}


def _size(path: Path) -> int:
    """Bytes of the trace: an OTF master file stands for its folder (the trace's files)."""
    if path.suffix == ".otf":
        path = path.parent
    return sum(f.stat().st_size for f in path.rglob("*")) if path.is_dir() else path.stat().st_size


def measure(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one run; a failed run stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"bench_startup: {' '.join(cmd)} failed:\n{r.stderr.decode(errors='replace')}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="rounds (default 5); medians are shown")
    ap.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted")
    ap.add_argument("--python", default=sys.executable, help="the interpreter partrace runs in")
    ap.add_argument("--info-only", action="store_true", help="no merge cases (a shorter run)")
    args = ap.parse_args()
    py = args.python
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("PARTRACE_MPI", "PARTRACE_JIT", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    compiled = {**env, "PARTRACE_JIT": "numba"}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        h5 = Path(tmp) / "otf.h5"
        measure([py, "-m", "partrace", "merge", str(SAMPLES["OTF"]), "-o", str(h5), "-q"], env)
        traces = {**SAMPLES, "partrace HDF5": h5}
        cases = {"python -c pass": [py, "-c", "pass"],
                 "python -c 'import numpy'": [py, "-c", "import numpy"],
                 # the floor of every command that runs a compiled kernel
                 "python -c 'import numba'": [py, "-c", "import numba"],
                 "partrace --help": [py, "-m", "partrace", "--help"]}
        sizes, envs = {}, {}
        for name, trace in traces.items():
            info = [py, "-m", "partrace", "info", str(trace)]
            sizes[f"info {name}"] = _size(trace)
            cases[f"info {name}"] = info
            if name != "partrace HDF5":     # no kernel there: nothing to compare
                sizes[f"info {name} (compiled)"] = _size(trace)
                cases[f"info {name} (compiled)"] = info
                envs[f"info {name} (compiled)"] = compiled
            if not args.info_only:
                sizes[f"merge {name} -> h5"] = _size(trace)
                cases[f"merge {name} -> h5"] = [py, "-m", "partrace", "merge", str(trace), "-o",
                                                str(Path(tmp) / "out.h5"), "--overwrite", "-q"]
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for round_ in range(args.warmup + args.repeat):
            for name, cmd in cases.items():
                got = measure(cmd, envs.get(name, env))
                if round_ >= args.warmup:
                    times[name].append(got)
    med = {name: (statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts))
           for name, ts in times.items()}
    base_wall, base = (x or 1e-9 for x in med["python -c 'import numpy'"])
    width = max(len(n) for n in med)
    print(f"start-up, median of {args.repeat} interleaved rounds ({py}, "
          f"load {os.getloadavg()[0]:.1f})")
    print(f"{'command':<{width}}  {'input':>9}  {'wall s':>7}  {'CPU s':>6}  "
          f"{'wall x numpy':>12}  {'CPU x numpy':>11}")
    print(f"{'-' * width}  {'-' * 9}  {'-' * 7}  {'-' * 6}  {'-' * 12}  {'-' * 11}")
    for name, (wall, cpu) in med.items():
        size = f"{sizes[name] / 1024:,.0f} KB" if name in sizes else ""
        print(f"{name:<{width}}  {size:>9}  {wall:7.3f}  {cpu:6.3f}  {wall / base_wall:12.2f}  "
              f"{cpu / base:11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

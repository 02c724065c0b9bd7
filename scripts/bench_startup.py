#!/usr/bin/env python3
"""Start-up cost of partrace commands on small traces, against Python's own start-up.

Runs, interleaved round by round (so a busy machine weighs on all alike):
``python -c pass``, ``python -c "import numpy"``, ``python -c "import numba"``
(the floor of any command that runs a compiled kernel), ``partrace --help``, and
``partrace info`` and ``partrace merge -o OUT.h5`` on a small sample trace of
each format (and on a partrace HDF5 file made from the OTF one).  Prints one
table: median wall and CPU (user + system, of the child) seconds, and CPU as a
multiple of the ``import numpy`` baseline measured in the same run.  The
kernels are loaded from numba's cache (run ``partrace warm`` first, or the
first round includes compiling: use --warmup).

    scripts/bench_startup.py [--repeat 5] [--warmup 1] [--python .venv/bin/python]
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
    args = ap.parse_args()
    py = args.python
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PARTRACE_MPI", None)
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        h5 = Path(tmp) / "otf.h5"
        measure([py, "-m", "partrace", "merge", str(SAMPLES["OTF"]), "-o", str(h5), "-q"], env)
        traces = {**SAMPLES, "partrace HDF5": h5}
        cases = {"python -c pass": [py, "-c", "pass"],
                 "python -c 'import numpy'": [py, "-c", "import numpy"],
                 # the floor of every command that runs a compiled kernel
                 "python -c 'import numba'": [py, "-c", "import numba"],
                 "partrace --help": [py, "-m", "partrace", "--help"]}
        sizes = {}
        for name, trace in traces.items():
            sizes[f"info {name}"] = sizes[f"merge {name} -> h5"] = _size(trace)
            cases[f"info {name}"] = [py, "-m", "partrace", "info", str(trace)]
            cases[f"merge {name} -> h5"] = [py, "-m", "partrace", "merge", str(trace), "-o",
                                            str(Path(tmp) / "out.h5"), "--overwrite", "-q"]
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for round_ in range(args.warmup + args.repeat):
            for name, cmd in cases.items():
                got = measure(cmd, env)
                if round_ >= args.warmup:
                    times[name].append(got)
    med = {name: (statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts))
           for name, ts in times.items()}
    base = med["python -c 'import numpy'"][1] or 1e-9
    width = max(len(n) for n in med)
    print(f"start-up, median of {args.repeat} interleaved rounds ({py}, "
          f"load {os.getloadavg()[0]:.1f})")
    print(f"{'command':<{width}}  {'input':>9}  {'wall s':>7}  {'CPU s':>6}  {'CPU x numpy':>11}")
    print(f"{'-' * width}  {'-' * 9}  {'-' * 7}  {'-' * 6}  {'-' * 11}")
    for name, (wall, cpu) in med.items():
        size = f"{sizes[name] / 1024:,.0f} KB" if name in sizes else ""
        print(f"{name:<{width}}  {size:>9}  {wall:7.3f}  {cpu:6.3f}  {cpu / base:11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Start-up cost of partrace commands on small traces, against Python's own start-up,
and (``--against NAME=TREE``) against another source tree in interleaved pairs.

Runs, interleaved round by round (so a busy machine weighs on all alike):
``python -c pass``, ``python -c "import numpy"``, ``python -c "import numba"``
(the floor of any command that runs a compiled kernel), ``partrace --help``, and on a
small sample trace of each format (and on a partrace HDF5 file made from the OTF
one): ``info`` as it chooses (a small input runs its kernels as Python and never
imports numba: partrace/kernels/jit.py) and with compiled kernels
(``PARTRACE_JIT=numba``), ``decode`` (the Python API decoding every unit, compiled, as
scripts/bench_ctools.py's decode row does), ``merge -o OUT.h5`` and ``merge -o
OUT.otf``.  On inputs this small each command is nearly all start-up.

Alone it prints the median wall and CPU (user + system, of the child) seconds, and
the CPU as a multiple of the ``import numpy`` baseline of the same run.  With
``--against NAME=TREE`` every partrace case also runs with TREE's partrace (its
folder put first on PYTHONPATH) right after this tree's, round by round; the table
shows both medians and the median of the per-pair ratios (this / NAME): below 1 is
faster here.

The compiled kernels are loaded from numba's cache (run ``partrace warm`` in each
tree first, or the first rounds include compiling: use --warmup).  Python's bytecode
cache is written as an install's is (PYTHONDONTWRITEBYTECODE is dropped for the
children; set PYTHONPYCACHEPREFIX to keep it out of the trees).  The children run
in a temporary folder, so ``-m partrace`` finds the tree named on PYTHONPATH.

    scripts/bench_startup.py [--repeat 5] [--warmup 1] [--python .venv/bin/python]
                             [--info-only] [--against s11=/path/to/tree]
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

import bench_results

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SAMPLES = {     # format -> a small trace of it (a few KB to 150 KB)
    "OTF": DATA / "otf" / "real-long" / "trace" / "ring8_long.otf",
    "DUMPI": DATA / "dumpi" / "p2p-4rank",
    "ovni": DATA / "ovni" / "v1-zoo-small" / "ovni",
    "ROSS": DATA / "ross" / "pi-np1-seq-allmodes" / "stats",
}
# the decode row of scripts/bench_ctools.py: every unit decoded, nothing kept
DECODE = ("import sys; from partrace.formats import open_trace; r = open_trace(sys.argv[1]); "
          "d = r.read_definitions(); [None for u in r.units() for _ in r.decode(u, d)]")


def _size(path: Path) -> int:
    """Bytes of the trace: an OTF master file stands for its folder (the trace's files)."""
    if path.suffix == ".otf":
        path = path.parent
    return sum(f.stat().st_size for f in path.rglob("*")) if path.is_dir() else path.stat().st_size


def measure(cmd: list[str], env: dict, cwd: str) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one run; a failed run stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"bench_startup: {' '.join(cmd)} failed:\n{r.stderr.decode(errors='replace')}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def tree_env(tree: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    for name in ("PARTRACE_MPI", "PARTRACE_JIT", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    return env


def cases(py: str, tmp: Path, h5: Path, info_only: bool) -> tuple[dict, dict, dict]:
    """name -> argv of the partrace cases, name -> extra environment, name -> input bytes."""
    argv = {"partrace --help": [py, "-m", "partrace", "--help"]}
    extra, sizes = {}, {}
    for name, trace in {**SAMPLES, "partrace HDF5": h5}.items():
        info = f"info {name}"
        these = {info: [py, "-m", "partrace", "info", str(trace)]}
        if name != "partrace HDF5":     # no kernel there: nothing to compile or compare
            these[f"{info} (compiled)"] = these[info]
            extra[f"{info} (compiled)"] = {"PARTRACE_JIT": "numba"}
            these[f"decode {name}"] = [py, "-c", DECODE, str(trace)]
            for suffix, more in () if info_only else ((".h5", []), (".otf", ["--streams", "2"])):
                these[f"merge {name} -> {suffix[1:]}"] = [
                    py, "-m", "partrace", "merge", str(trace), "-o", str(tmp / f"out{suffix}"),
                    "--overwrite", "-q", *more]
        argv.update(these)
        sizes.update(dict.fromkeys(these, _size(trace)))
    return argv, extra, sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="rounds (default 5); medians are shown")
    ap.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted")
    ap.add_argument("--python", default=sys.executable, help="the interpreter partrace runs in")
    ap.add_argument("--info-only", action="store_true", help="no merge cases (a shorter run)")
    ap.add_argument("--against", metavar="NAME=TREE",
                    help="also run every partrace case with TREE's partrace, paired")
    bench_results.add_option(ap, "bench_startup")
    args = ap.parse_args()
    py = args.python
    trees = {"here": ROOT}
    if args.against:
        name, sep, tree = args.against.partition("=")
        if not sep or not (Path(tree) / "partrace" / "__init__.py").is_file():
            ap.error(f"--against {args.against}: expected NAME=TREE, TREE a partrace checkout")
        trees[name] = Path(tree).resolve()
    envs = {t: tree_env(path) for t, path in trees.items()}
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp_name:
        tmp = Path(tmp_name)
        h5 = tmp / "otf.h5"
        measure([py, "-m", "partrace", "merge", str(SAMPLES["OTF"]), "-o", str(h5), "-q"],
                envs["here"], tmp_name)
        floors = {"python -c pass": [py, "-c", "pass"],
                  "python -c 'import numpy'": [py, "-c", "import numpy"],
                  # the floor of every command that runs a compiled kernel
                  "python -c 'import numba'": [py, "-c", "import numba"]}
        argv, extra, sizes = cases(py, tmp, h5, args.info_only)
        runs = [(name, "here", cmd) for name, cmd in floors.items()]
        runs += [(name, t, cmd) for name, cmd in argv.items() for t in trees]
        times: dict[tuple[str, str], list[tuple[float, float]]] = {(n, t): [] for n, t, _ in runs}
        for round_ in range(args.warmup + args.repeat):
            for name, t, cmd in runs:
                got = measure(cmd, {**envs[t], **extra.get(name, {})}, tmp_name)
                if round_ >= args.warmup:
                    times[name, t].append(got)
    with bench_results.recorded("bench_startup", None, args.results):
        print("\n".join(report(times, sizes, trees, args.repeat, py)))
    return 0


def report(times: dict, sizes: dict, trees: dict, repeat: int, py: str) -> list[str]:
    med = {key: (statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts))
           for key, ts in times.items()}
    base = med["python -c 'import numpy'", "here"][1] or 1e-9
    names = list(dict.fromkeys(n for n, _ in times))
    width = max(len(n) for n in names)
    other = next((t for t in trees if t != "here"), None)
    head = (f"start-up, median of {repeat} interleaved rounds ({py}, load "
            f"{os.getloadavg()[0]:.1f}); x numpy: CPU as a multiple of import numpy's")
    cols = f"{'command':<{width}}  {'input':>9}  {'wall s':>7}  {'CPU s':>6}  {'x numpy':>7}"
    if other:
        head += (f"; against {other} = {trees[other]}: its medians and the median of the "
                 f"per-pair ratios here / {other}")
        cols += (f"  {other + ' wall':>10}  {other + ' CPU':>9}  {'wall ratio':>10}  "
                 f"{'CPU ratio':>9}")
    lines = [head, cols, "-" * len(cols)]
    for name in names:
        wall, cpu = med[name, "here"]
        size = f"{sizes[name] / 1024:,.0f} KB" if sizes.get(name) else ""
        line = f"{name:<{width}}  {size:>9}  {wall:7.3f}  {cpu:6.3f}  {cpu / base:7.2f}"
        if other and (name, other) in times:
            o_wall, o_cpu = med[name, other]
            pairs = list(zip(times[name, "here"], times[name, other]))
            w_ratio = statistics.median(a[0] / b[0] for a, b in pairs)
            c_ratio = statistics.median(a[1] / max(b[1], 1e-9) for a, b in pairs)
            line += f"  {o_wall:10.3f}  {o_cpu:9.3f}  {w_ratio:10.3f}  {c_ratio:9.3f}"
        lines.append(line)
    return lines


if __name__ == "__main__":
    sys.exit(main())

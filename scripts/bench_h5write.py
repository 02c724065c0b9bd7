#!/usr/bin/env python3
"""Merging to HDF5, this tree against other partrace trees, paired, on the same traces.

    python scripts/bench_h5write.py --against old=/path/to/tree [--against ...] \\
        [--suite bench-out/suite-x0.5 | TRACE ...] [--ranks 1,2] [--pairs 3]

For each trace and rank count, ``python -m partrace merge TRACE -o out.h5 -q``
runs once per tree to warm up (numba's cache, page cache), then ``--pairs``
rounds run every tree once each, in turn (A B A B ...: a busy machine weighs on
both alike), each in a fresh folder outside every tree with PYTHONPATH at its
tree, under GNU ``/usr/bin/time -v`` (``mpiexec -n N`` from this interpreter's
folder for N > 1).  Printed, per trace and rank count, one markdown table:

  CPU s      user + system of the whole command (time -v: every waited-for process)
  wall s     elapsed
  peak MiB   the largest process's resident peak
  out/in     output bytes per input byte (the trace's own files)
  ratio      this tree / the other, CPU and wall, median of the per-pair ratios

with two floors measured in the same rounds: reading the trace's files
(8 MiB blocks, warm cache, in this process: the "x read" column) and
``python -c "import numpy"`` (the CPU every command pays before any work).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_results

ROOT = Path(__file__).resolve().parent.parent
GNU_TIME = "/usr/bin/time"
SUITE = {"otf": "otf/*.otf", "dumpi": "dumpi/*.meta", "ovni": "ovni/ovni", "ross": "ross"}


def suite_traces(folder: Path) -> dict[str, Path]:
    """The suite's trace of each format found under ``folder`` (scripts/bench_suite's)."""
    out = {}
    for fmt, pattern in SUITE.items():
        found = sorted(folder.glob(pattern))
        if found:
            out[fmt] = found[0]
    return out


def input_files(trace: Path) -> list[Path]:
    sys.path.insert(0, str(ROOT))
    from partrace.formats import detect, get
    return list(get(detect(trace)).open(trace).source_files())


def read_seconds(files: list[Path], repeat: int = 3) -> float:
    """Best of ``repeat``: every file read in 8 MiB blocks (the floor of any merge)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for f in files:
            with open(f, "rb", buffering=0) as fh:
                while fh.read(8 << 20):
                    pass
        best = min(best, time.perf_counter() - t0)
    return best


def mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else (shutil.which("mpiexec") or "mpiexec")


def timed(argv: list[str], tree: Path | None, scratch: Path) -> dict:
    """One run under ``time -v`` in a fresh folder: cpu, wall, peak MiB, output bytes."""
    env = {**os.environ}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        r = subprocess.run([GNU_TIME, "-v", *argv], cwd=tmp, env=env, capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise SystemExit(f"failed: {' '.join(argv)} (PYTHONPATH={tree})\n{r.stderr[-3000:]}")
        out = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())

    def field(name):
        return re.search(rf"{re.escape(name)}: (.+)", r.stderr).group(1).strip()
    wall = 0.0
    for part in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":"):
        wall = wall * 60 + float(part)
    return dict(cpu=float(field("User time (seconds)")) + float(field("System time (seconds)")),
                wall=wall, peak=int(field("Maximum resident set size (kbytes)")) / 1024,
                out=out)


def merge_argv(trace: Path, ranks: int) -> list[str]:
    cmd = [sys.executable, "-m", "partrace", "merge", str(trace), "-o", "out.h5", "-q"]
    return [mpiexec(), "-n", str(ranks), *cmd] if ranks > 1 else cmd


def bench(trace: Path, ranks: int, trees: dict[str, Path], pairs: int, scratch: Path) -> list[str]:
    files = input_files(trace)
    in_bytes = sum(f.stat().st_size for f in files)
    numpy = [sys.executable, "-c", "import numpy"]
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    runs["import numpy"] = []
    for name, tree in trees.items():                    # warm-up, not counted
        timed(merge_argv(trace, ranks), tree, scratch)
    reads = []
    for _ in range(pairs):
        for name, tree in trees.items():
            runs[name].append(timed(merge_argv(trace, ranks), tree, scratch))
        runs["import numpy"].append(timed(numpy, None, scratch))
        reads.append(read_seconds(files, 1))
    t_read = statistics.median(reads)
    mine = next(iter(trees))
    lines = [f"#### {trace}  ({in_bytes / 1e6:,.1f} MB in {len(files)} files), {ranks} rank(s), "
             f"{pairs} pairs, medians",
             "| tree | CPU s | wall s | x read (wall) | peak MiB | out/in bytes "
             f"| {mine}/tree CPU | {mine}/tree wall |",
             "|---|---|---|---|---|---|---|---|"]
    for name, rs in runs.items():
        cpu = statistics.median(r["cpu"] for r in rs)
        wall = statistics.median(r["wall"] for r in rs)
        peak = max(r["peak"] for r in rs)
        if name == "import numpy":
            lines.append(f"| python -c 'import numpy' | {cpu:.3f} | {wall:.3f} | | {peak:,.0f} "
                         "| | | |")
            continue
        ratio = ["", ""]
        if name != mine:
            ratio = [f"{statistics.median(a[k] / b[k] for a, b in zip(runs[mine], rs)):.3f}"
                     for k in ("cpu", "wall")]
        out = statistics.median(r["out"] for r in rs)
        lines.append(f"| {name} | {cpu:.3f} | {wall:.3f} | {wall / t_read:,.1f} | {peak:,.0f} | "
                     f"{out / in_bytes:.4f} | {ratio[0]} | {ratio[1]} |")
    lines.append(f"raw read of the input (warm, 8 MiB blocks): {t_read:.3f} s")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--suite", type=Path, help="a scripts/bench_suite output folder (suite-xS)")
    ap.add_argument("--formats", default=",".join(SUITE), help="of the suite's traces")
    ap.add_argument("--against", action="append", default=[], metavar="NAME=TREE",
                    help="another partrace source tree (repeatable)")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--scratch", type=Path, help="where the runs' folders go (default: temp)")
    bench_results.add_option(ap, "bench_h5write")
    args = ap.parse_args(argv)
    if not os.access(GNU_TIME, os.X_OK):
        raise SystemExit(f"needs GNU time at {GNU_TIME}")
    trees = {"this": ROOT}
    for spec in args.against:
        name, _, path = spec.partition("=")
        trees[name] = Path(path).resolve()
    traces = list(args.traces)
    if args.suite:
        found = suite_traces(args.suite)
        traces += [found[f] for f in args.formats.split(",") if f in found]
    if not traces:
        ap.error("no trace: give TRACE ... or --suite")
    scratch = args.scratch or Path(tempfile.gettempdir())
    scratch.mkdir(parents=True, exist_ok=True)
    with bench_results.recorded("bench_h5write", argv, args.results):
        return measure(args, trees, traces, scratch)


def measure(args, trees, traces, scratch) -> int:
    print(f"trees: " + ", ".join(f"{k}={v}" for k, v in trees.items())
          + f"; {os.cpu_count()} cpus; GNU time -v")
    for trace in traces:
        for ranks in (int(x) for x in args.ranks.split(",")):
            print("\n".join(bench(trace.resolve(), ranks, trees, args.pairs, scratch)), flush=True)
            print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

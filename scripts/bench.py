#!/usr/bin/env python3
"""Throughput of partrace on one trace, against reading the same bytes.

    python scripts/bench.py TRACE [--ranks 1,2,4] [--streams 4] [--format F]

Measured in one run, warm page cache:
  read        the trace's files read in 8 MiB blocks (the floor)
  decode      every unit decoded on one process (no merge, no output)
  merge->h5   `partrace merge TRACE -o X.h5` under mpiexec -n N (whole command)
  merge->otf  `partrace merge TRACE -o X.otf --streams M` under mpiexec -n N
  otf2, perfetto  each sink writing the decoded trace on one process (rows/s)
and printed as one table: seconds, MB/s, rows/s (rows of every table the
format decodes: events, samples, ...), ratio to the raw read, peak resident
memory per rank (as the merge reports it), and parallel efficiency
t(1 rank) / (N x t(N ranks)).
The merge figures include process start-up and imports, as a user sees them.

Then, in a second table (scripts/bench_ctools.py), CPU seconds and peak memory
of partrace's decode, `info`, merge->h5 and merge->otf on one process, next to
the format's C tool on the same input when its path is given (--otfprint,
--otfmerge, --otfinfo, --dumpi2ascii, --ovnidump, or PARTRACE_BENCH_<TOOL>):
paired runs interleaved, min and median, the ratio partrace/C, output bytes
per input byte, and the targets those are held to. --ctools-repeat 0 skips it.
"""
from __future__ import annotations

import argparse
import re
import resource
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_ctools
import bench_results

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def read_all(files) -> float:
    t0 = time.perf_counter()
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while fh.read(8 << 20):
                pass
    return time.perf_counter() - t0


def decode_all(path, fmt):
    from partrace.formats import open_trace
    reader = open_trace(path, fmt)
    defs = reader.read_definitions()
    rows = 0
    t0 = time.perf_counter()
    for unit in reader.units():
        for chunk in reader.decode(unit, defs):
            rows += sum(len(t) for t in chunk.values())
    return time.perf_counter() - t0, rows, reader


def answer_rates(path, fmt, repeat: int) -> dict:
    """Best-of-N seconds of `profile` and `comm` in this process (warm, 1 rank), as decode is
    measured, the number of events, and `plan`: what any run does before decoding (units,
    surveys, definitions: the ROSS reader's scan of every file), which decode leaves out and
    profile/comm include."""
    from partrace import analysis
    from partrace.engine.mpi import serial
    from partrace.engine.pipeline import open_on_all_ranks, read_plan
    from partrace.formats import open_trace
    reader = open_trace(path, fmt)
    defs = reader.read_definitions()
    if reader.ordered:
        reader.start_after(None)
    events = sum(len(c.get("events", ())) for u in reader.units() for c in reader.decode(u, defs))
    out = {"events": events}
    for name, run in (("plan", lambda: read_plan(serial(), open_on_all_ranks(serial(), path, fmt))),
                      ("profile", lambda: analysis.profile(path, format=fmt)),
                      ("comm", lambda: analysis.communication(path, format=fmt))):
        run()           # warm: numba kernels
        times = []
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        out[name] = min(times)
    return out


SINK_RATES = {      # name: (sink class, output suffix, a module its writer needs)
    "otf2": ("partrace.output.otf2_sink:OTF2Sink", ".otf2", "_otf2"),
    "perfetto": ("partrace.output.perfetto_sink:PerfettoSink", ".pftrace", None),
}


def sink_rate(path, fmt, name: str, repeat: int, tmpdir=None) -> tuple[float, int] | None:
    """Best-of-N seconds of one output's sink writing the decoded trace on 1 rank (prepare,
    every table in one window, commit: definitions, events, publish), and the rows it was
    given; None when the module its writer needs is missing."""
    import importlib
    target, suffix, needs = SINK_RATES[name]
    if needs:
        try:
            importlib.import_module(needs)
        except ImportError:
            return None
    from partrace.engine.mpi import serial
    from partrace.engine.pipeline import run
    from partrace.output.memory import MemorySink
    module, cls = target.split(":")
    Sink = getattr(importlib.import_module(module), cls)
    mem = MemorySink()
    run(serial(), path, mem, format=fmt)
    rows = sum(len(t) for t in mem.tables.values())
    times = []
    for i in range(max(1, repeat) + 1):        # the first run warms the numba kernels
        with tempfile.TemporaryDirectory(prefix=f"partrace-bench-{name}-", dir=tmpdir) as tmp:
            comm, sink = serial(), Sink(Path(tmp) / f"x{suffix}")
            t0 = time.perf_counter()
            sink.prepare(comm, mem.defs, mem.schema)
            sink.write(comm, mem.tables)
            sink.commit(comm)
            if i:
                times.append(time.perf_counter() - t0)
    return min(times), rows


def mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else (shutil.which("mpiexec") or "mpiexec")


def run_merge(path, out, nranks, extra, fmt) -> tuple[float, float]:
    """Wall seconds of the whole command, and the peak memory per rank it reported (MiB)."""
    cmd = [mpiexec(), "-n", str(nranks), sys.executable, "-m", "partrace", "merge", str(path),
           "-o", str(out), *extra] + (["--format", fmt] if fmt else [])
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ,
                       "PYTHONPATH": str(ROOT)})
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"merge failed ({' '.join(cmd)}):\n{r.stderr}")
    m = re.search(r"peak memory ([\d,]+) MiB", r.stderr)
    return dt, float(m.group(1).replace(",", "")) if m else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--format")
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--streams", type=int, default=4, help="OTF output streams (0: skip)")
    ap.add_argument("--repeat", type=int, default=2, help="best of N for read and decode")
    ap.add_argument("--memory", help="--memory budget passed to merge (default: partrace's)")
    ap.add_argument("--tmpdir", help="where the outputs go (default: system temp)")
    ap.add_argument("--ctools-repeat", type=int, default=3,
                    help="interleaved rounds for the CPU/memory table (0: skip it)")
    bench_ctools.add_tool_options(ap)
    bench_results.add_option(ap, "bench")
    args = ap.parse_args(argv)
    with bench_results.recorded("bench", argv, args.results):
        return measure(args)


def measure(args) -> int:
    ranks = [int(x) for x in args.ranks.split(",")]

    _, _, reader = decode_all(args.trace, args.format)        # warm up: cache, numba JIT
    files = reader.source_files()
    nbytes = sum(f.stat().st_size for f in files)
    t_read = min(read_all(files) for _ in range(args.repeat))
    best = min((decode_all(args.trace, args.format) for _ in range(args.repeat)),
               key=lambda r: r[0])
    t_dec, rows = best[0], best[1]

    decode_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results = [("read", 1, t_read, float("nan")), ("decode", 1, t_dec, decode_peak)]
    answers = answer_rates(args.trace, args.format, args.repeat)
    writing = {name: sink_rate(args.trace, args.format, name, args.repeat, args.tmpdir)
               for name in SINK_RATES}
    extra = ["--memory", args.memory] if args.memory else []
    with tempfile.TemporaryDirectory(prefix="partrace-bench-", dir=args.tmpdir) as tmp:
        for n in ranks:
            results.append(("merge->h5", n, *run_merge(args.trace, Path(tmp) / f"o{n}.h5", n,
                                                       extra, args.format)))
        if args.streams:
            for n in ranks:
                results.append(("merge->otf", n, *run_merge(
                    args.trace, Path(tmp) / f"o{n}.otf", n,
                    extra + ["--streams", str(args.streams)], args.format)))

    print(f"trace: {args.trace}  ({nbytes / 1e6:,.1f} MB in {len(files)} files, "
          f"{rows:,} rows)  cpus: {os.cpu_count()}")
    print("| phase      | ranks |  seconds |     MB/s |  Mrows/s |  x read | peak MiB/rank "
          "| efficiency |")
    print("|------------|-------|----------|----------|----------|---------|---------------"
          "|------------|")
    one = {phase: dt for phase, n, dt, _ in results if n == 1}
    for phase, n, dt, peak in results:
        eff = one[phase] / (n * dt) if phase in one else float("nan")
        print(f"| {phase:<10} | {n:>5} | {dt:>8.3f} | {nbytes / dt / 1e6:>8.1f} | "
              f"{rows / dt / 1e6:>8.2f} | {t_read / dt:>7.3f} | {peak:>13,.0f} | {eff:>10.2f} |")
    events, plan = answers.pop("events"), answers.pop("plan")
    print(f"plan (units, surveys, definitions; not in decode): {plan:.3f} s")
    for name, dt in answers.items():
        print(f"{name}: {dt:.3f} s, {events / dt / 1e6:.2f} M events/s on 1 rank, "
              f"{t_dec / dt:.2f} of the decode speed, {(plan + t_dec) / dt:.2f} of plan + decode "
              f"(target: >= 0.8 and >= 5 M events/s)")
    for name, rate in writing.items():
        if rate is not None:
            dt, n = rate
            print(f"{name} writing: {dt:.3f} s, {n / dt / 1e6:.2f} M rows/s on 1 rank "
                  f"({n:,} rows of every table; target: >= 2 M events/s per rank)")
    if args.ctools_repeat > 0:
        tools = {t: getattr(args, t) for t in bench_ctools.TOOLS}
        print()
        print("\n".join(bench_ctools.compare(args.trace, args.format, tools,
                                             args.ctools_repeat, args.tmpdir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""How partrace's merge scales with the rank count, from every rank's account.

    python scripts/bench_scaling.py [--mb 2] [--ranks 1,2,4,8,16,32] [--formats ...]

Generates one trace per format (scripts/gen_*.py, about --mb MB each; OTF2: the OTF
one's events, written by the OTF2 library) and merges each to HDF5 and to OTF at every
rank count with `--stats FILE.json`.  The ranks may be far more
than the cores: wall time then means nothing, but each rank's busy CPU time still counts
its own work.  Printed per trace and output:

  E(P)      busy(1) / (P x max over ranks of busy(P)) per phase: the efficiency on P idle
            cores with a free network; beside it the busiest rank's excess over the mean
  traffic   bytes and messages (sent + received) of the rank that moves the most, per phase
  same      whether the output's data equals the output at 1 rank (HDF5: every dataset's
            values; OTF: every file's bytes)
  wall      the whole command at 2 ranks against 1 rank, in rounds of turning order
            (median ratio; only meaningful on 2 idle cores), beside two bounds: two 1-rank
            merges run side by side (half their ratio to one is what this machine allows
            t(2)/t(1)), and the 1-rank account's fixed part (every process pays it whole)
  accounts  every case's accounts at every rank count are kept in WORKDIR/accounts/, so
            that the model can be fitted again from them (scaling_model.py) without the runs
  model     seconds per phase at --model-ranks for an input of --model-gb, the busy time
            fitted as a/P + b + cP (a, the work that divides, grown with the input) plus the
            network (--net-gbs, --net-latency-us; the window phases' messages per window,
            times the windows the modelled input takes), every rank's opens at the metadata server
            (--fs-opens) and, for HDF5's single layout, the join: rank 0 placing the
            other ranks' chunks (its CPU per dataset, from the largest P's account, and
            per chunk, the median over the runs; the chunks grown with the output, a
            long table's fewer a byte as the HDF5 sink's chunk rule lengthens them)
            and each rank filling in what its part kept (its share of those bytes read and
            written, --fs-read-gbs, --fs-write-gbs: the owned chunks a rank wrote into the
            file after each window are not copied); for HDF5 also the efficiency without that
            join, at the serial path's write CPU.  Where
            the format lists its units by reading the files' bytes in parts (ROSS), that
            listing is timed apart and a P-th of it grown with the input in the plan
  h5c       (--outputs h5c) the one HDF5 file written collectively, where
            scripts/parallel_hdf5 built .venv-mpio (run with mpiexec.mpich): the model of
            that path, with the CPU of HDF5's own filter pipeline.  The accounts see only
            partrace's own MPI calls: a rank waiting inside HDF5's collective write counts
            as busy (MPICH with UCX polls), so measure it with no more ranks than cores
  h5p       (--outputs h5p) HDF5 in layout "parts": each rank's file and rank 0's index
            of virtual datasets over them, no join (the model has none either)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import bench_results
import scaling_model as sm

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
UNITS = 64
# OTF output: a stream is written by one rank, so as many streams as units (the most ranks
# measured); with fewer, the ranks beyond the stream count have nothing to write
OUTPUTS = {"h5": [], "otf": ["--streams", str(UNITS)], "h5c": [], "h5p": ["--layout", "parts"]}
# h5c: the one HDF5 file written collectively, by the parallel h5py scripts/parallel_hdf5
# builds (.venv-mpio, launched by Debian's MPICH), so that the model of that path has the
# CPU of HDF5's own filter pipeline, not the serial path's
MPIO_PYTHON = ROOT / ".venv-mpio" / "bin" / "python"
MPIO_LAUNCHER = "mpiexec.mpich"


def generate(fmt: str, mb: float, folder: Path) -> Path:
    """A trace of about ``mb`` MB in ``folder`` (made once), and the path to merge.  OTF2:
    the OTF trace's events written by the OTF2 library (partrace's OTF2 output goes
    through it), a location per process and one per process's counters."""
    py = [sys.executable]
    if fmt == "otf2":
        target = folder / "otf2" / "gen.otf2"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([*py, "-m", "partrace", "merge", str(generate("otf", mb, folder)),
                            "-o", str(target), "-q"], check=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        return target
    top = folder / fmt      # each format's files in a folder of its own
    inside = {"otf": "gen.otf", "dumpi": "synth.meta", "ovni": "ovni", "ross": "."}[fmt]
    target = top / inside
    if target.exists():
        return target
    # made in a folder beside it and renamed when whole: a run stopped while it generated
    # must not leave a part of a trace that the next run takes for all of it
    part = folder / f".{fmt}.partial"
    shutil.rmtree(part, ignore_errors=True)
    making = part / inside
    n = max(1, int(mb * 1e6))
    cmd = {     # UNITS units (files, streams) each, so that every rank up to 64 has some;
        # sizes from the generators' bytes per record
        "otf": [*py, SCRIPTS / "gen_otf.py", making, "--processes", str(UNITS), "--streams",
                str(UNITS), "--events", str(n // 17)],
        "dumpi": [*py, SCRIPTS / "gen_dumpi.py", part, "--ranks", str(UNITS),
                  "--calls", str(max(1, n // (UNITS * 50)))],
        "ovni": [*py, SCRIPTS / "gen_ovni.py", part, "--looms", "2", "--procs", "4",
                 "--threads", str(UNITS // 8), "--events", str(max(4, n // (UNITS * 20))),
                 "--offsets"],
        "ross": [*py, SCRIPTS / "gen_ross.py", part, "--mb", str(max(1, round(mb / 3.3)))],
    }[fmt]
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(top, ignore_errors=True)
    os.replace(part, top)
    return target


def trace_bytes(trace: Path) -> int:
    """The bytes of a generated trace: its folder's files (a trace given as a folder, ROSS,
    is its own folder; the others sit each in a folder of its own beside them)."""
    folder = trace if trace.is_dir() else trace.parent
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else (shutil.which("mpiexec") or "mpiexec")


EXTRA: list[str] = []       # options for every merge (--memory)


def merge(trace: Path, out: Path, p: int, extra: list[str], stats: Path | None,
          collective: bool = False, copies: int = 1) -> float:
    """Wall seconds of one whole merge command at ``p`` ranks (``collective``: under the
    parallel h5py, the HDF5 file written collectively from 2 ranks on); ``copies``: that
    many of the command side by side, each writing its own output beside ``out``, until
    the last one ends."""
    launcher, python = (MPIO_LAUNCHER, str(MPIO_PYTHON)) if collective else (
        mpiexec(), sys.executable)
    outs = [out] if copies == 1 else [out.with_name(f"{k}-{out.name}") for k in range(copies)]
    cmds = [[launcher, "-n", str(p), python, "-m", "partrace", "merge", str(trace),
             "-o", str(o), "-q", "--overwrite", *EXTRA, *extra] for o in outs]
    if stats is not None:
        cmds[0] += ["--stats", str(stats)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if collective:
        env["PARTRACE_H5_COLLECTIVE"] = "1" if p > 1 else "0"
    t0 = time.perf_counter()
    running = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env) for cmd in cmds]
    for cmd, r in zip(cmds, running):
        _, err = r.communicate()
        if r.returncode != 0:
            raise SystemExit(f"merge failed ({' '.join(cmd)}):\n{err}")
    return time.perf_counter() - t0


def digest(folder: Path) -> str:
    """The data of an output folder: HDF5 files by their datasets' values, others by bytes
    (a folder left out: layout parts' OUT.h5.parts/, read through OUT.h5's datasets)."""
    h = hashlib.sha256()
    for f in sorted(folder.iterdir()):
        if f.is_dir():
            continue
        h.update(f.name.encode())
        if f.suffix == ".h5":
            _hash_h5(f, h)
        elif f.is_file():
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _hash_h5(path: Path, h) -> None:
    import h5py
    import numpy as np

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            data = obj[()]
            h.update(f"{name} {obj.dtype} {obj.shape}".encode())
            h.update(repr(data.tolist()).encode() if getattr(data, "dtype", None) == object
                     else np.ascontiguousarray(data).tobytes())
    with h5py.File(path, "r") as f:
        f.visititems(visit)


def output(folder: Path, kind: str) -> Path:
    """The output file of a case (its suffix chooses the format: h5c and h5p write .h5)."""
    return folder / f"out.{'h5' if kind in ('h5c', 'h5p') else kind}"


def output_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def measure_case(trace: Path, kind: str, ranks: list[int], work: Path) -> dict:
    """Every rank count's account, output digest and wall seconds (the whole command's)
    for one trace and output."""
    runs, same, sizes, walls = {}, {}, {}, {}
    for p in ranks:
        folder = work / f"{kind}-{p}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        stats = work / f"{kind}-{p}.json"
        walls[p] = merge(trace, output(folder, kind), p, OUTPUTS[kind], stats, kind == "h5c")
        runs[p] = json.loads(stats.read_text())
        same[p], sizes[p] = digest(folder), output_bytes(folder)
        shutil.rmtree(folder)
    return {"runs": runs, "digest": same, "bytes": sizes, "walls": walls}


def wall_pair(trace: Path, kind: str, rounds: int, work: Path) -> dict[str, float]:
    """Median wall seconds of the merge at 1 rank, at 2 ranks, and of two 1-rank merges side
    by side ("pair": what this machine gives two copies of the same work at once), and the
    median paired ratios to 1 rank, in rounds whose order turns (1 2 pair, 2 pair 1, ...)
    so that a drift of the machine's speed weighs on each."""
    times: dict[str, list[float]] = {"1": [], "2": [], "pair": []}
    ratios: dict[str, list[float]] = {"2": [], "pair": []}
    runs = {"1": (1, 1), "2": (2, 1), "pair": (1, 2)}      # ranks, copies
    order = list(runs)
    for i in range(rounds):
        got = {}
        for name in order[i % 3:] + order[:i % 3]:
            folder = work / f"wall-{name}"
            folder.mkdir(parents=True, exist_ok=True)
            p, copies = runs[name]
            got[name] = merge(trace, output(folder, kind), p, OUTPUTS[kind], None,
                              kind == "h5c", copies)
            shutil.rmtree(folder)
        for name in times:
            times[name].append(got[name])
        for name in ratios:
            ratios[name].append(got[name] / got["1"])
    return {**{f"t{k}": statistics.median(v) for k, v in times.items()},
            **{f"ratio{k}": statistics.median(v) for k, v in ratios.items()}}


def divisible_seconds(one: dict) -> float:
    """Of a 1-rank account, the busy time of the phases whose work the ranks share: all
    but start-up and kernels, which every process pays whole."""
    (rank,) = one["ranks"]
    return sum(v["busy_s"] for k, v in rank["phases"].items() if k not in ("start-up", "kernels"))


def print_wall(rounds: int, wall: dict[str, float], divisible: float | None,
               accounted: float | None = None) -> None:
    """The wall figures at 2 ranks against 1, beside the bounds on them that this machine
    and the fixed costs set.  ``divisible``: the 1-rank account's phases the ranks share;
    ``accounted``: that run's own wall seconds, which the fixed part is reckoned from (the
    rounds' median is other runs: on a machine whose speed drifts the two differ by more
    than the fixed part)."""
    t1 = wall["t1"]
    print(f"wall, {rounds} rounds, order turning: 1 rank {t1:.2f} s, 2 ranks {wall['t2']:.2f} s, "
          f"t(2)/t(1) {wall['ratio2']:.2f} (median of pairs; 2 idle cores: ideal 0.50)")
    print(f"  two 1-rank merges side by side: {wall['tpair']:.2f} s, {wall['ratiopair']:.2f} "
          f"of t(1): this machine's ideal t(2)/t(1) is {wall['ratiopair'] / 2:.2f}")
    whole = accounted if accounted is not None else t1
    if divisible is not None and divisible < whole:
        fixed = whole - divisible   # launch, interpreter, start-up, kernels
        print(f"  fixed per process (the 1-rank accounted run's {whole:.2f} s less its phases "
              f"the ranks share): {fixed:.2f} s; with the rest halved, t(2)/t(1) "
              f"{(fixed + divisible / 2) / whole:.2f}")
    elif divisible is not None:     # a rank's threads (compressing, writing) add CPU past the wall
        print(f"  fixed per process: not told apart (the 1-rank account's shared phases took "
              f"{divisible:.2f} s of CPU, more than its run's {whole:.2f} s)")


def warm(formats: list[str]) -> None:
    """The formats' kernels compiled and cached first (those not warm yet), and partrace's
    modules compiled to bytecode, as an installed package has them (pip compiles them;
    under PYTHONDONTWRITEBYTECODE a source tree has none, and every rank would compile
    every module again in its start-up), so that no run's busy time includes compiling."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "partrace")],
                   check=True, capture_output=True, env=env)
    code = ("import sys; from partrace.warm import is_warm; "
            "print(' '.join(f for f in sys.argv[1:] if not is_warm(f)))")
    cold = subprocess.run([sys.executable, "-c", code, *formats], capture_output=True,
                          text=True, env=env, check=True).stdout.split()
    if cold:
        subprocess.run([sys.executable, "-m", "partrace", "warm",
                        *[a for f in cold for a in ("--format", f)]],
                       check=True, capture_output=True, env=env)


def listing_seconds(fmt: str, trace: Path) -> tuple[float, float] | None:
    """(all files on one rank, the busiest of 8 parts) CPU seconds of the format's listing of
    ``trace``, where it lists in parts (list_part: ROSS hops the files' bytes, each rank a
    stretch), else None.  Each part is listed as its rank alone would, twice, the faster
    kept (the first loads the kernels); in a process of its own."""
    code = """if 1:
        import json, sys, time
        from partrace.formats import get
        from partrace.formats.base import TraceReader
        fmt, path = sys.argv[1:]
        if type(get(fmt).open(path)).list_part is TraceReader.list_part:
            print("null")
            sys.exit()
        def listed(r, n):
            best = None
            for _ in range(2):
                fresh = get(fmt).open(path)
                t = time.thread_time()
                fresh.list_part(r, n)
                t = time.thread_time() - t
                best = t if best is None else min(best, t)
            return best
        print(json.dumps([listed(0, 1), max(listed(r, 8) for r in range(8))]))
    """
    r = subprocess.run([sys.executable, "-c", code, fmt, str(trace)], capture_output=True,
                       text=True, check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_JIT": "numba"})
    got = json.loads(r.stdout)
    return None if got is None else (float(got[0]), float(got[1]))


def module_files() -> int:
    """Files a rank opens to import what a merge imports (the metadata server's load)."""
    code = ("import sys, partrace.cli, partrace.engine.pipeline, partrace.engine.windows, "
            "partrace.output.hdf5_sink, h5py, numba, mpi4py.MPI; "
            "print(sum(1 for m in list(sys.modules.values()) if getattr(m, '__file__', None)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    return int(r.stdout.strip()) if r.returncode == 0 else 1000


def print_case(name: str, case: dict, ranks: list[int]) -> bool:
    runs = case["runs"]
    one = runs[ranks[0]]
    print(f"\n### {name}\n")
    print("E(P) and the busiest rank's excess over the mean busy time ('-': under 1 ms at "
          "1 rank):\n")
    print("| phase | busy(1) s | " + " | ".join(f"P={p}" for p in ranks) + " |")
    print("|---|---:|" + "---:|" * len(ranks))
    for phase in sm.PHASES + [None]:
        cells = [f"{sm.efficiency(one, runs[p], phase):.2f} +{sm.excess(runs[p], phase):.0%}"
                 if sm.busy(one, phase).sum() >= 0.001 else f"- +{sm.excess(runs[p], phase):.0%}"
                 for p in ranks]
        print(f"| {phase or 'total'} | {sm.busy(one, phase).sum():.3f} | " + " | ".join(cells)
              + " |")
    tops = [(p, *sm.busiest(runs[p])) for p in ranks if p > 1]
    if tops:
        print("\nThe busiest rank over the whole run, and rank 0, over the mean busy time: "
              + "; ".join(f"P={p}: rank {r} +{x:.0%}, rank 0 {z:+.0%}" for p, r, x, z in tops))
    print("\nPer rank, the one that moves the most: MB sent + received / messages:\n")
    print("| phase | " + " | ".join(f"P={p}" for p in ranks) + " |")
    print("|---|" + "---:|" * len(ranks))
    for phase in sm.PHASES + [None]:
        cells = [sm.traffic(runs[p], phase) for p in ranks]
        if any(c[1] for c in cells):
            print(f"| {phase or 'total'} | " + " | ".join(f"{b / 1e6:.2f} / {m:.0f}"
                                                         for b, m in cells) + " |")
    base = case["digest"][ranks[0]]
    ok = all(d == base for d in case["digest"].values())
    print(f"\nsame data at every P: {'yes' if ok else 'NO'} "
          f"({', '.join(f'{p}: {d}' for p, d in case['digest'].items())})")
    return ok


def print_model(name: str, case: dict, kind: str, rates: sm.Rates, targets: list[int],
                input_bytes: int, model_bytes: float) -> None:
    """The model's table (``case["listing"]``: listing_seconds', grown into the plan)."""
    ranks = sorted(case["runs"])
    if kind == "h5c" and len([p for p in ranks if p > 1]) < 2:
        # one rank writes the serial path's way: the collective write's terms need two
        # rank counts of its own to be told apart (its work that divides from its fixed)
        print(f"\nNo model of {name}: it needs two rank counts above 1 (the collective "
              "write), with no more ranks than cores")
        return
    joined = kind == "h5"       # the default (single) layout: the parts joined
    size = case["bytes"][ranks[-1]]
    grow = model_bytes / input_bytes if model_bytes else 1.0
    runs = case["runs"]
    if kind == "h5c":   # fitted to the collective runs alone (one rank writes serially)
        runs = {p: r for p, r in runs.items() if p > 1}
    listing = case.get("listing")
    cost = sm.join_cost(runs[ranks[-1]], grow, [runs[p] for p in ranks[:-1]]) if joined else None
    rows = sm.model(runs, size, cost, rates, [1] + targets, grow, listing,
                   sm.filled_share(runs[ranks[-1]]) if joined else 1.0)
    print(f"\nModel of {name} (output {size / 1e6:.1f} MB), for an input of "
          f"{input_bytes * grow / 1e9:,.4g} GB, seconds on the busiest rank:\n")
    if listing:     # a step of the plan that the measured runs' fit cannot see grow
        print(f"The plan lists the files in parts, a stretch of their bytes a rank: "
              f"{listing[0]:.3g} s of CPU for all of them on one rank here, {listing[1]:.3g} s "
              "on the busiest of 8; a P-th of it grown with the input.\n")
    print("| step | P=1 | " + " | ".join(f"P={p}" for p in targets) + " |")
    print("|---|---:|" + "---:|" * len(targets))
    for step, secs in rows:
        print(f"| {step} | " + " | ".join(f"{s:.4g}" for s in secs) + " |")
    total = rows[-1][1]
    print("| modelled E(P) | 1.00 | " + " | ".join(
        f"{total[0] / (p * t):.3g}" for p, t in zip(targets, total[1:])) + " |")
    if joined:      # the same run without rank 0's join, at the serial path's write CPU
        # (the collective write's own is the h5c case's: HDF5's filter pipeline)
        join = [a + b for a, b in zip(dict(rows)[sm.JOIN_PLACE], dict(rows)[sm.JOIN_FILL])]
        print("| modelled E(P) without the join | 1.00 | " + " | ".join(
            f"{total[0] / (p * (t - j)):.3g}"
            for p, t, j in zip(targets, total[1:], join[1:])) + " |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=2, help="size of each generated trace (MB, "
                    "about; default 2: a few minutes in all; 200 for a real run)")
    ap.add_argument("--ranks", default="1,2,4,8,16,32", help="rank counts (the first is the "
                    "baseline: 1)")
    ap.add_argument("--formats", default="otf,dumpi,ovni,ross,otf2")
    ap.add_argument("--outputs", default="h5,otf")
    ap.add_argument("--wall-rounds", type=int, default=3,
                    help="rounds of 1 rank, 2 ranks and two 1-rank runs side by side for the "
                         "wall time (0: skip)")
    ap.add_argument("--memory", help="--memory of every merge (default: partrace's; smaller "
                    "makes more windows)")
    ap.add_argument("--model-ranks", default="32,256,1024")
    ap.add_argument("--model-gb", type=float, default=1000,
                    help="input size (GB) of the modelled runs (default 1,000: a 1 TB trace; "
                         "0: the measured trace's size)")
    ap.add_argument("--net-gbs", type=float, default=5.0,
                    help="GB/s one rank sends (and receives) at once (default 5)")
    ap.add_argument("--net-latency-us", type=float, default=2.0, help="µs a message")
    ap.add_argument("--fs-read-gbs", type=float, default=2.0,
                    help="GB/s one client reads from the file system (default 2)")
    ap.add_argument("--fs-write-gbs", type=float, default=1.0,
                    help="GB/s one client writes (default 1)")
    ap.add_argument("--fs-opens", type=float, default=20000,
                    help="file opens per second the metadata server serves (default 20,000)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/partrace-bench-scaling"),
                    help="traces (kept, per size) and outputs (removed)")
    bench_results.add_option(ap, "bench_scaling")
    args = ap.parse_args(argv)
    with bench_results.recorded("bench_scaling", argv, args.results):
        return measure(args)


def measure(args) -> int:
    ranks = [int(x) for x in args.ranks.split(",")]
    EXTRA[:] = ["--memory", args.memory] if args.memory else []
    targets = [int(x) for x in args.model_ranks.split(",")]
    rates = sm.Rates(args.net_gbs * 1e9, args.net_latency_us * 1e-6, args.fs_read_gbs * 1e9,
                     args.fs_write_gbs * 1e9, args.fs_opens, module_files())
    traces = args.workdir / f"traces-{args.mb:g}mb-{UNITS}u"
    warm(args.formats.split(","))
    print(f"memory {args.memory or 'default'}; ranks {args.ranks} on {os.cpu_count()} cpus; "
          f"traces of about {args.mb:g} MB, {UNITS} units each; "
          f"model: {args.net_gbs:g} GB/s and {args.net_latency_us:g} µs a message per rank, "
          f"a client reads {args.fs_read_gbs:g} and writes {args.fs_write_gbs:g} GB/s, "
          f"{args.fs_opens:,.0f} opens/s, {rates.modules} module files a rank")
    all_same = True
    for fmt in args.formats.split(","):
        trace = generate(fmt, args.mb, traces)
        size = trace_bytes(trace)
        listing = listing_seconds(fmt, trace)      # the trace's, whatever the output
        for kind in args.outputs.split(","):
            name = f"{fmt} ({size / 1e6:.1f} MB) -> {kind}"
            case = measure_case(trace, kind, ranks, args.workdir / "out")
            case["listing"] = listing
            # every rank count's accounts of the case, kept: the model can be fitted again
            # (other rates, sizes, rank counts) without running the merges again
            kept = args.workdir / "accounts" / f"{args.mb:g}mb-{fmt}-{kind}.json"
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps({"name": name, "input_bytes": size, **case}))
            all_same &= print_case(name, case, ranks)
            if kind == "h5c" and max(ranks) > (os.cpu_count() or 1):
                print(f"\n(h5c beyond {os.cpu_count()} ranks: a rank waiting inside HDF5's "
                      "collective write counts as busy, polling for a core; not a cost "
                      "of its own there)")
            if args.wall_rounds > 0:
                wall = wall_pair(trace, kind, args.wall_rounds, args.workdir / "out")
                one = case["runs"].get(1)
                print_wall(args.wall_rounds, wall, divisible_seconds(one) if one else None,
                           case["walls"].get(1))
            print_model(name, case, kind, rates, targets, size, args.model_gb * 1e9)
    print(f"\nidentity across rank counts: {'every output the same' if all_same else 'FAILED'}")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Reading a small time window of merged HDF5 files: what the chunk size costs a reader.

    python scripts/bench_h5window.py OUT.h5 [OUT.h5 ...] [--rows 1000] [--repeat 7]

A window reads whole chunks of every column (HDF5 decompresses a chunk whole),
so longer chunks cost a small window more.  For each file: the events table's
chunk rows, then the best of ``--repeat`` runs (each in a fresh process state:
the file reopened, HDF5's chunk cache empty) of
``partrace.open(OUT).to_pandas(time=(t0, t1))`` for a window of about
``--rows`` rows in the middle of the trace, and of the same with only
``time, location, kind`` columns.  The page cache is warm (the first run warms
it): this is decompression and HDF5's work, not the disk.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import bench_results

ROOT = Path(__file__).resolve().parent.parent


def window(path: Path, rows: int) -> tuple[int, int]:
    import h5py
    with h5py.File(path, "r") as f:
        t = f["events/time"]
        mid = t.shape[0] // 2
        lo, hi = t[mid], t[min(t.shape[0] - 1, mid + rows)]
    return int(lo), int(hi)


def best(fn, repeat: int) -> float:
    out = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=7)
    bench_results.add_option(ap, "bench_h5window")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import h5py

    import partrace
    with bench_results.recorded("bench_h5window", argv, args.results):
        print("| file | chunk rows | window rows | all columns ms | time,location,kind ms |")
        print("|---|---|---|---|---|")
        for path in args.files:
            t0, t1 = window(path, args.rows)
            with h5py.File(path, "r") as f:
                chunk = f["events/time"].chunks[0]
            n = len(partrace.open(path).to_pandas(time=(t0, t1)))
            full = best(lambda: partrace.open(path).to_pandas(time=(t0, t1)), args.repeat)
            few = best(lambda: partrace.open(path).to_pandas(
                columns=["time", "location", "kind"], time=(t0, t1)), args.repeat)
            print(f"| {path} | {chunk} | {n} | {full * 1e3:.1f} | {few * 1e3:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

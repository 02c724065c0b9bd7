#!/usr/bin/env python3
"""The index of layout "parts": rank 0's virtual datasets over every rank's part.

    python scripts/bench_parts_index.py [--ranks 32,256] [--windows 8,130] [--rows 1000]

The index lays each rank's rows out in global order, which takes them window by window:
W x P blocks a column.  For each (P, W) this writes P part files of one int64 column
(W x --rows rows each) in a scratch folder, then its index twice, reading each back:

  per block   one mapping per block, as h5py's ``VirtualLayout`` makes them (the baseline)
  per part    partrace's index (formats/hdf5/virtual.py): one mapping per part, the union
              of its blocks

and prints, for each, the seconds to write the index, to open it, to read 1,000 rows in the
middle and to read it all, with per part / per block; both read back equal to the rows the
parts hold.  A merge writes one such dataset per column (23 for OTF's events).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import bench_results

ROOT = Path(__file__).resolve().parent.parent


def per_block(parent, name: str, blocks, shard_rows: dict) -> None:
    import h5py
    import numpy as np
    total = sum(n for _, _, n in blocks)
    layout = h5py.VirtualLayout(shape=(total,), dtype=np.int64)
    at = 0
    for fname, first, n in blocks:
        src = h5py.VirtualSource(fname, "x", shape=(shard_rows[fname],))
        layout[at:at + n] = src[first:first + n]
        at += n
    parent.create_virtual_dataset(name, layout)


def per_part(parent, name: str, blocks, shard_rows: dict) -> None:
    import numpy as np

    from partrace.formats.hdf5 import virtual
    virtual.create(parent, name, np.int64, (), blocks, shard_rows, "x")


def measure(folder: Path, make, blocks, shard_rows: dict, expected) -> tuple[float, ...]:
    import h5py
    import numpy as np

    from partrace.formats.hdf5.layout import LIBVER
    path = folder / "index.h5"
    t0 = time.perf_counter()
    with h5py.File(path, "w", libver=LIBVER) as f:
        make(f, "x", blocks, shard_rows)
    t1 = time.perf_counter()
    with h5py.File(path, "r") as f:
        ds = f["x"]
        t2 = time.perf_counter()
        mid = len(expected) // 2
        middle = ds[mid:mid + 1000]
        t3 = time.perf_counter()
        every = ds[:]
        t4 = time.perf_counter()
    assert np.array_equal(middle, expected[mid:mid + 1000]) and np.array_equal(every, expected)
    return t1 - t0, t2 - t1, t3 - t2, t4 - t3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", default="32,256", help="P values (default: 32,256)")
    ap.add_argument("--windows", default="8,130", help="W values (default: 8,130)")
    ap.add_argument("--rows", type=int, default=1000, help="rows per block (default: 1000)")
    bench_results.add_option(ap, "bench_parts_index")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import h5py
    import numpy as np
    n = args.rows
    with bench_results.recorded("bench_parts_index", argv, args.results):
        print(f"h5py {h5py.__version__}, HDF5 {h5py.version.hdf5_version}; {n} rows a block; "
              "seconds, and per part / per block")
        print()
        print("| P | W | mappings per part / per block | write index | open | "
              "1,000 rows | all rows |")
        print("|---:|---:|---|---|---|---|---|")
        for p in (int(v) for v in args.ranks.split(",")):
            for w in (int(v) for v in args.windows.split(",")):
                with tempfile.TemporaryDirectory(prefix="bench-parts-") as tmp:
                    folder = Path(tmp)
                    shard_rows = {}
                    for r in range(p):      # part r holds its W blocks, values r*W*n ...
                        fname = f"rank-{r:05d}.h5"
                        with h5py.File(folder / fname, "w") as f:
                            f["x"] = np.arange(w * n, dtype=np.int64) + r * w * n
                        shard_rows[fname] = w * n
                    blocks = [(f"rank-{r:05d}.h5", k * n, n) for k in range(w) for r in range(p)]
                    expected = np.concatenate([np.arange(n, dtype=np.int64) + r * w * n + k * n
                                               for k in range(w) for r in range(p)])
                    old = measure(folder, per_block, blocks, shard_rows, expected)
                    new = measure(folder, per_part, blocks, shard_rows, expected)
                cells = " | ".join(f"{b:.4f} / {a:.4f} ({b / a:.2f})" if a > 0 else f"{b:.4f}"
                                   for a, b in zip(old, new))
                print(f"| {p} | {w} | {p} / {w * p} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

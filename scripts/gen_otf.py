#!/usr/bin/env python3
"""Write a synthetic multi-stream OTF trace of any size through partrace's OTF writer.

    python scripts/gen_otf.py OUT.otf --processes 16 --streams 4 --events 4000000

Each process runs iterations of: Enter compute, a counter sample, Leave
compute, Enter MPI_Send, a message to the next process, Leave, Enter
MPI_Recv, the matching receive, Leave (9 records), with random durations.
Rows are built with numpy, one stream at a time, so memory follows the
largest stream, not the trace.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from partrace.model import Definitions, Kind, Table  # noqa: E402

PATTERN = [  # (kind, region)
    (Kind.ENTER, 2), (Kind.COUNTER, 0), (Kind.LEAVE, 2),
    (Kind.ENTER, 3), (Kind.SEND, 0), (Kind.LEAVE, 3),
    (Kind.ENTER, 4), (Kind.RECV, 0), (Kind.LEAVE, 4),
]
REGIONS = {1: "main", 2: "compute", 3: "MPI_Send", 4: "MPI_Recv"}
COMM = 1


def definitions(nproc: int) -> Definitions:
    ids = np.arange(1, nproc + 1, dtype=np.int64)
    obj = lambda xs: np.array(list(xs), dtype=object)  # noqa: E731
    return Definitions("generated", tables={
        "locations": Table({"id": ids, "name": obj(f"Process {i - 1}" for i in ids),
                            "parent": np.zeros(nproc, np.int64)}),
        "regions": Table({"id": np.array(list(REGIONS), np.int64), "name": obj(REGIONS.values()),
                          "group": np.array([1, 1, 2, 2], np.int64)}),
        "region_groups": Table({"id": np.array([1, 2], np.int64), "name": obj(["Application", "MPI"])}),
        "communicators": Table({"id": np.array([COMM], np.int64), "name": obj(["MPI_COMM_WORLD"])}),
        "communicator_members": Table({"comm": np.full(nproc, COMM, np.int64), "location": ids}),
        "counters": Table({"id": np.array([1], np.int64), "name": obj(["PAPI_TOT_INS"]),
                           "unit": obj(["#"]), "group": np.zeros(1, np.int64)}),
    }, attrs={"generator": "scripts/gen_otf.py"}, source=None)


def process_rows(p: int, nproc: int, iterations: int, rng) -> dict[str, np.ndarray]:
    k = len(PATTERN)
    n = iterations * k + 2
    kinds = np.empty(n, np.uint8)
    region = np.zeros(n, np.int64)
    kinds[0], region[0] = Kind.ENTER, 1
    kinds[-1], region[-1] = Kind.LEAVE, 1
    kinds[1:-1] = np.tile([int(x) for x, _ in PATTERN], iterations)
    region[1:-1] = np.tile([r for _, r in PATTERN], iterations)
    time = np.cumsum(rng.integers(50, 5000, n)).astype(np.int64) + 1_000_000
    peer = np.zeros(n, np.int64)
    send, recv = kinds == Kind.SEND, kinds == Kind.RECV
    peer[send] = p % nproc + 1
    peer[recv] = (p - 2) % nproc + 1
    size = np.where(send | recv, 1024 * (1 + np.arange(n) % 8), 0).astype(np.uint64)
    counter = np.where(kinds == Kind.COUNTER, 1, 0).astype(np.int64)
    value = np.where(counter == 1, np.cumsum(rng.integers(1000, 100000, n)), 0).astype(np.uint64)
    return {"time": time, "location": np.full(n, p, np.int64), "seq": np.arange(n, dtype=np.int64),
            "kind": kinds, "region": region, "peer": peer, "tag": np.where(send | recv, 7, 0),
            "comm": np.where(send | recv, COMM, 0).astype(np.int64), "size": size,
            "counter": counter, "value": value}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("output", help="NAME.otf")
    ap.add_argument("--processes", type=int, default=16)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--events", type=int, default=1_000_000, help="total records (about)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    from partrace.formats.otf import writer
    from tests.support.otf_write import write_stream

    out = Path(args.output)
    if out.suffix != ".otf":
        raise SystemExit("output must be named NAME.otf")
    out.parent.mkdir(parents=True, exist_ok=True)
    stub = out.with_suffix("")
    defs = definitions(args.processes)
    smap = writer.stream_map(list(range(1, args.processes + 1)), args.streams)
    iterations = max(1, args.events // (args.processes * len(PATTERN)))
    total = 0
    for s, procs in smap.items():
        parts = [process_rows(p, args.processes, iterations, np.random.default_rng([args.seed, p]))
                 for p in procs]
        cols = {c: np.concatenate([x[c] for x in parts]) for c in parts[0]}
        order = np.lexsort((cols["seq"], cols["location"], cols["time"]))
        table = Table({c: v[order] for c, v in cols.items()})
        write_stream(stub, s, {"events": table}, defs)
        total += len(table)
    writer.write_global(stub, defs, smap)
    size = sum(f.stat().st_size for f in out.parent.glob(stub.name + ".*"))
    print(f"{out}: {total:,} records, {args.processes} processes on {len(smap)} streams, "
          f"{size / 1e6:,.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

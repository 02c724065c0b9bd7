#!/usr/bin/env python
"""Write a synthetic DUMPI trace: N ranks x M calls (ring Isend/Irecv/Waitall,
Allreduce, Barrier between Init and Finalize) for benchmarks.

    python scripts/gen_dumpi.py OUTDIR --ranks 4 --calls 100000

Records are encoded once per pattern and stamped with times by numpy, so
generating millions of calls takes seconds.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))    # tests.support

from tests.support.dumpi_encode import (BY_NAME, Call, encode_call, rank_path,  # noqa: E402
                                        write_meta, write_rank)

MASK = 0x4F          # thread, cpu and wall times, statuses (libdumpi's default)
WALL0 = 700          # wall offset (s); stored seconds are biased by it
STEP = 1500          # ns between call boundaries


def pattern(rank: int, n: int) -> list[Call]:
    right, left = (rank + 1) % n, (rank - 1) % n
    st = [(64, left, 0, 0, 7), (0, -2, 0, 0, -1)]
    return [
        Call("MPI_Irecv", dict(count=16, datatype=9, source=left, tag=7, comm=2, request=2)),
        Call("MPI_Isend", dict(count=16, datatype=9, dest=right, tag=7, comm=2, request=3)),
        Call("MPI_Waitall", dict(count=2, requests=[2, 3], statuses=st)),
        Call("MPI_Allreduce", dict(count=1, datatype=14, op=3, comm=2)),
        Call("MPI_Barrier", dict(comm=2)),
    ]


def stamp(records: list[bytes], m: int, rank: int) -> tuple[bytes, np.ndarray]:
    """m records cycling through ``records`` with increasing cpu/wall times."""
    lens = np.array([len(r) for r in records])
    which = np.arange(m) % len(records)
    start = np.concatenate([[0], np.cumsum(lens[which])[:-1]])
    buf = np.frombuffer(b"".join(records), np.uint8)
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]])
    idx = (offs[which][:, None] + np.arange(lens.max())[None, :])
    keep = np.arange(lens.max())[None, :] < lens[which][:, None]
    out = np.zeros(int(lens[which].sum()), np.uint8)
    out[(start[:, None] + np.arange(lens.max())[None, :])[keep]] = buf[idx[keep]]
    t_in = 10**9 + np.arange(m, dtype=np.int64) * 2 * STEP + rank * 37
    t_out = t_in + STEP
    # time blocks after label, mask, thread (5 bytes): cpu at 5, wall at 17; each block is
    # u16 sec, u32 ns (entry) then u16 sec, u32 ns (exit).  Stored seconds are biased by
    # the file's offsets (cpu 0, wall WALL0), so both blocks store t // 1e9 here.
    for at, t in ((5, t_in), (11, t_out), (17, t_in), (23, t_out)):
        sec = (t // 10**9).astype(">u2").view(np.uint8).reshape(-1, 2)
        ns = (t % 10**9).astype(">u4").view(np.uint8).reshape(-1, 4)
        for k in range(2):
            out[start + at + k] = sec[:, k]
        for k in range(4):
            out[start + at + 2 + k] = ns[:, k]
    return out.tobytes(), which


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--calls", type=int, default=10000, help="calls per rank")
    ap.add_argument("--prefix", default="synth")
    a = ap.parse_args()
    a.outdir.mkdir(parents=True, exist_ok=True)
    write_meta(a.outdir, a.prefix, a.ranks)
    for r in range(a.ranks):
        pat = pattern(r, a.ranks)
        recs = [encode_call(c, MASK, 0, 0) for c in pat]      # times stamped below
        body, which = stamp(recs, max(0, a.calls - 2), r)
        first = encode_call(Call("MPI_Init", {"argv": ["synth"]}, wall=(WALL0 * 10**9,) * 2),
                            MASK, 0, WALL0)
        t_end = 10**9 + a.calls * 2 * STEP
        last = encode_call(Call("MPI_Finalize", {}, wall=(WALL0 * 10**9 + t_end,) * 2,
                                cpu=(t_end, t_end)), MASK, 0, WALL0)
        counts = {BY_NAME[c.name][0]: int((which == i).sum()) for i, c in enumerate(pat)}
        counts[BY_NAME["MPI_Init"][0]] = counts[BY_NAME["MPI_Finalize"][0]] = 1
        write_rank(rank_path(a.outdir, a.prefix, r), [], mask=MASK, wall_offset=WALL0,
                   stream=first + body + last, counts=counts)
    print(f"wrote {a.ranks} ranks x {a.calls} calls to {a.outdir}")


if __name__ == "__main__":
    main()

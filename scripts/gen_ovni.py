#!/usr/bin/env python3
"""Write a synthetic ovni trace (layout v3, as libovni >= 1.11 writes it).

L looms x P processes x T threads, E events per thread stream: OHx first, OHe
last, and between them MPI enter/leave pairs (MS, MR, MAr), nanos6 task
execute/end pairs with a u32 task id, burst events and, now and then, a jumbo
task-type creation (6Yc).  Streams are built with numpy (no Python loop per
event), so millions of events take seconds.

    python scripts/gen_ovni.py OUT --looms 2 --procs 2 --threads 4 --events 100000
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

# A vocabulary of "items": short event sequences that are emitted together.
# Each event: (first byte, MCV, payload kind); payload kinds: "" none,
# "task" u32 task id, "jumbo" the 6Yc label below.
ITEMS = [
    ([(0x00, "OB.", "")], 0.15),
    ([(0x00, "MS[", ""), (0x00, "MS]", "")], 0.2),
    ([(0x00, "MR[", ""), (0x00, "MR]", "")], 0.2),
    ([(0x00, "MAr", ""), (0x00, "MAR", "")], 0.1),
    ([(0x03, "6Tx", "task"), (0x03, "6Te", "task")], 0.349),
    ([(0x13, "6Yc", "jumbo")], 0.001),
]
LABEL = b"\x01\x00\x00\x00synthetic task type\x00"
JUMBO_EVENT = 16 + len(LABEL)


def stream_bytes(n_events: int, cpu: int, tag: int, rng: np.random.Generator,
                 t0: int) -> bytes:
    """One stream: header, OHx, ~n_events - 2 vocabulary events, OHe."""
    evs = [ev for item, _ in ITEMS for ev in item]
    first_ev = np.cumsum([0] + [len(item) for item, _ in ITEMS])[:-1]
    item_len = np.array([len(item) for item, _ in ITEMS])
    probs = np.array([p for _, p in ITEMS])
    body = max(n_events - 2, 0)
    items = rng.choice(len(ITEMS), size=body, p=probs / probs.sum())
    lens = item_len[items]
    items = items[np.cumsum(lens) <= body]
    lens = item_len[items]
    within = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
    types = np.repeat(first_ev[items], lens) + within
    types = np.concatenate([types, np.full(body - len(types), 0, np.int64)])   # pad with OB.

    sizes = np.array([JUMBO_EVENT if k == "jumbo" else (16 if k == "task" else 12)
                      for _, _, k in evs])[types]
    sizes = np.concatenate([[28], sizes, [12]])
    offs = 8 + np.concatenate([[0], np.cumsum(sizes)[:-1]])
    buf = np.zeros(int(offs[-1] + sizes[-1]), np.uint8)
    buf[:8] = np.frombuffer(b"ovni\x01\x00\x00\x00", np.uint8)
    head = np.array([[f, *mcv.encode()] for f, mcv, _ in evs], np.uint8)
    codes = np.concatenate([[-1], types, [-2]])
    # event headers (first byte + MCV) by type
    all_heads = np.concatenate([head, np.array([[0x0F, *b"OHx"], [0x00, *b"OHe"]], np.uint8)])
    heads = all_heads[np.where(codes == -1, len(evs), np.where(codes == -2, len(evs) + 1, codes))]
    buf[offs[:, None] + np.arange(4)] = heads
    clocks = t0 + np.cumsum(rng.integers(20, 2000, len(offs))).astype(np.uint64)
    buf[offs[:, None] + 4 + np.arange(8)] = clocks.astype("<u8").view(np.uint8).reshape(-1, 8)
    ohx = np.array([(cpu, -1, tag)], "<i4,<i4,<u8").tobytes()     # cpu, creator tid, tag
    buf[offs[0] + 12:offs[0] + 28] = np.frombuffer(ohx, np.uint8)
    kinds = np.array([k for _, _, k in evs])
    for k in ("task", "jumbo"):
        sel = np.flatnonzero(np.isin(types, np.flatnonzero(kinds == k))) + 1
        o = offs[sel]
        if k == "task":
            ids = (np.arange(len(sel)) // 2 + 1).astype("<u4")
            buf[o[:, None] + 12 + np.arange(4)] = ids.view(np.uint8).reshape(-1, 4)
        elif len(sel):
            data = np.frombuffer(np.uint32(len(LABEL)).astype("<u4").tobytes() + LABEL, np.uint8)
            buf[o[:, None] + 12 + np.arange(len(data))] = data
    return buf.tobytes()


def write_trace(out: Path, looms: int, procs: int, threads: int, events: int, seed: int = 1,
                offsets: bool = False) -> Path:
    """Write the trace under ``out/ovni`` and return that folder."""
    rng = np.random.default_rng(seed)
    root = out / "ovni"
    for lm in range(looms):
        loom = f"node{lm}.synthetic"
        for p in range(procs):
            pid = 10_000 + 1_000 * p
            for t in range(threads):
                tid = pid + t
                cpu = p * threads + t
                o = {"lib": {"version": "1.14.0", "commit": "synthetic"}, "part": "thread",
                     "tid": tid, "pid": pid, "loom": loom, "app_id": 1,
                     "require": {"ovni": "1.1.0", "mpi": "1.0.0", "nanos6": "1.0.0"}}
                if t == 0:
                    o.update(rank=lm * procs + p, nranks=looms * procs)
                    if p == 0:
                        o["loom_cpus"] = [{"index": i, "phyid": i} for i in range(procs * threads)]
                o["finished"] = 1
                d = root / f"loom.{loom}" / f"proc.{pid}" / f"thread.{tid}"
                d.mkdir(parents=True, exist_ok=True)
                (d / "stream.json").write_text(json.dumps({"version": 3, "ovni": o}, indent=4))
                (d / "stream.obs").write_bytes(
                    stream_bytes(events, cpu, 0x1000 * (p + 1) + t, rng, 10**9 * (lm + 1)))
    if offsets:
        rows = [f"{'rank':<10} {'hostname':<20} {'offset_median':<20} {'offset_mean':<20} "
                "offset_std"]
        rows += [f"{lm:<10} {f'node{lm}':<20} {-10**9 * lm:<20} {-10**9 * lm:<20.6f} 0.000000"
                 for lm in range(looms)]
        (root / "clock-offsets.txt").write_text("\n".join(rows) + "\n")
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder to create the ovni/ trace folder in")
    ap.add_argument("--looms", type=int, default=1)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--events", type=int, default=1000, help="events per thread stream")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--offsets", action="store_true", help="also write ovni/clock-offsets.txt")
    a = ap.parse_args()
    root = write_trace(a.out, a.looms, a.procs, a.threads, a.events, a.seed, a.offsets)
    print(root)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Write a synthetic ROSS stats folder of realistic records, for benchmarks.

  gen_ross.py OUTDIR [--mb 300] [--kinds gvt,evtrace,model] [--pes 64] [--nkp 16] [--lps-per-pe 256]

Layouts are those of partrace.formats.ross.layouts (ROSS 8.1.1 as really written):
  gvt/rt:  per sampling round and PE, one block [PE, nkp x KP, lps-per-pe x LP] (GVT-flush order);
  evtrace: 24-byte header + 12 bytes of model data, rank blocks of events;
  model:   48-byte model record + 16 bytes (stats_type 1), one per LP and round.
Each file is about --mb megabytes; values are random but plausible (ids, monotone GVT).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from partrace.formats.ross import layouts as L


def engine_file(path: Path, mb: int, pes: int, nkp: int, lpp: int, rng, rt: bool):
    block = np.dtype([("pe", L.HEADER_DTYPES[L.PE]), ("kp", L.HEADER_DTYPES[L.KP], nkp),
                      ("lp", L.HEADER_DTYPES[L.LP], lpp)])
    rounds = max(1, mb * 2**20 // (block.itemsize * pes))
    b = np.zeros((rounds, pes), block)
    gvt = np.cumsum(rng.exponential(1.0, rounds))[:, None]
    rtime = 1000.0 + np.cumsum(rng.exponential(1e-3, (rounds, pes)), axis=0)
    pe_ids = np.arange(pes)[None, :]
    for part, code in (("pe", L.PE), ("kp", L.KP), ("lp", L.LP)):
        r = b[part]
        r["sample_type"] = code
        r["sample_size"] = L.HEADER_DTYPES[code].itemsize - 24
        vt = gvt if part == "pe" else gvt[..., None]
        r["virtual_time"] = vt
        r["real_time"] = rtime if part == "pe" else rtime[..., None]
        r["pe_id"] = pe_ids if part == "pe" else pe_ids[..., None]
        r["events_processed"] = rng.integers(0, 500, r.shape)
        r["events_rolled_back"] = rng.integers(0, 50, r.shape)
        r["efficiency"] = 100.0 * (1 - r["events_rolled_back"] / np.maximum(r["events_processed"], 1))
    b["kp"]["kp_id"] = np.arange(nkp)
    b["lp"]["kp_id"] = np.arange(lpp) % nkp
    b["lp"]["lp_id"] = pe_ids[..., None] * lpp + np.arange(lpp)
    b["pe"]["num_gvts"] = np.arange(rounds)[:, None]
    b.tofile(path)


def evtrace_file(path: Path, mb: int, pes: int, lpp: int, rng):
    dt = np.dtype(L.EVTRACE_HEADER + [("model", "u1", 12)])
    per = max(1, mb * 2**20 // dt.itemsize // pes)          # one rank block per PE
    n = per * pes
    r = np.zeros(n, dt)
    nlp = pes * lpp
    dest = (np.repeat(np.arange(pes), per) * lpp + rng.integers(0, lpp, n)) % nlp
    r["dest_lp"] = dest
    r["src_lp"] = np.where(rng.random(n) < 0.25, rng.integers(0, nlp, n), dest)
    t = np.sort(rng.uniform(0, 1000, (pes, per)), axis=1).ravel()
    r["send_vts"] = t
    r["recv_vts"] = t + 1 + rng.exponential(0.5, n)
    r["real_ts"] = 1500 + np.arange(n) * 1e-6
    r["model_data_sz"] = 12
    r["model"] = rng.integers(0, 256, (n, 12))
    r.tofile(path)


def model_file(path: Path, mb: int, pes: int, nkp: int, lpp: int, rng):
    dt = np.dtype(L.HEADERS[L.MODEL_GVT] + [("model", "u1", 16)])
    nlp = pes * lpp
    rounds = max(1, mb * 2**20 // (dt.itemsize * nlp))
    r = np.zeros((rounds, nlp), dt)
    r["sample_type"], r["sample_size"], r["stats_type"], r["model_size"] = 3, 24, 1, 16
    gvt = np.cumsum(rng.exponential(1.0, rounds))[:, None]
    r["gvt"], r["virtual_time"] = gvt, gvt + rng.exponential(1.0, r.shape)
    r["real_time"] = 1000.0 + np.arange(rounds)[:, None] * 1e-3
    lp = np.arange(nlp)
    r["lp_id"], r["pe_id"], r["kp_id"] = lp, lp // lpp, (lp % lpp) % nkp
    r["model"] = rng.integers(0, 256, r["model"].shape)
    r.tofile(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--mb", type=int, default=300, help="approximate size of each file")
    ap.add_argument("--kinds", default="gvt,evtrace,model")
    ap.add_argument("--pes", type=int, default=64)
    ap.add_argument("--nkp", type=int, default=16)
    ap.add_argument("--lps-per-pe", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    a.outdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    for kind in a.kinds.split(","):
        path = a.outdir / f"ross-stats-{kind}.bin"
        if kind in ("gvt", "rt"):
            engine_file(path, a.mb, a.pes, a.nkp, a.lps_per_pe, rng, kind == "rt")
        elif kind == "evtrace":
            evtrace_file(path, a.mb, a.pes, a.lps_per_pe, rng)
        elif kind == "model":
            model_file(path, a.mb, a.pes, a.nkp, a.lps_per_pe, rng)
        else:
            raise SystemExit(f"unknown kind {kind!r}")
        print(f"{path}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()

"""A synthetic format for the profile's tests (not shipped): many locations and regions,
random ENTER/LEAVE rows (so stacks nest deep, LEAVEs find no open region, regions stay
open at the end), and optionally each location's rows cut across every unit (a reader
that is not ``locations_in_one_unit``: the profile must join the units' fragments).

A trace is a JSON file ``{"wide": {"locations": L, "regions": R, "rows": N, "units": U,
"cut": true|false, "seed": S}}``; register it with
``PARTRACE_FORMATS=wide=tests.analysis.wide:Wide``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from partrace.formats.base import Format, TraceReader, Unit
from partrace.model import Definitions, Kind, Table, column


def spec(path) -> dict:
    return json.loads(Path(path).read_text())["wide"]


BLOCK = 512     # locations drawn together (one generator per block: fast at 20,000 locations)


def block_rows(s: dict, block: int) -> dict[str, np.ndarray]:
    """All rows of the locations BLOCK*block+1 ... (at most BLOCK of them), one row of each
    array per location, in order (the same whatever the units)."""
    rng = np.random.default_rng([s["seed"], block])
    n, m = s["rows"], min(BLOCK, s["locations"] - BLOCK * block)
    return {"time": np.cumsum(rng.integers(0, 50, (m, n)), axis=1),     # ties (0 steps) on purpose
            "kind": np.where(rng.random((m, n)) < 0.55, Kind.ENTER, Kind.LEAVE).astype(np.uint8),
            "region": rng.integers(1, s["regions"] + 2, (m, n))}  # id regions + 1: not defined


def location_rows(s: dict, loc: int) -> dict[str, np.ndarray]:
    b = block_rows(s, (loc - 1) // BLOCK)
    return {k: v[(loc - 1) % BLOCK] for k, v in b.items()}


class WideReader(TraceReader):
    format_name = "wide"

    def units(self):
        s = spec(self.path)
        return [Unit(f"{u:04d}", 1000, u) for u in range(s["units"])]

    def read_definitions(self, survey=None):
        s = spec(self.path)
        ids = np.arange(1, s["locations"] + 1, dtype=np.int64)
        regs = np.arange(1, s["regions"] + 1, dtype=np.int64)
        return Definitions("wide", {
            "locations": Table({"id": ids, "name": np.array([f"loc {i}" for i in ids], object),
                                "parent": np.zeros(len(ids), np.int64)}),
            "regions": Table({"id": regs, "name": np.array([f"region {i}" for i in regs], object),
                              "group": np.zeros(len(regs), np.int64)})}, {}, source={"spec": s})

    def schema(self, defs):
        return {"events": [column("time"), column("location"), column("seq"), column("kind"),
                           column("region")]}

    def decode(self, unit, defs):
        s = spec(self.path)
        u, nu, n = unit.info, s["units"], s["rows"]
        if s["cut"]:        # piece u of every location's rows
            bounds = np.linspace(0, n, nu + 1).astype(np.int64)
            lo, hi = int(bounds[u]), int(bounds[u + 1])
        else:               # the whole rows of the locations of this unit
            lo, hi = 0, n
        for block in range((s["locations"] + BLOCK - 1) // BLOCK):
            r = block_rows(s, block)
            locs = np.arange(BLOCK * block + 1, BLOCK * block + 1 + len(r["time"]))
            keep = np.ones(len(locs), bool) if s["cut"] else (locs - 1) % nu == u
            if not keep.any():
                continue
            locs = locs[keep]
            yield {"events": Table({
                "time": r["time"][keep, lo:hi].ravel(),
                "location": np.repeat(locs, hi - lo).astype(np.int64),
                "seq": np.tile(np.arange(lo, hi, dtype=np.int64), len(locs)),
                "kind": r["kind"][keep, lo:hi].ravel(), "region": r["region"][keep, lo:hi].ravel()})}


class Wide(Format):
    name = "wide"
    description = "synthetic profile test traces"

    @classmethod
    def sniff(cls, path):
        try:
            return path.is_file() and "wide" in json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError, OSError):
            return False

    @classmethod
    def open(cls, path, **options):
        return WideReader(path)


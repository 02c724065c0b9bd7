"""The profile on synthetic traces (tests/analysis/wide.py) with random ENTER/LEAVE rows:
each location's rows whole in one unit or cut across every unit; against a plain-Python
walk, the routed walk, on 1 and 3 ranks; and its memory at 20,000 locations x 5,000
regions (a dense locations x regions array would need 2.4 GB)."""
from __future__ import annotations

import csv
import io
import json
import tracemalloc

import numpy as np
import pytest

from partrace import analysis
from tests.analysis import wide
from tests.analysis.test_profile_comm import _walk_profile
from tests.conftest import SYNTH, run_cli

WIDE = "wide=tests.analysis.wide:Wide"


@pytest.fixture
def make(tmp_path, monkeypatch):
    monkeypatch.setenv("PARTRACE_FORMATS", WIDE)

    def make(locations=40, regions=9, rows=300, units=5, cut=True, seed=1):
        p = tmp_path / f"wide-{locations}-{regions}-{rows}-{units}-{cut}-{seed}.json"
        p.write_text(json.dumps({"wide": {"locations": locations, "regions": regions, "rows": rows,
                                          "units": units, "cut": cut, "seed": seed}}))
        return p
    return make


def _plain(path):
    """Per (location, region id) [calls, incl, excl] and the unmatched counts, by a walk in
    Python over every location's rows (an undefined region id reported as 0)."""
    s = wide.spec(path)
    per_loc, leave, enter = {}, 0, 0
    for loc in range(1, s["locations"] + 1):
        if (loc - 1) % wide.BLOCK == 0:
            block = wide.block_rows(s, (loc - 1) // wide.BLOCK)
        r = {k: v[(loc - 1) % wide.BLOCK] for k, v in block.items()}
        region = np.where(r["region"] > s["regions"], 0, r["region"])
        ev = {"time": r["time"], "kind": r["kind"], "region": region,
              "location": np.full(len(region), loc), "seq": np.arange(len(region))}
        out, un, op = _walk_profile(ev)
        leave, enter = leave + un, enter + op
        for reg, v in out.items():
            per_loc[(loc, reg)] = tuple(v)
    return per_loc, leave, enter


def _check(got, path):
    per_loc, leave, enter = _plain(path)
    assert got["unmatched"] == {"leave": leave, "enter": enter}
    assert {(r["location_id"], r["region_id"]): (r["calls"], r["inclusive_ns"], r["exclusive_ns"])
            for r in got["locations"]} == per_loc
    by_region, incl = {}, {}
    for (_, reg), v in per_loc.items():
        by_region[reg] = tuple(a + b for a, b in zip(by_region.get(reg, (0, 0, 0)), v))
        incl.setdefault(reg, []).append(v[1])
    assert {r["region_id"]: (r["calls"], r["inclusive_ns"], r["exclusive_ns"])
            for r in got["regions"]} == by_region
    assert {r["region_id"]: (r["locations"], r["inclusive_min_ns"], r["inclusive_max_ns"])
            for r in got["regions"]} == {reg: (len(v), min(v), max(v)) for reg, v in incl.items()}


@pytest.mark.parametrize("cut", [True, False])
def test_profile_equals_a_plain_walk_and_the_routed_walk(make, cut):
    path = make(cut=cut)
    got = analysis.profile(path, per_location=True)
    assert got["unmatched"]["leave"] and got["unmatched"]["enter"]     # the test means it
    _check(got, path)
    assert got == analysis.profile(path, per_location=True, exchange=True)


def test_profile_with_deep_stacks_across_many_units(make):
    """Stacks deeper than the first allocation and fragments longer than one row per unit."""
    path = make(locations=3, regions=4, rows=4000, units=40, seed=7)
    got = analysis.profile(path, per_location=True)
    _check(got, path)


@pytest.mark.mpi
@pytest.mark.parametrize("cut", [True, False])
def test_profile_cli_is_the_same_on_1_and_3_ranks(make, cut):
    path = make(cut=cut, units=7)
    env = {"PARTRACE_FORMATS": f"{SYNTH},{WIDE}"}
    outs = []
    for n in (None, 3):
        r = run_cli(["profile", str(path), "--csv", "--per-location"], nranks=n, env=env)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1]
    rows = list(csv.DictReader(io.StringIO(outs[0])))
    per_loc, _, _ = _plain(path)
    assert {(int(r["location_id"]), int(r["region_id"])): (int(r["calls"]), int(r["inclusive_ns"]),
                                                           int(r["exclusive_ns"])) for r in rows} == per_loc


def test_memory_stays_bounded_at_20000_locations_and_5000_regions(make):
    """Sums are kept per (location, region) pair that occurs, never locations x regions."""
    path = make(locations=20_000, regions=5_000, rows=24, units=3, cut=True, seed=5)
    dense = 20_000 * 5_001 * 8 * 3
    tracemalloc.start()
    try:
        analysis.profile(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200 << 20, f"peak {peak / 2**20:.0f} MiB"     # ~120 MiB: O(pairs that occur)
    assert peak < dense / 10
    got = analysis.profile(path, per_location=True)
    assert len(got["locations"]) > 20_000 and len(got["regions"]) > 4_000
    _check(got, path)


def test_ids_looked_up_by_binary_search_give_the_same_profile(make, monkeypatch):
    """Sparse ids (no lookup table): the binary-search path gives the same figures."""
    from partrace.analysis import regions
    from tests.analysis.test_profile_comm import TRACES
    paths = [make(cut=True), TRACES["otf-hybrid16"], TRACES["ovni-v3"]]
    want = [analysis.profile(p, per_location=True) for p in paths]
    monkeypatch.setattr(regions, "DENSE", -10**9)
    ids = np.array([3, 7, 1000, 10**12])
    idx = regions.IdIndex(ids)
    assert idx.table is None
    assert idx.of(np.array([7, 8, 10**12, 0, 3])).tolist() == [1, -1, 3, -1, 0]
    assert [analysis.profile(p, per_location=True) for p in paths] == want


@pytest.mark.parametrize("dense", [True, False])
def test_a_location_the_definitions_lack_is_an_error_not_a_stray_write(monkeypatch, dense):
    from partrace.analysis import regions
    from partrace.model import Definitions, Table
    if not dense:
        monkeypatch.setattr(regions, "DENSE", -10**9)
    defs = Definitions("t", {"locations": Table({"id": np.array([1, 2]), "name": np.array(["a", "b"], object),
                                                 "parent": np.zeros(2, np.int64)}),
                             "regions": Table({"id": np.array([5]), "name": np.array(["f"], object),
                                               "group": np.zeros(1, np.int64)})}, {})
    w = regions.Walker(defs)
    ev = Table({"time": np.array([1, 2, 3]), "location": np.array([1, 9, 2]),
                "kind": np.array([1, 2, 1], np.uint8), "region": np.array([5, 5, 5])})
    with pytest.raises(ValueError, match="location 9"):
        w.events(ev)

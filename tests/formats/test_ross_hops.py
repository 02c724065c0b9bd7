"""The hop units() keeps for each region's survey and decode on the same process: the
definitions and every table equal those of a reader that keeps none (every survey and
decode hops again) or only some (a budget that runs out part way), on every fixture cut in
small regions; the kept hops are dropped once used; a file cut short after units() is a
TraceError, not a read past its end."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.ross import ROSS
from partrace.formats.ross import reader as R
from tests.formats.test_ross import DATA, EVT_RUN, RUNS

REGION = 4096       # many regions per file


def everything(path, region_size=REGION):
    """(definitions' tables and attrs, every table of every unit) as the engine reads them:
    units, each unit surveyed, the surveys combined, then each unit decoded."""
    reader = ROSS.open(path, region_size=region_size)
    units = reader.units()
    kept = sum(s.nbytes + c.nbytes for _, s, c in reader._hops.values()), len(reader._hops)
    survey = None
    for u in units:
        s = reader.survey(u)
        survey = s if survey is None else reader.combine(survey, s)
    reader.start_after(None)
    defs = reader.read_definitions(survey)
    tables = [{n: t.columns for n, t in chunk.items()}
              for u in units for chunk in reader.decode(u, defs)]
    assert not reader._hops         # each kept hop was used once, then dropped
    return {n: t.columns for n, t in defs.tables.items()}, defs.attrs, tables, *kept, len(units)


def same(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("run", RUNS)
def test_kept_hops_change_nothing(run, monkeypatch):
    path = DATA / run / "stats"
    kept = everything(path)
    assert kept[4] == kept[5] > 1                   # every region's hop kept
    monkeypatch.setattr(R, "HOP_CACHE", 0)
    none = everything(path)
    assert none[4] == 0
    monkeypatch.setattr(R, "HOP_CACHE", kept[3] // 2)   # runs out part way
    some = everything(path)
    assert 0 < some[4] < some[5] and some[3] <= kept[3] // 2
    for other in (none, some):
        same(kept[:3], other[:3])


def test_a_file_cut_short_after_units_is_an_error(tmp_path):
    dst = tmp_path / "stats"
    shutil.copytree(DATA / EVT_RUN / "stats", dst)
    reader = ROSS.open(dst, region_size=REGION)
    units = reader.units()
    last = max((u for u in units if u.info["kind"] == "evtrace"), key=lambda u: u.info["end"])
    path = last.info["path"]
    with open(path, "r+b") as f:
        f.truncate(last.info["end"] - 1)
    with pytest.raises(TraceError, match="file changed since it was scanned"):
        reader.survey(last)

"""Ids are kept in 32 bits (model.ID): one that does not fit is refused, never wrapped."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from partrace.errors import LimitError
from partrace.model import Table, column, conform

from ..conftest import run_cli

DATA = Path(__file__).resolve().parents[1] / "data"


def test_cast_keeps_every_id_that_fits_and_refuses_the_first_that_does_not():
    loc = column("location")
    edge = np.array([1, 2**31 - 1, -2**31], np.int64)
    assert conform(Table({"location": edge}), [loc])["location"].tolist() == edge.tolist()
    for bad in (2**31, -2**31 - 1):
        with pytest.raises(LimitError, match=f"'location': value {bad} does not fit"):
            conform(Table({"location": np.array([1, bad], np.int64)}), [loc])
    big = np.array([2**31], np.uint64)
    with pytest.raises(LimitError):
        conform(Table({"region": big}), [column("region")])


def test_otf_function_id_above_31_bits_is_an_error_at_its_line(tmp_path):
    """A legal OTF function id (OTF ids are 32-bit unsigned) above partrace's limit."""
    trace = tmp_path / "t"
    shutil.copytree(DATA / "otf" / "ring8" / "trace", trace)
    d = trace / "ring8.0.def"
    d.write_text(d.read_text().replace('DF1G1NM"main"X2', 'DF80000000G1NM"main"X2'))
    first = None
    for f in sorted(trace.glob("*.events")):
        lines = f.read_text().split("\n")
        for i, line in enumerate(lines):
            new = re.sub(r"^([EL])1(X|$)", r"\g<1>80000000\2", line)
            if new != line and first is None and f.name == "ring8.1.events":
                first = i + 1
            lines[i] = new
        f.write_text("\n".join(lines))
    r = run_cli(["merge", str(trace / "ring8.otf"), "-o", str(tmp_path / "x.h5")])
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (f"partrace: error: {trace / 'ring8.1.events'}:line {first}: "
                                f"an id above 2**31-1 (partrace keeps ids in 32 bits)")
    assert not (tmp_path / "x.h5").exists()

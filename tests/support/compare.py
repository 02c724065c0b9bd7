"""Comparing partrace HDF5 outputs: every table, column and definition."""
from __future__ import annotations

import json

import h5py
import numpy as np

from partrace.formats.hdf5.layout import read_table


def h5_content(path) -> dict:
    """Everything a reader can see in a partrace HDF5 file, as plain values."""
    out = {}
    with h5py.File(path, "r") as f:
        out["attrs"] = {k: f.attrs[k] for k in f.attrs if k != "source"}
        for name in json.loads(f.attrs["tables"]) + ["locations", "regions"]:
            out[name] = read_table(f[name]).columns
        out["definitions"] = f["definitions"]["source"][()]
        out["definition_attrs"] = f["definitions"].attrs["attrs"]
    return out


def assert_same_content(a, b) -> None:
    ca, cb = h5_content(a), h5_content(b)
    assert ca.keys() == cb.keys()
    for key in ca:
        if isinstance(ca[key], dict) and key not in ("attrs",):
            assert list(ca[key]) == list(cb[key]), key
            for col in ca[key]:
                va, vb = ca[key][col], cb[key][col]
                assert va.dtype == vb.dtype, (key, col)
                assert va.shape == vb.shape, (key, col)
                assert all(x == y for x, y in zip(va, vb)) if va.dtype == object \
                    else np.array_equal(va, vb), (key, col)
        else:
            assert str(ca[key]) == str(cb[key]), key


def merge_on_rank_counts(trace, tmp_path, ranks=(None, 2, 4), extra=()):
    """Merge ``trace`` to HDF5 once per rank count; check every output has the same
    content and return the first (None = a plain process, no launcher)."""
    from tests.conftest import run_cli
    outs = []
    for n in ranks:
        out = tmp_path / f"o{n}.h5"
        r = run_cli(["merge", str(trace), "-o", str(out), "-q", *extra], nranks=n)
        assert r.returncode == 0, r.stderr
        outs.append(out)
    for out in outs[1:]:
        assert_same_content(outs[0], out)
    return outs[0]

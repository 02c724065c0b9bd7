"""model.take is values[index] whatever the column's shape and the index's kind: the OTF
sink and writer gather every stream's rows with it."""
from __future__ import annotations

import numpy as np
import pytest

from partrace.model import take

RNG = np.random.default_rng(5)
COLUMNS = {
    "u1": RNG.integers(0, 255, 1000).astype(np.uint8),
    "i8": RNG.integers(-2**40, 2**40, 1000),
    "payload": RNG.integers(0, 255, (1000, 16)).astype(np.uint8),
    "odd rows": RNG.integers(0, 255, (1000, 3)).astype(np.uint8),
    "pairs": RNG.integers(0, 2**31, (1000, 2)).astype(np.int32),
    "bytes": np.array([b"a%d" % i for i in range(1000)], "S6"),
    "objects": np.array([f"row {i}" for i in range(1000)], object),
    "strided": RNG.integers(0, 255, (1000, 16)).astype(np.uint8)[:, ::2],
}
INDEXES = {
    "ascending": np.sort(RNG.choice(1000, 300, replace=False)),
    "any order": RNG.integers(0, 1000, 500),
    "int32": RNG.integers(0, 1000, 50).astype(np.int32),
    "empty": np.zeros(0, np.int64),
    "slice": slice(10, 700),
    "mask": RNG.random(1000) < 0.3,
}


@pytest.mark.parametrize("index", INDEXES, ids=str)
@pytest.mark.parametrize("name", COLUMNS, ids=str)
def test_take_is_fancy_indexing(name, index):
    values, idx = COLUMNS[name], INDEXES[index]
    got, want = take(values, idx), values[idx]
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)

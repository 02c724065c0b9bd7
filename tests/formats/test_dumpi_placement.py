"""Placement of a chunk's event rows (kernels.extras_in_row_order, kernels.gather_rows)
against the definition, row by row: per call ENTER, its entry extras, its exit extras
(each in the order added), LEAVE; compiled and as plain Python."""
from __future__ import annotations

import numpy as np

from partrace.formats.dumpi.kernels import extras_in_row_order, gather_rows


def _by_definition(n, ecall, eorder, enter, leave, extra) -> list[int]:
    rows = []
    for c in range(n):
        rows.append(int(enter[0] if len(enter) == 1 else enter[c]))
        for o in (1, 2):
            rows += [int(extra[i]) for i in range(len(ecall)) if ecall[i] == c and eorder[i] == o]
        rows.append(int(leave[0] if len(leave) == 1 else leave[c]))
    return rows


def test_rows_are_placed_call_by_call_entry_extras_before_exit_extras(jit_mode):
    rng = np.random.default_rng(13)
    for trial in range(60):
        n, k = int(rng.integers(1, 30)), int(rng.integers(0, 50))
        ecall = rng.integers(0, n, k).astype(np.int64)
        eorder = rng.integers(1, 3, k).astype(np.int8)
        cnt = np.bincount(ecall, minlength=n).astype(np.int64)
        extra = rng.integers(-2**40, 2**40, k)
        # ENTER/LEAVE values per call, or one value for all (the kind column)
        enter = rng.integers(-9, 9, n if trial % 2 else 1)
        leave = rng.integers(-9, 9, 1 if trial % 3 else n)
        eperm = extras_in_row_order(ecall, eorder, cnt)
        out = np.empty(2 * n + k, np.int64)
        gather_rows(cnt, eperm, enter, leave, extra, out)
        assert out.tolist() == _by_definition(n, ecall, eorder, enter, leave, extra)
        # in narrower columns too (int32, int8: the widths events place)
        for dt in (np.int32, np.int8):
            small = np.empty(2 * n + k, dt)
            gather_rows(cnt, eperm, enter.astype(dt), leave.astype(dt), extra.astype(dt), small)
            assert small.tolist() == out.astype(dt).tolist()

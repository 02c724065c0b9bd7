"""Reading part of a partrace HDF5 table: some columns, a time window, some locations.

Rows are in (time, location, seq) order, so a time window is one row range,
found by bisecting the chunked ``time`` column (a few chunk reads); locations
are then picked from the ``location`` column of that range, and the other
columns are read only in the chunks that hold picked rows.
"""
from __future__ import annotations

import json

import numpy as np

from ...model import Table


def _bisect(ds, value: int, side: str) -> int:
    """First row whose time is >= value (side "left") or > value ("right")."""
    lo, hi = 0, ds.shape[0]
    step = (ds.chunks or (1024,))[0]
    while hi - lo > step:       # one element per probe: one chunk read
        mid = (lo + hi) // 2
        v = ds[mid]
        if v < value or (side == "right" and v == value):
            lo = mid + 1
        else:
            hi = mid
    return lo + int(np.searchsorted(ds[lo:hi], value, side=side))


def time_rows(group, time) -> tuple[int, int]:
    """The row range of ``t0 <= time < t1`` (either end None: open)."""
    rows = group["time"].shape[0] if "time" in group else int(group.attrs["rows"])
    if time is None:
        return 0, rows
    t0, t1 = time
    start = 0 if t0 is None else _bisect(group["time"], int(t0), "left")
    stop = rows if t1 is None else _bisect(group["time"], int(t1), "left")
    return start, max(start, stop)


def read_selection(group, columns: list[str] | None = None, time=None,
                   locations=None) -> Table:
    """Rows of a table group with ``t0 <= time < t1`` and ``location`` in ``locations``."""
    from .layout import read_column, read_table
    names = json.loads(group.attrs["columns"])
    wanted = names if columns is None else list(columns)
    unknown = [c for c in wanted if c not in names]
    if unknown:
        raise KeyError(f"{group.name}: no column {unknown[0]!r} (has {', '.join(names)})")
    if (time is not None or locations is not None) and "time" not in names:
        raise KeyError(f"{group.name}: not a table in time order (no time column)")
    start, stop = time_rows(group, time)
    if locations is None:
        return read_table(group, start, stop, wanted)
    loc = read_column(group["location"], start, stop)
    hit = np.isin(loc, np.asarray(list(locations), dtype=loc.dtype))
    step = group["location"].chunks[0] if group["location"].chunks else max(1, stop - start)
    # chunks (aligned to the file's) that hold a picked row: only those are read
    first = (start // step) * step
    edges = np.arange(first, stop + step, step)
    edges[0], edges[-1] = start, min(edges[-1], stop)
    edges = np.unique(np.clip(edges, start, stop))
    counts = np.add.reduceat(hit, edges[:-1] - start) if len(edges) > 1 else np.zeros(0, int)
    blocks = [(int(a), int(b)) for a, b, n in zip(edges[:-1], edges[1:], counts) if n]
    out = {}
    for name in wanted:
        if name == "location":
            out[name] = loc[hit]
            continue
        ds = group[name]
        parts = [read_column(ds, a, b)[hit[a - start:b - start]] for a, b in blocks]
        if parts:
            out[name] = np.concatenate(parts)
        else:
            out[name] = read_column(ds, 0, 0)
    return Table(out)

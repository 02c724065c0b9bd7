"""Tokens no record defines, kept as the OTF library keeps them: what one rank's decode met.

checks.py says which references are kept; here they are gathered for the run: per
definitions table the distinct ids, and per kind the first place one was met (unit,
file, line) with its warning.  The reader hands them on (found_definitions) as stand-in
definition rows, each named after its token (``function 0x2a``), in the columns of the
table it joins; a process (peer, root, origin) gets no row: the token stays in its column.
"""
from __future__ import annotations

import numpy as np

from ...model import Table
from ..base import Found
from .checks import TARGETS

FILE_ORDER = {"events": 0, "snaps": 1, "stats": 2, "marker": 3}     # in a unit, as decoded
NO_LOCATION = "locations"
# values of a stand-in row other than its id and name: OTF_UNKNOWN (-1) as a key's type,
# a counter of absolute values at points (OTF_COUNTER_TYPE_ABS | OTF_COUNTER_SCOPE_POINT)
STAND_IN = {("keys", "type"): 255, ("counters", "properties"): 1 | 4}


def warning(path, line: int, record: str, col: str, token: int) -> str:
    """The one line that says a kind of undefined reference is kept."""
    _, kw, what = TARGETS[col]
    where = f"{path}: line {line}" if line else f"{path}"
    if TARGETS[col][0] == NO_LOCATION:
        return (f"{where}: {record} names process {token:x} as its {col}, which no DP record "
                f"defines; kept as its token (no location), as the OTF library keeps it")
    return (f"{where}: {record} names {what} {token:x}, which no {kw} record defines; kept as "
            f"\"{stand_in_name(col, token)}\", as the OTF library keeps it")


def stand_in_name(col: str, token: int) -> str:
    return f"{TARGETS[col][2]} 0x{token:x}"


class Undefined:
    """One reader's undefined references on this rank, until found_definitions takes them."""

    def __init__(self):
        self.ids: dict[str, dict[int, str]] = {}        # table -> {id: its column}
        self.first: dict[str, tuple[tuple, str]] = {}   # kind -> (place, warning)
        self.tables: dict[str, Table] = {}              # the definitions' tables (columns)

    def add(self, col: str, tokens: np.ndarray, place) -> None:
        """`tokens` (distinct, undefined) of column `col`; `place()`: (unit key, file,
        line) and the warning, asked for the first of each kind only."""
        table, _, what = TARGETS[col]
        if table != NO_LOCATION:
            mine = self.ids.setdefault(table, {})
            for t in tokens.tolist():
                mine.setdefault(int(t), col)
        if what not in self.first:
            self.first[what] = place()

    def take(self) -> Found | None:
        """The stand-in rows and first places met so far, forgotten here."""
        if not self.ids and not self.first:
            return None
        rows = {t: _rows(self.tables[t], t, ids) for t, ids in self.ids.items() if ids}
        found = Found(rows, dict(self.first))
        self.ids, self.first = {}, {}
        return found


def _rows(like: Table, table: str, ids: dict[int, str]) -> Table:
    """Stand-in rows of `ids` ({id: the column that named it}) in the columns of `like`."""
    from .defs import with_counter_meaning
    keys = sorted(ids)
    names = np.array([stand_in_name(ids[i], i) for i in keys] or [], dtype=object)
    cols = {}
    for c in like.names:
        dt = np.asarray(like[c]).dtype
        if c == "id":
            cols[c] = np.array(keys, dtype=dt)
        elif dt == object:
            cols[c] = names if c == "name" else np.full(len(keys), "", dtype=object)
        else:
            cols[c] = np.full(len(keys), STAND_IN.get((table, c), 0), dtype=dt)
    out = Table(cols)
    if table == "counters":
        out = with_counter_meaning(out)
        out = Table({c: out[c] for c in like.names})
    return out

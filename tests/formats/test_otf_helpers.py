"""Shared helpers of the OTF tests: decode a whole trace, parse otfprint dumps."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from partrace.formats.otf import OTF
from partrace.model import Table

DATA = Path(__file__).resolve().parents[1] / "data" / "otf"


def decode_all(path, chunk: int | None = None):
    r = OTF.open(path)
    d = r.read_definitions()
    sch = r.schema(d)
    parts = {t: [] for t in sch}
    for u in r.units():
        kw = {"chunk": chunk} if chunk and u.key != "marker" else {}
        for ch in r.decode(u, d, **kw):
            assert set(ch) <= set(sch)
            for t, tab in ch.items():
                assert tab.names == [c.name for c in sch[t]]
                parts[t].append(tab)
    return r, d, {t: Table.concat(v, sch[t]) for t, v in parts.items()}


_LINE = re.compile(r"^\(#\d+\) \t(\d+) (\w+): (.*)$")
_DEF = re.compile(r"^\(#\d+\) \t?(Def\w+): (.*)$")
_PAIR = re.compile(r'([A-Za-z][A-Za-z_ ]*?) ("[^"]*"|-?\d[^,]*|[A-Z][A-Z_/0-9]*(?: <\d+>)?)(?:, |$)')


def fields(text: str) -> tuple[dict, list]:
    kv = []
    if ", KeyValue: " in text:
        text, kvs = text.split(", KeyValue: ", 1)
        kv = [tuple(x.split(":", 1)) for x in kvs.split(", ")]
    return {m.group(1): m.group(2).strip('"') if m.group(2).startswith('"') else m.group(2)
            for m in _PAIR.finditer(text)}, kv


def otfprint(path: Path):
    """(records, defs): records = [(ticks, type, fields, kv)], defs = [(type, fields, kv)]."""
    recs, defs = [], []
    for line in path.read_text().splitlines():
        m = _LINE.match(line)
        if m:
            f, kv = fields(m.group(3))
            recs.append((int(m.group(1)), m.group(2), f, kv))
            continue
        m = _DEF.match(line)
        if m:
            f, kv = fields(m.group(2))
            defs.append((m.group(1), f, kv, m.group(2)))
    return recs, defs


def per_location(tab: Table, cols: list[str]) -> dict[int, list[tuple]]:
    out = defaultdict(list)
    order = np.lexsort((tab["seq"], tab["location"]))
    data = [tab[c][order].tolist() for c in cols]
    for loc, *vals in zip(tab["location"][order].tolist(), *data):
        out[loc].append(tuple(vals))
    return dict(out)

"""Trace Event Format lines built as numpy byte strings, a chunk of rows at a time.

Each piece of a line is an array of byte strings (numbers converted by numpy's own
casts, names looked up in a table of JSON literals made once per definition) or a
constant; ``numpy.strings.add`` joins them element by element and ``text`` drops the
padding of the fixed-width result: no Python runs per row.  Every line but the first
of the file begins with ",\\n", so lines can be cut, reordered by location and
concatenated without a trailing comma anywhere.
"""
from __future__ import annotations

import functools
import json

import numpy as np
from numpy import strings as S

CHUNK = 1 << 16             # rows turned into text at once
NULL = b"null"              # a value JSON cannot hold (NaN, infinities)


def literals(names: list[str]) -> np.ndarray:
    """JSON string literals (ASCII, escaped) of ``names``, as a byte-string array (per
    definition, not per row)."""
    return np.array([json.dumps(str(n)).encode() for n in names] or [b'""'], dtype="S")


def integers(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.astype("S20" if a.dtype.kind == "u" else "S21")


def numbers(a: np.ndarray) -> np.ndarray:
    """Integers as they are; floats by numpy's shortest round-trip repr, null if not finite."""
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return integers(a.astype(np.uint64 if a.dtype.kind == "u" else np.int64))
    a = a.astype(np.float64)
    return np.where(np.isfinite(a), a.astype("S32"), NULL)


def quoted(a: np.ndarray) -> np.ndarray:
    """Integers as JSON strings (flow ids: JavaScript's numbers hold 53 bits)."""
    return join(b'"', integers(a), b'"')


def micros(ns: np.ndarray) -> np.ndarray:
    """Times in ns as µs (the format's unit) with 3 decimals: exact, as JSON numbers."""
    ns = np.asarray(ns, dtype=np.int64)
    a = np.abs(ns)
    frac = S.slice((a % 1000 + 1000).astype("S4"), 1, None)       # "1xyz" -> "xyz"
    out = join((a // 1000).astype("S20"), b".", frac)
    return np.where(ns < 0, S.add(b"-", out), out)


def join(*parts) -> np.ndarray:
    """Element by element concatenation of byte-string arrays and constants."""
    return functools.reduce(S.add, parts)


def text(lines: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The lines' bytes one after another, and where each line ends."""
    lines = np.asarray(lines, dtype="S")
    ends = np.cumsum(S.str_len(lines).astype(np.int64))
    if not len(lines):
        return b"", ends
    raw = np.frombuffer(lines.tobytes(), np.uint8)
    return raw[raw != 0].tobytes(), ends        # JSON text holds no NUL byte (\u0000)


def chunks(n: int):
    """Row ranges of at most CHUNK rows covering range(n)."""
    for a in range(0, n, CHUNK):
        yield a, min(n, a + CHUNK)

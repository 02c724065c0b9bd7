"""A run's columns held at the narrowest form their values need.

A decoded chunk comes from few locations over a short stretch of time, so
many of its columns hold one value (a thread's ids, a record kind's unused
fields) and its integer columns span a small range (time, seq, counters).
A run keeps such a column as that one value (``Constant``) or as its
minimum plus offsets in the narrowest unsigned type the range fits
(``Offsets``, a frame of reference), or, when its values count up by one
from the first (a location's ``seq``, a stream's source order), as that first
value alone (``Steps``), or, when they go up by 0 or 1 from row to row (the
index of the call a row belongs to), as one bit a row (``Stairs``, not for
key columns); a sub-array column (rows of several fields) is held
as its rows' words, each word column in one of those forms (``Words``) when
that saves a quarter; a column that is ``time`` plus one offset (a second clock
of the same events: ovni's ``ticks``, a CPU clock in step with the wall clock),
or whose offsets are an earlier column's, is held as that column and the
offset between them (``Shifted``, see :func:`narrowed_columns`); any other
column stays the array it was.  Reading a slice back gives the original values
in the original dtype; ``put`` widens a slice straight into a caller's buffer,
and ``piece`` gives a slice in its narrow form (what engine/gather.py puts in
key order).
"""
from __future__ import annotations

import numpy as np

from ..kernels.jit import njit
from ..kernels.reduce import min_max
from ..model import KEY_COLUMNS

# unsigned types an integer column's offsets may take, narrowest first
_OFFSET_TYPES = tuple(np.dtype(t) for t in ("u1", "u2", "u4"))
_INT64_MIN, _INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
# rows of offsets sampled to find two columns worth comparing whole; a run of at most
# this many rows is not searched for shifted columns (its columns hold next to nothing)
_SAMPLES = 64


class Constant:
    """``n`` rows that all hold ``value`` (one row: a scalar or a sub-array)."""

    __slots__ = ("value", "n", "dtype", "shape")

    def __init__(self, value: np.ndarray, n: int):
        self.value, self.n, self.dtype = value, n, value.dtype
        self.shape = (n,) + value.shape

    nbytes = property(lambda self: self.value.nbytes)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key) -> np.ndarray:
        m = len(range(*key.indices(self.n))) if isinstance(key, slice) else len(np.asarray(key))
        out = np.empty((m,) + self.value.shape, self.dtype)
        out[...] = self.value
        return out

    def put(self, a: int, b: int, dest: np.ndarray) -> None:
        dest[...] = self.value

    def searchsorted(self, v, side: str = "left", sorter=None) -> int:
        value = self.value.item()
        below = value < v if side == "left" else value <= v
        return self.n if below else 0


class Offsets:
    """Integers held as ``base`` (their minimum) plus narrow unsigned ``offsets``."""

    __slots__ = ("base", "offsets", "dtype", "shape")

    def __init__(self, base: np.generic, offsets: np.ndarray):
        self.base, self.offsets, self.dtype = base, offsets, base.dtype
        self.shape = offsets.shape

    nbytes = property(lambda self: self.offsets.nbytes)

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, key) -> np.ndarray:
        return np.add(self.offsets[key], self.base, dtype=self.dtype)

    def put(self, a: int, b: int, dest: np.ndarray) -> None:
        widen_into(self.offsets[a:b], self.base, dest)

    def searchsorted(self, v, side: str = "left", sorter=None) -> int:
        """As ndarray.searchsorted on the values (sorted; np.searchsorted calls this)."""
        v, lo = int(v), int(self.base)
        hi = lo + int(self.offsets[-1])
        if v < lo or (v == lo and side == "left"):
            return 0
        if v > hi or (v == hi and side == "right"):
            return len(self.offsets)
        return int(self.offsets.searchsorted(self.offsets.dtype.type(v - lo), side=side))


class Steps:
    """``n`` integers counting up by one from ``start``: the row's position gives it."""

    __slots__ = ("start", "n", "dtype", "shape", "width")

    def __init__(self, start: np.generic, n: int):
        self.start, self.n, self.dtype, self.shape = start, n, start.dtype, (n,)
        # the offsets type of every piece (one for all: a gather lays pieces side by side)
        self.width = _narrowest(max(n - 1, 1), np.dtype(np.uint64))

    nbytes = property(lambda self: self.start.nbytes)

    def __len__(self) -> int:
        return self.n

    def positions(self, key) -> np.ndarray:
        if isinstance(key, slice):
            return np.arange(*key.indices(self.n), dtype=np.int64)
        rows = np.asarray(key, dtype=np.int64)
        return np.where(rows < 0, rows + self.n, rows)

    def __getitem__(self, key) -> np.ndarray:
        return np.add(self.positions(key), self.start, dtype=self.dtype, casting="unsafe")

    def put(self, a: int, b: int, dest: np.ndarray) -> None:
        if dest.dtype == self.dtype and dest.ndim == 1:     # one pass, nothing allocated
            _count_into(dest, self.dtype.type(int(self.start) + a), self.dtype.type(1))
        else:
            widen_into(np.arange(a, b, dtype=np.int64), self.start, dest)

    def piece(self, a: int, b: int) -> "Offsets":
        return Offsets(self.dtype.type(int(self.start) + a), np.arange(b - a, dtype=self.width))

    def searchsorted(self, v, side: str = "left", sorter=None) -> int:
        at = int(v) - int(self.start) + (side == "right")
        return min(max(at, 0), self.n)


class Stairs:
    """``n`` integers from ``start`` that go up by 0 or 1 from each row to the next (a
    call's rows share its index, the next call's rows have the next one): held as one
    bit a row, its step, and the steps before every MARK-th row, from which a piece is
    counted (at most MARK rows before it)."""

    __slots__ = ("start", "steps", "marks", "n", "dtype", "shape", "width")

    MARK = 4096     # rows between counts kept (a multiple of 8: a count starts a byte)

    def __init__(self, start: np.generic, steps: np.ndarray, marks: np.ndarray, n: int,
                 climb: int):
        self.start, self.steps, self.marks, self.n = start, steps, marks, n
        self.dtype, self.shape = start.dtype, (n,)
        # the offsets type of every piece, from the whole climb (one for all, as Steps)
        self.width = _narrowest(max(climb, 1), np.dtype(np.uint64))

    nbytes = property(lambda self: self.steps.nbytes + self.marks.nbytes)

    def __len__(self) -> int:
        return self.n

    def offsets(self, a: int, b: int) -> np.ndarray:
        """Rows a..b (0 <= a <= b <= n) less ``start``, in ``width``."""
        if b <= a:
            return np.zeros(0, self.width)
        m = a // self.MARK
        first = m * self.MARK
        bits = np.unpackbits(self.steps[first >> 3:(b + 7) >> 3], count=b - first,
                             bitorder="little")
        counted = np.cumsum(bits, dtype=self.width)
        counted += self.width.type(self.marks[m])
        return counted[a - first:]

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, slice):
            a, b, step = key.indices(self.n)
            if step == 1:
                return np.add(self.offsets(a, max(a, b)), self.start, dtype=self.dtype)
        return self[0:self.n][key]

    def put(self, a: int, b: int, dest: np.ndarray) -> None:
        widen_into(self.offsets(a, b), self.start, dest)

    def piece(self, a: int, b: int) -> "Offsets":
        return Offsets(self.start, self.offsets(a, b))


def _stairs(values: np.ndarray, lo, hi) -> "Stairs | None":
    """``values`` as Stairs when they start at ``lo``, end at ``hi`` and each row is the
    one before or one more (a sample of them is checked first: no pass for most)."""
    n = len(values)
    if n <= _SAMPLES or values[0] != lo or values[-1] != hi or int(hi) - int(lo) >= n - 1:
        return None
    stride = n // _SAMPLES
    rises = np.diff(values[::stride].astype(np.int64))
    if rises.min() < 0 or rises.max() > stride:
        return None
    steps = np.empty(n, np.uint8)
    if not _steps_of(values, steps):
        return None
    sums = np.add.reduceat(steps, np.arange(0, n, Stairs.MARK), dtype=np.int64)
    marks = np.concatenate(([0], np.cumsum(sums[:-1])))
    return Stairs(lo, np.packbits(steps, bitorder="little"), marks, n, int(hi) - int(lo))


@njit(cache=True)
def _steps_of(values, steps) -> bool:
    """steps[i] = values[i] - values[i - 1] (steps[0] = 0) when every one is 0 or 1."""
    steps[0] = 0
    for i in range(1, values.shape[0]):
        if values[i] == values[i - 1]:
            steps[i] = 0
        elif values[i] - values[i - 1] == 1:    # a difference: uint64 + 1 would be a float
            steps[i] = 1
        else:
            return False
    return True


class Shifted:
    """A column that is another column of its run (``of``, a form) plus ``delta``, in
    ``dtype``: it holds nothing of its own."""

    __slots__ = ("of", "delta", "dtype", "shape")

    def __init__(self, of, delta: int, dtype: np.dtype):
        self.of, self.delta, self.dtype, self.shape = of, delta, np.dtype(dtype), of.shape

    nbytes = 0

    def __len__(self) -> int:
        return len(self.of)

    def __getitem__(self, key) -> np.ndarray:
        return self._shift(self.of[key])

    def _shift(self, values: np.ndarray) -> np.ndarray:
        return np.add(values, self.delta, dtype=np.int64).astype(self.dtype)

    def put(self, a: int, b: int, dest: np.ndarray) -> None:
        np.copyto(dest, self[a:b], casting="unsafe")

    def piece(self, a: int, b: int):
        """The other column's piece, shifted: an Offsets piece keeps its offsets."""
        p = piece(self.of, a, b)
        if isinstance(p, Offsets):
            return Offsets(self._shift(np.asarray(p.base))[()], p.offsets)
        if isinstance(p, Constant):
            return Constant(self._shift(np.asarray(p.value)), p.n)
        return self._shift(p)


class Words:
    """A sub-array column (rows of k elements) held as its rows' words, each word
    column at its own narrowest form: a row's fields (an id, a size, flags) vary
    over small ranges or not at all, though the row as a whole does not."""

    __slots__ = ("parts", "dtype", "shape", "unit")

    def __init__(self, parts: list, dtype: np.dtype, shape: tuple, unit: int):
        self.parts, self.dtype, self.shape, self.unit = parts, dtype, shape, unit

    nbytes = property(lambda self: sum(int(p.nbytes) for p in self.parts))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        m = len(range(*key.indices(len(self)))) if isinstance(key, slice) else len(np.asarray(key))
        out = np.empty((m,) + self.shape[1:], self.dtype)
        words = as_words(out, self.unit)
        for j, part in enumerate(self.parts):
            words[:, j] = part[key]
        return out

    def put(self, a: int, b: int, dest: np.ndarray) -> None:
        if dest.dtype != self.dtype or not dest.flags.c_contiguous:
            np.copyto(dest, self[a:b], casting="unsafe")
            return
        words = as_words(dest, self.unit)
        for j, part in enumerate(self.parts):
            put(part, a, b, words[:, j])


def as_words(rows: np.ndarray, unit: int) -> np.ndarray:
    """C-contiguous rows as (n, words a row) unsigned integers of ``unit`` bytes (a view)."""
    return rows.reshape(len(rows), int(np.prod(rows.shape[1:], dtype=np.int64))).view(f"u{unit}")


def _as_narrow_words(values: np.ndarray) -> "Words | np.ndarray":
    """A sub-array column as Words, when its word columns narrow to at most 3/4 of its
    bytes (else the array).  Words of at most 4 bytes: fields that wide are common."""
    width = values.dtype.itemsize * int(np.prod(values.shape[1:], dtype=np.int64))
    unit = next(u for u in (4, 2, 1) if width % u == 0)
    if width // unit < 2 or values.dtype.kind not in "iufb":
        return values
    words = as_words(np.ascontiguousarray(values), unit)
    lo, hi = words[0].copy(), words[0].copy()
    _word_ranges(words, lo, hi)         # one pass over the rows for every word column
    kinds = [_narrowest(int(h) - int(l), words.dtype) for l, h in zip(lo, hi)]
    held = sum(0 if k is None else k.itemsize for k in kinds) * len(values)
    if held * 4 > values.nbytes * 3:
        return values
    parts = []
    for j, kind in enumerate(kinds):
        column, base = words[:, j], words.dtype.type(lo[j])
        if kind is None:
            parts.append(Constant(np.array(base), len(values)))
        elif kind == words.dtype:
            parts.append(np.ascontiguousarray(column))
        else:
            out = np.empty(len(values), kind)
            np.subtract(column, base, out=out, casting="unsafe")
            parts.append(Offsets(base, out))
    return Words(parts, values.dtype, values.shape, unit)


def _narrowest(span: int, dtype: np.dtype) -> np.dtype | None:
    """The type a column of unsigned ``dtype`` values over ``span`` is held in (None: constant)."""
    if span == 0:
        return None
    return next((t for t in _OFFSET_TYPES if t.itemsize < dtype.itemsize
                 and span <= np.iinfo(t).max), dtype)


@njit(cache=True)
def _word_ranges(words, lo, hi):
    for i in range(1, words.shape[0]):
        for j in range(words.shape[1]):
            w = words[i, j]
            if w < lo[j]:
                lo[j] = w
            elif w > hi[j]:
                hi[j] = w


def widen_into(offsets: np.ndarray, base: np.generic, dest: np.ndarray) -> None:
    """dest[:] = base + offsets, added in base's type and cast to dest's as astype does."""
    np.add(offsets, base, out=dest, dtype=base.dtype, casting="unsafe")


def narrowed(values, stairs: bool = False):
    """``values`` at its narrowest form (itself when nothing narrower holds it exactly);
    ``stairs``: Stairs may hold it (not a key column: those are searched)."""
    if not isinstance(values, np.ndarray) or values.dtype == object or len(values) == 0:
        return values
    if values.strides[0] == 0:      # one row repeated (np.broadcast_to): constant, no pass
        return Constant(values[0].copy(), len(values))
    if values.ndim == 1 and values.dtype.kind in "iu":
        lo, hi = min_max(values)
        if lo == hi:
            return Constant(values[:1].reshape(()).copy(), len(values))
        span = int(hi) - int(lo)
        if span == len(values) - 1 and _counts_up(values):
            return Steps(lo, len(values))
        held = _stairs(values, lo, hi) if stairs else None
        if held is not None:
            return held
        for t in _OFFSET_TYPES:
            if t.itemsize >= values.dtype.itemsize:
                break
            if span <= np.iinfo(t).max:
                out = np.empty(len(values), t)
                np.subtract(values, lo, out=out, casting="unsafe")
                return Offsets(lo, out)
        return values
    if _constant(values):
        return Constant(values[:1].reshape(values.shape[1:]).copy(), len(values))
    if values.ndim > 1:
        return _as_narrow_words(values)
    return values


@njit(cache=True)
def _count_into(dest, start, one):
    # start and one of dest's type: no mixed-sign sum (uint64 + int64 is a float in numba)
    v = start
    for i in range(dest.shape[0]):
        dest[i] = v
        v += one


@njit(cache=True)
def _counts_up(values) -> bool:
    for i in range(1, values.shape[0]):
        if values[i] - values[i - 1] != 1:      # a difference: uint64 + 1 would be a float
            return False
    return True


def narrowed_columns(columns: dict) -> dict:
    """Each column at its narrowest form; an integer column that is ``time`` plus one
    offset in every row as that offset (``Shifted``: compared in one pass, none built).
    Such columns are a second clock of the same events: ovni's raw ``ticks`` (time
    minus the loom's offset), a CPU clock kept in step with the wall clock."""
    out = {}
    time = columns.get("time")
    # a few rows are not worth a pass (and in one row every column is time plus one offset)
    shifts = time is not None and len(time) > _SAMPLES
    for name, values in columns.items():
        delta = _shift_of(values, time) if shifts and name != "time" and "time" in out else None
        out[name] = narrowed(values, name not in KEY_COLUMNS) if delta is None else \
            Shifted(out["time"], delta, values.dtype)
    _share_offsets(out)
    return out


def _share_offsets(forms: dict) -> None:
    """A column held as offsets equal to an earlier column's (its values are that
    column's moved by one constant: a rank as a location and as recorded, an index and
    the request it names) becomes that column ``Shifted``: the offsets are held once.
    Candidates are matched by a sample of their offsets (no pass), then compared whole."""
    seen: dict[tuple, list[str]] = {}
    for name, form in list(forms.items()):
        if type(form) is not Offsets or form.offsets.ndim != 1 or len(form) <= _SAMPLES:
            continue
        key = _sample(form.offsets)
        for other in () if name == "time" else seen.get(key, ()):      # time: the key's own
            delta = int(form.base) - int(forms[other].base)
            if _INT64_MIN <= delta <= _INT64_MAX and \
                    np.array_equal(form.offsets, forms[other].offsets):
                forms[name] = Shifted(forms[other], delta, form.dtype)
                break
        else:
            seen.setdefault(key, []).append(name)


def _sample(offsets: np.ndarray) -> tuple:
    """Offsets' type, length and every k-th value: equal for equal offsets."""
    return offsets.dtype.str, len(offsets), \
        offsets[::max(1, len(offsets) // _SAMPLES)].tobytes()


def _shift_of(ticks, time) -> int | None:
    """d when ticks == time + d in every row (as integers), else None."""
    if not (isinstance(ticks, np.ndarray) and isinstance(time, np.ndarray)) or len(ticks) == 0 \
            or ticks.ndim != 1 or ticks.dtype.kind not in "iu" or time.dtype.kind not in "iu" \
            or ticks.strides[0] == 0 or time.strides[0] == 0:
        return None
    d = int(ticks[0]) - int(time[0])
    if not (np.iinfo(np.int64).min <= d <= np.iinfo(np.int64).max) or \
            int(ticks[-1]) - int(time[-1]) != d:
        return None
    wide = ticks.view(np.int64) if ticks.dtype.itemsize == 8 else ticks.astype(np.int64)
    return d if _shifted_by(wide, time.astype(np.int64, copy=False), d) else None


@njit(cache=True)
def _shifted_by(ticks, time, d) -> bool:
    for i in range(ticks.shape[0]):
        if ticks[i] - time[i] != d:
            return False
    return True


def _constant(values: np.ndarray) -> bool:
    """Every row holds the bits of row 0 (floats: -0.0 and 0.0 differ, a NaN equals itself)."""
    bits = _as_bits(values)
    if bits is None:
        return False
    first = bits[0]
    if not (np.array_equal(bits[-1], first) and np.array_equal(bits[len(bits) // 2], first)):
        return False        # the common case, rejected without a pass over the column
    return bool((bits == first).all())


def _as_bits(values: np.ndarray) -> np.ndarray | None:
    item = values.dtype.itemsize
    if values.dtype.kind in "iub":
        return values
    if values.dtype.kind in "fc" and item in (1, 2, 4, 8):
        return values.view(f"u{item}")
    if values.dtype.kind == "c" and item == 16:
        return values.view("u8").reshape(values.shape + (2,))
    return None


def put(values, a: int, b: int, dest: np.ndarray) -> None:
    """Rows a..b of a column form, widened into ``dest`` (cast as astype would)."""
    if isinstance(values, np.ndarray):
        np.copyto(dest, values[a:b], casting="unsafe")
    else:
        values.put(a, b, dest)


def piece(values, a: int, b: int):
    """Rows a..b of a column form, in the same form (no widening, no copy of an array;
    Steps, Stairs and Shifted rows as an Offsets piece, which exchanges and gathers know)."""
    if isinstance(values, (Steps, Shifted, Stairs)):
        return values.piece(a, b)
    if isinstance(values, Constant):
        return Constant(values.value, b - a)
    if isinstance(values, Offsets):
        return Offsets(values.base, values.offsets[a:b])
    if isinstance(values, Words):
        return Words([piece(p, a, b) for p in values.parts], values.dtype,
                     (b - a,) + values.shape[1:], values.unit)
    return values[a:b]


def tail(values) -> tuple:
    """The shape of one row of a column form (a sub-array column's elements)."""
    return tuple(values.shape[1:])

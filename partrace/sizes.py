"""Sizes as people write them ('512M', '4G'): one reading for ``--memory`` and the API's
``memory=``, so that both accept and refuse the same texts with the same words."""
from __future__ import annotations

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
SMALLEST_BUDGET = 1 << 20


def parse_size(text: str) -> int:
    """'512M' -> bytes (K, M, G, T: powers of 1024; a trailing B is allowed); a ValueError
    that says what is wrong for a text that is no size or a budget under 1M."""
    t = text.strip().upper().removesuffix("B")
    num, unit = (t[:-1], t[-1]) if t and t[-1] in UNITS else (t, "")
    try:
        value = int(float(num) * UNITS[unit])
    except ValueError:
        raise ValueError(f"not a size: {text!r} (e.g. 512M, 4G)") from None
    if value < SMALLEST_BUDGET:
        raise ValueError(f"{text!r}: the budget must be at least 1M")
    return value

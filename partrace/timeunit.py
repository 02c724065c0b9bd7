"""What the ``time`` column counts, as a trace's definitions say, and times in that unit.

Most formats store ns of a wall clock (converted from their ticks).  A format whose clock
is something else says so in its definitions' attrs: ``time_ns_per_unit`` (time-column
ticks per unit of its own) and ``time_meaning`` (per table family: what the time is;
ROSS: virtual time, or real seconds, x 1e9).  Every answer shows times in that unit and
``--time`` takes it: the engine sorts by the column and never needs to know.  A base
room: imports nothing of partrace.
"""
from __future__ import annotations

from dataclasses import dataclass

END_OF_TIME = (1 << 63) - 1     # the key a format gives an infinite time (ROSS's final GVT)


@dataclass(frozen=True)
class TimeUnit:
    name: str           # "ns", "virtual time", "s (real time)"
    per_unit: float     # time-column ticks per unit

    @property
    def wall_ns(self) -> bool:
        return self.per_unit == 1

    def shown(self, key: int) -> float:
        """A time-column value in this unit (the end of time as inf)."""
        if key >= END_OF_TIME:
            return float("inf")
        return key if self.wall_ns else key / self.per_unit

    def key(self, value) -> int:
        """A time in this unit as a time-column value (ns stay exact integers)."""
        if self.wall_ns and isinstance(value, int):
            return value
        return int(round(value * self.per_unit))

    def keys(self, window):
        """A window (lo, hi) in this unit, None for an open end, as time-column values."""
        lo, hi = window
        return (-(1 << 63) if lo is None else self.key(lo),
                END_OF_TIME if hi is None else self.key(hi))


NS = TimeUnit("ns", 1)


def of(attrs: dict, table: str = "events") -> TimeUnit:
    """The unit of ``table``'s time column, from a trace's definitions' attrs."""
    per_unit = attrs.get("time_ns_per_unit")
    if not per_unit:
        return NS
    meaning = attrs.get("time_meaning", {})
    family = table if table in meaning else table.split("_")[0]
    what = str(meaning.get(family, ""))
    return TimeUnit("s (real time)" if what.startswith("real_time") else "virtual time",
                    float(per_unit))


def described(attrs: dict) -> str:
    """The unit of the events' times in words, for ``info``."""
    unit = of(attrs)
    if not unit.wall_ns:
        return f"{unit.name} (stored x {unit.per_unit:g} in the time column)"
    tps = attrs.get("ticks_per_second") or attrs.get("timer_resolution")
    if tps:
        return f"ns of wall clock (the trace's ticks: {float(tps):,.0f} per second)"
    return "ns of wall clock"

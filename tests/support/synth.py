"""A synthetic format for testing the engine on its own (not shipped).

A trace is a JSON file ``{"synth": {"locations": L, "events": E, "units": U,
"seed": S}}``. Times are coarse so that many rows of different locations tie,
which exercises the (time, location, seq) tie-break.  It also emits a table
with a string column and one with a fixed-width sub-array column, so the
exchange of every column type is tested.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from partrace.formats.base import Format, TraceReader, Unit
from partrace.model import (STR, Column, Definitions, Kind,
                            Table, column, conform)


def spec(path) -> dict:
    return json.loads(Path(path).read_text())["synth"]


class SynthReader(TraceReader):
    format_name = "synth"

    # bytes a real trace spends on an event: a unit's size stands for its events, so the
    # plan compiles kernels for a trace of many events (a JSON file of 34 bytes holding a
    # million events would otherwise run them as Python: partrace.kernels.jit.confirm)
    EVENT_BYTES = 16

    def units(self):
        s = spec(self.path)
        locs = np.arange(1, s["locations"] + 1)
        return [Unit(f"{u:04d}", 1000 + 37 * u + self.EVENT_BYTES * s["events"] * len(part),
                     [int(x) for x in part])
                for u, part in enumerate(np.array_split(locs, s["units"]))]

    def read_definitions(self):
        s = spec(self.path)
        ids = np.arange(1, s["locations"] + 1, dtype=np.int64)
        locs = Table({"id": ids, "name": np.array([f"loc {i}" for i in ids], dtype=object),
                      "parent": np.zeros(len(ids), np.int64)})
        regs = Table({"id": np.arange(1, 4, dtype=np.int64),
                      "name": np.array(["a", "b", "c"], dtype=object),
                      "group": np.ones(3, np.int64)})
        return Definitions("synth", {"locations": locs, "regions": regs},
                           {"seed": s["seed"]}, source={"spec": s})

    def schema(self, defs):
        key = [column("time"), column("location"), column("seq")]
        return {
            "events": key + [column("kind"), column("region"), column("value")],
            "notes": key + [Column("text", STR, "a note")],
            "vectors": key + [Column("payload", ("u1", 4), "four bytes")],
        }

    def decode(self, unit, defs):
        import os
        if os.environ.get("PARTRACE_TEST_FAIL_DECODE") == unit.key:
            from partrace.errors import TraceError
            raise TraceError(self.path, f"unit {unit.key}", f"injected failure in unit {unit.key}")
        if os.environ.get("PARTRACE_TEST_HOLD_DECODE") == unit.key:   # to be killed mid-run
            import time
            Path(f"{self.path}.held").touch()
            time.sleep(120)
        if os.environ.get("PARTRACE_TEST_UNIT_SECONDS"):     # a decode that takes a while
            import time
            time.sleep(float(os.environ["PARTRACE_TEST_UNIT_SECONDS"]))
        s = spec(self.path)
        schema = self.schema(defs)
        for loc in unit.info:
            rng = np.random.default_rng([s["seed"], loc])
            n = s["events"]
            t = np.sort(rng.integers(0, n // 2 + 1, n)) * 1000
            ev = Table({"time": t, "location": np.full(n, loc, np.int64),
                        "seq": np.arange(n, dtype=np.int64),
                        "kind": np.where(np.arange(n) % 2 == 0, Kind.ENTER, Kind.LEAVE).astype(np.uint8),
                        "region": rng.integers(1, 4, n), "value": rng.integers(0, 2**63, n, dtype=np.uint64)})
            m = max(1, n // 10)
            notes = Table({"time": t[:m], "location": np.full(m, loc, np.int64),
                           "seq": np.arange(m, dtype=np.int64),
                           "text": np.array([f"note {loc}/{i}" for i in range(m)], dtype=object)})
            vec = Table({"time": t[:m], "location": np.full(m, loc, np.int64),
                         "seq": np.arange(m, dtype=np.int64),
                         "payload": rng.integers(0, 256, (m, 4)).astype(np.uint8)})
            # two chunks per location, to exercise chunked decoding
            h = n // 2
            yield {"events": conform(ev.take(slice(0, h)), schema["events"])}
            yield {"events": conform(ev.take(slice(h, n)), schema["events"]),
                   "notes": conform(notes, schema["notes"]), "vectors": conform(vec, schema["vectors"])}


class Synth(Format):
    name = "synth"
    description = "synthetic test traces"

    @classmethod
    def sniff(cls, path):
        try:
            return path.is_file() and "synth" in json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError, OSError):
            return False

    @classmethod
    def open(cls, path, **options):
        from partrace.formats.base import check_options
        check_options(cls.name, options)
        return SynthReader(path)

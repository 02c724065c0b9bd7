"""Decode speed of OTF2 input, in one run: the raw read of the event files, the otf2
package's Python reader, and partrace's reader (the library's C reader with compiled
callbacks).  Makes its archive with partrace's OTF2 output of a synthetic trace.

    python scripts/bench_otf2.py [--events 400000] [--locations 8]

Prints one table: what was read, seconds (best of --repeat), million events per second
(for the raw read: the archive's events over the time to read its bytes, a ceiling).
Run it twice or after `partrace warm`: the first run compiles the callbacks.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_results

ROOT = Path(__file__).resolve().parents[1]


def make_archive(folder: Path, events: int, locations: int) -> Path:
    spec = folder / "synth.json"
    spec.write_text(json.dumps({"synth": {"locations": locations, "events": events,
                                          "units": locations, "seed": 1}}))
    out = folder / "bench.otf2"
    env = {"PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": "synth=tests.support.synth:Synth"}
    import os
    subprocess.run([sys.executable, "-m", "partrace", "convert", str(spec), "-o", str(out), "-q"],
                   check=True, cwd=ROOT, env={**os.environ, **env})
    return out


def raw_read(anchor: Path) -> int:
    n = 0
    for p in sorted(anchor.with_suffix("").glob("*.evt")):
        n += len(p.read_bytes())
    return n


def python_reader(anchor: Path) -> int:
    import otf2
    n = 0
    with otf2.reader.open(str(anchor), batch_events=10_000) as trace:
        for _ in trace.events:
            n += 1
    return n


def partrace_reader(anchor: Path) -> int:
    from partrace.formats.otf2 import OTF2
    reader = OTF2.open(anchor)
    defs = reader.read_definitions()
    n = 0
    for unit in reader.units():
        for chunk in reader.decode(unit, defs):
            n += len(chunk["events"])
    return n


def best(fn, anchor, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        n = fn(anchor)
        times.append(time.perf_counter() - t)
    return n, min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=400_000)
    ap.add_argument("--locations", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    bench_results.add_option(ap, "bench_otf2")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        anchor = make_archive(Path(tmp), args.events, args.locations)
        partrace_reader(anchor)         # compiles or loads the callbacks once
        n_events = partrace_reader(anchor)
        rows = []
        for name, fn in (("raw read of the .evt files", raw_read),
                         ("otf2 Python reader", python_reader),
                         ("partrace OTF2 reader", partrace_reader)):
            n, secs = best(fn, anchor, args.repeat)
            unit = "bytes" if fn is raw_read else "events"
            rows.append((name, f"{n:,} {unit}", secs, n_events / secs / 1e6))
    with bench_results.recorded("bench_otf2", None, args.results):
        print(f"{'reader':32s} {'read':>22s} {'seconds':>9s} {'M events/s':>11s}")
        for name, n, secs, rate in rows:
            print(f"{name:32s} {n:>22s} {secs:9.3f} {rate:11.2f}")


if __name__ == "__main__":
    main()

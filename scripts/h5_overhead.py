#!/usr/bin/env python3
"""HDF5 output bytes against input bytes, per fixture, and where the bytes go.

    python scripts/h5_overhead.py [TRACE ...] [--tables]

With no TRACE, every fixture under tests/data (all five input formats) is
merged with default settings, in this process, into a temporary folder.  Printed
as one markdown table, per trace:

  in kB      the trace's own files (the reader's ``source_files``)
  out kB     the HDF5 output
  out/in     their ratio (the target: <= 2, <= 1 for OTF text)
  data kB    bytes of the datasets' stored values (chunks, compact or contiguous)
  meta kB    the rest: object headers, chunk indexes, attributes, types, free space
  datasets   how many datasets (each costs an object header, and an index when chunked)
  empty      datasets of 0 rows

``--tables`` adds each table's datasets and bytes (where a fixture's meta goes).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import bench_results

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def fixtures() -> list[Path]:
    """Every trace under tests/data: OTF (.otf, zlib ones included), DUMPI, ovni, ROSS, OTF2."""
    out = sorted(DATA.glob("otf/*/*/*.otf"))
    out += sorted(p for p in DATA.glob("dumpi/*") if p.is_dir())
    out += sorted(p / "ovni" for p in DATA.glob("ovni/*") if (p / "ovni").is_dir())
    out += sorted(p / "stats" for p in DATA.glob("ross/*") if (p / "stats").is_dir())
    out += sorted(DATA.glob("otf2/*/traces.otf2"))
    return out


def input_bytes(trace: Path) -> tuple[str, int]:
    from partrace.formats import detect, get
    fmt = detect(trace)
    return fmt, sum(f.stat().st_size for f in get(fmt).open(trace).source_files())


def anatomy(path: Path) -> dict:
    """Datasets, empty ones, stored data bytes, per table (first path component)."""
    import h5py
    out = dict(datasets=0, empty=0, data=0, tables=defaultdict(lambda: [0, 0]))
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                size = obj.id.get_storage_size()
                out["datasets"] += 1
                out["empty"] += obj.size == 0
                out["data"] += size
                key = "/".join(name.split("/")[:2 if name.startswith("definitions/") else 1])
                out["tables"][key][0] += 1
                out["tables"][key][1] += size
        f.visititems(visit)
    return out


def measure(trace: Path, scratch: Path) -> dict:
    import partrace
    fmt, n_in = input_bytes(trace)
    out = scratch / (trace.parent.name + "-" + trace.name + ".h5")
    partrace.merge(trace, out, overwrite=True)
    n_out = out.stat().st_size
    return dict(trace=trace, format=fmt, n_in=n_in, n_out=n_out, **anatomy(out))


def target(row: dict) -> float:
    """The issue's target: 1x for OTF text input, 2x for the rest (zlib OTF included)."""
    if row["format"] == "otf" and "real-zlib" not in str(row["trace"]):
        return 1.0
    return 2.0


def table(rows: list[dict], per_table: bool = False) -> list[str]:
    lines = ["| trace | fmt | in kB | out kB | out/in | target | data kB | meta kB | datasets | empty |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["n_out"] / r["n_in"]
        mark = "" if ratio <= target(r) else " **over**"
        name = r["trace"].relative_to(DATA) if r["trace"].is_relative_to(DATA) else r["trace"]
        lines.append(f"| {name} | {r['format']} | {r['n_in'] / 1e3:.1f} | {r['n_out'] / 1e3:.1f} "
                     f"| {ratio:.3f}{mark} | {target(r):g} | {r['data'] / 1e3:.1f} "
                     f"| {(r['n_out'] - r['data']) / 1e3:.1f} | {r['datasets']} | {r['empty']} |")
        if per_table:
            for key, (n, size) in sorted(r["tables"].items()):
                lines.append(f"|  `{key}` | | | | | | {size / 1e3:.1f} | | {n} | |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--tables", action="store_true", help="datasets and bytes per table")
    bench_results.add_option(ap, "h5_overhead")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    traces = [t.resolve() for t in args.traces] or fixtures()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(t, Path(tmp)) for t in traces]
    with bench_results.recorded("h5_overhead", argv, args.results):
        print("\n".join(table(rows, args.tables)))
        over = [r for r in rows if r["n_out"] / r["n_in"] > target(r)]
        print(f"\n{len(rows) - len(over)} of {len(rows)} traces within target")
    return 0


if __name__ == "__main__":
    sys.exit(main())

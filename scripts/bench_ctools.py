#!/usr/bin/env python3
"""CPU and memory of partrace next to the formats' own C tools, on the same trace.

Used by scripts/bench.py (its --otfprint, --otfmerge, --otfinfo, --dumpi2ascii and
--ovnidump options, or the PARTRACE_BENCH_<TOOL> environment variables); can
also be run alone:

    python scripts/bench_ctools.py TRACE --otfprint PATH --otfmerge PATH ...

Several traces, each named (LABEL=PATH), give each its table and then one table of
the ratios side by side, a row per format and phase, a column per label: the
suite's generated traces next to traces the formats' own libraries wrote
(docs/benchmarks.md says how to make those; this script builds nothing):

    python scripts/bench_ctools.py suite=bench-out/suite-x1/otf/x.otf \
        real=/tmp/real/otf/lib.otf --phases 'merge->h5,merge->otf' --otfmerge PATH ...

Each command runs as a child process: CPU seconds from os.wait4 (user + system
of the child and every descendant it waited for), peak resident memory of the
largest process of that tree from GNU time's %M (ru_maxrss of a child of this
script would carry this script's own RSS across exec; without GNU time it is
used anyway and flagged as an upper bound). The partrace commands run on one
process, without mpiexec, as a user types them:

  start-up    python, numpy, numba, partrace imported (shown, not a target)
  decode      every unit decoded (no merge, no output), this script as the child
  info        `partrace info TRACE`
  merge->h5   `partrace merge TRACE -o X.h5`
  merge->otf  `partrace merge TRACE -o X.otf --streams 2`

and the C tool each is held against (outputs of printing tools go to /dev/null):

  otf    decode: otfprint -s   info: otfinfo -l 3   merges: otfmerge -n 2
  dumpi  every row: dumpi2ascii on each rank's .bin file in turn
  ovni   every row: ovnidump on the trace folder
  ross   no C tool: partrace's figures only

A warm-up round runs every command once (page cache, numba's compiled-kernel
cache); then the measured rounds alternate partrace and C commands (A B A B
...). Figures include process start-up and imports, as a user pays them.

Each merge row is also run on the format's smallest sample trace (partrace/samples,
a few KB), its kernels compiled as on a large input: what a run costs whatever its
size (interpreter, imports, kernel loading, the output's set-up). The C tools pay
milliseconds of it. Beside the ratio, the table prints that fixed cost and the
ratio net of it, (partrace - fixed) / C: the pace per byte, which is what remains
of the gap on inputs far larger than these. The targets are held to the whole
ratio.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import bench_results

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ("otfprint", "otfmerge", "otfinfo", "dumpi2ascii", "ovnidump")
MERGE_STREAMS = 2          # otfmerge -n 2, and the same stream count for partrace
# Linux keeps the pre-exec peak in ru_maxrss: a child forked from this (large) Python
# process and exec'ing a 3 MiB tool reports this process's RSS. GNU time forks the
# command from its own small process and prints the command's real peak (%M, KiB).
GNU_TIME = next((t for t in ("/usr/bin/time", shutil.which("time")) if t and os.access(t, os.X_OK)),
                None)

# The targets partrace is held to, as printed beside the ratios.
TARGETS = {"decode": 0.5, "merge->h5": 1.0, "merge->otf": 1.5}
PHASES = ("start-up", "decode", "info", "merge->h5", "merge->otf")
PEAK_TARGET_MIB, PEAK_TARGET_INPUT = 600, 200e6


@dataclass
class Command:
    """One measured command: argv, where it runs, and where its output goes."""
    label: str
    argv: list[str]
    output: str | None = None      # output path or prefix, relative to a fresh folder
    runs: list[tuple[float, float, int]] = field(default_factory=list)  # cpu s, MiB, bytes
    env: dict = field(default_factory=dict)     # set for this command only

    def key(self) -> tuple:
        return tuple(self.argv), self.output, tuple(sorted(self.env.items()))


def run_measured(argv: list[str], cwd: Path, extra_env=None) -> tuple[float, float]:
    """CPU seconds (user+sys, from os.wait4: the child and every descendant it waited for)
    and peak RSS (MiB: the largest process of that tree, from GNU time when present);
    stdout is discarded (the printing tools' text goes to /dev/null)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(extra_env or {})}
    peak_file = cwd.parent / (cwd.name + ".peak")
    if GNU_TIME:
        argv = [GNU_TIME, "-f", "%M", "-o", str(peak_file), *argv]
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)
    with proc.stderr:
        err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"failed (exit {proc.returncode}): {' '.join(argv)}\n"
                         f"{err.decode(errors='replace')[-2000:]}")
    if GNU_TIME:
        peak_kib = float(peak_file.read_text().split()[-1])
        peak_file.unlink()
    else:
        peak_kib = usage.ru_maxrss            # an upper bound: see GNU_TIME
    return usage.ru_utime + usage.ru_stime, peak_kib / 1024


def measure(cmd: Command, scratch: Path) -> tuple[float, float, int]:
    """Run ``cmd`` in a fresh folder; its output's total bytes (0 if it writes none)."""
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        cpu, peak = run_measured(cmd.argv, Path(tmp), cmd.env)
        nbytes = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
    return cpu, peak, nbytes


def partrace_commands(trace: str, fmt: str | None) -> dict[str, Command]:
    py, fmt_opt = sys.executable, (["--format", fmt] if fmt else [])
    trace = str(Path(trace).resolve())               # the commands run in scratch folders
    cli = [py, "-m", "partrace"]
    startup = ("import numpy, numba, partrace.cli, partrace.formats as f; "
               + (f"f.get({fmt!r})" if fmt else f"f.get(f.detect({trace!r}))"))
    return {
        "start-up": Command("partrace start-up", [py, "-c", startup]),
        "decode": Command("partrace decode", [py, str(Path(__file__).resolve()), "--decode-only",
                                              trace, *fmt_opt]),
        "info": Command("partrace info", [*cli, "info", trace, *fmt_opt]),
        "merge->h5": Command("partrace merge -o X.h5",
                             [*cli, "merge", trace, "-o", "out.h5", "-q", *fmt_opt],
                             output="out.h5"),
        "merge->otf": Command(f"partrace merge -o X.otf --streams {MERGE_STREAMS}",
                              [*cli, "merge", trace, "-o", "out.otf", "-q",
                               "--streams", str(MERGE_STREAMS), *fmt_opt], output="out.otf"),
    }


def fixed_commands(fmt: str, phases) -> dict[str, Command]:
    """Each merge row's command on the format's smallest sample trace, kernels compiled
    (PARTRACE_JIT=numba: a trace that small would otherwise run them as Python)."""
    from partrace.warm import samples

    def size(path: Path) -> int:
        files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
        return sum(f.stat().st_size for f in files)
    found = samples(fmt)
    if not found:
        return {}
    sample = min(found, key=size)
    rows = {}
    for phase, cmd in partrace_commands(str(sample), fmt).items():
        if phase.startswith("merge->") and phase in phases:
            rows[phase] = Command(f"{cmd.label} (fixed: {sample.name})", cmd.argv, cmd.output,
                                  env={"PARTRACE_JIT": "numba"})
    return rows


def c_commands(fmt: str, trace: str, files: list[Path], tools: dict) -> dict[str, Command]:
    """The C tool each partrace row is compared with (rows without a tool are left out)."""
    trace = str(Path(trace).resolve())
    rows: dict[str, Command] = {}
    if fmt == "otf":
        merge = None
        if tools.get("otfmerge"):
            merge = Command(f"otfmerge -n {MERGE_STREAMS}",
                            [tools["otfmerge"], "-n", str(MERGE_STREAMS), "-o", "out", trace],
                            output="out")
        if tools.get("otfprint"):
            rows["decode"] = Command("otfprint -s", [tools["otfprint"], "-s", trace])
        if tools.get("otfinfo"):
            # level 3 reads the events and counts them, as `partrace info` does
            rows["info"] = Command("otfinfo -l 3", [tools["otfinfo"], "-l", "3", trace])
        if merge:
            rows["merge->h5"] = rows["merge->otf"] = merge
    elif fmt == "dumpi" and tools.get("dumpi2ascii"):
        bins = sorted(str(f.resolve()) for f in files if f.suffix == ".bin")
        loop = 'for f; do "$0" "$f" || exit 1; done'     # one dumpi2ascii per rank file
        tool = Command(f"dumpi2ascii x{len(bins)} files", ["sh", "-c", loop,
                                                           tools["dumpi2ascii"], *bins])
        rows = dict.fromkeys(TARGETS | {"info": 0}, tool)
    elif fmt == "ovni" and tools.get("ovnidump"):
        tool = Command("ovnidump", [tools["ovnidump"], trace])
        rows = dict.fromkeys(TARGETS | {"info": 0}, tool)
    return rows


def run_rounds(commands: list[Command], repeat: int, scratch: Path) -> None:
    """A warm-up round, then ``repeat`` rounds running the commands in the given order
    (partrace and C interleaved); a command shared by several rows runs once a round."""
    unique = list({c.key(): c for c in commands}.values())
    for c in unique:
        measure(c, scratch)
    for _ in range(repeat):
        for c in unique:
            c.runs.append(measure(c, scratch))
    for c in commands:                    # rows sharing a C command share its runs
        c.runs = next(u for u in unique if u.key() == c.key()).runs


def stats(values: list[float]) -> tuple[float, float]:
    return min(values), statistics.median(values)


def verdict(ok: bool | None) -> str:
    return "" if ok is None else (" ok" if ok else " MISSED")


def report(fmt: str, in_bytes: int, mine: dict[str, Command], theirs: dict[str, Command],
           repeat: int, ratios: dict | None = None,
           fixed: dict[str, Command] | None = None) -> list[str]:
    """The markdown table: one row per partrace command, its C tool beside it, then the
    fixed cost of the merge rows and their ratio net of it; `ratios` (when given) gets
    each phase's (min, median) ratio to its C tool, and "PHASE net" the net ratio."""
    text_otf = fmt == "otf"
    out_target = 1.0 if text_otf else 2.0
    how = ("GNU time %M" if GNU_TIME else
           "ru_maxrss: no GNU time, so an upper bound holding this script's own RSS")
    lines = [f"CPU seconds (user+sys, os.wait4) and peak RSS ({how}), min / median of "
             f"{repeat} interleaved runs; input {in_bytes:,} bytes",
             "| phase | partrace CPU s | C tool | C CPU s | ratio min / med | target "
             "| peak MiB (max of runs) partrace / C | out/in bytes partrace / C |",
             "|---|---|---|---|---|---|---|---|"]
    startup = mine.pop("start-up", None)
    if startup:
        lines.append(f"| start-up | {stats([r[0] for r in startup.runs])[0]:.3f} | "
                     "python + numpy + numba + partrace imports: in every partrace row "
                     "| | | | " f"{max(r[1] for r in startup.runs):,.0f} | |")
    decode_min = stats([r[0] for r in mine["decode"].runs])[0] if "decode" in mine else None
    for phase, cmd in mine.items():
        p_cpu = stats([r[0] for r in cmd.runs])
        p_peak = max(r[1] for r in cmd.runs)
        c = theirs.get(phase)
        c_cpu = stats([r[0] for r in c.runs]) if c else None
        c_col = (f"{c_cpu[0]:.3f} / {c_cpu[1]:.3f}" if c else "-")
        ratio = (p_cpu[0] / c_cpu[0], p_cpu[1] / c_cpu[1]) if c and c_cpu[0] > 0 else None
        if ratios is not None and ratio:
            ratios[phase] = ratio
        if phase == "info" and decode_min is None:
            target = "-"
        elif phase == "info":
            # the target is partrace's own decode; the C tool's ratio is shown for reference
            target = f"<= decode ({decode_min:.3f} s){verdict(p_cpu[0] <= decode_min)}"
        elif phase in TARGETS:
            ok = None if ratio is None else ratio[0] <= TARGETS[phase]
            target = f"<= {TARGETS[phase]}x{verdict(ok)}"
        ratio_col = f"{ratio[0]:.2f}x / {ratio[1]:.2f}x" if ratio else "-"
        peak_ok = p_peak <= PEAK_TARGET_MIB if in_bytes <= PEAK_TARGET_INPUT else None
        peak_col = (f"{p_peak:,.0f}{verdict(peak_ok)} / "
                    + (f"{max(r[1] for r in c.runs):,.0f}" if c else "-"))
        if cmd.output:
            p_out = cmd.runs[-1][2] / in_bytes
            c_out = f"{c.runs[-1][2] / in_bytes:.2f}" if c and c.output else "-"
            out_col = f"{p_out:.2f} (<= {out_target:g}{verdict(p_out <= out_target)}) / {c_out}"
        else:
            out_col = "-"
        lines.append(f"| {phase} | {p_cpu[0]:.3f} / {p_cpu[1]:.3f} | "
                     f"{c.label if c else '-'} | {c_col} | {ratio_col} | {target} | "
                     f"{peak_col} | {out_col} |")
    lines += net_of_fixed(mine, theirs, fixed or {}, ratios)
    lines.append(f"targets: peak RSS <= {PEAK_TARGET_MIB} MiB for a "
                 f"{PEAK_TARGET_INPUT / 1e6:.0f} MB trace (checked when the input is at most "
                 f"that); output <= 2x input bytes, <= 1x for OTF text input.")
    return lines


def net_of_fixed(mine: dict[str, Command], theirs: dict[str, Command],
                 fixed: dict[str, Command], ratios: dict | None) -> list[str]:
    """The lines saying each merge row's fixed cost and its ratio net of it (min / median
    of the runs' differences: the rounds interleave, so run i of each was taken together)."""
    lines = []
    for phase, f in fixed.items():
        c = theirs.get(phase)
        if phase not in mine or not c or not f.runs:
            continue
        f_cpu = stats([r[0] for r in f.runs])
        net = [(m[0] - fr[0]) / cr[0] for m, fr, cr in zip(mine[phase].runs, f.runs, c.runs)
               if cr[0] > 0]
        if not net:
            continue
        ratio = stats(net)
        if ratios is not None:
            ratios[f"{phase} net"] = ratio
        lines.append(f"{phase}: fixed cost {f_cpu[0]:.3f} / {f_cpu[1]:.3f} s ({f.label}, "
                     f"peak {max(r[1] for r in f.runs):,.0f} MiB); net of it over "
                     f"{c.label}: {ratio[0]:.2f}x / {ratio[1]:.2f}x")
    return lines


def compare(trace: str, fmt: str | None, tools: dict, repeat: int,
            tmpdir: str | None = None, phases=PHASES, ratios: dict | None = None) -> list[str]:
    """Measure partrace and the C tools on ``trace`` (only the rows of `phases`); the
    table's lines.  `ratios` (when given) gets "format" and each phase's ratios."""
    from partrace.formats import open_trace
    reader = open_trace(trace, fmt)
    name = reader.format_name
    files = reader.source_files()
    in_bytes = sum(f.stat().st_size for f in files)
    mine = {k: c for k, c in partrace_commands(trace, fmt).items() if k in phases}
    theirs = {k: c for k, c in c_commands(name, trace, files, tools).items() if k in phases}
    fixed = {k: c for k, c in fixed_commands(name, phases).items() if k in theirs}
    if ratios is not None:
        ratios["format"] = name
    order = []
    for phase, cmd in mine.items():        # A B A B: each partrace command, then its C tool
        order.append(cmd)
        if phase in fixed:
            order.append(fixed[phase])
        if phase in theirs:
            order.append(theirs[phase])
    if tmpdir:      # absolute: the runs are started in folders of their own
        tmpdir = str(Path(tmpdir).resolve())
        Path(tmpdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="partrace-ctools-", dir=tmpdir) as scratch:
        run_rounds(order, repeat, Path(scratch))
    return report(name, in_bytes, mine, theirs, repeat, ratios, fixed)


def side_by_side(runs: list[tuple[str, dict]], phases) -> list[str]:
    """One table of the ratios of several traces: a row per format and phase (in the
    order met), a column per label; several traces of one label and format: the first."""
    labels = list(dict.fromkeys(label for label, _ in runs))
    cells: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
    for label, ratios in runs:
        for phase in [q for p in phases for q in (p, f"{p} net")]:
            if phase in ratios:
                cells.setdefault((ratios["format"], phase), {}).setdefault(label, ratios[phase])
    lines = ["CPU of partrace over its C tool, min / median of the interleaved runs, "
             "side by side",
             "| format | phase | " + " | ".join(labels) + " | target |",
             "|---|---|" + "---|" * len(labels) + "---|"]
    for (fmt, phase), row in cells.items():
        vals = [f"{row[k][0]:.2f}x / {row[k][1]:.2f}x" if k in row else "-" for k in labels]
        target = f"<= {TARGETS[phase]}x" if phase in TARGETS else "-"
        if phase.endswith(" net"):
            target = "(net of the fixed cost: no target)"
        lines.append(f"| {fmt} | {phase} | " + " | ".join(vals) + f" | {target} |")
    return lines


def labelled(arg: str) -> tuple[str, str]:
    """``LABEL=PATH`` or ``PATH`` (labelled by itself); a path holding '=' keeps it when
    it exists as given."""
    label, sep, path = arg.partition("=")
    if not sep or Path(arg).exists():
        return arg, arg
    return label, path


def decode_only(trace: str, fmt: str | None) -> None:
    """The child behind the `decode` row: decode every unit, keep nothing."""
    from partrace.formats import open_trace
    reader = open_trace(trace, fmt)
    defs = reader.read_definitions()
    for unit in reader.units():
        for _ in reader.decode(unit, defs):
            pass


def add_tool_options(ap: argparse.ArgumentParser) -> None:
    for tool in TOOLS:
        env = f"PARTRACE_BENCH_{tool.upper()}"
        ap.add_argument(f"--{tool}", metavar="PATH", default=os.environ.get(env) or None,
                        help=f"the C tool {tool} (default: ${env}; none: not compared)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", nargs="+",
                    help="a trace, or several as LABEL=PATH (their ratios side by side)")
    ap.add_argument("--format")
    ap.add_argument("--phases", default=",".join(PHASES),
                    help=f"the rows to measure, comma-separated (default: {','.join(PHASES)})")
    ap.add_argument("--repeat", type=int, default=3, help="measured rounds (after one warm-up)")
    ap.add_argument("--tmpdir", help="where the outputs go (default: system temp)")
    ap.add_argument("--decode-only", action="store_true", help=argparse.SUPPRESS)
    add_tool_options(ap)
    bench_results.add_option(ap, "bench_ctools")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.decode_only:
        decode_only(args.trace[0], args.format)
        return 0
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        ap.error(f"--phases: unknown {', '.join(unknown)} (known: {', '.join(PHASES)})")
    tools = {t: getattr(args, t) for t in TOOLS}
    traces = [labelled(t) for t in args.trace] if len(args.trace) > 1 else [(None, args.trace[0])]
    with bench_results.recorded("bench_ctools", argv, args.results):
        runs = []
        for label, trace in traces:
            if label is not None:
                print(f"\n{label}: {trace}")
            ratios: dict = {}
            print("\n".join(compare(trace, args.format, tools, args.repeat, args.tmpdir,
                                     phases, ratios)))
            runs.append((label, ratios))
        if len(traces) > 1:
            print()
            print("\n".join(side_by_side(runs, phases)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

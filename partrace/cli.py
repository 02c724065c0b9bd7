"""The ``partrace`` command: merge, convert, info.

Runs as a plain process or under ``mpiexec``/``srun``.  Imports stay lazy:
``partrace --help`` loads neither numpy, h5py nor mpi4py, and a run loads
only the format and writer it uses.

Exit status: 0 success, 2 bad input or usage (one line on stderr naming the
file and where), 3 internal error, 130 interrupted (Ctrl-C), 143 terminated
(SIGTERM, as Slurm sends at a time limit or `scancel`, to every rank or to one
alone).  An interrupted or failed run removes its spill files and its
unpublished output on every rank (see partrace.engine.stop); warnings and
errors are one line each.
"""
from __future__ import annotations

import argparse
import sys

EPILOG = """\
examples:
  partrace merge trace.otf -o trace.h5
  mpiexec -n 8 partrace merge trace.otf -o merged.otf --streams 4
  partrace convert trace.h5 -o back.otf
  partrace info trace.otf --json
  partrace warm                      # once after install: compile the kernels
"""


def _command(sub, name: str, func, **parser_args) -> argparse.ArgumentParser:
    """A subcommand ``name`` run by ``func(job, args)`` (engine/job.py)."""
    p = sub.add_parser(name, **parser_args)
    p.set_defaults(func=func)
    return p


def _add_input(p: argparse.ArgumentParser, help: str | None = None, then=()) -> None:
    """TRACE, the options ``then`` ((args, kwargs) of add_argument: placed here, they keep
    their place in --help), --format and --reader-option."""
    p.add_argument("trace", help=help)
    for args, kwargs in then:
        p.add_argument(*args, **kwargs)
    p.add_argument("--format", help="input format (default: detected)")
    _add_reader_option(p)


def _add_memory_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory", type=_size, default="2G", metavar="SIZE",
                   help="memory budget per rank")
    p.add_argument("--tmpdir", help="folder for spilled rows (default: $TMPDIR or /tmp)")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    from .output import OUTPUTS     # the registry alone: no sink is imported
    _add_input(p, "input trace (file or folder)", then=[
        (("-o", "--output"), dict(required=True, help="output path: " + ", ".join(
            f"NAME{o.suffixes[0]}" for o in OUTPUTS.values()))),
        (("--to",), dict(choices=list(OUTPUTS), help="output format (default: from the name)"))])
    p.add_argument("--streams", type=int, metavar="M",
                   help="OTF output: number of streams (0 = one per process; "
                        "default: the input's layout, or one per location up to 1024)")
    p.add_argument("--compress", choices=["gzip", "lzf", "zlib"],
                   help="HDF5 output (always compressed; default: shuffle + fast deflate): "
                        "gzip: denser deflate (level 2, more CPU); lzf: h5py's lzf (not "
                        "readable by HDF5's C tools). OTF output: zlib "
                        "(NAME.x.events.z files, as the OTF library writes them)")
    p.add_argument("--memory", type=_size, default="2G", metavar="SIZE",
                   help="memory budget per rank, e.g. 512M, 4G (default 2G): decoded rows "
                        "beyond 7/10 of it (2/5 for OTF output) are spilled to --tmpdir and the merge runs in "
                        "windows of the global order; the output is the same")
    p.add_argument("--tmpdir", help="folder for spilled rows (default: $TMPDIR or /tmp); "
                                    "node-local storage is best")
    p.add_argument("--layout", choices=["single", "parts"],
                   help="HDF5 output: one self-contained file (single, the default) or per-rank "
                        "files in OUT.h5.parts/ joined by virtual datasets in OUT.h5 (parts)")
    p.add_argument("--sync", choices=["none", "offsets", "clc"], default="none",
                   help="clock correction before the global order: none (the summary says how "
                        "many messages the output shows received before they were sent); "
                        "offsets: each process's clock moved by the offset (and drift) its "
                        "messages imply, the decoded time kept in the column time_original; "
                        "clc: offsets, then receives still before their sends moved forward "
                        "with the rest of their location (see docs/clocks.md)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    p.add_argument("--progress", choices=["auto", "bar", "log", "none"], default="auto",
                   help="progress on stderr: a bar, or a line every few seconds (log); "
                        "default: bar on a terminal, else log")
    p.add_argument("--stats", metavar="FILE.json", type=_report_path(".json"),
                   help="write every rank's account of the run as JSON: CPU busy, time "
                        "waiting in MPI, bytes and messages, files opened, peak memory, per "
                        "phase and window (docs/accounts.md)")
    p.add_argument("--self-trace", metavar="FILE",
                   type=_report_path(".pftrace", ".json", ".otf2"),
                   help="write the run itself as a trace, a track per rank with its phases "
                        "and MPI calls: FILE.pftrace (Perfetto), FILE.json (Chrome) or "
                        "FILE.otf2 (Vampir)")


def _add_reader_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reader-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the input format (repeatable); VALUE is JSON where it "
                        "parses (numbers, lists, objects), else text. ROSS: region_size=BYTES, "
                        "model_dtypes='{\"model\": [[\"count\", \"<i8\"], ...]}'")


def reader_options(args) -> dict:
    """--reader-option KEY=VALUE ... as a dict (VALUE as JSON where it parses)."""
    import json
    out = {}
    for item in getattr(args, "reader_option", None) or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            from .errors import UsageError
            raise UsageError(f"--reader-option {item!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def _size(text: str) -> int:
    """--memory SIZE as bytes, or argparse's one-line refusal."""
    from .sizes import parse_size
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _report_path(*suffixes: str):
    """An argparse type: a path ending in one of ``suffixes`` whose folder exists."""
    def check(text: str) -> str:
        import os
        if not text.endswith(suffixes):
            raise argparse.ArgumentTypeError(f"{text!r}: expected a name ending in "
                                             f"{' or '.join(suffixes)}")
        if not os.path.isdir(os.path.dirname(os.path.abspath(text))):
            raise argparse.ArgumentTypeError(f"{text!r}: no such folder")
        if text.endswith(".otf2"):
            from .output.self_trace_otf2 import refusal
            if refusal(text):
                raise argparse.ArgumentTypeError(refusal(text))
        return text
    return check


def build_parser() -> argparse.ArgumentParser:
    from .version import __version__
    parser = argparse.ArgumentParser(
        prog="partrace", description="MPI-parallel trace processing: read OTF, OTF2, DUMPI, "
        "ovni and ROSS traces, merge all events into one global time order, write HDF5, OTF, "
        "OTF2, Perfetto or Chrome JSON; profile, communication, dump and timeline answers from any of them.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"partrace {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = _command(sub, "merge", cmd_run,
                 help="merge every event of every location into one time order",
                 description="Decode the trace on all ranks and write every event in one "
                 "global (time, location, seq) order to HDF5, OTF (remapped onto M "
                 "streams), OTF2, Perfetto or Chrome JSON.")
    _add_run_options(p)
    p = _command(sub, "convert", cmd_run,
                 help="convert a trace (or partrace HDF5) to another format",
                 description="Same engine as merge; any input partrace reads, including "
                 "its own HDF5 output, to HDF5, OTF, OTF2, Perfetto or Chrome JSON.")
    _add_run_options(p)
    p = _command(sub, "info", cmd_info,
                 help="what a trace holds: format, locations, counts, time span")
    _add_input(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_analysis_commands(sub)
    _add_clocks_command(sub)
    p = _command(sub, "warm", cmd_warm,
                 help="compile the numba kernels once (after install); "
                 "say where they are cached",
                 description="Run every command on small sample traces of each format "
                 "(bundled with the package) and on the TRACEs named, in one "
                 "process and then on 2 ranks under mpiexec (the kernels only a parallel "
                 "run uses), so that every compiled kernel is in numba's cache before a "
                 "job starts; print the cache folder and the time taken. A run on 8 "
                 "ranks or more whose cache is cold does this on rank 0 while the other "
                 "ranks wait (PARTRACE_WARM=1: at any rank count, 0: never).")
    p.add_argument("traces", nargs="*", metavar="TRACE",
                   help="traces to warm on besides the samples (with TRACEs and no --format, "
                        "only those)")
    from .warm import SAMPLES      # the registry of samples alone: nothing is compiled
    p.add_argument("--format", dest="formats", action="append", type=str.lower,
                   choices=[*SAMPLES, "hdf5"],
                   help="the samples of this format only (repeatable; default: all)")
    p.add_argument("-q", "--quiet", action="store_true", help="only the summary lines")
    p.add_argument("--parallel-only", action="store_true", help=argparse.SUPPRESS)
    return parser


def _add_analysis_commands(sub) -> None:
    p = _command(sub, "profile", cmd_profile,
                 help="time per region: calls, inclusive and exclusive time",
                 description="Calls, inclusive and exclusive time of every region (function, "
                 "MPI call, ovni state), summed over locations, with min/mean/max over "
                 "locations and the imbalance max/mean. Runs on any number of ranks.")
    _add_input(p)
    p.add_argument("--sort", choices=["exclusive", "inclusive", "calls", "name", "imbalance"],
                   default="exclusive", help="order of the regions (default: exclusive time)")
    p.add_argument("--top", type=int, default=30, metavar="N",
                   help="show the first N regions (0: all; default 30; CSV/JSON give all)")
    p.add_argument("--per-location", action="store_true",
                   help="one row per location and region")
    p.add_argument("--plot", metavar="FILE", help="also draw the profile as bars (.png, .svg, .pdf; "
                   "needs matplotlib)")
    _add_table_options(p)
    p = _command(sub, "comm", cmd_comm,
                 help="who talks to whom: message matrix, sizes, collectives",
                 description="Messages and bytes per sender/receiver pair, the message size "
                 "histogram, and calls and bytes of collectives.")
    _add_input(p)
    p.add_argument("--what", choices=["pairs", "histogram", "collectives"], default=None,
                   help="CSV: which table (default: pairs); text shows all three")
    p.add_argument("--by", choices=["location", "process"], default="location",
                   help="pairs of locations, or of processes (threads summed into their process, "
                        "LPs into their PE)")
    p.add_argument("--top", type=int, default=30, metavar="N",
                   help="show the N pairs with the most bytes, then messages (0: all; default 30; "
                        "CSV/JSON give all pairs by sender and receiver)")
    p.add_argument("--plot", metavar="FILE", help="also draw the matrix as a heatmap (.png, .svg, "
                   ".pdf; needs matplotlib)")
    _add_table_options(p)
    p = _command(sub, "dump", cmd_dump,
                 help="events as text in global time order, with names",
                 description="One line per event in (time, location, seq) order: time (ns, "
                 "or the trace's own unit), location, kind, region and the non-zero "
                 "columns, names instead of ids. "
                 "Filters apply while decoding; output streams (| head ends the run).")
    _add_input(p)
    p.add_argument("--time", metavar="T0:T1", help="only events with T0 <= time < T1 (in the "
                   "trace's time unit, as info shows it: ns, or ROSS's virtual time; either "
                   "side may be empty)")
    p.add_argument("--location", metavar="L,...", help="only these locations (names or ids)")
    p.add_argument("--kind", metavar="K,...", help="only these kinds (enter, leave, send, ...)")
    p.add_argument("--region", metavar="R,...", help="only these regions (names or ids)")
    _add_memory_options(p)
    p = _command(sub, "timeline", cmd_timeline,
                 help="draw a time window: regions per location, messages",
                 description="A picture of a time window: one lane per location (consecutive "
                 "locations share a lane beyond 64), region visits coloured by region, "
                 "messages as lines from send to receive. Needs matplotlib.")
    _add_input(p, then=[(("--plot",), dict(metavar="FILE", required=True,
                                           help="the picture (.png, .svg, .pdf)"))])
    p.add_argument("--time", metavar="T0:T1", help="the window (in the trace's time unit, as "
                   "info shows it: ns, or ROSS's virtual time; default: the whole trace, "
                   "at most 2,000,000 events)")
    _add_memory_options(p)


def _add_clocks_command(sub) -> None:
    p = _command(sub, "clocks", cmd_clocks,
                 help="check the clock condition: receives that end before their send starts",
                 description="Match every message (the k-th send from S to R with a tag on a "
                 "communicator meets the k-th such receive) and show, per pair of processes, "
                 "the messages each way, those whose receive ends before the send starts, the "
                 "largest such violation, the least delay each way and the clock offset they "
                 "imply (half the difference of the least delays, within half their sum); "
                 "collective calls are checked as the many-to-many messages they are. "
                 "See docs/clocks.md.")
    _add_input(p)
    p.add_argument("--by", choices=["process", "location"], default="process",
                   help="pairs of processes (threads share their process's clock; default) or "
                        "of locations")
    p.add_argument("--top", type=int, default=30, metavar="N",
                   help="show the N pairs with the largest violations, then the most messages "
                        "(0: all; default 30; JSON gives all)")
    p.add_argument("--json", action="store_true", help="JSON: totals and one record per pair")


def cmd_clocks(job, args) -> int:
    from .analysis import render as R
    from .analysis.clocks import check
    comm = job.comm
    res = check(args.trace, comm=comm, format=args.format, by=args.by,
                reader_options=reader_options(args))
    if comm.rank == 0:
        print(R.as_json(res) if args.json else R.clocks_text(res, args.top or None))
    return 0


def _add_table_options(p) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--csv", action="store_true", help="CSV with a header row")
    g.add_argument("--json", action="store_true", help="JSON records")
    _add_memory_options(p)


def check_options(comm, args) -> None:
    """Refuse what the options alone show to be wrong, before any work: on rank 0, so that
    under mpiexec it is said once (the caller runs this in a guard, then checks)."""
    if comm.rank != 0:
        return
    _time_range(getattr(args, "time", None))
    if getattr(args, "plot", None) is not None:     # not after the work, as an internal error
        from .analysis.plot import check_target
        check_target(args.plot)


def cmd_profile(job, args) -> int:
    from .analysis import profile
    from .analysis import render as R
    comm = job.comm
    res = profile(args.trace, comm=comm, format=args.format, memory=args.memory, tmpdir=args.tmpdir,
                  reader_options=reader_options(args),
                  per_location=args.per_location)
    if comm.rank != 0:
        return 0
    key = R.PROFILE_SORTS[args.sort]
    res["regions"].sort(key=lambda r: (r[key], r["region"]) if args.sort == "name"
                        else (-r[key], r["region"]))
    if args.json:
        print(R.as_json(res if args.per_location else {k: v for k, v in res.items() if k != "locations"}))
    elif args.csv:
        if args.per_location:
            print(R.as_csv(res["locations"], ["location", "location_id", "region", "region_id",
                                              "calls", "inclusive_ns", "exclusive_ns"]))
        else:
            print(R.as_csv(res["regions"]))
    elif args.per_location:
        print(R.per_location_text(res, args.top or None))
    else:
        print(R.profile_text(res, args.top or None))
    if args.plot:
        from .analysis.plot import profile_bars
        profile_bars(res, args.plot)
    return 0


def cmd_timeline(job, args) -> int:
    from .analysis.timeline import timeline_data
    comm = job.comm
    data = timeline_data(comm, args.trace, format=args.format, shown_time=_time_range(args.time),
                         reader_options=reader_options(args),
                         memory=args.memory, tmpdir=args.tmpdir)
    if comm.rank == 0:
        from .analysis.plot import timeline
        timeline(data, args.plot)
    return 0


def _time_range(text: str | None):
    """--time T0:T1 as (T0, T1) in the trace's own time unit (ns of a wall clock, ROSS's
    virtual time, as ``info`` shows it), None for an empty side."""
    if text is None:
        return None
    from .errors import UsageError
    lo, sep, hi = text.partition(":")
    try:
        if not sep:
            raise ValueError
        t0, t1 = (_number(lo) if lo.strip() else None, _number(hi) if hi.strip() else None)
    except ValueError:
        raise UsageError(f"--time {text}: expected T0:T1 in the trace's time unit, as info "
                         f"shows it (ns: 1000:2000, 5000:; ROSS virtual time: 5:6)") from None
    if t0 is not None and t1 is not None and t0 >= t1:
        raise UsageError(f"--time {text}: an empty window (T0 must be below T1)")
    return t0, t1


def _number(text: str):
    """An integer as one (ns stay exact), else a float (virtual time: 5.5)."""
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if value != value:
            raise ValueError(text) from None
        return value


def cmd_dump(job, args) -> int:
    from .analysis.dump import DumpSink, Stop
    from .engine.pipeline import run
    comm = job.comm

    def split(text):
        return None if text is None else [x.strip() for x in text.split(",") if x.strip()]
    sink = DumpSink(shown_time=_time_range(args.time), locations=split(args.location),
                    kinds=split(args.kind), regions=split(args.region))
    try:
        run(comm, args.trace, sink, format=args.format, memory=args.memory, spill_dir=args.tmpdir,
            reader_options=reader_options(args))
    except Stop:            # the reader closed the pipe (| head): a normal end
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def cmd_comm(job, args) -> int:
    from .analysis import communication
    from .analysis import render as R
    comm = job.comm
    res = communication(args.trace, comm=comm, format=args.format, with_names=True, by=args.by,
                        reader_options=reader_options(args))
    if comm.rank != 0:
        return 0
    names = res.pop("location_names")
    if args.plot:
        from .analysis.plot import comm_heatmap
        comm_heatmap(res, args.plot, names)
    if args.json:
        print(R.as_json(res if args.what is None else res[args.what]))
    elif args.csv:
        cols = {"pairs": ["sender_id", "receiver_id", "sender", "receiver", "messages", "bytes"],
                "histogram": ["low", "high", "messages", "bytes"],
                "collectives": ["collective", "calls", "bytes_sent", "bytes_received", "locations"]}
        what = args.what or "pairs"
        print(R.as_csv(res[what], cols[what]))
    else:
        pairs = res["pairs"].columns
        print(f"messages: {int(pairs['messages'].sum()):,} in {len(res['pairs']):,} "
              f"sender/receiver pairs, {int(pairs['bytes'].sum()):,} bytes")
        if not res["pairs"]:
            print(f"({R.NO_MESSAGES})")
        if res["pairs"]:
            shown = R.heaviest_pairs(res["pairs"], args.top or None)
            print(R.as_text(shown, [("sender", "sender"), ("receiver", "receiver"),
                                    ("messages", "messages"), ("bytes", "bytes")]))
            if len(shown) < len(res["pairs"]):
                print(f"({len(res['pairs']) - len(shown):,} more pairs: --top 0 for all)")
        if res["histogram"]:
            print("\nmessage sizes:")
            print(R.as_text([{**h, "range": f"[{h['low']:,}, {h['high']:,})"} for h in res["histogram"]],
                            [("range", "bytes"), ("messages", "messages"), ("bytes", "total bytes")]))
        if res["collectives"]:
            print("\ncollectives:")
            print(R.as_text(res["collectives"], [("collective", "collective"), ("calls", "calls"),
                                                 ("bytes_sent", "bytes sent"),
                                                 ("bytes_received", "bytes received"),
                                                 ("locations", "locations")]))
    return 0


def cmd_run(job, args) -> int:
    from .merging import CLOCK_SHARE, merge
    comm = job.comm
    done = merge(job, args.trace, args.output, to=args.to, format=args.format,
                 overwrite=args.overwrite, streams=args.streams, compression=args.compress,
                 layout=args.layout, memory=args.memory, tmpdir=args.tmpdir,
                 reader_options=reader_options(args), sync=args.sync,
                 progress="none" if args.quiet else args.progress, count_clocks=not args.quiet,
                 stats=args.stats, self_trace=args.self_trace)
    if done.report_error is not None:
        from .errors import one_line
        print(f"partrace: error: {one_line(done.report_error)}", file=sys.stderr)
    if comm.rank == 0 and not args.quiet:
        stats, counted = done.stats, done.violations
        extra = f", {done.spilled_bytes / 1e6:,.1f} MB spilled" if done.spilled_bytes else ""
        if args.memory < SMALL_BUDGET:      # said where the time it cost is seen
            extra += (f" (--memory {args.memory / 2**20:g}M: under {SMALL_BUDGET >> 20}M most "
                      f"rows spill and windows are many; the default 2G is many times faster)")
        if counted is None:
            extra += (f", messages beyond --memory/{CLOCK_SHARE}: not checked against the "
                      f"clocks (partrace clocks checks them all)")
        elif counted[0] or counted[2]:
            extra += (f", {counted[1]:,} of {counted[0]:,} messages received before they were "
                      f"sent" + (f" and {counted[3]:,} of {counted[2]:,} collectives that a "
                                 f"member left before another entered" if counted[2] else "") +
                      f" (--sync {args.sync})")
        print(f"partrace: wrote {args.output}: {done.events:,} events ({done.rows:,} rows in all "
              f"tables) from {_amount(stats.source_bytes)} in {_files(stats.source_files)} "
              f"in {done.seconds:.2f} s on {comm.size} rank(s), {stats.windows} window(s){extra}, "
              f"peak memory {done.peak_rss_bytes / 2**20:,.0f} MiB per rank", file=sys.stderr)
        if done.report_error is None:
            print(*done.report_lines, sep="\n", file=sys.stderr)
    return 0 if done.report_error is None else 2


# A budget below this makes a run spill and window so much that it is many times slower
# (ring8: 0.5 s at 2G, 12 s at 1M): accepted, and the summary says so
SMALL_BUDGET = 64 << 20


def _amount(nbytes: int) -> str:
    """Bytes as a reader counts them: exact below a megabyte (a small trace is not '0.0 MB')."""
    return f"{nbytes:,} bytes" if nbytes < 1_000_000 else f"{nbytes / 1e6:,.1f} MB"


def _files(n: int) -> str:
    return f"{n:,} file" if n == 1 else f"{n:,} files"


def cmd_info(job, args) -> int:
    from .info import gather_info, render
    comm = job.comm
    report = gather_info(comm, args.trace, args.format, reader_options(args))
    if comm.rank == 0:
        print(render(report, as_json=args.json))
    return 0


def cmd_warm(job, args) -> int:
    from . import warm
    comm = job.comm
    if not args.parallel_only:
        with comm.guard():      # under mpiexec: rank 0 compiles, the others wait
            if comm.rank == 0:  # (already on many ranks: no second mpiexec from a rank)
                warm.main(args, rehearse=not comm.parallel)
        comm.check()
    if comm.parallel:           # then all ranks together, each run failing on all ranks
        warm.main(args, comm)   # alike: the kernels only a parallel run uses
    return 0


# commands that decode a trace: a parallel run of one warms a cold cache on rank 0 first
DECODING = {cmd_run, cmd_info, cmd_profile, cmd_comm, cmd_dump, cmd_timeline, cmd_clocks}


def _one_line_warnings() -> None:
    """Every Python warning as one line: ``partrace: warning: <file>: <what>``.

    The readers' warnings name their file first; the source line Python
    would print under them means nothing to a user.
    """
    import warnings

    def show(message, category, filename, lineno, file=None, line=None):
        from .errors import _first_line
        from .output.staging import public_paths
        text = public_paths(_first_line(str(message)))
        if category is not UserWarning:
            text = f"{text} ({category.__name__})"
        try:
            print(f"partrace: warning: {text}", file=file or sys.stderr)
        except (OSError, ValueError):
            pass

    warnings.showwarning = show


def make_job(args):
    """The job a command runs in (engine/job.py): its input chooses the kernels' mode and a
    parallel run of a command that decodes warms a cold cache on rank 0 first; a merge
    keeps every rank's account."""
    from .engine.job import Job
    decodes = args.func in DECODING
    trace = getattr(args, "trace", None)

    def warm_up(comm):
        from .warm import before_parallel_run
        before_parallel_run(comm, trace, args.format)
    return Job(trace=trace, decodes=decodes, kernels="numba" if args.func is cmd_warm else None,
               checks=lambda comm: check_options(comm, args), warm_up=warm_up,
               account=args.func is cmd_run, keep_slices=bool(getattr(args, "self_trace", None)))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .display import register
    register()      # non-UTF-8 names print as \xNN, never crash a UTF-8 stream
    from .engine import stop
    _one_line_warnings()
    job = make_job(args)
    try:
        with job:   # a failure on this rank alone ends every rank there, its files removed
            code = args.func(job, args)
    except BrokenPipeError:       # output piped into `head` and the like: stop quietly
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (Exception, KeyboardInterrupt, stop.StopRequested) as exc:
        failure = job.describe(exc)     # the job has cleaned up (and, on many ranks, ended)
        if failure.line:
            print(failure.line, file=sys.stderr)
        return failure.code
    late = job.signalled_after_output()     # arrived once the output was complete: it stays
    return code if late is None else late


def _one_blas_thread() -> None:
    """partrace does no linear algebra, yet numpy's OpenBLAS starts a thread per core when
    numpy loads, and those threads wake and spin: one BLAS thread, unless the user chose.
    Only before numpy is imported (its BLAS reads the variables once, at load)."""
    import os
    if "numpy" not in sys.modules:
        for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")


def entry() -> None:
    _one_blas_thread()
    from .kernels import collector
    collector.own_process()     # the process is partrace's alone (not main() in a caller's)
    from .engine import stop
    stop.install()      # before anything slow: a signal during imports exits 143 cleanly
    code = main()
    stop.finished()     # from here a signal changes nothing: the exit status stands
    sys.exit(code)


if __name__ == "__main__":
    entry()

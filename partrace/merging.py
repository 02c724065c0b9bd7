"""A merge or conversion inside a :class:`~partrace.engine.job.Job`: what ``partrace merge``
and ``partrace.merge()`` both run, so that the same input gives the same output, the same
accounts and the same refusals by either path.  They differ only in how they say it: the
command line prints the summary, the API returns it."""
from __future__ import annotations

import time
from dataclasses import dataclass

from .engine.job import Job
from .engine.pipeline import RunStats

# the share of the memory budget a merge keeps of message records to count the clock
# violations its output holds: matching them takes about four times their bytes at the
# end, which the engine's budget does not include (beyond the share: not counted)
CLOCK_SHARE = 40


@dataclass
class Merged:
    """What a merge did: the run's own figures (rank-local), the totals over all ranks,
    the clock check of its output and the accounts' summary lines (rank 0)."""

    stats: RunStats
    seconds: float
    events: int             # over all ranks, as the rows below
    rows: int
    spilled_bytes: int
    peak_rss_bytes: int     # the largest of any rank
    violations: tuple | None    # (messages, late, collectives, late) or None: not counted
    report_lines: list[str]
    report_error: OSError | None = None     # --stats or --self-trace could not be written


def merge(job: Job, trace, output, *, to=None, format=None, overwrite=False, streams=None,
          compression=None, layout=None, memory: int, tmpdir=None, reader_options=None,
          sync: str = "none", progress: str = "none", count_clocks: bool = False,
          stats: str | None = None, self_trace: str | None = None) -> Merged:
    """Collective: make the sink (every rank refuses alike), correct the clocks (``sync``),
    run the engine, count the clock violations of the output (``count_clocks``: within
    1/CLOCK_SHARE of ``memory``) and write the accounts (``stats``, ``self_trace``)."""
    from .analysis.sync import clock_sync
    from .engine.pipeline import run
    from .output import make_sink
    comm = job.comm
    sink = job.open_sink(lambda: make_sink(output, to=to, source=str(trace), overwrite=overwrite,
                                           streams=streams, compression=compression,
                                           layout=layout))
    shown = job.progress(progress)
    t0 = time.perf_counter()
    retime = clock_sync(comm, sync, trace, format=format, reader_options=reader_options,
                        budget=memory // CLOCK_SHARE if count_clocks else -1)   # -1: none
    try:
        stats_ = run(comm, trace, sink, format=format, progress=shown,
                     reader_options=reader_options, memory=memory, spill_dir=tmpdir,
                     retime=retime)
    finally:    # also when the plan fails, before the run's own cleanup
        shown.done()
    violations = retime.violations(comm)
    lines, error = [], None
    try:
        lines = job.report(stats, self_trace, _write_self_trace)
    except OSError as exc:      # the output, published by now, stays
        error = exc
    return Merged(stats_, time.perf_counter() - t0,
                  events=comm.allreduce_sum(stats_.rows_written.get("events", 0)),
                  rows=comm.allreduce_sum(sum(stats_.rows_written.values())),
                  spilled_bytes=comm.allreduce_sum(stats_.spilled_bytes),
                  peak_rss_bytes=comm.allreduce_max(_peak_rss()),
                  violations=violations, report_lines=lines, report_error=error)


def _write_self_trace(path: str, reports: list[dict]) -> None:
    from .output.self_trace import write_self_trace
    write_self_trace(path, reports)


def _peak_rss() -> int:
    """This process's peak resident memory in bytes."""
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # Linux: KiB

"""Benchmark scripts append what they print to docs/results/<script>.md, with where it ran.

Each record is: the date (UTC), the machine (uname, CPU model, CPU count), the git
commit of the tree (with "+ uncommitted changes" when the tree differs from it),
the exact command, and the script's output as printed.  The files are written by
the scripts only, never edited by hand.

    --results FILE    append here instead (``none``: do not record)
    PARTRACE_BENCH_RESULTS=DIR   the default folder instead of docs/results/
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ("<!-- Written by scripts/{script}.py (scripts/bench_results.py appends a record per "
          "run); do not edit by hand. -->")


def add_option(ap: argparse.ArgumentParser, script: str) -> None:
    folder = Path(os.environ.get("PARTRACE_BENCH_RESULTS") or ROOT / "docs" / "results")
    ap.add_argument("--results", default=str(folder / f"{script}.md"), metavar="FILE",
                    help="append this run's output and machine to FILE (default: "
                         f"$PARTRACE_BENCH_RESULTS/{script}.md, else docs/results/{script}.md; "
                         "'none': do not record)")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _git(*args: str) -> str:
    r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def _commit() -> str:
    commit = _git("rev-parse", "--short=12", "HEAD") or "not a git checkout"
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return commit + (" + uncommitted changes" if dirty else "")


def record(script: str, argv: list[str], output: str) -> str:
    """The markdown record of one run."""
    u = platform.uname()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join([f"python scripts/{script}.py", shlex.join(argv)]).rstrip()
    return "\n".join([
        f"## {when}", "",
        f"- machine: {u.system} {u.release} {u.machine}, {_cpu_model()}, "
        f"{os.cpu_count()} CPUs (host {u.node})",
        f"- commit: {_commit()}",
        f"- command: `{command}`", "",
        "```", output.rstrip("\n"), "```", ""])


def append(path: Path, script: str, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a") as f:
        if new:
            f.write(HEADER.format(script=script) + "\n\n"
                    f"# Results of scripts/{script}.py\n\n")
        f.write(text + "\n")


class _Tee(io.TextIOBase):
    def __init__(self, out):
        self.out, self.kept = out, io.StringIO()

    def write(self, s: str) -> int:
        self.kept.write(s)
        return self.out.write(s)

    def flush(self) -> None:
        self.out.flush()


@contextlib.contextmanager
def recorded(script: str, argv: list[str] | None, results: str | None):
    """Print as usual; if the block ends without an error, append what it printed to
    ``results`` (a path, or None/'none' for no record)."""
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield
    if results and results.lower() != "none":
        path = Path(results)
        argv = list(sys.argv[1:] if argv is None else argv)
        append(path, script, record(script, argv, tee.kept.getvalue()))
        print(f"(recorded in {path})", file=sys.stderr)

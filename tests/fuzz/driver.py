"""Run one damaged case through the CLI and check the rule (see test_fuzz.py).

One rank: the case runs in a child forked from this (already warm) process,
which calls ``partrace.cli.main(argv)`` with stdout/stderr sent to files, a
memory limit (RLIMIT_AS) and a wall-clock limit enforced by the parent
(SIGKILL: a hang cannot stall the suite, even inside a blocking system call).
The parent reads the child's peak resident memory from ``wait4``.  A fresh
child per case means no state leaks from one case to the next.

Two ranks: ``mpiexec -n 2 python -m partrace ...`` under a tiny wrapper that
reports the peak resident memory of its descendants (RUSAGE_CHILDREN).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .damage import Case, Fixture, copy_fixture, fixture_root

ROOT = Path(__file__).resolve().parents[2]
RESULTS: list = []             # (ranks, table row) of every failing case, for the summary
MEMORY_LIMIT = 2 << 30          # the bound on peak resident memory
ADDRESS_LIMIT = 3 << 30         # RLIMIT_AS: keeps a blow-up from hurting the machine
TIMEOUT_1 = 30.0                # seconds per case, one rank (a clean case takes < 2 s)
REQUIRE_OFFSET = True           # an error naming an existing file must say the line or byte
TIMEOUT_2 = 60.0                # under mpiexec (start-up of two interpreters included)

# where: a line or byte offset; in an HDF5 file the object (a dataset or group path), whose
# library reports no byte offset for what it cannot read; in an OTF2 event file the record
ERROR_LINE = re.compile(r"^partrace: error: (?P<path>/[^:]*?)"
                        r"(?::(?P<where>line \d+|byte \d+|object /[^:]*|event \d+))?: "
                        r"(?P<msg>\S.*)$")
WARNING_LINE = re.compile(r"^(?:partrace: warning: |(?P<src>\S+\.py):\d+: \w*Warning: )(?P<msg>.*)$")
SUMMARY_LINE = re.compile(r"^partrace: wrote .*: [\d,]+ events \((?P<rows>[\d,]+) rows in all tables\) "
                          r"from .* peak memory "
                          r"(?P<mib>[\d,]+) MiB per rank$")
ACCOUNTS_LINE = re.compile(r"^partrace: per rank: busy .* slowest rank \d+: .*$")


@dataclass
class Outcome:
    rc: int | None              # None: killed at the time limit
    stdout: str
    stderr: str
    peak_rss: int               # bytes, the largest process of the run
    seconds: float
    rows: dict = field(default_factory=dict)   # per table ("*" = total, OTF output)


# --- running ---------------------------------------------------------------------------------

def run_forked(argv: list[str], work: Path, timeout: float = TIMEOUT_1) -> Outcome:
    """``partrace ARGV`` in a forked child of this process (one rank)."""
    out_path, err_path = work / "stdout.txt", work / "stderr.txt"
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:                                        # the child: never returns
        code = 99
        try:
            code = _child(argv, out_path, err_path, work / "spill")
        finally:
            os._exit(code)
    status, usage = None, None
    while time.monotonic() - t0 < timeout:
        got, status, usage = os.wait4(pid, os.WNOHANG)
        if got == pid:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
        status = None
    rc = None if status is None else (os.waitstatus_to_exitcode(status))
    return Outcome(rc, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"),
                   usage.ru_maxrss * 1024, time.monotonic() - t0)


def _child(argv, out_path: Path, err_path: Path, spill: Path) -> int:
    import tempfile
    import warnings
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.environ["TMPDIR"] = str(spill)
    tempfile.tempdir = str(spill)
    # as a plain `partrace` process shows warnings (pytest records them otherwise)
    warnings.resetwarnings()
    warnings.simplefilter("default")
    warnings.showwarning = lambda m, c, f, n, file=None, line=None: sys.stderr.write(
        warnings.formatwarning(m, c, f, n, line))
    code = 98
    try:
        from partrace.cli import main
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:                                # noqa: BLE001 - reported as a traceback
        import traceback
        traceback.print_exc()
        code = 97
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return code


def run_mpiexec(argv: list[str], work: Path, nranks: int = 2,
                timeout: float = TIMEOUT_2) -> Outcome:
    """``mpiexec -n NRANKS python -m partrace ARGV`` (via a wrapper that reports memory)."""
    launcher = Path(sys.executable).parent / "mpiexec"
    report = work / "rusage.json"
    cmd = [sys.executable, "-m", "tests.fuzz.driver", "--rusage", str(report), "--",
           str(launcher), "-n", str(nranks), sys.executable, "-m", "partrace", *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(work / "spill")}
    env.pop("PARTRACE_MPI", None)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT, start_new_session=True,
                            preexec_fn=_limit_address_space)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        info = json.loads(report.read_text()) if report.exists() else {"rc": proc.returncode,
                                                                        "maxrss": 0}
        rc = info["rc"]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        rc, info = None, {"maxrss": 0}
    return Outcome(rc, stdout, stderr, info["maxrss"] * 1024, time.monotonic() - t0)


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))


def _wrapper(argv: list[str]) -> int:
    """``driver --rusage FILE -- CMD...``: run CMD, write its exit status and peak memory."""
    report = Path(argv[argv.index("--rusage") + 1])
    cmd = argv[argv.index("--") + 1:]
    rc = subprocess.call(cmd)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    report.write_text(json.dumps({"rc": rc, "maxrss": peak}))
    return 0


# --- the input tree --------------------------------------------------------------------------

def snapshot(root: Path) -> dict[str, str]:
    """Every entry under root -> its type and content hash (named pipes are not opened)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            rel = p.relative_to(root).as_posix()
            if stat.S_ISREG(st.st_mode):
                out[rel] = "file " + hashlib.sha256(p.read_bytes()).hexdigest()
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = "dir"
            elif stat.S_ISFIFO(st.st_mode):
                out[rel] = "fifo"
            else:
                out[rel] = f"other {st.st_mode:o}"
    return out


# --- rows ------------------------------------------------------------------------------------

def count_rows(case: Case, outcome: Outcome, out_dir: Path) -> dict:
    """Rows per table of a successful run: info's JSON, the HDF5 file, or OTF's summary line."""
    if case.command == "info":
        return dict(json.loads(outcome.stdout)["rows"])
    if case.command == "h5":
        import h5py
        with h5py.File(out_dir / "x.h5", "r") as f:
            return {t: int(f[t]["time"].shape[0]) for t in json.loads(f.attrs["tables"])}
    m = [SUMMARY_LINE.match(x) for x in outcome.stderr.splitlines()]
    m = [x for x in m if x]
    return {"*": int(m[-1]["rows"].replace(",", ""))} if m else {}


# --- one case, start to end ------------------------------------------------------------------

@dataclass
class Result:
    case: Case
    outcome: Outcome
    problems: list[str]

    def row(self) -> str:
        o = self.outcome
        rc = "hang" if o.rc is None else str(o.rc)
        lines = [x for x in o.stderr.splitlines() if x.strip()]
        err = next((x for x in lines if "error" in x or "Traceback" in x), lines[-1] if lines else "")
        return (f"{self.case.id} | {self.case.damage.describe()} | rc={rc} | "
                f"{'; '.join(self.problems)} | {err[:300]}")


def warm_up(fx: Fixture, work: Path) -> None:
    """Merge the clean fixture in this process once, so that children forked later
    start with partrace imported and its kernels loaded (a child that compiles
    or loads numba kernels itself takes seconds)."""
    import partrace
    import partrace.cli  # noqa: F401
    trace = copy_fixture(fx, work)
    for suffix in ("h5", "otf"):
        partrace.merge(trace, work / f"x.{suffix}")


def run_case(case: Case, work: Path, baseline: dict | None, nranks: int = 1,
             timeout: float | None = None) -> Result:
    """Copy, damage, run, check.  ``baseline``: rows of the clean fixture for this command."""
    work.mkdir(parents=True)
    trace = copy_fixture(case.fixture, work / "in")
    root = fixture_root(case.fixture, work / "in")
    case.damage.apply(root)
    out_dir, spill = work / "out", work / "spill"
    out_dir.mkdir()
    spill.mkdir()
    before = snapshot(work / "in")
    argv = case.argv(trace, out_dir, spill)
    if nranks == 1:
        outcome = run_forked(argv, work, timeout or TIMEOUT_1)
    else:
        outcome = run_mpiexec(argv, work, nranks, timeout or TIMEOUT_2)
    problems = check(case, outcome, work, root, trace, out_dir, spill, before, baseline, nranks)
    return Result(case, outcome, problems)


def check(case: Case, o: Outcome, work: Path, root: Path, trace: Path, out_dir: Path,
          spill: Path, before: dict, baseline: dict, nranks: int) -> list[str]:
    problems = []
    text = o.stderr + o.stdout
    if o.rc is None:
        problems.append(f"hang (killed after {o.seconds:.0f} s)")
    elif o.rc not in (0, 2):
        problems.append(f"exit {o.rc}")
    if "Traceback" in text:
        problems.append("traceback")
    if "internal error" in text:
        problems.append("internal error")
    if "MemoryError" in text:
        problems.append("MemoryError")
    if o.peak_rss > MEMORY_LIMIT:
        problems.append(f"peak memory {o.peak_rss >> 20} MiB")
    if snapshot(work / "in") != before:
        problems.append("input changed")
    spilled = sorted(p.name for p in spill.iterdir())
    if spilled:
        problems.append(f"leftover in --tmpdir: {spilled[0]}")
    outputs = sorted(p.name for p in out_dir.iterdir())
    hidden = [n for n in outputs if n.startswith(".")]
    if hidden:
        problems.append(f"leftover staging folder {hidden[0]}")
    lines = [x for x in o.stderr.splitlines() if x.strip()]
    if o.rc == 2:
        if outputs:
            problems.append(f"output left behind: {outputs[0]}")
        problems += _check_error_lines(lines, root, trace, case.fixture.offsets)
    elif o.rc == 0:
        problems += _check_rows(case, o, out_dir, lines, root, baseline, nranks)
    return problems


def _check_error_lines(lines: list[str], root: Path, trace: Path,
                      offsets: bool = True) -> list[str]:
    lines = [x for x in lines if not _is_warning(x, root)]
    if len(lines) != 1:
        return [f"{len(lines)} lines on stderr"]
    m = ERROR_LINE.match(lines[0])
    if not m:
        return ["stderr is not 'partrace: error: FILE[:line N|:byte N]: ...'"]
    path = Path(m["path"])
    inside = path == trace or path == root or root in path.parents
    if not inside:
        return [f"error names {path}, not a file of the trace"]
    if (REQUIRE_OFFSET and offsets and m["where"] is None and path.is_file()
            and not path.is_symlink()):
        return ["error gives no line or byte offset in an existing file"]
    return []


def _is_warning(line: str, root: Path) -> bool:
    """A Python warning naming a file of the trace, or the source line printed under one."""
    m = WARNING_LINE.match(line)
    return bool(m and str(root) in m["msg"]) or line.startswith("  ")


def _check_rows(case: Case, o: Outcome, out_dir: Path, lines: list[str], root: Path,
                baseline: dict, nranks: int) -> list[str]:
    problems = []
    names = sorted(p.name for p in out_dir.iterdir())
    if case.command == "h5":
        expected = {"x.h5"} | ({"x.h5.parts"} if nranks > 1 else set())
        if not set(names) <= expected or "x.h5" not in names:
            problems.append(f"outputs {names}")
    elif case.command == "otf" and ("x.otf" not in names or any(not n.startswith("x.") for n in names)):
        problems.append(f"outputs {names}")
    if problems:
        return problems
    warned = [x for x in lines if WARNING_LINE.match(x) and _is_warning(x, root)]
    others = [x for x in lines if not _is_warning(x, root) and not SUMMARY_LINE.match(x)
              and not ACCOUNTS_LINE.match(x)]
    if others:
        problems.append(f"unexpected stderr: {others[0][:120]}")
    try:
        rows = o.rows = count_rows(case, o, out_dir)
    except Exception as exc:                             # noqa: BLE001 - an unreadable output
        return [f"output unreadable: {type(exc).__name__}: {exc}"]
    if baseline is None:                                 # the clean run itself
        return problems
    # a table the run did not produce has 0 rows (DUMPI and ROSS make tables per kind seen)
    tables = sorted(set(rows) | set(baseline))
    pairs = {t: (baseline.get(t, 0), rows.get(t, 0)) for t in tables}
    fewer = {t: (a, b) for t, (a, b) in pairs.items() if b < a}
    more = {t: (a, b) for t, (a, b) in pairs.items() if b > a}
    if case.damage.rows == "any":       # read as the format's library reads the bytes
        return problems
    if more:
        problems.append("more rows than clean: " + _fmt(more))
    if fewer and not warned and case.damage.rows != "fewer":
        problems.append("rows lost in silence: " + _fmt(fewer))
    return problems


def _fmt(d: dict) -> str:
    return ", ".join(f"{t} {a}->{b}" for t, (a, b) in sorted(d.items()))


if __name__ == "__main__":
    sys.exit(_wrapper(sys.argv[1:]))

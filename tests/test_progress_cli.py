"""Progress under mpiexec: stderr is a file, so rank 0 logs a line per interval,
summed over both ranks, for every phase in order; -q says nothing."""
import re

from partrace.engine.progress import _size
from tests.conftest import run_cli
from tests.support.synth import SynthReader

FAST = {"PARTRACE_PROGRESS_INTERVAL": "0.1"}


def test_two_ranks_log_every_phase_in_order_with_rising_percent_and_eta(synth_trace, tmp_path):
    trace = synth_trace(locations=24, events=60000, units=24)
    out = tmp_path / "out.h5"
    # a small budget: the merge runs in many windows; each unit takes 0.05 s at least, so
    # the decode (compiled kernels: a fraction of a second) logs its progress more than once
    r = run_cli(["merge", str(trace), "-o", str(out), "--memory", "8M"], nranks=2,
                env={**FAST, "PARTRACE_TEST_UNIT_SECONDS": "0.05"})
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("partrace: ")]
    phases = [re.match(r"partrace: (\S+)", line)[1] for line in lines]
    order = [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]
    assert order == ["plan", "decode", "merge+write", "wrote", "per"], order    # "per rank:"
    assert lines[phases.index("decode") - 1].startswith("partrace: plan done in ")

    decode = [re.fullmatch(r"partrace: decode (\d+)% \S+ \S+/\S+ \S+.*\(2 ranks\)", line)
              for line in lines if line.startswith("partrace: decode ") and "%" in line]
    assert decode and all(decode), lines
    percents = [int(m[1]) for m in decode]
    assert percents == sorted(percents) and percents[-1] > 0
    assert any("ETA" in m[0] for m in decode)
    total = sum(u.size for u in SynthReader(trace).units())
    assert f"partrace: decode done: {_size(total)} in " in r.stderr

    windows = [re.fullmatch(r"partrace: merge\+write window (\d+)/(\d+) (ETA \d+:\d\d|\d+:\d\d elapsed)",
                            line) for line in lines if "merge+write window" in line]
    assert windows and all(windows), lines
    n = int(re.search(r"merge\+write done: (\d+) windows", r.stderr)[1])
    summary = re.search(r"(\d+) window\(s\)", r.stderr)
    assert n == int(summary[1]) > 1 and {int(m[2]) for m in windows} == {n}
    seen = [int(m[1]) for m in windows]
    assert seen == sorted(seen) and any(m[3].startswith("ETA") for m in windows)


def test_quiet_and_none_say_nothing_but_errors(synth_trace, tmp_path):
    trace = synth_trace()
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "q.h5"), "-q"], nranks=2, env=FAST)
    assert r.returncode == 0 and r.stderr == ""
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "n.h5"), "--progress", "none"],
                env=FAST)
    assert r.returncode == 0
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"partrace: wrote {tmp_path / 'n.h5'}: ")
    assert lines[1].startswith("partrace: per rank: busy ")       # the ranks' accounts

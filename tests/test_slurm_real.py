"""The Slurm batch scripts under a real Slurm: a one-node cluster on this machine.

scripts/slurm_cluster starts munged, slurmctld and slurmd (Debian's slurm-wlm and
munge; CI installs them) with everything under a temporary folder; the jobs go
through the real ``sbatch``, ``srun --mpi=pmi2`` (the mpich wheel's mpi4py),
``scontrol``, ``squeue`` and ``scancel``.  Skipped, with the reason, where Slurm is
not installed or the cluster does not come up (no root, no munge, ...).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT, SYNTH, run_cli
from tests.support.compare import assert_same_content

pytestmark = [pytest.mark.slow, pytest.mark.mpi]

CLUSTER = ROOT / "scripts" / "slurm_cluster"
SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
DAEMONS = ["munged", "slurmctld", "slurmd"]
CLIENTS = ["sbatch", "srun", "sinfo", "squeue", "scontrol", "scancel"]
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
         "PREEMPTED", "BOOT_FAIL", "DEADLINE")
RING8 = DATA / "otf" / "ring8" / "trace" / "ring8.otf"
OVNI = DATA / "ovni" / "v3-mpisim-small" / "ovni"


class Cluster:
    def __init__(self, folder: Path, env: dict):
        self.folder, self.env = folder, env

    def run(self, *cmd, cwd=None, timeout=60, **extra) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), cwd=cwd or self.folder, env={**self.env, **extra},
                              capture_output=True, text=True, timeout=timeout)

    def submit(self, submit: Path, script: str | Path, *args, ntasks=2, mem="600M",
               **extra) -> str:
        """sbatch slurm/SCRIPT (or the script at a path) on one node with NTASKS tasks and
        --mem-per-cpu=MEM (None: the script's own); the job's id."""
        submit.mkdir(parents=True, exist_ok=True)
        r = self.run("sbatch", "--parsable", "--nodes=1", f"--ntasks-per-node={ntasks}",
                     "--time=00:10:00", *([f"--mem-per-cpu={mem}"] if mem else []),
                     str(ROOT / "slurm" / script), *map(str, args), cwd=submit, **extra)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict:
        r = self.run("scontrol", "show", "job", "-o", job_id)
        assert r.returncode == 0, r.stderr
        fields = {}
        for item in r.stdout.split():
            key, _, value = item.partition("=")
            fields.setdefault(key, value)
        return fields

    def in_queue(self, job_id: str) -> bool:
        """Pending, running or completing (its processes not yet all gone)."""
        r = self.run("squeue", "-h", "-j", job_id, "-o", "%T")
        return r.returncode == 0 and bool(r.stdout.strip())

    def wait(self, job_id: str, timeout=240) -> dict:
        """Wait until the job has left the queue; its scontrol record then."""
        deadline = time.monotonic() + timeout
        while self.in_queue(job_id):
            assert time.monotonic() < deadline, f"job {job_id} still queued: {self.job(job_id)}"
            time.sleep(0.3)
        info = self.job(job_id)
        assert info["JobState"] in ENDED, info
        return info


def _skip_reason() -> str | None:
    missing = [n for n in DAEMONS + CLIENTS if shutil.which(n, path=SEARCH) is None]
    if missing:
        return (f"Slurm not installed ({', '.join(missing)} not found; "
                "apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        return "slurmd runs jobs as their users: the one-node cluster needs root"
    if not (Path(sys.prefix) / "bin" / "partrace").exists():
        return "needs the tests run from a virtualenv with partrace installed (PARTRACE_VENV)"
    if shutil.which("python3", path=SEARCH) is None:
        return "scripts/slurm_cluster needs python3 on PATH"
    return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("slurm")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PARTRACE_", "SLURM_", "SBATCH_", "SRUN_", "SQUEUE_", "PMI",
                                "OMPI_", "HYD", "MPIR_"))
           and k not in ("VIRTUAL_ENV",)}
    env.update(PATH=SEARCH, SLURM_CONF=str(folder / "slurm.conf"),
               PARTRACE_VENV=sys.prefix, SRUN_MPI="pmi2", PYTHONPATH=str(ROOT),
               NUMBA_CACHE_DIR=str(folder / "numba"))
    c = Cluster(folder, env)
    try:
        r = c.run(str(CLUSTER), "start", str(folder), timeout=90, SLURM_CLUSTER_WAIT="60")
    except subprocess.TimeoutExpired:
        r = None
    if r is None or r.returncode != 0:
        c.run(str(CLUSTER), "stop", str(folder))
        why = "timed out" if r is None else (r.stderr.strip().splitlines() or ["?"])[0]
        pytest.skip(f"a one-node Slurm cluster did not come up: {why}")
    try:
        yield c
    finally:
        c.run(str(CLUSTER), "stop", str(folder))


def test_merge_sbatch_on_two_tasks_equals_a_plain_merge(cluster, tmp_path):
    submit = tmp_path / "submit"
    job = cluster.submit(submit, "merge.sbatch", RING8, "merged.h5")
    info = cluster.wait(job)
    log = (submit / f"partrace-merge-{job}.out").read_text()    # the script's own --output
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", (info, log)
    assert info["NumTasks"] == "2" and info["NumNodes"] == "1", info
    assert "partrace: wrote merged.h5: 5,972 events" in log and "on 2 rank(s)" in log, log
    plain = tmp_path / "plain.h5"
    r = run_cli(["merge", str(RING8), "-o", str(plain), "-q"])
    assert r.returncode == 0, r.stderr
    assert_same_content(plain, submit / "merged.h5")


def test_convert_sbatch_on_two_tasks_equals_a_plain_convert(cluster, tmp_path):
    submit = tmp_path / "submit"
    job = cluster.submit(submit, "convert.sbatch", OVNI, "out.h5")
    info = cluster.wait(job)
    log = (submit / f"partrace-convert-{job}.out").read_text()
    assert info["JobState"] == "COMPLETED", (info, log)
    assert "partrace: wrote out.h5" in log and "on 2 rank(s)" in log, log
    plain = tmp_path / "plain.h5"
    r = run_cli(["convert", str(OVNI), "-o", str(plain), "-q"])
    assert r.returncode == 0, r.stderr
    assert_same_content(plain, submit / "out.h5")


@pytest.mark.parametrize("per", ["cpu", "node"])
def test_the_memory_the_job_asked_for_is_partraces_budget(cluster, tmp_path, per):
    # 60M a task either way: partrace's --memory is two thirds of it, which its
    # summary names (it is under the 64M below which it says what that costs)
    submit = tmp_path / "submit"
    if per == "cpu":
        job = cluster.submit(submit, "merge.sbatch", RING8, "m.h5", mem="60M")
    else:
        # sbatch refuses --mem beside the script's own #SBATCH --mem-per-cpu (they are
        # mutually exclusive): --mem is had by editing that line, as a site would
        script = tmp_path / "slurm" / "merge.sbatch"
        script.parent.mkdir()
        text = (ROOT / "slurm" / "merge.sbatch").read_text()
        assert "#SBATCH --mem-per-cpu=3G\n" in text
        script.write_text(text.replace("#SBATCH --mem-per-cpu=3G\n", "#SBATCH --mem=120M\n"))
        job = cluster.submit(submit, script, RING8, "m.h5", mem=None)
    info = cluster.wait(job)
    log = (submit / f"partrace-merge-{job}.out").read_text()
    assert info["JobState"] == "COMPLETED", (info, log)
    if per == "cpu":
        assert info["MinMemoryCPU"] == "60M", info
    else:
        assert info["MinMemoryNode"] == "120M", info
    assert "(--memory 40M: under 64M" in log, log


def test_scancel_mid_run_leaves_nothing(cluster, tmp_path):
    trace_dir, out_dir, spill = tmp_path / "trace", tmp_path / "out", tmp_path / "spill"
    for d in (trace_dir, out_dir, spill):
        d.mkdir()
    trace = trace_dir / "big.json"
    trace.write_text('{"synth": {"locations": 6, "events": 20000, "units": 6, "seed": 3}}')
    out = out_dir / "merged.h5"
    submit = tmp_path / "submit"
    # a tiny budget spills; unit 0005 holds its rank (the test's hook) until cancelled
    job = cluster.submit(submit, "merge.sbatch", trace, out, "--memory", "1M",
                         "--tmpdir", spill, PARTRACE_FORMATS=SYNTH,
                         PARTRACE_TEST_HOLD_DECODE="0005")
    held = trace_dir / "big.json.held"
    deadline = time.monotonic() + 180
    while not (held.exists() and any(spill.iterdir())):
        assert cluster.in_queue(job), (submit / f"partrace-merge-{job}.out").read_text()
        assert time.monotonic() < deadline, "the job never reached the held unit"
        time.sleep(0.2)
    assert cluster.job(job)["JobState"] == "RUNNING"
    assert any(p.name.startswith(".merged.h5.partrace-") for p in out_dir.iterdir())
    r = cluster.run("scancel", job)
    assert r.returncode == 0, r.stderr
    info = cluster.wait(job, timeout=90)
    log = (submit / f"partrace-merge-{job}.out").read_text()
    assert info["JobState"] == "CANCELLED", (info, log)
    assert f"JOB {job} ON" in log and "CANCELLED" in log, log
    assert "partrace: wrote" not in log, log
    # the ranks cleaned up on SIGTERM, before the job left the queue
    assert list(out_dir.iterdir()) == [], log
    assert list(spill.iterdir()) == [], log

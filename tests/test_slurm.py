"""The Slurm batch scripts, end to end under a fake Slurm.

Fake ``sbatch`` does what Slurm does to a job: copies the script to a spool
folder and runs the copy in the submit folder, with SLURM_* set from its
options and the script's #SBATCH lines, output to the --output file;
``scontrol show job`` names the original script; ``srun`` runs
``mpiexec -n $SLURM_NTASKS`` and logs its arguments.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import partrace
from tests.conftest import DATA, ROOT, mpiexec, run_cli

SBATCH = r"""#!/bin/bash
set -eu
ntasks=1; mem=
while [[ "$1" == --* ]]; do
    case "$1" in
        --ntasks=*) ntasks=${1#*=} ;;
        --mem-per-cpu=*) mem=${1#*=} ;;
    esac
    shift
done
script=$1; shift
[ -n "$mem" ] || mem=$(sed -n 's/^#SBATCH --mem-per-cpu=//p' "$script")
out=$(sed -n 's/^#SBATCH --output=//p' "$script"); out=${out//%j/42}
case "$mem" in *G) mb=$(( ${mem%G} * 1024 )) ;; *M) mb=${mem%M} ;; *) mb=$mem ;; esac
spool=$FAKE_SLURM/spool/job42; mkdir -p "$spool"
cp "$script" "$spool/slurm_script"
realpath "$script" > "$FAKE_SLURM/command"
echo "Submitted batch job 42"
SLURM_JOB_ID=42 SLURM_NTASKS=$ntasks SLURM_SUBMIT_DIR=$PWD SLURM_MEM_PER_CPU=$mb \
SLURM_CPUS_PER_TASK=1 bash "$spool/slurm_script" "$@" > "${out:-slurm-42.out}" 2>&1
"""
SCONTROL = r"""#!/bin/bash
echo "JobId=$3 JobName=fake"
echo "   Command=$(cat "$FAKE_SLURM/command")"
"""
SRUN = r"""#!/bin/bash
echo "$@" >> "$FAKE_SLURM/srun.log"
while [[ "$1" == --* ]]; do shift; done
exec "%s" -n "$SLURM_NTASKS" "$@"
"""


@pytest.fixture
def slurm(tmp_path):
    """A fake Slurm on PATH, a checkout (slurm/ beside .venv) and a submit folder elsewhere."""
    venv = Path(sys.prefix)
    if not (venv / "bin" / "partrace").exists() or mpiexec() is None:
        pytest.skip("needs the tests run from a virtualenv with partrace and mpiexec installed")
    fake = tmp_path / "fake-slurm"
    (fake / "bin").mkdir(parents=True)
    for name, text in {"sbatch": SBATCH, "scontrol": SCONTROL, "srun": SRUN % mpiexec()}.items():
        p = fake / "bin" / name
        p.write_text(text)
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "slurm", checkout / "slurm")
    (checkout / ".venv").symlink_to(venv)
    submit = tmp_path / "elsewhere"
    submit.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PARTRACE_", "SLURM_", "PMI", "OMPI_", "HYD"))
           and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(FAKE_SLURM=str(fake), PATH=f"{fake / 'bin'}:/usr/bin:/bin",
               NUMBA_CACHE_DIR=str(tmp_path / "numba"))

    def sbatch(*args, **extra):
        return subprocess.run(["sbatch", *args], cwd=submit, env={**env, **extra},
                              capture_output=True, text=True, timeout=300)
    return sbatch, checkout, submit, fake


def test_merge_sbatch_runs_on_two_ranks_from_another_folder(slurm):
    sbatch, checkout, submit, fake = slurm
    trace = DATA / "otf" / "ring8" / "trace" / "ring8.otf"
    r = sbatch("--ntasks=2", str(checkout / "slurm" / "merge.sbatch"), str(trace), "merged.h5")
    log = (submit / "partrace-merge-42.out").read_text()
    assert r.returncode == 0, log
    assert "on 2 rank(s)" in log
    srun_args = (fake / "srun.log").read_text().split()
    # the site's --mpi default is kept; the budget is 2/3 of the 3G per task
    assert not any(a.startswith("--mpi") for a in srun_args)
    assert srun_args[:2] == ["partrace", "merge"]
    assert srun_args[srun_args.index("--memory") + 1] == f"{3 * 1024 * 2 // 3}M"

    merged = partrace.open(submit / "merged.h5").columns("events")
    ref = json.loads((DATA / "otf" / "ring8" / "reference" / "ring8.summary.json").read_text())
    assert len(merged["time"]) == ref["record_counts_by_section"]["events"]
    # the same as a plain one-rank merge, table by table, column by column
    serial = submit / "serial.h5"
    assert run_cli(["merge", str(trace), "-o", str(serial), "-q"]).returncode == 0
    one, two = partrace.open(serial), partrace.open(submit / "merged.h5")
    assert one.tables == two.tables
    for table in one.tables:
        for name, column in one.columns(table).items():
            np.testing.assert_array_equal(two.columns(table)[name], column, err_msg=f"{table}/{name}")


def test_convert_sbatch_passes_srun_mpi_and_keeps_a_given_memory(slurm, tmp_path):
    sbatch, checkout, submit, fake = slurm
    trace = DATA / "ovni" / "v3-mpisim-small" / "ovni"
    r = sbatch("--ntasks=2", str(checkout / "slurm" / "convert.sbatch"), str(trace), "out.h5",
               "--memory", "64M", SRUN_MPI="pmix")
    log = (submit / "partrace-convert-42.out").read_text()
    assert r.returncode == 0, log
    srun_args = (fake / "srun.log").read_text().split()
    assert srun_args[0] == "--mpi=pmix" and srun_args[1:3] == ["partrace", "convert"]
    assert srun_args.count("--memory") == 1 and "64M" in srun_args
    lines = [line for line in (trace.parent / "ovnidump.txt").read_text().splitlines()
             if line.strip()]
    assert len(partrace.open(submit / "out.h5").columns("events")["time"]) == len(lines)


def test_missing_venv_fails_with_a_clear_message(slurm, tmp_path):
    sbatch, checkout, submit, fake = slurm
    trace = DATA / "otf" / "ring8" / "trace" / "ring8.otf"
    r = sbatch("--ntasks=2", str(checkout / "slurm" / "merge.sbatch"), str(trace), "m.h5",
               PARTRACE_VENV=str(tmp_path / "no-venv"))
    log = (submit / "partrace-merge-42.out").read_text()
    assert r.returncode == 2
    assert f"no virtualenv with partrace in: {tmp_path / 'no-venv'}" in log
    assert not (fake / "srun.log").exists() and not (submit / "m.h5").exists()

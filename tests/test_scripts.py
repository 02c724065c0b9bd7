"""The shipped scripts parse, and the Slurm scripts launch partrace through srun."""
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SHELL = ["slurm/merge.sbatch", "slurm/convert.sbatch", "scripts/test", "scripts/demo",
         "scripts/bench_suite", ".ci/run"]


@pytest.mark.parametrize("script", SHELL)
def test_shell_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(ROOT / script)]).returncode == 0


@pytest.mark.parametrize("name,command", [("merge", "partrace merge"),
                                          ("convert", "partrace convert")])
def test_sbatch_runs_partrace_under_srun(name, command):
    text = (ROOT / "slurm" / f"{name}.sbatch").read_text()
    assert "#SBATCH --nodes" in text and "#SBATCH --time" in text
    assert any(line.startswith("srun ") and command in line for line in text.splitlines())


@pytest.mark.parametrize("gen", ["gen_otf", "gen_dumpi", "gen_ovni", "gen_ross", "bench", "bench_ctools"])
def test_python_scripts_answer_help(gen):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{gen}.py"), "--help"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "usage" in r.stdout

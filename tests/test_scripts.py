"""The shipped scripts parse, and the Slurm scripts launch partrace through srun."""
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.support.scripts import script

SHELL = ["slurm/merge.sbatch", "slurm/convert.sbatch", "scripts/test", "scripts/demo",
         "scripts/bench_suite", "scripts/slurm_cluster", "scripts/parallel_hdf5", ".ci/run"]


@pytest.mark.parametrize("script", SHELL)
def test_shell_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(ROOT / script)]).returncode == 0


@pytest.mark.parametrize("name,command", [("merge", "partrace merge"),
                                          ("convert", "partrace convert")])
def test_sbatch_runs_partrace_under_srun(name, command):
    text = (ROOT / "slurm" / f"{name}.sbatch").read_text()
    assert "#SBATCH --nodes" in text and "#SBATCH --time" in text
    assert any(line.startswith("srun ") and command in line for line in text.splitlines())


@pytest.mark.parametrize("gen", ["gen_otf", "gen_dumpi", "gen_ovni", "gen_ross", "bench",
                                 "bench_ctools", "bench_h5write", "bench_h5window",
                                 "bench_startup", "bench_otf2", "h5_overhead", "gen_cli_docs",
                                 "bench_scaling", "bench_parts_index"])
def test_python_scripts_answer_help(gen):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{gen}.py"), "--help"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "usage" in r.stdout
    assert gen.startswith("gen_") or "--results FILE" in r.stdout     # every benchmark records


def test_bench_record_appends_with_machine_commit_and_command(tmp_path, capsys):
    results = script("bench_results")
    path = tmp_path / "results" / "bench_x.md"
    for n in (1, 2):
        with results.recorded("bench_x", ["TRACE", "--repeat", str(n)], str(path)):
            print(f"| table | {n} |")
    assert "| table | 2 |" in capsys.readouterr().out      # still printed as before
    text = path.read_text()
    assert text.startswith("<!-- Written by scripts/bench_x.py")
    assert text.count("do not edit by hand") == 1           # the header once, records appended
    assert text.count("\n## ") == 2 and text.index("| table | 1 |") < text.index("| table | 2 |")
    assert "- command: `python scripts/bench_x.py TRACE --repeat 2`" in text
    assert "CPUs" in text and "- commit: " in text


def test_bench_record_none_and_failed_runs_write_nothing(tmp_path):
    results = script("bench_results")
    with results.recorded("bench_x", [], "none"):
        print("not kept")
    path = tmp_path / "bench_x.md"
    with pytest.raises(RuntimeError):
        with results.recorded("bench_x", [], str(path)):
            raise RuntimeError("the run failed")
    assert not path.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_bench_ctools_run_records_its_table_in_the_results_file(tmp_path):
    env = {**os.environ, "PARTRACE_BENCH_RESULTS": str(tmp_path), "PYTHONPATH": str(ROOT)}
    trace = "tests/data/dumpi/p2p-4rank"
    # one run: appending to a file that has records is test_bench_record_appends_...'s
    r = subprocess.run([sys.executable, "scripts/bench_ctools.py", trace, "--repeat", "1",
                        "--tmpdir", str(tmp_path / "scratch")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "bench_ctools.md").read_text()
    assert text.count("\n## ") == 1
    assert f"- command: `python scripts/bench_ctools.py {trace} --repeat 1" in text
    assert text.count("| merge->h5 |") == 1 and r.stdout.strip() in text


def test_bench_ctools_net_ratio_takes_the_fixed_cost_off_each_interleaved_run():
    b = script("bench_ctools")
    mine = {"merge->h5": b.Command("p", ["p"], runs=[(3.0, 100, 0), (3.4, 100, 0)])}
    fixed = {"merge->h5": b.Command("p (fixed: s)", ["p", "s"],
                                    runs=[(1.0, 50, 0), (1.0, 50, 0)])}
    theirs = {"merge->h5": b.Command("c", ["c"], runs=[(1.0, 5, 0), (2.0, 5, 0)])}
    ratios = {}
    lines = b.net_of_fixed(mine, theirs, fixed, ratios)
    assert ratios["merge->h5 net"] == (1.2, 1.6)        # (3.4-1)/2 and (3-1)/1: min, median
    assert lines == ["merge->h5: fixed cost 1.000 / 1.000 s (p (fixed: s), peak 50 MiB); "
                     "net of it over c: 1.20x / 1.60x"]

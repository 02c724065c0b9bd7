"""`partrace dump`: every (filtered) event once, in the global order of the HDF5 merge, the
same text on any rank count, and a closed pipe ends the run quietly."""
from __future__ import annotations

import collections
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest

from partrace.model import Kind
from tests.conftest import DATA, ROOT, SYNTH, run_cli

TRACES = {
    "otf": DATA / "otf" / "hybrid16" / "trace" / "hybrid16.otf",
    "dumpi": DATA / "dumpi" / "p2p-4rank",
    "ovni": DATA / "ovni" / "v3-mpisim-small" / "ovni",
    "ross": DATA / "ross" / "pi-np2-opt-evtrace-full-model-gvt" / "stats",
}


def _merged(trace, tmp_path):
    out = tmp_path / "m.h5"
    r = run_cli(["merge", str(trace), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr
    with h5py.File(out, "r") as f:
        ev = {c: f["events"][c][()] for c in ("time", "location", "kind", "region")}
        locs = dict(zip(f["locations"]["id"][()].tolist(), f["locations"]["name"].asstr()[()]))
        regs = dict(zip(f["regions"]["id"][()].tolist(), f["regions"]["name"].asstr()[()]))
    return ev, locs, regs




@pytest.mark.parametrize("name", list(TRACES))
def test_every_event_in_the_merged_order(name, tmp_path):
    ev, locs, regs = _merged(TRACES[name], tmp_path)
    r = run_cli(["dump", str(TRACES[name])])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(ev["time"])
    if name == "ross":      # shown in its own unit, virtual time (stored x 1e9)
        times = np.array([float(x.split(None, 1)[0]) for x in lines])
        assert np.allclose(times, ev["time"] / 1e9, rtol=1e-8, atol=0)
    else:
        times = np.array([int(x.split(None, 1)[0]) for x in lines])
        assert np.array_equal(times, ev["time"])
    for i in np.linspace(0, len(lines) - 1, 25).astype(int).tolist():
        line = lines[i]
        assert locs[int(ev["location"][i])] in line
        assert f"  {Kind(int(ev['kind'][i])).name}" in line
        if ev["region"][i]:
            assert regs[int(ev["region"][i])] in line


def test_filters_select_what_pandas_selects(tmp_path):
    ev, locs, regs = _merged(TRACES["dumpi"], tmp_path)
    by_name = {v: k for k, v in locs.items()}
    r = run_cli(["dump", str(TRACES["dumpi"]), "--kind", "send,recv", "--location", "rank 1,rank 2",
                 "--time", f"{int(ev['time'][100])}:{int(ev['time'][400])}"])
    assert r.returncode == 0, r.stderr
    sel = (np.isin(ev["kind"], [Kind.SEND, Kind.RECV]) & np.isin(ev["location"], [by_name["rank 1"], by_name["rank 2"]])
           & (ev["time"] >= ev["time"][100]) & (ev["time"] < ev["time"][400]))
    lines = r.stdout.splitlines()
    assert len(lines) == int(sel.sum()) > 0
    assert [int(x.split(None, 1)[0]) for x in lines] == ev["time"][sel].tolist()
    r = run_cli(["dump", str(TRACES["dumpi"]), "--region", "MPI_Send"])
    assert len(r.stdout.splitlines()) == int((ev["region"] == [k for k, v in regs.items() if v == "MPI_Send"][0]).sum())


def test_unknown_names_are_usage_errors():
    for opt, value in (("--kind", "bogus"), ("--location", "nowhere"), ("--region", "nothing"), ("--time", "12")):
        r = run_cli(["dump", str(TRACES["otf"]), opt, value])
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert value in r.stderr


@pytest.mark.mpi
def test_same_text_on_1_and_3_ranks():
    outs = []
    for n in (None, 3):
        r = run_cli(["dump", str(TRACES["otf"])], nranks=n)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1] and outs[0]


@pytest.mark.parametrize("nranks", [None, 2])
def test_a_closed_pipe_ends_the_run_quietly(nranks, tmp_path):
    trace = tmp_path / "s.json"
    trace.write_text('{"synth": {"locations": 8, "events": 40000, "units": 4, "seed": 1}}')
    cmd = [sys.executable, "-m", "partrace", "dump", str(trace), "--memory", "8M"]
    if nranks:
        from tests.conftest import mpiexec
        cmd = [mpiexec(), "-n", str(nranks), *cmd]
    import os
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH}
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    first = p.stdout.readline()
    p.stdout.close()                    # as `| head -1` does
    err = p.stderr.read().decode()
    code = p.wait(timeout=120)
    # a plain process ends with 0; under mpiexec the launcher, which relays the ranks' output,
    # takes the SIGPIPE itself (-13) and ends the job, as `mpiexec ... | head` does in a shell
    assert code == 0 or (nranks and code == -13), (code, err)
    assert first and "Traceback" not in err and "error" not in err
    import time
    for _ in range(50):             # no rank left behind
        left = subprocess.run(["pgrep", "-f", str(trace)], capture_output=True, text=True).stdout.split()
        if not left:
            break
        time.sleep(0.2)
    assert not left


APEX = DATA / "corpus" / "otf2" / "apex-movielens" / "APEX.otf2"     # metrics of doubles


def test_counters_by_name_with_their_values_as_the_otf2_library_reads_them():
    """Every Metric record of an APEX archive (one double each), as OTF2's own Python reader
    gives it, is a COUNTER line naming its metric, its value the double (not its bits)."""
    otf2 = pytest.importorskip("otf2")
    want = collections.Counter()
    with otf2.reader.open(str(APEX)) as trace:
        for _, ev in trace.events:
            if type(ev).__name__ == "Metric":
                members = ev.metric.members if hasattr(ev.metric, "members") else \
                    ev.metric.metric_class.members
                assert len(members) == 1 and isinstance(ev.values[0], float)
                want[members[0].name, ev.values[0]] += 1
    r = run_cli(["dump", str(APEX), "--kind", "counter"])
    assert r.returncode == 0, r.stderr
    got = collections.Counter()
    for line in r.stdout.splitlines():
        name = re.search(r"  counter=(.*?)  (value=|record=)", line).group(1)
        value = re.search(r"  value=(\S+)", line)
        got[name, float(value.group(1)) if value else 0.0] += 1
    assert sum(want.values()) > 1000 and got == want

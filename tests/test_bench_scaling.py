"""scripts/bench_scaling.py on a tiny trace at 1 and 2 ranks: its tables, its model and the
check that every rank count wrote the same output."""
import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, run_cli
from tests.support.scripts import script


@pytest.mark.slow
@pytest.mark.mpi
def test_bench_scaling_tables_model_and_identity(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_scaling.py"), "--mb", "0.3",
         "--ranks", "1,2", "--formats", "dumpi", "--outputs", "h5", "--wall-rounds", "1",
         "--workdir", str(tmp_path), "--results", str(tmp_path / "results.md")],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "### dumpi" in out and "-> h5" in out
    assert "| phase | busy(1) s | P=1 | P=2 |" in out
    for phase in ("start-up", "plan", "decode", "cuts", "exchange", "merge", "write", "commit",
                  "total"):
        assert f"| {phase} |" in out
    assert "same data at every P: yes" in out           # the identity check ran and held
    assert "identity across rank counts: every output the same" in out
    assert "t(2)/t(1)" in out
    assert "The busiest rank over the whole run, and rank 0, over the mean busy time: P=2: rank" \
        in out
    assert "two 1-rank merges side by side" in out and "fixed per process" in out
    assert "| step | P=1 | P=32 | P=256 | P=1024 |" in out
    assert "| HDF5 join: rank 0 places the chunks |" in out and "| modelled E(P) |" in out
    assert "| HDF5 join: each rank fills its own |" in out
    assert "for an input of 1,000 GB" in out and "| modelled E(P) without the join |" in out
    assert "lists the files in parts" not in out   # DUMPI's rank files are listed by name
    assert "## " in (tmp_path / "results.md").read_text()


def test_the_otf2_trace_is_the_otf_one_written_by_the_otf2_library(tmp_path):
    """OTF2 has no generator of its own: the OTF trace's events, merged to OTF2 (partrace
    writes OTF2 through the library); the same events, read back by partrace."""
    bench = script("bench_scaling")
    otf2 = bench.generate("otf2", 0.05, tmp_path)
    assert otf2 == tmp_path / "otf2" / "gen.otf2" and otf2.is_file()
    events = []
    for trace in (tmp_path / "otf" / "gen.otf", otf2):
        r = run_cli(["info", str(trace), "--json"])
        assert r.returncode == 0, r.stderr
        events.append(json.loads(r.stdout)["events"])
    assert events[0] == events[1] > 0
    assert bench.generate("otf2", 0.05, tmp_path) == otf2      # made once


def test_a_trace_s_bytes_are_its_own_folder_s_not_its_neighbours(tmp_path):
    """The traces of every format sit side by side in one folder; ROSS's trace is a folder
    of its own, the others a file in one: each counts its own files only."""
    bench = script("bench_scaling")
    for name, size in (("ross/a", 3), ("ross/b", 4), ("otf/gen.otf", 5), ("otf/gen.1.z", 6),
                       ("dumpi/synth.meta", 7)):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * size)
    assert bench.trace_bytes(tmp_path / "ross") == 7
    assert bench.trace_bytes(tmp_path / "otf" / "gen.otf") == 11
    assert bench.trace_bytes(tmp_path / "dumpi" / "synth.meta") == 7


def _run(busy_by_rank: list[float]) -> dict:
    """An account as --stats writes it: the same busy time in the decode and the start-up."""
    def phase(b):
        return {"busy_s": b, "sent_bytes": 0, "recv_bytes": 0, "sent_messages": 0,
                "recv_messages": 0}
    return {"ranks": [{"busy_s": 2 * b, "phases": {"decode": phase(b), "start-up": phase(b)}}
                      for b in busy_by_rank]}


def test_the_busiest_rank_is_named_beside_rank_0():
    """The rank with the most busy time, its excess over the mean and rank 0's, as the
    benchmark prints them under the phase table."""
    sm = script("scaling_model")
    busy = [1.2, 0.9, 1.5, 0.8]
    mean = sum(busy) / len(busy)
    top, over, rank0 = sm.busiest(_run(busy))
    assert top == 2
    assert over == pytest.approx(1.5 / mean - 1) and rank0 == pytest.approx(1.2 / mean - 1)
    assert sm.busiest(_run([2.0, 1.0]))[0] == 0


def test_model_grows_only_the_work_that_divides():
    """busy = 8/P + 0.5 measured; a 4x larger input models 32/P + 0.5 in the decode: the
    fixed share of a rank does not grow with the input, nor does a phase that works on no
    rows (the start-up keeps 8/P + 0.5)."""
    sm = script("scaling_model")
    runs = {p: _run([8 / p + 0.5] * p) for p in (1, 2, 4, 8)}
    rates = sm.Rates(1e9, 0, 1e9, 1e9, 1e9, 0)
    same = dict(sm.model(runs, 0, None, rates, [1, 64]))["decode"]
    grown = dict(sm.model(runs, 0, None, rates, [1, 64], grow=4))["decode"]
    assert same == pytest.approx([8.5, 8 / 64 + 0.5], rel=1e-6)
    assert grown == pytest.approx([32.5, 32 / 64 + 0.5], rel=1e-6)
    start = dict(sm.model(runs, 0, None, rates, [1, 64], grow=4))["start-up"]
    assert start == pytest.approx(same, rel=1e-6)


def test_model_of_the_join_places_on_rank_0_and_fills_on_every_rank():
    """Rank 0 placed 40 chunks of 10 datasets, 4 MB, in 0.05 s, 0.02 s of it the first
    chunk of each dataset: 0.02 s for the datasets and 1 ms a further chunk, 1e-5 chunks
    a byte.
    A 1 GB output on 4 ranks: 10 datasets and 3/4 of 10,000 chunks, 7.52 s; each rank
    fills its quarter at 1 GB/s read and 0.5 GB/s written (0.75 s); one rank joins
    nothing."""
    sm = script("scaling_model")
    runs = {p: _run([8 / p + 0.5] * p) for p in (1, 2, 4, 8)}
    runs[8]["ranks"][0]["output"] = {"placed_bytes": 4_000_000, "placed_chunks": 40,
                                     "placed_datasets": 10, "place_seconds": 0.05,
                                     "first_place_seconds": 0.02}
    cost = sm.join_cost(runs[8])
    assert cost == pytest.approx((0.02, 0.001, 1e-5)) and sm.join_cost(runs[1]) == (0, 0, 0)
    rates = sm.Rates(1e9, 0, 1e9, 0.5e9, 1e9, 0)
    rows = dict(sm.model(runs, 1e9, cost, rates, [1, 4]))
    assert rows[sm.JOIN_PLACE] == pytest.approx([0.0, 0.02 + 7.5], rel=1e-6)
    assert rows[sm.JOIN_FILL] == pytest.approx([0.0, 0.75], rel=1e-6)


def test_model_of_the_join_spreads_the_placing_rank_0_gives_rows_up_for():
    """10 s of placing in 10 windows on 4 ranks, 1 s a window.  The second window's (the
    first's chunks) against rank 0's guess, 0.09 of a piece (9 s of 100 s of window work
    a rank): the others' extra rows, 3 s each, cost more than the placing exceeds it by.
    Windows 3-10 place 8 s, a quarter each while rank 0 has rows to give up, else what
    they exceed a rank's rows by (1 s of it: 8 - 1).  The last window's, at commit: 1 s.
    One window: all of it; two: the commit's 5 s and the others' 3 s of extra rows."""
    sm = script("scaling_model")
    assert sm.placing_cost(10.0, 4, 10, 100.0) == pytest.approx(1 + 3 + 8 / 4)
    assert sm.placing_cost(10.0, 4, 10, 1.0) == pytest.approx(1 + 0.91 + 7)
    assert sm.placing_cost(10.0, 4, 1, 100.0) == pytest.approx(10.0)
    assert sm.placing_cost(10.0, 4, 2, 100.0) == pytest.approx(5 + 3)


def test_model_of_the_join_grows_a_long_table_s_chunks_by_the_sink_s_rule():
    """Rank 0 placed 40 chunks, 30 of them the numbers of a table of 2**20 rows in chunks
    of 2**16 (the rule's), 10 of text.  An output 2**14 times as long: that table's
    2**34 rows go in chunks of the rule's longest, 2**18 (4x fewer chunks a byte), the
    text's as many a byte as measured; a table whose chunk rows the environment chose
    (2**10, not the rule's) keeps them."""
    sm = script("scaling_model")
    from partrace.formats.hdf5 import layout
    runs = {p: _run([8 / p + 0.5] * p) for p in (1, 8)}
    runs[8]["ranks"][0]["output"] = {"placed_bytes": 4_000_000, "placed_chunks": 40,
                                     "placed_datasets": 10, "place_seconds": 0.05,
                                     "first_place_seconds": 0.02,
                                     "tables": {"events": [1 << 20, 1 << 16, 30]}}
    assert layout.grown_chunk_rows(1 << 34) == layout.GROWN_CHUNK_ROWS == 1 << 18
    first, per_chunk, per_byte = sm.join_cost(runs[8], grow=1 << 14)
    assert (first, per_chunk) == pytest.approx((0.02, 0.001))
    assert per_byte == pytest.approx((30 / 4 + 10) / 4_000_000)
    assert sm.join_cost(runs[8])[2] == pytest.approx(40 / 4_000_000)
    runs[8]["ranks"][0]["output"]["tables"] = {"events": [1 << 20, 1 << 10, 30]}
    assert sm.join_cost(runs[8], grow=1 << 14)[2] == pytest.approx(40 / 4_000_000)


def test_model_of_the_join_takes_the_median_cpu_per_chunk_of_the_runs():
    """Rank 0's CPU per chunk at 2, 4 and 8 ranks: 1, 3 and 2 ms (the first chunk of each
    dataset apart): the model takes 2 ms; the datasets' cost and the chunks a byte are the
    run's given first; a run that placed no further chunk says nothing."""
    sm = script("scaling_model")
    runs = {p: _run([8 / p + 0.5] * p) for p in (1, 2, 4, 8)}
    for p, ms in ((2, 1), (4, 3), (8, 2)):
        runs[p]["ranks"][0]["output"] = {"placed_bytes": 1000 * p, "placed_chunks": 10 * p + 5,
                                         "placed_datasets": 5,
                                         "place_seconds": 0.01 + 10 * p * ms / 1000,
                                         "first_place_seconds": 0.01}
    cost = sm.join_cost(runs[8], 1.0, [runs[1], runs[2], runs[4]])
    assert cost == pytest.approx((0.01, 0.002, 85 / 8000))
    assert sm.join_cost(runs[8], 1.0, [runs[4]])[1] == pytest.approx(0.0025)


def test_model_copies_only_what_the_parts_kept_and_fits_the_write_without_placing():
    """Ranks 1 and 2 wrote 3 MB straight into the file and 1 MB was filled in from their
    parts: the join's copying step carries a quarter of the output; an account that does
    not say carries all of it.  Rank 0's placing after each window (0.5 s of its write)
    is the join's step, not the write's work: the write is fitted without it."""
    sm = script("scaling_model")
    runs = {p: _run([8 / p + 0.5] * p) for p in (1, 2, 3)}
    for p in (2, 3):
        for r in runs[p]["ranks"]:
            r["phases"]["write"] = dict(r["phases"]["decode"])
    runs[3]["ranks"] = [dict(r) for r in runs[3]["ranks"]]
    runs[3]["ranks"][0]["phases"] = dict(runs[3]["ranks"][0]["phases"])
    runs[3]["ranks"][0]["phases"]["write"] = dict(runs[3]["ranks"][0]["phases"]["write"])
    runs[3]["ranks"][0]["phases"]["write"]["busy_s"] += 0.5
    runs[3]["ranks"][0]["output"] = {"window_place_seconds": 0.5}
    runs[3]["ranks"][1]["output"] = {"direct_bytes": 2_000_000, "filled_bytes": 1_000_000}
    runs[3]["ranks"][2]["output"] = {"direct_bytes": 1_000_000, "filled_bytes": 0}
    assert sm.filled_share(runs[3]) == pytest.approx(0.25)
    assert sm.filled_share(runs[2]) == 1.0
    assert sm.row_work(runs[3], "write") == pytest.approx(sm.busy(runs[3], "decode"))
    assert sm.busy(runs[3], "write")[0] == pytest.approx(8 / 3 + 1.0)
    rates = sm.Rates(1e9, 0, 1e9, 0.5e9, 1e9, 0)
    cost = (0.0, 0.001, 1e-5)
    rows = dict(sm.model(runs, 1e9, cost, rates, [1, 4], filled=0.25))
    assert rows[sm.JOIN_FILL] == pytest.approx([0.0, 0.25 * 0.75], rel=1e-6)


def test_model_grows_a_listing_in_parts_a_pth_a_rank():
    """A listing in parts that reads the files' bytes (ROSS), measured 3 s for all files on one
    rank: a 4x larger input adds 3 x 3 s to the plan at P = 1, 3 x 1.5 at P = 2 and
    3 x 3/64 s at P = 64; with no such listing the plan keeps its fit (here 8/P + 0.5)."""
    sm = script("scaling_model")
    def plan_run(b):
        phase = {"busy_s": b, "sent_bytes": 0, "recv_bytes": 0, "sent_messages": 0,
                 "recv_messages": 0}
        return {"busy_s": b, "phases": {"plan": phase}}
    runs = {p: {"ranks": [plan_run(8 / p + 0.5)] * p} for p in (1, 2, 4, 8)}
    rates = sm.Rates(1e9, 0, 1e9, 1e9, 1e9, 0)
    kept = dict(sm.model(runs, 0, None, rates, [1, 2, 64], grow=4))["plan"]
    listed = dict(sm.model(runs, 0, None, rates, [1, 2, 64], grow=4, listing=(3.0, 0.4)))["plan"]
    fitted = [8.5, 4.5, 8 / 64 + 0.5]
    assert kept == pytest.approx(fitted, rel=1e-6)
    assert listed == pytest.approx([fitted[0] + 9, fitted[1] + 4.5, fitted[2] + 9 / 64],
                                   rel=1e-6)


def _windowed(p: int, x: float, per_window: float) -> dict:
    """An account of a run of ceil(x / P) windows whose exchange sends ``per_window``
    messages a window on every rank."""
    w = math.ceil(x / p)
    phase = {"busy_s": 1.0, "sent_bytes": 0, "recv_bytes": 0,
             "sent_messages": w * per_window * (p > 1), "recv_messages": 0}
    return {"ranks": [{"busy_s": 1.0, "phases": {"exchange": phase},
                       "windows": [{"window": k} for k in range(w)]} for _ in range(p)]}


def test_model_sends_each_window_s_messages_for_the_windows_a_larger_input_takes():
    """Windows of a run: ceil(x / P), x the input's decoded bytes over a window's (6.5
    here).  A window costs each rank 2 (P - 1) messages whatever the input; a 100x larger
    input takes ceil(650 / P) windows, so at P = 64 it sends 11 x 126 messages a rank,
    not 100 x what the measured run sent."""
    sm = script("scaling_model")
    runs = {p: _windowed(p, 6.5, 2 * (p - 1)) for p in (1, 2, 4, 8, 16)}
    assert sm.windows_at_one(runs) == pytest.approx(6.5)
    rates = sm.Rates(1e9, 1.0, 1e9, 1e9, 1e9, 0)       # a second a message: seconds = messages
    cpu = dict(sm.model(runs, 0, None, rates, [64], grow=100))["exchange"][0] - 1.0
    assert cpu == pytest.approx(math.ceil(650 / 64) * 2 * 63, rel=1e-6)


def test_wall_bounds_split_the_fixed_part_from_the_work_the_ranks_share(capsys):
    """t(1) = 3 s with 2 s of shared phases: 1 s fixed, 1 + 2 / 2 = 2 s at best on 2 ranks;
    two copies side by side in 3.3 s: this machine allows 1.1 / 2.  The fixed part comes
    from the accounted run's own wall where it is given (4 s: 2 s fixed, 3 / 4 at best)."""
    bench = script("bench_scaling")
    one = {"ranks": [{"phases": {"start-up": {"busy_s": 0.2}, "kernels": {"busy_s": 0.3},
                                 "decode": {"busy_s": 1.5}, "write": {"busy_s": 0.5}}}]}
    assert math.isclose(bench.divisible_seconds(one), 2.0)
    bench.print_wall(3, {"t1": 3.0, "t2": 2.4, "ratio2": 0.8, "tpair": 3.3, "ratiopair": 1.1},
                     bench.divisible_seconds(one))
    out = capsys.readouterr().out
    assert "t(2)/t(1) 0.80" in out and "ideal t(2)/t(1) is 0.55" in out
    assert "1.00 s; with the rest halved, t(2)/t(1) 0.67" in out
    bench.print_wall(3, {"t1": 3.0, "t2": 2.4, "ratio2": 0.8, "tpair": 3.3, "ratiopair": 1.1},
                     bench.divisible_seconds(one), accounted=4.0)
    assert "run's 4.00 s less its phases the ranks share): 2.00 s; with the rest halved, " \
        "t(2)/t(1) 0.75" in capsys.readouterr().out
    bench.print_wall(3, {"t1": 1.5, "t2": 1.0, "ratio2": 0.7, "tpair": 1.6, "ratiopair": 1.05},
                     bench.divisible_seconds(one))        # more CPU than wall: said, no bound
    assert "not told apart (the 1-rank account's shared phases took 2.00 s" in \
        capsys.readouterr().out

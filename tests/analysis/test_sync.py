"""`merge --sync`: clocks moved onto one reference before the global order, checked on
traces written from a known schedule on skewed clocks (tests/support/skew.py): the output's
messages counted again here, from its rows, by MPI's matching rule."""
from __future__ import annotations

import json
import re

import h5py
import numpy as np
import pytest

from tests.conftest import DATA, run_cli
from tests.support import skew
from tests.support.compare import assert_same_content

OFFSETS = np.array([0, 30_000, -20_000, 5_000, 123_457])


def merge(trace, out, *extra, nranks=None) -> str:
    r = run_cli(["merge", str(trace), "-o", str(out), "--progress", "none", *extra], nranks)
    assert r.returncode == 0, r.stderr
    return r.stderr


def late_messages(h5) -> tuple[int, int]:
    """(messages, received before sent) of an HDF5 output: the k-th send of (sender,
    receiver, tag) in the sender's order meets the k-th such receive."""
    with h5py.File(h5, "r") as f:
        ev = {c: f["events"][c][()] for c in ("time", "location", "seq", "kind", "peer", "tag")}
    sends, recvs = {}, {}
    order = np.lexsort((ev["seq"], ev["time"], ev["location"]))
    for i in order.tolist():
        kind, loc, peer = int(ev["kind"][i]), int(ev["location"][i]), int(ev["peer"][i])
        if kind == 3 and peer:
            sends.setdefault((loc, peer, int(ev["tag"][i])), []).append(int(ev["time"][i]))
        elif kind == 4 and peer:
            recvs.setdefault((peer, loc, int(ev["tag"][i])), []).append(int(ev["time"][i]))
    pairs = [(s, r) for key in sends for s, r in zip(sends[key], recvs.get(key, []))]
    return len(pairs), sum(r < s for s, r in pairs)


def summary(stderr: str) -> tuple[int, int, str]:
    """(messages, received before sent, --sync) from the summary line."""
    m = re.search(r"([\d,]+) of ([\d,]+) messages received before they were sent"
                  r"(?: and [\d,]+ of [\d,]+ collectives that a member left before another "
                  r"entered)? \(--sync (\w+)\)", stderr)
    return int(m[2].replace(",", "")), int(m[1].replace(",", "")), m[3]


def collectives_summary(stderr: str) -> tuple[int, int]:
    """(collectives checked, left by a member before another entered) from the summary."""
    m = re.search(r"and ([\d,]+) of ([\d,]+) collectives that a member left before another "
                  r"entered", stderr)
    return int(m[2].replace(",", "")), int(m[1].replace(",", ""))


@pytest.fixture(scope="module")
def skewed(tmp_path_factory):
    d = tmp_path_factory.mktemp("skew")
    sched = skew.schedule(5, 600, seed=7)
    clocks = skew.Clocks(OFFSETS, np.zeros(5))
    return sched, clocks, skew.write_dumpi(d / "trace", sched, clocks)


def test_none_counts_the_violations_and_changes_nothing(tmp_path, skewed):
    sched, clocks, trace = skewed
    said = merge(trace, tmp_path / "none.h5", "--sync", "none")
    merge(trace, tmp_path / "plain.h5")
    assert_same_content(tmp_path / "none.h5", tmp_path / "plain.h5")
    sent, received = skew.observed(sched, clocks)
    truth = int((received < sent).sum())
    assert truth > 0
    assert summary(said) == (600, truth, "none")
    assert late_messages(tmp_path / "none.h5") == (600, truth)


def test_offsets_remove_the_violations_same_output_on_1_and_3_ranks(tmp_path, skewed):
    sched, clocks, trace = skewed
    said = merge(trace, tmp_path / "one.h5", "--sync", "offsets")
    merge(trace, tmp_path / "three.h5", "--sync", "offsets", nranks=3)
    assert_same_content(tmp_path / "one.h5", tmp_path / "three.h5")
    assert summary(said) == (600, 0, "offsets")
    assert late_messages(tmp_path / "one.h5") == (600, 0)
    merge(trace, tmp_path / "none.h5")
    with h5py.File(tmp_path / "one.h5", "r") as f, h5py.File(tmp_path / "none.h5", "r") as g:
        assert json.loads(f["definitions"].attrs["attrs"])["clock_sync"] == "offsets"
        assert "clock_sync" not in json.loads(g["definitions"].attrs["attrs"])
        ev = {c: f["events"][c][()] for c in ("time", "time_original", "location", "seq")}
        before = {c: g["events"][c][()] for c in ("time", "location", "seq")}
    # the decoded times are kept, row for row
    key = np.lexsort((ev["seq"], ev["location"]))
    key0 = np.lexsort((before["seq"], before["location"]))
    assert np.array_equal(ev["time_original"][key], before["time"][key0])
    # each rank moved by one amount: its clock's offset from rank 0's, within the least latency
    least = int((sched.received - sched.sent).min())
    for rank in range(5):
        moved = np.unique((ev["time_original"] - ev["time"])[ev["location"] == rank + 1])
        assert len(moved) == 1
        assert abs(int(moved[0]) - (OFFSETS[rank] - OFFSETS[0])) <= least
    # and the output is in its own global order
    order = np.lexsort((ev["seq"], ev["location"], ev["time"]))
    assert np.array_equal(order, np.arange(len(order)))


def test_offsets_follow_a_drift(tmp_path):
    """Clocks 40 us apart and drifting 100 ppm: the offsets (a line in time) leave no message
    received before it was sent, where a constant shift could not."""
    sched = skew.schedule(2, 8000, latency=500, jitter=1500, gap=4_000, seed=5)
    clocks = skew.Clocks(np.array([0, 40_000]), np.array([0.0, 1e-4]))
    trace = skew.write_otf(tmp_path / "o" / "t.otf", sched, clocks)
    said = merge(trace, tmp_path / "none.h5")
    assert summary(said)[1] > 0
    said = merge(trace, tmp_path / "sync.h5", "--sync", "offsets")
    assert summary(said) == (8000, 0, "offsets")
    assert late_messages(tmp_path / "sync.h5") == (8000, 0)
    with h5py.File(tmp_path / "sync.h5", "r") as f:
        ev = {c: f["events"][c][()] for c in ("time", "time_original", "location")}
    moved = (ev["time_original"] - ev["time"])[ev["location"] == 2]
    t = ev["time_original"][ev["location"] == 2]
    truth = 40_000 + 1e-4 * (t - 40_000 - skew.T0)      # b's offset at its own reading t
    assert np.abs(moved - truth).max() <= 500        # the least latency


@pytest.mark.parametrize("trace", [DATA / "dumpi" / "p2p-4rank",
                                   DATA / "otf" / "ring8" / "trace" / "ring8.otf"])
def test_one_clock_is_left_as_it_is(tmp_path, trace):
    said = merge(trace, tmp_path / "sync.h5", "--sync", "offsets")
    assert summary(said)[1:] == (0, "offsets")
    with h5py.File(tmp_path / "sync.h5", "r") as f:
        for name in json.loads(f.attrs["tables"]):
            if "time_original" in f[name]:
                assert np.array_equal(f[name]["time"][()], f[name]["time_original"][()])


def test_exact_generated_clocks_left_as_they_are(tmp_path):
    sched = skew.schedule(4, 400, seed=3)
    trace = skew.write_dumpi(tmp_path / "d", sched, skew.Clocks.exact(4))
    said = merge(trace, tmp_path / "sync.h5", "--sync", "offsets")
    assert summary(said) == (400, 0, "offsets")
    with h5py.File(tmp_path / "sync.h5", "r") as f:
        assert np.array_equal(f["events"]["time"][()], f["events"]["time_original"][()])


@pytest.mark.parametrize("suffix", [".otf", ".otf2", ".json"])
def test_other_outputs_take_the_corrected_order(tmp_path, skewed, suffix):
    _, _, trace = skewed
    said = merge(trace, tmp_path / f"out{suffix}", "--sync", "offsets")
    assert summary(said) == (600, 0, "offsets")


def test_records_beyond_the_budget_are_not_counted(tmp_path):
    """8000 messages are 16000 records of 56 bytes: more than --memory 1M / 40
    holds, less than 64M / 40."""
    sched = skew.schedule(2, 8000, latency=500, jitter=1500, gap=4_000, seed=5)
    trace = skew.write_otf(tmp_path / "o" / "t.otf", sched, skew.Clocks.exact(2))
    said = merge(trace, tmp_path / "small.h5", "--memory", "1M")
    assert "messages beyond --memory/40: not checked against the clocks" in said
    assert "received before they were sent" not in said
    said = merge(trace, tmp_path / "big.h5", "--memory", "64M")
    assert summary(said) == (8000, 0, "none")


def test_a_corrected_output_keeps_its_original_time(tmp_path, skewed):
    """Corrected again (its own HDF5 as input), the output keeps the time first decoded; the
    clocks it holds are one already, so no time moves."""
    _, _, trace = skewed
    merge(trace, tmp_path / "once.h5", "--sync", "offsets")
    said = merge(tmp_path / "once.h5", tmp_path / "twice.h5", "--sync", "offsets")
    assert summary(said) == (600, 0, "offsets")
    with h5py.File(tmp_path / "once.h5", "r") as f, h5py.File(tmp_path / "twice.h5", "r") as g:
        for c in ("time", "time_original"):
            assert np.array_equal(f["events"][c][()], g["events"][c][()])


def _matched(ev) -> list[tuple[int, int]]:
    """(send row, receive row) of each message of events columns, by MPI's matching rule."""
    sends, recvs = {}, {}
    for i in np.lexsort((ev["seq"], ev["time_original"], ev["location"])).tolist():
        kind, loc, peer = int(ev["kind"][i]), int(ev["location"][i]), int(ev["peer"][i])
        if kind == 3 and peer:
            sends.setdefault((loc, peer, int(ev["tag"][i])), []).append(i)
        elif kind == 4 and peer:
            recvs.setdefault((peer, loc, int(ev["tag"][i])), []).append(i)
    return [p for key in sends for p in zip(sends[key], recvs.get(key, []))]


def test_clc_removes_what_offsets_cannot(tmp_path):
    """ring8 sends one way round the ring: no offset can be estimated, so moving process 3's
    stream 10 ms ahead leaves its messages received before they were sent after --sync
    offsets.  The logical clock moves each receive that needs it to 1 ns after its send,
    and the rest of its location with it, and each collective call that left before the
    data it waits for was entered to the time it was: no shift ever falls, every interval
    but those ending at such an event is kept, and no receive moves more than it needs."""
    trace = skew.shift_otf_stream(DATA / "otf" / "ring8" / "trace", tmp_path / "t", 4,
                                  10_000_000) / "ring8.otf"
    said = merge(trace, tmp_path / "offsets.h5", "--sync", "offsets")
    assert summary(said) == (320, 40, "offsets")
    checked = json.loads(run_cli(["clocks", str(trace), "--json"]).stdout)["collectives"]
    assert collectives_summary(said) == (18, checked["violations"]) and checked["violations"]
    said = merge(trace, tmp_path / "clc.h5", "--sync", "clc")
    assert collectives_summary(said) == (18, 0)
    merge(trace, tmp_path / "clc3.h5", "--sync", "clc", nranks=3)
    assert_same_content(tmp_path / "clc.h5", tmp_path / "clc3.h5")
    assert summary(said) == (320, 0, "clc") and late_messages(tmp_path / "clc.h5") == (320, 0)
    with h5py.File(tmp_path / "clc.h5", "r") as f:
        assert json.loads(f["definitions"].attrs["attrs"])["clock_sync"] == "clc"
        ev = {c: f["events"][c][()] for c in ("time", "time_original", "location", "seq",
                                               "kind", "peer", "tag")}
    shift = ev["time"] - ev["time_original"]
    rises = set()
    for loc in np.unique(ev["location"]).tolist():
        rows = np.flatnonzero(ev["location"] == loc)
        rows = rows[np.argsort(ev["seq"][rows])]
        d = np.diff(shift[rows])
        assert (d >= 0).all()
        rises.update(rows[1:][d > 0].tolist())
        if shift[rows[0]] > 0:
            rises.add(int(rows[0]))
    # a location moves at a receive or a collective call (its end, or its one record)
    assert rises and all(int(ev["kind"][r]) in (4, 6, 8) for r in rises)
    for s, r in _matched(ev):
        if r in rises:      # moved exactly as far as its send needs
            assert ev["time"][r] == ev["time"][s] + 1
    assert (shift[ev["location"] == 4] == 0).all()      # the clock ahead is never moved
    # the collectives too: none left before the data it waits for was entered
    checked = json.loads(run_cli(["clocks", str(tmp_path / "clc.h5"), "--json"]).stdout)
    assert checked["violations"] == 0
    assert checked["collectives"]["violations"] == 0 and checked["collectives"]["checked"] == 18


@pytest.mark.parametrize("trace", [DATA / "dumpi" / "p2p-4rank",
                                   DATA / "otf2" / "mpi3" / "traces.otf2"])
def test_clc_leaves_one_clock_as_it_is(tmp_path, trace):
    said = merge(trace, tmp_path / "clc.h5", "--sync", "clc")
    assert summary(said)[1:] == (0, "clc")
    with h5py.File(tmp_path / "clc.h5", "r") as f:
        assert np.array_equal(f["events"]["time"][()], f["events"]["time_original"][()])


def test_clc_after_offsets_that_sufficed_moves_nothing_more(tmp_path, skewed):
    _, _, trace = skewed
    merge(trace, tmp_path / "offsets.h5", "--sync", "offsets")
    said = merge(trace, tmp_path / "clc.h5", "--sync", "clc")
    assert summary(said) == (600, 0, "clc")
    with h5py.File(tmp_path / "offsets.h5", "r") as f, h5py.File(tmp_path / "clc.h5", "r") as g:
        assert np.array_equal(f["events"]["time"][()], g["events"]["time"][()])


def test_logical_clock_steps_by_hand(jit_mode):
    """Location 2 receives at 50 what location 1 sends at 100: it moves 51 (to 101); its
    send at 60 then leaves at 111, so location 1's receive at 105 moves 7 (to 112)."""
    from partrace.analysis.clc import last_step, steps
    from partrace.engine.mpi import serial
    # sender, receiver, send time, receive time, send seq, receive seq
    msgs = np.array([[1, 2, 100, 50, 0, 0], [2, 1, 60, 105, 1, 1]], np.int64)
    loc, time, seq, shift = steps(serial(), msgs)
    assert [loc.tolist(), time.tolist(), seq.tolist(), shift.tolist()] == \
        [[1, 2], [105, 50], [1, 0], [7, 51]]
    rows = (np.array([1, 1, 2, 2, 3]), np.array([104, 105, 49, 70, 500]), np.array([5, 1, 9, 2, 0]))
    assert last_step(loc, time, seq, *rows).tolist() == [-1, 0, -1, 1, -1]


def test_logical_clock_waits_for_collectives_by_hand(jit_mode):
    """A barrier entered at 200 on location 2 holds location 1, which entered at 100: its
    leave (at 110) moves 90, to 200.  As one record with a duration (10), the call itself
    moves: 100 + 90, so that it ends at 200."""
    from partrace.analysis import clock_collectives as CC
    from partrace.analysis.clc import steps
    from partrace.engine.mpi import serial
    none = np.zeros((0, 6), np.int64)
    # location, seq, kind, time, comm, root, collop, duration
    begin_end = np.array([[1, 3, CC.BEGIN, 100, 5, 0, 7, 0], [1, 4, CC.END, 110, 0, 0, 0, 0],
                          [2, 3, CC.BEGIN, 200, 5, 0, 7, 0], [2, 4, CC.END, 210, 0, 0, 0, 0]])
    found = steps(serial(), none, begin_end, {7: CC.BARRIER})
    assert [a.tolist() for a in found] == [[1], [110], [4], [90]]
    one_record = np.array([[1, 3, CC.COLLECTIVE, 100, 5, 0, 7, 10],
                           [2, 3, CC.COLLECTIVE, 200, 5, 0, 7, 10]])
    found = steps(serial(), none, one_record, {7: CC.BARRIER})
    assert [a.tolist() for a in found] == [[1], [100], [3], [90]]
    # a broadcast from location 1 (entered at 100) holds no one: location 2 left after it;
    # from location 2 (entered at 200), it holds location 1 as the barrier did
    rooted = begin_end.copy()
    rooted[:, 5] = 1
    assert [a.tolist() for a in steps(serial(), none, rooted, {7: CC.ONE_TO_ALL})] == \
        [[], [], [], []]
    rooted[:, 5] = 2
    assert [a.tolist() for a in steps(serial(), none, rooted, {7: CC.ONE_TO_ALL})] == \
        [[1], [110], [4], [90]]


def test_python_api_merges_and_checks_as_the_cli(tmp_path, skewed):
    pytest.importorskip("pandas")
    import partrace
    _, _, trace = skewed
    partrace.merge(trace, tmp_path / "api.h5", sync="offsets")
    merge(trace, tmp_path / "cli.h5", "--sync", "offsets")
    assert_same_content(tmp_path / "api.h5", tmp_path / "cli.h5")
    before, after = partrace.open(trace).clocks(), partrace.open(tmp_path / "api.h5").clocks()
    assert len(before) == len(after) == 10
    assert before.attrs["violations"] > 0 == after.attrs["violations"]
    assert (before["messages_ab"] + before["messages_ba"]).sum() == 600


def test_virtual_time_is_no_clock_to_correct(tmp_path):
    trace = DATA / "ross" / "pi-np2-opt-evtrace-full-model-gvt" / "stats"
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "o.h5"), "--sync", "offsets"])
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"partrace: error: {trace}: --sync corrects clocks; this trace's time is virtual time"]
    assert not (tmp_path / "o.h5").exists()
    r = run_cli(["clocks", str(trace), "--json"])
    assert json.loads(r.stdout)["time_unit"].startswith("time column (virtual time")

"""`partrace clocks`: messages matched and checked against clocks shifted by known amounts.

- real fixtures (one clock: no violation), the messages counted against dumpi2ascii's text
  and OTF's send records, the answer the same on 1 and 3 ranks;
- a real OTF trace with one stream's timestamps moved by a known amount;
- DUMPI, OTF and OTF2 traces written from a known true schedule read on skewed (and
  drifting) clocks (tests/support/skew.py): violations, least delays and offsets against
  the truth.
"""
from __future__ import annotations

import json
import re
from collections import Counter

import numpy as np
import pytest

from partrace.analysis.clocks import check
from tests.conftest import DATA, run_cli
from tests.support import skew

FIXTURES = {
    "dumpi-p2p": DATA / "dumpi" / "p2p-4rank",
    "otf-ring8": DATA / "otf" / "ring8" / "trace" / "ring8.otf",
    "otf-hybrid16": DATA / "otf" / "hybrid16" / "trace" / "hybrid16.otf",
    "otf2-mpi3": DATA / "otf2" / "mpi3" / "traces.otf2",
}


def clocks_json(path, nranks=None, *extra) -> dict:
    r = run_cli(["clocks", str(path), "--json", *extra], nranks)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", list(FIXTURES))
def test_fixture_one_clock_no_violation_any_rank_count(name):
    one, three = clocks_json(FIXTURES[name]), clocks_json(FIXTURES[name], 3)
    assert one == three
    assert one["violations"] == 0 and one["largest_violation_ns"] == 0
    assert one["unmatched_sends"] == 0 and one["unmatched_receives"] == 0
    assert one["messages"] > 0
    c = one["collectives"]
    assert c["violations"] == c["largest_violation_ns"] == c["unpaired_rows"] == 0
    assert c["instances"] > 0
    for p in one["pairs"]:      # every delay is positive, every offset bound holds 0
        for d in (p["least_delay_ab_ns"], p["least_delay_ba_ns"]):
            assert d is None or d > 0
        if p["offset_ns"] is not None:
            assert abs(p["offset_ns"]) <= p["offset_bound_ns"]


def _directed(result) -> Counter:
    out = Counter()
    for p in result["pairs"]:
        out[(p["a_id"], p["b_id"])] += p["messages_ab"]
        out[(p["b_id"], p["a_id"])] += p["messages_ba"]
    return +out


def test_dumpi_messages_as_dumpi2ascii_counts_them():
    sends = Counter()
    for txt in sorted(FIXTURES["dumpi-p2p"].glob("*.txt")):
        rank, call = int(txt.stem.rsplit("-", 1)[1]), None
        for line in txt.read_text().splitlines():
            m = re.match(r"(MPI_\w+) entering", line)
            call = m.group(1) if m else call
            m = re.match(r"int dest=(\d+)", line)
            if m and "send" in call.lower():
                sends[(rank + 1, int(m.group(1)) + 1)] += 1
    assert _directed(check(FIXTURES["dumpi-p2p"])) == sends


def test_otf_messages_as_the_send_records_say():
    sends = Counter()
    for events in sorted(FIXTURES["otf-ring8"].parent.glob("ring8.*.events")):
        stream = int(events.name.split(".")[1], 16)     # ring8: stream k holds process k
        for m in re.finditer(r"^S([0-9a-f]+)L", events.read_text(), re.M):
            sends[(stream, int(m.group(1), 16))] += 1
    assert _directed(check(FIXTURES["otf-ring8"])) == sends


COLLOP = re.compile(r"^COPB?([0-9a-f]+)(?:H[0-9a-f]+)?C([0-9a-f]+)RT([0-9a-f]+)", re.M)
ONE_TO_ALL, ALL_TO_ONE = {2}, {4}       # ring8's DCO records: Bcast, Reduce


def _otf_collectives(folder, stream):
    """(comm, op, root) of each collective record of an OTF stream, in order."""
    text = next(folder.glob(f"*.{stream:x}.events")).read_text()
    out = []
    for m in COLLOP.finditer(text):
        op, comm, root = (int(x, 16) for x in m.groups())
        out.append((comm, op, root))
    return out


def test_otf_collective_instances_as_the_records_say():
    folder = FIXTURES["otf-ring8"].parent
    per_comm = Counter()
    for stream in range(1, 9):      # an instance is a call of every member: the most calls
        calls = Counter(comm for comm, _, _ in _otf_collectives(folder, stream))
        for comm, n in calls.items():
            per_comm[comm] = max(per_comm[comm], n)
    c = check(FIXTURES["otf-ring8"])["collectives"]
    assert c["instances"] == c["checked"] == sum(per_comm.values())


def test_real_otf_stream_moved_ahead(tmp_path):
    """Process 3 of ring8 (stream 4, ticks of 1 ns) read on a clock 10 ms ahead: every message
    it sends to process 4 arrives before it left, each least delay moves by exactly 10 ms."""
    ahead = 10_000_000
    before = check(FIXTURES["otf-ring8"])
    moved = skew.shift_otf_stream(FIXTURES["otf-ring8"].parent, tmp_path / "t", 4, ahead)
    after = clocks_json(moved / "ring8.otf", 3)
    assert after == clocks_json(moved / "ring8.otf")
    old = {(p["a_id"], p["b_id"]): p for p in before["pairs"]}
    new = {(p["a_id"], p["b_id"]): p for p in after["pairs"]}
    assert old.keys() == new.keys()
    # ring: 3 -> 4 -> 5; the pair (3, 4) is a = 3 (stream 3), b = 4 (stream 4: moved)
    into, out_of = new[(3, 4)], new[(4, 5)]
    assert into["least_delay_ab_ns"] == old[(3, 4)]["least_delay_ab_ns"] + ahead
    assert into["violations"] == 0
    assert out_of["least_delay_ab_ns"] == old[(4, 5)]["least_delay_ab_ns"] - ahead
    assert out_of["violations"] == out_of["messages_ab"] == 40
    # the largest violation: the message that took least, moved back by 10 ms
    assert out_of["largest_violation_ns"] == ahead - old[(4, 5)]["least_delay_ab_ns"]
    assert after["violations"] == 40
    assert after["largest_violation_pair"] == [out_of["a"], out_of["b"]]
    for key in old.keys() - {(3, 4), (4, 5)}:
        assert new[key] == old[key]
    # collectives: process 4 enters every one 10 ms late (they last microseconds), so each
    # it takes part in violates but a one-to-all rooted elsewhere (it only waits for its
    # root) and an all-to-one it roots (it only waits)
    calls = _otf_collectives(moved, 4)
    late = [(op, root) for _, op, root in calls
            if not (op in ONE_TO_ALL and root != 4) and not (op in ALL_TO_ONE and root == 4)]
    c = after["collectives"]
    assert c["violations"] == len(late) > 0
    assert ahead - 1_000_000 < c["largest_violation_ns"] <= ahead
    assert "Process 3" in (c["largest_violation"]["entered_last"],
                           c["largest_violation"]["left_first"])


def _truth(sched, clocks, a, b):
    """From the schedule: messages each way, least true latency each way, and the observed
    violations, largest violation and least delays (0-based ranks a < b)."""
    sent, received = skew.observed(sched, clocks)
    out = {}
    for way, (s, r) in (("ab", (a, b)), ("ba", (b, a))):
        m = (sched.sender == s) & (sched.receiver == r)
        out[f"n_{way}"] = int(m.sum())
        out[f"latency_{way}"] = int((sched.received - sched.sent)[m].min())
        out[f"delay_{way}"] = int((received - sent)[m].min())
        out[f"late_{way}"] = (sent - received)[m]
    late = np.r_[out["late_ab"], out["late_ba"]]
    out["violations"] = int((late > 0).sum())
    out["largest"] = int(late.max(initial=0)) if out["violations"] else 0
    return out


def _ranks(path) -> dict[int, int]:
    """{process id of the clocks' pairs: the schedule's 0-based rank}: rank r wrote location
    r + 1, whose process is itself (OTF, DUMPI) or its location group's row (OTF2)."""
    from partrace.analysis import roots
    from partrace.formats import open_trace
    top = roots(open_trace(path).read_definitions())
    return {top[loc]: loc - 1 for loc in range(1, 6)}


def _otf2(otf, folder):
    """The OTF trace as OTF2, written by partrace's OTF2 output (the otf2 library)."""
    pytest.importorskip("otf2")
    folder.mkdir()
    r = run_cli(["convert", str(otf), "-o", str(folder / "t.otf2"), "-q"])
    assert r.returncode == 0, r.stderr
    return folder / "t.otf2"


@pytest.mark.parametrize("writer", ["dumpi", "otf", "otf2"])
def test_known_offsets_estimated_within_the_least_latency(tmp_path, writer):
    sched = skew.schedule(5, 600, seed=7)
    clocks = skew.Clocks(np.array([0, 30_000, -20_000, 5_000, 123_457]), np.zeros(5))
    if writer == "dumpi":
        path = skew.write_dumpi(tmp_path / "d", sched, clocks)
    else:
        path = skew.write_otf(tmp_path / "o" / "t.otf", sched, clocks, streams=2)
        path = _otf2(path, tmp_path / "o2") if writer == "otf2" else path
    res = clocks_json(path)
    assert res == clocks_json(path, 3)
    assert res["messages"] == 600 and res["unmatched_sends"] == res["unmatched_receives"] == 0
    assert len(res["pairs"]) == 10
    total = 0
    rank = _ranks(path)
    for p in res["pairs"]:
        a, b = rank[p["a_id"]], rank[p["b_id"]]
        t = _truth(sched, clocks, a, b)
        offset = clocks.offset_at(a, b, skew.T0)
        assert (p["messages_ab"], p["messages_ba"]) == (t["n_ab"], t["n_ba"])
        assert (p["least_delay_ab_ns"], p["least_delay_ba_ns"]) == (t["delay_ab"], t["delay_ba"])
        assert (p["violations"], p["largest_violation_ns"]) == (t["violations"], t["largest"])
        # least delays: latency + offset one way, latency - offset the other
        assert p["offset_ns"] == offset + (t["latency_ab"] - t["latency_ba"]) / 2
        assert p["offset_bound_ns"] == (t["latency_ab"] + t["latency_ba"]) / 2
        assert abs(p["offset_ns"] - offset) <= p["offset_bound_ns"]
        assert abs(p["offset_ns"] - offset) <= max(t["latency_ab"], t["latency_ba"])
        assert p["offset_min_ns"] <= offset <= p["offset_max_ns"]
        total += t["violations"]
    assert res["violations"] == total > 0


def test_exact_clocks_no_violation_offsets_hold_zero(tmp_path):
    sched = skew.schedule(3, 300, seed=2)
    res = check(skew.write_dumpi(tmp_path / "d", sched, skew.Clocks.exact(3)))
    assert res["violations"] == 0 and res["messages"] == 300
    for p in res["pairs"]:
        assert p["offset_min_ns"] <= 0 <= p["offset_max_ns"]
        assert abs(p["offset_ns"]) <= p["offset_bound_ns"]


def test_drift_within_its_bound(tmp_path):
    """Clocks that drift 100 ppm apart over 32 ms: the offsets at both ends of the span
    (its first and last tenth) are those of the true clocks then, within their bounds and
    what the drift moves within an end; the drift follows, and shows beyond its bound."""
    sched = skew.schedule(2, 8000, latency=500, jitter=1500, gap=4_000, seed=5)
    rho, ahead = 1e-4, 40_000
    clocks = skew.Clocks(np.array([0, ahead]), np.array([0.0, rho]))
    res = check(skew.write_otf(tmp_path / "o" / "t.otf", sched, clocks))
    (p,) = res["pairs"]
    span = int(sched.sent[-1] - sched.sent[0])
    within = rho * span / 10 + 2        # the drift within one end (+ rounding of local times)
    for end in p["drift_from"]:
        assert end["bound_ns"] > 0      # within an end the clocks look a constant apart
        true_t = end["time_ns"] - ahead / 2     # the mean of a send on each clock
        truth = clocks.offset_at(0, 1, int(true_t))
        assert abs(end["offset_ns"] - truth) <= end["bound_ns"] + within
    (e0, e1) = p["drift_from"]
    slack = (e0["bound_ns"] + e1["bound_ns"] + 2 * within) / (e1["time_ns"] - e0["time_ns"]) * 1e6
    assert abs(p["drift_ppm"] - rho * 1e6) <= slack
    assert 0 < p["drift_bound_ppm"] < abs(p["drift_ppm"])     # the trace shows it


def test_text_names_the_totals_and_the_worst_pair_first(tmp_path):
    sched = skew.schedule(3, 300, seed=4)
    clocks = skew.Clocks(np.array([0, 50_000, -9_000]), np.zeros(3))
    path = skew.write_dumpi(tmp_path / "d", sched, clocks)
    r = run_cli(["clocks", str(path), "--top", "1"])
    assert r.returncode == 0, r.stderr
    sent, received = skew.observed(sched, clocks)
    late = sent - received
    lines = r.stdout.splitlines()
    assert lines[0] == (f"messages: 300 matched, {int((late > 0).sum())} of them received "
                        f"before they were sent (by the trace's clocks)")
    # ranks 1 and 2 are 59 us apart: the worst pair, shown first, the only one shown
    worst = int(late.max())
    assert lines[1] == f"largest violation: {worst:,} ns (rank 1 - rank 2)"
    row = next(i for i, x in enumerate(lines) if x.startswith("------")) + 1
    assert lines[row].split()[:2] == ["rank", "1"] and lines[row].split()[2:4] == ["rank", "2"]
    assert f"{worst:,}" in lines[row]
    assert lines[row + 1] == "(2 more pairs: --top 0 for all)"


CORPUS = {    # real traces others published (tests/data/corpus/SOURCES.md), each from one clock
    "otf2-sstmacro-10rank": DATA / "corpus" / "otf2" / "sstmacro-10rank",
    "otf2-pipit-ping-pong": DATA / "corpus" / "otf2" / "pipit-ping-pong",
    "dumpi-d2g-alltoall": DATA / "corpus" / "dumpi" / "d2g-alltoall-run0",
    "dumpi-sstmacro-testbgp": DATA / "corpus" / "dumpi" / "sstmacro-testbgp",
}


@pytest.mark.parametrize("name", list(CORPUS))
def test_published_traces_keep_the_clock_condition(name):
    """SST/macro's OTF2 output has communicators of their own on every rank (a self group):
    their calls are not instances across ranks, and are not checked."""
    one = clocks_json(CORPUS[name])
    assert one == clocks_json(CORPUS[name], 3)
    assert one["violations"] == one["unmatched_sends"] == one["unmatched_receives"] == 0
    assert one["collectives"]["violations"] == 0
    assert one["messages"] > 0
    named = {p[f"{x}_id"]: p[x] for p in one["pairs"] for x in "ab"}
    assert len(set(named.values())) == len(named)       # one name a process


def _matched_by_the_rule(rec: np.ndarray) -> tuple[list, int, int]:
    """MPI's non-overtaking rule, record by record: per (sender, receiver, comm, tag), the
    k-th send in (time, seq) order meets the k-th receive in (time, seq) order."""
    from partrace.analysis.clocks import SIDE, WIDTH
    sides: dict = {}
    for r in sorted(map(tuple, rec.tolist()), key=lambda r: (r[5], r[6])):
        sides.setdefault(r[:SIDE], ([], []))[r[SIDE]].append(r)
    out, sends, recvs = [], 0, 0
    for key in sorted(sides):
        s, r = sides[key]
        out += [(a[0], a[1], a[5], b[5], a[6], b[6]) for a, b in zip(s, r)]
        sends, recvs = sends + max(len(s) - len(r), 0), recvs + max(len(r) - len(s), 0)
    assert rec.shape[1] == WIDTH
    return out, sends, recvs


@pytest.mark.parametrize("layout", ["in-seq-order", "ties-out-of-seq-order", "long-times",
                                    "wide-ids"])
def test_match_follows_the_non_overtaking_rule(layout):
    """The matcher against the rule it implements, on records out of time order with ties of
    time (seq decides): ids, tags and times that fit one sort key, whose ties are (or are
    not) in seq order; times too long for that (a key of the ids beside them); 64-bit ids
    and tags (a sort of every field)."""
    from partrace.analysis.clocks import match
    rng = np.random.default_rng(7)
    n = 4000
    rec = np.empty((n, 7), np.int64)
    rec[:, 0], rec[:, 1] = rng.integers(1, 5, n), rng.integers(1, 5, n)
    rec[:, 2], rec[:, 3] = rng.integers(0, 3, n), rng.integers(-1, 4, n)
    rec[:, 4], rec[:, 5] = rng.integers(0, 2, n), rng.integers(0, 300, n)
    rec[:, 6] = rng.permutation(n)
    if layout == "in-seq-order":
        rec[:, 6] = np.argsort(np.argsort(rec[:, 5], kind="stable"))
    if layout == "long-times":
        rec[:, 5] = rec[:, 5] * (1 << 52)
    if layout == "wide-ids":
        rec[:, 0] = rec[:, 0] * (1 << 60) - (1 << 62)
        rec[:, 3] = rec[:, 3] * (1 << 40)
    msgs, sends, recvs = match(rec)
    want, want_sends, want_recvs = _matched_by_the_rule(rec)
    assert sorted(map(tuple, msgs.tolist())) == sorted(want)
    assert (sends, recvs) == (want_sends, want_recvs)
    assert len(want) > 1000 and sends and recvs

"""The decode's compiled gathers and orders against plain numpy, on the bytes and records of
the real fixtures, compiled and as Python (jit_mode): word reads where offsets fall on the
u32 grid, byte reads elsewhere; the (time, LP) order of an event side by each of its ways."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.ross import ROSS
from partrace.formats.ross import decode as D
from partrace.formats.ross import kernels
from partrace.formats.ross import layouts as L
from partrace.formats.ross import scan
from tests.formats.test_ross import DATA, EVT_RUN, SEQ_RUN

def file_bytes(run, name="ross-stats-evtrace.bin") -> np.ndarray:
    return scan.open_bytes(DATA / run / "stats" / name)


def events(run):
    """(file bytes, record starts, ENDS of every event record) of a fixture's event trace."""
    path = DATA / run / "stats" / "ross-stats-evtrace.bin"
    buf = scan.open_bytes(path)
    starts, codes, _ = scan.hop_checked(path, buf, 0, len(buf), L.FAMILY["evtrace"])
    return buf, starts, D.gather(buf, starts, D.ENDS)


def test_u32_reads_on_and_off_the_word_grid(jit_mode):
    buf = file_bytes(EVT_RUN)
    offs = np.arange(0, len(buf) - 8, 3, dtype=np.int64)     # every residue mod 4
    want = np.lib.stride_tricks.sliding_window_view(buf, 4)[offs + 5].astype(np.int64) \
        @ np.array([1, 1 << 8, 1 << 16, 1 << 24], np.int64)
    assert np.array_equal(scan.u32_at(buf, offs, 5), want)
    assert np.array_equal(scan.u32_at(buf, offs + 5), want)


@pytest.mark.parametrize("width", [24, 13])
def test_record_copies_on_and_off_the_word_grid(jit_mode, width):
    buf, starts, _ = events(SEQ_RUN)
    sel = np.concatenate([starts[:-2], starts[:40] + 1, starts[40:80] + 2])    # aligned, odd
    keep = np.arange(len(sel)) % 5 != 3
    for skip in (0, 4, 7):
        out = np.full((len(sel), width), 0xAB, np.uint8)
        kernels.copy_records(buf, sel, width, keep, out, skip)
        want = np.stack([buf[s + skip:s + skip + width] for s in sel])
        want[~keep] = 0
        assert np.array_equal(out, want)
        kernels.copy_records(buf, sel, width, None, out, skip)
        assert np.array_equal(out[keep], want[keep]) and np.array_equal(
            out[~keep], np.stack([buf[s + skip:s + skip + width] for s in sel[~keep]]))


def reference_order(time, lp):
    return np.lexsort((lp, time))       # stable: ties in file order


@pytest.mark.parametrize("run", [EVT_RUN, SEQ_RUN])
def test_each_side_of_the_events_in_key_order_by_every_way(jit_mode, run):
    _, _, ends = events(run)
    send, recv = D.to_ns(ends["send_vts"]), D.to_ns(ends["recv_vts"])
    src, dst = ends["src_lp"], ends["dest_lp"]
    n = len(ends)
    distinct = np.unique(recv)
    swapped = distinct.copy()
    swapped[[10, 11]] = swapped[[11, 10]]
    zeros = np.zeros(len(distinct), np.uint32)
    cases = {"send side": (send, src), "recv side": (recv, dst),
             "in order": (np.sort(send), np.zeros(n, np.uint32)),
             "one swap": (swapped, zeros),
             "shuffled": (np.random.default_rng(5).permutation(distinct), zeros),
             # the records twice over: equal keys, kept in file order
             "recv twice": (np.tile(recv, 2), np.tile(dst, 2)),
             "send twice": (np.repeat(send, 2), np.repeat(src, 2)),
             # a clamped time (int64 max): the combined key would not fit, a lexsort
             "clamped": (np.r_[recv[:-1], np.iinfo(np.int64).max], dst)}
    ways = set()
    for name, (time, lp) in cases.items():
        got = D.key_order(time, lp)
        assert np.array_equal(got, reference_order(time, lp)), name
        ways.add(_way(time, lp))
    assert ways == {"in order", "nearly", "unstable", "stable again", "lexsort"}


def _way(time, lp) -> str:
    """Which of key_order's ways a side takes (that each is tested)."""
    t0, t1, l0, l1 = (int(v) for v in kernels.spans(time, lp))
    width = l1 - l0 + 1
    if (t1 - t0 + 1) * width > np.iinfo(np.int64).max:
        return "lexsort"
    key = (time - t0) * width + (lp.astype(np.int64) - l0)
    down = int((np.diff(key) < 0).sum())
    if down == 0:
        return "in order"
    if down * D.NEARLY_SORTED <= len(key):
        return "nearly"
    return "stable again" if len(np.unique(key)) < len(key) else "unstable"


@pytest.mark.parametrize("run", [EVT_RUN, SEQ_RUN])
def test_lp_locations_by_lookup_equal_the_search_and_name_an_unknown_lp(jit_mode, run):
    reader = ROSS.open(DATA / run / "stats")
    defs = reader.read_definitions()
    _, starts, ends = events(run)
    locate = D.Locator(defs, Path("events.bin"))
    lps = defs.tables["lps"]
    for ids in (ends["src_lp"], ends["dest_lp"]):
        want = 1 + len(defs.tables["pes"]) + len(defs.tables["kps"]) + L.index_in(lps["lp_id"], ids)
        assert np.array_equal(locate.lp(ids, starts), want)
    bad = ends["dest_lp"].astype(np.int64)
    bad[7] = int(lps["lp_id"].max()) + 1
    with pytest.raises(TraceError) as e:
        locate.lp(bad, starts)
    assert e.value.where == f"byte {starts[7]}" and f"LP id {bad[7]}" in e.value.message

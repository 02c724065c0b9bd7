"""Pictures: each command writes a real image whose labels and counts are those of the data
(SVG keeps its text, so the test reads it back)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from partrace import analysis
import partrace.analysis.timeline  # noqa: F401  (analysis.timeline below)
from partrace.engine.mpi import serial
from tests.conftest import DATA, run_cli

pytest.importorskip("matplotlib")

OTF = DATA / "otf" / "hybrid16" / "trace" / "hybrid16.otf"
DUMPI = DATA / "dumpi" / "p2p-4rank"


def _svg_text(path):
    return re.findall(r">([^<>]+)</text>", path.read_text())


def test_profile_bars_name_the_top_regions(tmp_path):
    out = tmp_path / "p.svg"
    r = run_cli(["profile", str(DUMPI), "--plot", str(out)])
    assert r.returncode == 0, r.stderr
    texts = _svg_text(out)
    top = sorted(analysis.profile(DUMPI)["regions"], key=lambda x: (-x["exclusive_ns"], x["region"]))[:25]
    for reg in top:
        assert reg["region"] in texts


def test_heatmap_labels_the_locations_that_talk(tmp_path):
    out = tmp_path / "c.svg"
    r = run_cli(["comm", str(OTF), "--plot", str(out)])
    assert r.returncode == 0, r.stderr
    texts = _svg_text(out)
    pairs = analysis.communication(OTF)["pairs"]
    for p in pairs:
        assert p["sender"] in texts and p["receiver"] in texts
    assert not any(t.startswith("Thread") for t in texts)     # threads send nothing: not drawn
    png = tmp_path / "c.png"
    r = run_cli(["comm", str(DUMPI), "--plot", str(png)])
    assert r.returncode == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("trace", [OTF, DUMPI])
def test_timeline_has_every_visit_and_message(trace, tmp_path):
    data = analysis.timeline.timeline_data(serial(), trace)
    prof = analysis.profile(trace)
    assert len(data["intervals"]["start"]) == sum(r["calls"] for r in prof["regions"])
    sends = sum(p["messages"] for p in analysis.communication(trace)["pairs"])
    assert len(data["messages"]["send_time"]) == sends       # every send found its receive
    assert (data["messages"]["recv_time"] >= data["messages"]["send_time"]).all()
    assert (data["intervals"]["end"] >= data["intervals"]["start"]).all()
    out = tmp_path / "t.svg"
    r = run_cli(["timeline", str(trace), "--plot", str(out)])
    assert r.returncode == 0, r.stderr
    title = [t for t in _svg_text(out) if t.startswith("timeline:")][0]
    assert f"{len(data['intervals']['start']):,} region visits" in title
    assert f"{sends:,} messages" in title


def test_a_window_cuts_visits_at_its_edges():
    full = analysis.timeline.timeline_data(serial(), OTF)
    t0, t1 = full["t0"], full["t1"]
    mid = (t0 + t1) // 2
    part = analysis.timeline.timeline_data(serial(), OTF, time=(mid, t1))
    iv = part["intervals"]
    assert part["t0"] == mid and (iv["start"] >= mid).all() and (iv["end"] <= t1).all()
    # a visit open across the cut starts at the cut
    fi = full["intervals"]
    across = (fi["start"] < mid) & (fi["end"] > mid)
    assert across.any() and int((iv["start"] == mid).sum()) >= int(across.sum())


def test_too_many_lanes_are_grouped(tmp_path):
    from partrace.analysis.plot import MAX_LANES, _bands
    ids = np.arange(1, 1001)
    band, labels = _bands(ids, {int(i): f"LP {i}" for i in ids})
    assert len(labels) <= MAX_LANES and labels[0] == "LP 1 .. LP 16" and band[-1] == len(labels) - 1


@pytest.mark.mpi
def test_same_pictures_on_1_and_3_ranks(tmp_path):
    # the timeline has its own parallel path; a profile's or comm's picture is drawn from
    # its result, which test_cli_csv_is_the_same_on_1_and_3_ranks checks on every format
    for cmd in (["timeline", str(OTF), "--time", "3000000:3500000"],):
        outs = []
        for n in (None, 3):
            out = tmp_path / f"{cmd[0]}-{n}.svg"
            r = run_cli([*cmd, "--plot", str(out)], nranks=n)
            assert r.returncode == 0, r.stderr
            outs.append(out.read_bytes())
        assert outs[0] == outs[1], cmd

"""`partrace info` agrees with the OTF library's own counts (summary of otfprint's dump)."""
import json

import pytest

from tests.conftest import DATA, run_cli

OTFPRINT_TO_KIND = {
    "Enter": "ENTER", "Leave": "LEAVE", "SendMessage": "SEND", "ReceiveMessage": "RECV",
    "Counter": "COUNTER", "Collective": "COLLECTIVE", "BeginCollective": "COLLECTIVE_BEGIN",
    "EndCollective": "COLLECTIVE_END", "FileOperation": "FILE_OP",
    "BeginFileOperation": "FILE_BEGIN", "EndFileOperation": "FILE_END", "RMAPut": "RMA_PUT",
    "RMAPutRemoteEnd": "RMA_PUT_REMOTE_END", "RMAGet": "RMA_GET", "RMAEnd": "RMA_END",
    "BeginProcess": "PROCESS_BEGIN", "EndProcess": "PROCESS_END", "EventComment": "COMMENT",
}


@pytest.mark.parametrize("name", ["ring8", "hybrid16"])
@pytest.mark.parametrize("nranks", [None, 3])
def test_info_counts_match_otfprint(name, nranks):
    trace = DATA / "otf" / name / "trace" / f"{name}.otf"
    ref = json.loads((DATA / "otf" / name / "reference" / f"{name}.summary.json").read_text())
    r = run_cli(["info", str(trace), "--json"], nranks=nranks)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["format"] == "otf"
    assert info["locations"] == len(ref["process_to_stream"])
    assert info["rows"]["events"] == ref["record_counts_by_section"]["events"]
    # the markers section of otfprint also lists the marker definitions
    assert info["rows"]["markers"] == sum(c.get("markers:Marker", 0)
                                          for c in ref["per_process_counts"].values())
    assert info["definitions"]["marker_defs"] == ref["definition_counts"]["DefMarker"]
    expected = {}
    for proc, counts in ref["per_process_counts"].items():
        for key, c in counts.items():
            section, what = key.split(":")
            if section == "events":
                expected.setdefault(proc, {})[OTFPRINT_TO_KIND[what]] = c
    assert info["events_per_location"] == expected
    tps = ref["timer_resolution"]
    span = info["time_span_ns"]["events"]
    assert span["first"] == ref["first_event_time"] * 10**9 // tps
    assert span["last"] == ref["last_event_time"] * 10**9 // tps
    assert info["facts"]["ticks_per_second"] == tps
    assert info["size_bytes"] == sum(ref["files"].values())


def test_info_text_names_format_and_kinds():
    r = run_cli(["info", str(DATA / "otf" / "ring8" / "trace" / "ring8.otf")])
    assert r.returncode == 0, r.stderr
    assert "format:     otf" in r.stdout
    assert "ENTER" in r.stdout and "time span:" in r.stdout


def test_info_counts_ovni_events_per_model_like_ovnidump():
    trace = DATA / "ovni" / "v3-mpisim-small"
    model_names = {"O": "ovni", "M": "mpi", "6": "nanos6"}
    expected = {}
    for line in (trace / "ovnidump.txt").read_text().splitlines():
        if line.strip():
            model = model_names[line.split()[1][0]]
            expected[model] = expected.get(model, 0) + 1
    r = run_cli(["info", str(trace / "ovni"), "--json"], nranks=2)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["events_per_region_group"] == expected
    assert info["facts"]["looms"] == 1 and info["facts"]["threads"] == 6
    assert info["definitions"]["cpus"] == 6

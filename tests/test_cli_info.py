"""`partrace info` agrees with the upstream tools' own decodes beside the fixtures
(otfprint, dumpi2ascii summaries, ovnidump, ROSS's CSV) and names what it counts."""
import csv
import json
import re
from collections import Counter

import pytest

import partrace
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
    assert "format:     OTF\n" in r.stdout
    assert "ENTER" in r.stdout and "time span:" in r.stdout


def test_a_run_folder_holding_trace_name_otf_is_found_as_the_trace():
    """ring8/ holds trace/ring8.otf (and reference/, merged_n1/ ...): as ovni/ is found."""
    folder = run_cli(["info", "--json", str(DATA / "otf" / "ring8")])
    master = run_cli(["info", "--json", str(DATA / "otf" / "ring8" / "trace" / "ring8.otf")])
    assert folder.returncode == 0 and master.returncode == 0, folder.stderr + master.stderr
    a, b = json.loads(folder.stdout), json.loads(master.stdout)
    assert a.pop("path") != b.pop("path") and a == b


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


def _otfprint(name):
    """Processes (name, parent), functions (name, group name) and Enter/Leave
    records per function, from the OTF library's own dump."""
    text = (DATA / "otf" / name / "reference" / f"{name}.otfprint.txt").read_text()
    procs = {int(i): (n, int(p)) for i, n, p in
             re.findall(r'DefProcess: stream \d+, process (\d+), name "([^"]*)", parent (\d+)', text)}
    groups = {int(i): n for i, n in
              re.findall(r'DefFunctionGroup: stream \d+, group (\d+), name "([^"]*)"', text)}
    funcs = {int(i): (n, groups[int(g)]) for i, n, g in
             re.findall(r'DefFunction: stream \d+, function (\d+), name "([^"]*)", group (\d+)', text)}
    records = Counter((what, int(f)) for what, f in
                      re.findall(r"\d+ (Enter|Leave): function (\d+), process", text))
    return procs, funcs, records


def test_info_names_otf_locations_groups_and_regions():
    procs, funcs, records = _otfprint("hybrid16")
    trace = DATA / "otf" / "hybrid16" / "trace" / "hybrid16.otf"
    r = run_cli(["info", str(trace), "--json"], nranks=2)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)

    def path(p):
        name, parent = procs[p]
        return name if parent == 0 else f"{path(parent)}/{name}"
    assert info["location_names"] == {str(p): path(p) for p in procs}
    assert "Process 0/Thread 0:1" in info["location_names"].values()

    per_group = Counter()
    for (what, f), c in records.items():
        per_group[funcs[f][1]] += c
    got = {g: c for g, c in info["events_per_region_group"].items() if g != "none"}
    assert got == dict(per_group) and {"MPI", "OMP", "Application"} <= set(got)

    expected = {funcs[f][0]: (records[("Enter", f)], records[("Enter", f)] + records[("Leave", f)],
                              funcs[f][1]) for f in {f for _, f in records}}
    assert {d["name"]: (d["enters"], d["events"], d["group"]) for d in info["regions"]} == expected

    text = run_cli(["info", str(trace)]).stdout
    assert "group 1" not in text and "  Process 3/Thread 3:3: ENTER 90," in text
    for name, (enters, events, group) in expected.items():
        assert re.search(rf"^  {re.escape(name)} +{enters:,} +{events:,}  {group}$", text, re.M), name


def test_info_lists_dumpi_calls_per_function_in_full_and_ranks_by_name():
    trace = DATA / "dumpi" / "p2p-4rank"
    ref = json.loads((trace / "p2p-4rank.summary.json").read_text())
    calls = Counter()
    for rank in ref["ranks"].values():
        calls.update(rank["calls_per_function"])
    r = run_cli(["info", str(trace)])
    assert r.returncode == 0, r.stderr
    assert "..." not in r.stdout
    section = re.split(r"\n  (?=\S)", r.stdout.split("  calls_per_function:\n")[1])[0]
    listed = dict(re.findall(r"^    (\S+): (\d+)$", section, re.M))
    assert {k: int(v) for k, v in listed.items()} == dict(calls)
    for rank in range(ref["num_ranks"]):
        assert re.search(rf"^  rank {rank}: ENTER {ref['ranks'][str(rank)]['num_calls']},",
                         r.stdout, re.M)
    # each function's calls on each rank: one row of its calls/ table
    info = json.loads(run_cli(["info", str(trace), "--json"], nranks=2).stdout)
    rank_of = {loc: int(name.split()[1]) for loc, name in info["location_names"].items()}
    per_rank = {}
    for table, counts in info["rows_per_location"].items():
        if table.startswith("calls/"):
            for loc, c in counts.items():
                per_rank.setdefault(str(rank_of[loc]), {})[table[len("calls/"):]] = c
    assert per_rank == {r: v["calls_per_function"] for r, v in ref["ranks"].items()}


def test_info_counts_ovni_event_types_per_model_with_names():
    trace = DATA / "ovni" / "v3-mpisim-small"
    mcvs = Counter(line.split()[1] for line in (trace / "ovnidump.txt").read_text().splitlines()
                   if line.strip())
    r = run_cli(["info", str(trace / "ovni"), "--json"], nranks=2)
    assert r.returncode == 0, r.stderr
    types = json.loads(r.stdout)["event_types_per_model"]
    models = {"O": "ovni", "M": "mpi", "6": "nanos6"}
    assert {code: t["count"] for ts in types.values() for code, t in ts.items()} == dict(mcvs)
    assert all(code[0] in models and model == models[code[0]]
               for model, ts in types.items() for code in ts)
    # ovnidump's text for an MCV names what its description says
    assert types["mpi"]["MUi"]["description"] == "MPI_Init()"
    assert types["ovni"]["OHx"]["description"] == "thread execute"
    text = run_cli(["info", str(trace / "ovni")]).stdout
    assert f"mpi events: {sum(c for k, c in mcvs.items() if k[0] == 'M'):,}" in text
    assert "  mpi0/27413/27413: " in text


def test_info_shows_ross_virtual_time_in_its_own_units_and_names_pes_kps_lps():
    trace = DATA / "ross" / "phold-np2-opt-gvt-pekplp"

    def rows(name):
        with open(trace / "reference" / f"{name}.csv") as f:
            return list(csv.DictReader(f))
    vts = [float(row["virtual_time"]) for row in rows("gvt-pe")]
    r = run_cli(["info", str(trace), "--json"])
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    span = info["time_span"]["gvt_pe"]
    assert span["unit"] == "virtual time"
    assert abs(span["first"] - min(vts)) < 1e-6 and abs(span["last"] - max(vts)) < 1e-6
    # rows per location by name: PE p, its KP p.k, and its LP g (the reader puts LPs
    # under their PE), counted from ROSS's own CSV of the same file
    names = {}
    for table, csv_name, name in [
            ("gvt_pe", "gvt-pe", lambda row: f"PE {row['pe_id']}"),
            ("gvt_kp", "gvt-kp", lambda row: f"PE {row['pe_id']}/KP {row['pe_id']}.{row['kp_id']}"),
            ("gvt_lp", "gvt-lp", lambda row: f"PE {row['pe_id']}/LP {row['lp_id']}")]:
        expected = Counter(name(row) for row in rows(csv_name))
        got = {info["location_names"][loc]: c for loc, c in info["rows_per_location"][table].items()}
        assert got == dict(expected), table
        names.update(expected)
    text = run_cli(["info", str(trace)]).stdout
    assert f"time span:  gvt_pe: {span['first']:.9g} .. {span['last']:.9g} virtual time" in text
    assert " ns" not in text.split("events:")[0]
    assert "format:     ROSS\n" in text
    for name, c in names.items():
        assert re.search(rf"^ *{name}: gvt_\w\w {c}$", text, re.M), name


def test_info_on_partrace_hdf5_says_so_and_counts_agree_with_merge(tmp_path):
    trace = DATA / "otf" / "ring8" / "trace" / "ring8.otf"
    out = tmp_path / "ring8.h5"
    m = run_cli(["merge", str(trace), "-o", str(out)], nranks=2)
    assert m.returncode == 0, m.stderr
    # merge's summary counts the rows of all tables, as info's "rows" line does
    merged_rows = int(re.search(r"wrote .*?([\d,]+) rows", m.stderr)[1].replace(",", ""))
    h5 = partrace.open(out)
    all_rows = sum(len(h5.table(name)) for name in h5.tables)
    events = len(h5.table("events"))
    ref = json.loads((DATA / "otf" / "ring8" / "reference" / "ring8.summary.json").read_text())
    assert events == ref["record_counts_by_section"]["events"]
    r = run_cli(["info", str(out)])
    assert r.returncode == 0, r.stderr
    assert "format:     partrace HDF5 (from OTF)\n" in r.stdout
    assert f"events:     {events:,}\n" in r.stdout
    assert f"rows:       {all_rows:,} in all tables (" in r.stdout
    assert merged_rows == all_rows
    info = json.loads(run_cli(["info", str(out), "--json"]).stdout)
    assert (info["format"], info["source_format"]) == ("hdf5", "otf")


def test_info_says_which_viewer_opens_each_output():
    """Every output of the registry, with its suffix and what opens it (issue: viewers)."""
    from partrace.output import OUTPUTS
    r = run_cli(["info", str(DATA / "otf2" / "mpi3")])
    assert r.returncode == 0, r.stderr
    assert "format:     OTF2" in r.stdout
    tail = r.stdout.split("written by `partrace merge TRACE -o OUT.<suffix>`, and what opens each:\n", 1)[1]
    lines = tail.splitlines()
    assert len(lines) == len(OUTPUTS)
    for line, o in zip(lines, OUTPUTS.values()):
        assert line.split()[0] == f"OUT{o.suffixes[0]}" and line.endswith(f"{o.title}: {o.opens_in}")
        assert o.opens_in
    assert any("ui.perfetto.dev" in line and line.split()[0] == "OUT.pftrace" for line in lines)
    assert any("Vampir" in line and line.split()[0] == "OUT.otf2" for line in lines)
    j = json.loads(run_cli(["info", "--json", str(DATA / "otf2" / "mpi3")]).stdout)
    assert {k: v["opens_in"] for k, v in j["outputs"].items()} == \
        {o.name: o.opens_in for o in OUTPUTS.values()}


INFO_TRACES = [DATA / "otf" / "hybrid16" / "trace" / "hybrid16.otf",
               DATA / "dumpi" / "coll-4rank",
               DATA / "ovni" / "v3-mpisim-small" / "ovni",
               DATA / "ross" / "pi-np2-opt-evtrace-full-model-gvt",
               DATA / "otf2" / "mpi3"]
HONOURS_SELECTION = {"otf", "dumpi", "ovni", "ross"}     # OTF2's reader decodes everything


@pytest.mark.parametrize("trace", INFO_TRACES,
                         ids=lambda p: p.parts[-2] if p.name == "ovni" else p.name)
def test_info_asks_readers_for_the_columns_it_counts_and_reports_as_a_full_decode(
        trace, monkeypatch, jit_mode):
    """info decodes only time, location, kind and region (ovni: its MCV too; where events
    have one, the counter): readers that honour the selection skip every other column; the
    report equals one made from every column."""
    from partrace import info as info_mod
    from partrace.engine.mpi import serial
    seen: dict[str, set] = {}
    add = info_mod._Counts.add

    def spy(self, name, t):
        seen.setdefault(name, set()).update(t.columns)
        return add(self, name, t)
    monkeypatch.setattr(info_mod._Counts, "add", spy)
    report = info_mod.gather_info(serial(), trace)
    selected = dict(seen)
    monkeypatch.setattr(info_mod, "counted_columns", lambda schema: None)     # None: every column
    seen.clear()
    assert info_mod.gather_info(serial(), trace) == report
    if report["format"] in HONOURS_SELECTION:
        assert any(selected[t] < seen[t] for t in seen)          # something was left out
    if trace.suffix == ".otf":
        assert selected["events"] == {"time", "location", "kind", "region", "counter"}
        assert selected["snapshots"] == selected["statistics"] == {"time", "location"}
        summary = trace.parent.parent / "reference" / "hybrid16.summary.json"
        upstream = json.loads(summary.read_text())["record_counts_by_section"]["events"]
        assert report["rows"]["events"] == upstream

"""A record naming a token no record defines is read as the OTF library reads it.

OTF_Reader hands every token on as is: otfprint prints it, otfmerge copies it.  Copies of
the real fixtures with one reference changed to an undefined token are decoded and compared
with otfprint's dump of the same copy record by record; the token stays in its column, the
definitions get a row named after it, and the run says each kind once, at its first record.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA, run_cli
from tests.formats.test_otf_helpers import decode_all, otfprint
from tests.formats.test_otf_reader import _check_against_otfprint
from tests.support.compare import merge_on_rank_counts

RING8 = DATA / "otf" / "ring8" / "trace"
HYBRID16 = DATA / "otf" / "hybrid16" / "trace"
OTFPRINT = shutil.which("otfprint")
needs_otfprint = pytest.mark.skipif(OTFPRINT is None, reason="otfprint (otf-trace) not installed")


def _edited(tmp_path: Path, src: Path, edits: list[tuple[str, bytes, bytes]]) -> tuple[Path, list]:
    """A copy of `src` with the first line equal to `old` of each (file, old, new) replaced
    by `new`; the master file and each edit's (file, line)."""
    trace = tmp_path / "trace"
    shutil.copytree(src, trace)
    where = []
    for name, old, new in edits:
        f = trace / name
        lines = f.read_bytes().split(b"\n")
        at = lines.index(old)
        lines[at] = new
        f.write_bytes(b"\n".join(lines))
        where.append((f, at + 1))
    return next(trace.glob("*.otf")), where


def _otfprint_of(master: Path, tmp_path: Path) -> Path:
    dump = tmp_path / "otfprint.txt"
    subprocess.run([OTFPRINT, "-o", str(dump), str(master)], check=True, capture_output=True)
    return dump


CASES = [
    # (fixture, file, line, edited, column, token, definitions table, warning's words)
    (RING8, "ring8.1.events", b"E6", b"E1f", "region", 0x1f, "regions",
     'Enter names function 1f, which no DF record defines; kept as "function 0x1f"'),
    (RING8, "ring8.1.events", b"L6", b"L77", "region", 0x77, "regions",
     'Leave names function 77, which no DF record defines; kept as "function 0x77"'),
    (RING8, "ring8.1.events", b"CNT2V0", b"CNT9V0", "counter", 9, "counters",
     'Counter names counter 9, which no DCNT record defines; kept as "counter 0x9"'),
    (RING8, "ring8.1.events", b"K4Y5V0", b"KaY5V0", "key", 0xa, "keys",
     'KeyValue names key a, which no DK record defines; kept as "key 0xa"'),
    (RING8, "ring8.1.events", b"E2X1", b"E2X5", "scl", 5, "scl",
     'Enter names source code location 5, which no DS record defines; kept as '
     '"source code location 0x5"'),
    (RING8, "ring8.1.events", b"S2L400T64Cf4241", b"S2L400T64Cf4249", "comm", 0xf4249,
     "communicators", 'SendMsg names process group f4249, which no DPG record defines; kept as '
     '"process group 0xf4249"'),
    (RING8, "ring8.1.events", b"S2L400T64Cf4241", b"S99L400T64Cf4241", "peer", 0x99, None,
     "SendMsg names process 99 as its peer, which no DP record defines; kept as its token"),
    (HYBRID16, "hybrid16.1.stats", b"SF12N1E961I961", b"SF99N1E961I961", "region", 0x99,
     "regions", 'FunctionSummary names function 99, which no DF record defines; kept as '
     '"function 0x99"'),
]


@needs_otfprint
@pytest.mark.parametrize("src,name,old,new,col,token,table,said", CASES,
                         ids=[f"{c[4]}-{c[1]}" for c in CASES])
def test_undefined_token_is_read_as_otfprint_reads_it(tmp_path, src, name, old, new, col, token,
                                                      table, said):
    master, [(f, line)] = _edited(tmp_path, src, [(name, old, new)])
    dump = _otfprint_of(master, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # the reader says nothing itself: the run does
        _check_against_otfprint(master.parent, dump)
        reader, defs, tabs = decode_all(master.parent)
    in_table = ("keyvalues" if col == "key" else
                "statistics" if name.endswith(".stats") else "events")
    assert (np.asarray(tabs[in_table][col]) == token).sum() == 1
    found = reader.found_definitions()
    assert reader.found_definitions() is None       # handed on once
    [(place, text)] = found.first.values()
    assert text.startswith(f"{f}: line {line}: {said}"), text
    if table is None:       # a process: the token stays in its column, no location made
        assert found.rows == {}
        return
    rows = found.rows[table]
    assert rows.names == defs.tables[table].names
    assert rows["id"].tolist() == [token]
    if "name" in rows:      # (scl rows have none)
        assert rows["name"].tolist() == [said.split('kept as "')[1].rstrip('"')]


@needs_otfprint
def test_undefined_marker_and_its_key_are_read_as_otfprint_reads_them(tmp_path):
    lines = (RING8 / "ring8.0.marker").read_bytes().split(b"\n")
    spot = next(x for x in lines if x.startswith(b"MS3T"))
    master, [(f, line)] = _edited(tmp_path, RING8, [("ring8.0.marker", spot, b"MS77" + spot[3:])])
    _check_against_otfprint(master.parent, _otfprint_of(master, tmp_path))
    reader, defs, tabs = decode_all(master.parent)
    assert 0x77 in tabs["markers"]["marker"].tolist()
    found = reader.found_definitions()
    assert found.rows["marker_defs"]["name"].tolist() == ["marker 0x77"]
    [(_, text)] = found.first.values()
    assert text.startswith(f"{f}: line {line}: MarkerSpot names marker 77, which no MD record "
                           'defines; kept as "marker 0x77"'), text


EDITS = [("ring8.1.events", b"E6", b"E2a"), ("ring8.1.events", b"CNT2V0", b"CNT9V0"),
         ("ring8.1.events", b"S2L400T64Cf4241", b"S99L400T64Cf4241"),
         ("ring8.3.events", b"E6", b"E2a")]


def _warnings(stderr: str) -> list[str]:
    return [x for x in stderr.splitlines() if x.startswith("partrace: warning:")]


def test_merge_keeps_the_tokens_at_any_rank_count(tmp_path):
    """HDF5 at 1 and 3 ranks: the same content, the token in its column, the stand-in rows
    in the definitions, each kind said once (the first place: the same at any rank count)."""
    master, where = _edited(tmp_path, RING8, EDITS)
    out = merge_on_rank_counts(master, tmp_path, ranks=(None, 3))
    import h5py
    with h5py.File(out, "r") as h:
        regions = dict(zip(h["regions"]["id"][:].tolist(),
                           [n.decode() for n in h["regions"]["name"][:]]))
        assert regions[0x2a] == "function 0x2a"
        assert (h["events"]["region"][:] == 0x2a).sum() == 2
        assert (h["events"]["peer"][:] == 0x99).sum() == 1
        assert 0x99 not in h["locations"]["id"][:].tolist()     # a process: its token only
    for n in (None, 3):
        r = run_cli(["merge", str(master), "-o", str(tmp_path / f"w{n}.h5")], nranks=n)
        assert r.returncode == 0, r.stderr
        said = _warnings(r.stderr)
        assert len(said) == 3, said         # function, counter, process: the function once
        assert said[0].startswith(f"partrace: warning: {where[1][0]}: line {where[1][1]}: Counter")
        assert said[1].startswith(f"partrace: warning: {where[0][0]}: line {where[0][1]}: Enter")
        assert said[2].startswith(f"partrace: warning: {where[2][0]}: line {where[2][1]}: SendMsg")


@needs_otfprint
def test_otf_output_keeps_the_tokens_as_otfmerge_does(tmp_path):
    master, _ = _edited(tmp_path, RING8, EDITS)
    out = tmp_path / "out.otf"
    r = run_cli(["merge", str(master), "-o", str(out), "-q"], nranks=2)
    assert r.returncode == 0, r.stderr
    recs, defs = otfprint(_otfprint_of(out, tmp_path / "."))
    src, _ = otfprint(_otfprint_of(master, tmp_path / "."))
    assert sorted(map(repr, recs)) == sorted(map(repr, src))        # record for record
    assert [f for _, t, f, _ in recs if t == "Enter" and f["function"] == "42"] != []
    assert not [d for d in defs if d[0] == "DefFunction" and d[1]["function"] == "42"]   # no DF


@pytest.mark.parametrize("suffix", [".otf2", ".pftrace", ".json"])
def test_other_outputs_name_the_stand_ins(tmp_path, suffix):
    master, _ = _edited(tmp_path, RING8, EDITS)
    out = tmp_path / f"out{suffix}"
    r = run_cli(["merge", str(master), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr
    if suffix == ".otf2":       # read by the OTF2 library (the otf2 package)
        import otf2
        with otf2.reader.open(str(out)) as trace:
            names = {r.name for r in trace.definitions.regions}
            enters = sum(1 for _, ev in trace.events
                         if type(ev).__name__ == "Enter" and ev.region.name == "function 0x2a")
        assert "function 0x2a" in names and enters == 2
    else:
        assert out.read_bytes().count(b"function 0x2a") >= 1


def test_profile_shows_the_stand_in_region(tmp_path):
    master, _ = _edited(tmp_path, RING8, EDITS)
    for n in (None, 2):
        r = run_cli(["profile", str(master), "--json"], nranks=n)
        assert r.returncode == 0, r.stderr
        rows = {x["region"]: x for x in json.loads(r.stdout)["regions"]}
        assert rows["function 0x2a"]["calls"] == 2
        assert len(_warnings(r.stderr)) == 1        # profile decodes the regions' columns only


def test_a_merge_that_decodes_twice_says_each_kind_once(tmp_path):
    """--sync offsets reads the messages in a pass of its own before the merge: the process
    is met by both, and said once."""
    master, _ = _edited(tmp_path, RING8, EDITS)
    r = run_cli(["merge", str(master), "-o", str(tmp_path / "s.h5"), "--sync", "offsets"])
    assert r.returncode == 0, r.stderr
    said = _warnings(r.stderr)
    assert len(said) == 3 and sum("as its peer" in x for x in said) == 1, said

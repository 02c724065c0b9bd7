"""Damaged copies of the real OTF fixtures, through the CLI (serial and 2 ranks).

Every case: exit 2, exactly one stderr line ``partrace: error: <file>[:line N]: ...``
naming the damaged file, no output left behind, the input unchanged.  Also:
strings that are not UTF-8 (Latin-1, KOI8-R names of VampirTrace-era traces)
survive OTF -> OTF byte for byte.
"""
from __future__ import annotations

import os
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA, run_cli
from tests.support import damage

RING8 = DATA / "otf" / "ring8" / "trace"
HYBRID16 = DATA / "otf" / "hybrid16" / "trace"
ZLIB = DATA / "otf" / "real-zlib" / "trace"


def _copy(tmp_path, src=RING8) -> Path:
    dst = tmp_path / "in"
    shutil.copytree(src, dst)
    return dst


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


def _replace_line(path: Path, old: bytes, new: bytes, nth: int = 0) -> int:
    """Replace the nth line equal to ``old`` by ``new``; its 1-based line number."""
    lines = _lines(path)
    at = [i for i, l in enumerate(lines) if l == old][nth]
    lines[at] = new
    path.write_bytes(b"\n".join(lines))
    return at + 1


def _next_record_line(path: Path, line: int) -> int:
    """The first record line at or after ``line`` (not a time or '*' line)."""
    lines = _lines(path)
    for i in range(line - 1, len(lines)):
        l = lines[i]
        if l and not l.startswith(b"*") and not all(c in b"0123456789abcdef" for c in l):
            return i + 1
    raise AssertionError("no record after the line")


def _fails(tmp_path, trace: Path, where: str, expect: str, nranks=(None,), outputs=(".h5",),
           full: bool = False):
    """The reader raises a TraceError naming ``where`` and saying ``expect`` (in process),
    and the CLI's merge exits 2 with that one line, nothing written, the input unchanged.
    ``full``: the CLI merges to each output kind on 1 rank and to HDF5 on 2 ranks (the
    error comes from decoding, before any sink): one case of each family checks it, the
    others one CLI run (the suite's time budget)."""
    from partrace.formats import open_trace
    e = damage.api_error(lambda t: damage.decode_units(open_trace(t)), trace)
    assert str(e).startswith(f"{where}: ") and expect in str(e), str(e)
    if full:
        nranks, outputs = (None, 2), (".h5", ".otf")
    for n in nranks:
        line = damage.cli_fails(trace, tmp_path / f"out{n}", where, None, n,
                                outputs=outputs if n is None else outputs[:1])
        assert expect in line, line
    return line


# ---- references to definitions --------------------------------------------------------------------

def test_snapshots_without_their_events_file(tmp_path):
    """The fuzz case: hybrid16.2.events deleted beside .2.snaps and .2.stats lost the
    stream's events with exit 0."""
    d = _copy(tmp_path, HYBRID16)
    (d / "hybrid16.2.events").unlink()
    _fails(tmp_path, d / "hybrid16.otf", f"{d / 'hybrid16.2.events'}", "missing: the events of stream 2",
           nranks=(None,))


def _skips(tmp_path, trace: Path, f: Path, line: int, process: str) -> None:
    """The OTF library skips the records of a process the master file does not list
    (OTF_Reader_readEvents): so does partrace, with one warning naming the file and the
    first such record's line, and reads the rest (records compared with otfprint's in
    test_library_leniency.py)."""
    import json
    r = run_cli(["info", str(trace), "--json"])
    assert r.returncode == 0, r.stderr
    said = r.stderr.splitlines()
    assert len(said) == 1 and said[0].startswith(f"partrace: warning: {f}: line {line}: "), said
    assert f"of processes ring8.otf does not list (first: {process}) are skipped" in said[0]
    whole = json.loads(run_cli(["info", str(RING8 / "ring8.otf"), "--json"]).stdout)["events"]
    assert 0 < json.loads(r.stdout)["events"] < whole


def test_records_of_process_zero_are_skipped_as_the_library_does(tmp_path):
    d = _copy(tmp_path)
    f = d / "ring8.3.events"
    line = _replace_line(f, b"*3", b"*0", nth=5)
    _skips(tmp_path, d / "ring8.otf", f, _next_record_line(f, line), "0")


def test_records_of_a_process_not_in_the_master_file_are_skipped(tmp_path):
    d = _copy(tmp_path)
    lines = _lines(d / "ring8.0.def")
    at = lines.index(b'DP8NM"Process 7"')
    (d / "ring8.0.def").write_bytes(b"\n".join(lines[:at + 1] + [b'DP9NM"stray"'] + lines[at + 1:]))
    f = d / "ring8.2.events"
    line = _replace_line(f, b"*2", b"*9", nth=3)
    _skips(tmp_path, d / "ring8.otf", f, _next_record_line(f, line), "9")


# a token no record defines (function, counter, key, ...) is data, as the OTF library reads
# it: test_otf_undefined.py


def test_zero_where_otf_means_all_is_accepted(tmp_path):
    """Summaries name peer 0 / collective 0 for "all" (hybrid16: SM0..., SCO...CL0): not an error."""
    stats = (HYBRID16 / "hybrid16.1.stats").read_bytes()
    assert b"\nSM0C" in stats and b"CL0NS" in stats
    out = tmp_path / "o.h5"
    r = run_cli(["merge", str(HYBRID16 / "hybrid16.otf"), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr


def test_marker_spot_of_undefined_process(tmp_path):
    """(A marker no MD record defines is data: test_otf_undefined.py.)"""
    d = _copy(tmp_path)
    f = d / "ring8.0.marker"
    spot = next(l for l in _lines(f) if l.startswith(b"MS"))
    proc = spot[spot.index(b"P") + 1:spot.index(b"V")]
    line = _replace_line(f, spot, spot.replace(b"P" + proc + b"V", b"P0V"))
    _fails(tmp_path, d / "ring8.otf", f"{f}:line {line}", "got MarkerSpot of process 0",
           nranks=(None, 2), outputs=(".h5", ".otf"))


# ---- files that are not regular files -------------------------------------------------------------

@pytest.mark.parametrize("name,kind", [
    ("ring8.3.events", "fifo"), ("ring8.4.events", "dir"), ("ring8.0.def", "fifo"),
    ("ring8.0.def", "dir"), ("ring8.0.marker", "fifo"), ("ring8.otf", "fifo"),
])
def test_fifo_or_directory_in_place_of_a_trace_file(tmp_path, name, kind):
    d = _copy(tmp_path)
    p = d / name
    p.unlink()
    os.mkfifo(p) if kind == "fifo" else p.mkdir()
    what = "a FIFO" if kind == "fifo" else "a directory"
    target = d if name.endswith(".otf") else d / "ring8.otf"
    _fails(tmp_path, target, str(p), f"expected a regular file, found {what}",
           full=(name, kind) == ("ring8.3.events", "fifo"))


# ---- bytes flipped, lines cut ---------------------------------------------------------------------

@pytest.mark.parametrize("src,name,old,new,expect", [
    (RING8, "ring8.2.events", b"E6", b"E6g", "expected end of line"),
    (RING8, "ring8.2.events", b"E6", b"E", "expected a hexadecimal number for region of Enter"),
    (RING8, "ring8.2.events", b"*2", b"*2x", "expected a process line"),
    (RING8, "ring8.2.events", b"*2", b"*", "expected a process line"),
    (RING8, "ring8.2.events", b"K1Y6V0", b"K1Y6V", "expected a hexadecimal number for value of KeyValue"),
    (RING8, "ring8.2.events", b"E6", b"E11111111111111111", "number longer than 16 hex digits"),
    (RING8, "ring8.0.def", b'DF1G1NM"main"X2', b'DF1G1NM"main', "expected a closing quote"),
    (RING8, "ring8.0.def", b'DF1G1NM"main"X2', b'DF1GgNM"main"X2', "expected a hex number for group of DefFunction"),
    (RING8, "ring8.0.def", b"DTR3b9aca00", b"DTR3b9aca00000000000", "expected at most 16 hex digits"),
    (RING8, "ring8.0.def", b'DK1Y6NM"iteration"T"solver iteration number"',
     b'DK1Y106NM"iteration"T"solver iteration number"',
     "expected type of DefKeyValue to be an OTF value type 0..b, got 106"),
    (RING8, "ring8.0.def", b'DP3NM"Process 2"', b'DP8000000000000000NM"Process 2"',
     "expected token of DefProcess to be at most 7fffffffffffffff, got 8000000000000000"),
    (RING8, "ring8.2.events", b"K1Y6V0", b"K1Y106V0", "expected an OTF value type 0..b for type of KeyValue, got 106"),
    (RING8, "ring8.otf", b"3:3", b"3:3x", "expected '<stream>:<process>,<process>,...' in hex"),
    (HYBRID16, "hybrid16.1.stats", b"SF12N1E961I961", b"SF12N1E961J961", "expected field tag 'I'"),
    (HYBRID16, "hybrid16.1.snaps", None, None, "expected a known record keyword"),
])
def test_garbled_line(tmp_path, src, name, old, new, expect):
    d = _copy(tmp_path, src)
    f = d / name
    if old is None:          # first record line of the file gets a byte it cannot start with
        lines = _lines(f)
        at = _next_record_line(f, 1) - 1
        lines[at] = b"\xff" + lines[at]
        f.write_bytes(b"\n".join(lines))
        line = at + 1
    else:
        line = _replace_line(f, old, new)
    master = next(d.glob("*.otf"))
    _fails(tmp_path, master, f"{f}:line {line}", expect, full=new == b"E6g")


def test_missing_stream_file_of_a_master_line_with_leading_zeros(tmp_path):
    d = _copy(tmp_path)
    line = _replace_line(d / "ring8.otf", b"5:5", b"05:5")
    (d / "ring8.5.events").unlink()
    _fails(tmp_path, d / "ring8.otf", f"{d / 'ring8.otf'}:line {line}", "expected ring8.5.events", nranks=(None,))


def _info(trace: Path) -> tuple[dict, list[str]]:
    import json
    r = run_cli(["info", str(trace), "--json"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["rows"], r.stderr.splitlines()


def test_cut_in_a_record_drops_its_line_with_a_warning(tmp_path):
    """A last line with no newline is no record for OTF's reader (OTF_RBuffer_guaranteeRecord
    finds no newline: end of file), which drops it in silence; partrace drops it too, and
    says so, naming the file and the byte where the line starts."""
    d = _copy(tmp_path)
    f = d / "ring8.5.events"
    data = f.read_bytes()
    start = data.index(b"\nCOP", len(data) // 2) + 1
    f.write_bytes(data[:start + 3])                     # "COP" with no field values
    rows, err = _info(d / "ring8.otf")
    assert len(err) == 1 and err[0].startswith(f"partrace: warning: {f}: byte {start}: "
                                               "last line has no newline"), err
    f.write_bytes(data[:start])                         # the same file cut at the line start
    at_line, err = _info(d / "ring8.otf")
    assert err == [] and rows == at_line
    clean, _ = _info(RING8 / "ring8.otf")
    assert rows["events"] < clean["events"]


def test_a_last_line_of_blanks_is_no_record_and_no_loss(tmp_path):
    d = _copy(tmp_path)
    f = d / "ring8.5.events"
    f.write_bytes(f.read_bytes() + b"   ")
    rows, err = _info(d / "ring8.otf")
    assert err == [] and rows == _info(RING8 / "ring8.otf")[0]


def test_zlib_stream_cut_inside_a_block_warns(tmp_path):
    """OTF's zlib streams end at a sync flush (00 00 ff ff), never finished; one that ends
    elsewhere was cut: what it holds is read (as OTF's reader does), with a warning."""
    whole, err = _info(ZLIB / "ring8_z.otf")
    assert err == []
    d = _copy(tmp_path, ZLIB)
    f = d / "ring8_z.2.events.z"
    data = f.read_bytes()
    assert data.endswith(b"\x00\x00\xff\xff")
    f.write_bytes(data[:-9])
    rows, err = _info(d / "ring8_z.otf")
    zlib_lines = [x for x in err if "zlib stream cut short" in x]
    assert len(zlib_lines) == 1 and zlib_lines[0].startswith(
        f"partrace: warning: {f}: byte {len(data) - 9}: "), err
    assert all(x.startswith(f"partrace: warning: {f}: ") for x in err), err
    assert rows["events"] < whole["events"]


def test_corrupt_zlib_names_the_byte_where_it_fails(tmp_path):
    d = _copy(tmp_path, ZLIB)
    f = next(d.glob("*.1.events.z"))
    data = bytearray(f.read_bytes())
    data[len(data) // 2:len(data) // 2 + 16] = b"\xff" * 16
    f.write_bytes(bytes(data))
    # the first byte whose arrival makes zlib fail, found by feeding it byte by byte
    z, at = zlib.decompressobj(), None
    for i in range(len(data)):
        try:
            z.decompress(bytes(data[i:i + 1]))
        except zlib.error:
            at = i
            break
    assert at is not None and len(data) // 2 <= at < len(data)
    _fails(tmp_path, next(d.glob("*.otf")), f"{f}:byte {at}", "expected zlib data", full=True)


# ---- strings that are not UTF-8 -------------------------------------------------------------------

LATIN1 = "noyau_é_à".encode("latin-1")          # b'noyau_\xe9_\xe0'
KOI8R = "ядро_вычислений".encode("koi8-r")


def _foreign_names(tmp_path) -> Path:
    d = _copy(tmp_path)
    defs = d / "ring8.0.def"
    data = defs.read_bytes()
    for old, new in ((b'DF3G1NM"kernel_a"', b'DF3G1NM"' + LATIN1 + b'"'),
                     (b'DF4G1NM"kernel_b"', b'DF4G1NM"' + KOI8R + b'"'),
                     (b'DCR"otfgen_mpi (partrace refgen)"', b'DCR"' + "créé".encode("latin-1") + b'"')):
        assert old in data
        data = data.replace(old, new)
    defs.write_bytes(data)
    ev = d / "ring8.1.events"
    ev.write_bytes(ev.read_bytes().replace(b'#"run started', b'#"' + KOI8R + b" run started", 1))
    return d


def test_non_utf8_names_keep_their_bytes(tmp_path):
    import partrace
    d = _foreign_names(tmp_path)
    t = partrace.open(d / "ring8.otf")
    names = dict(zip(t.definitions.tables["regions"]["id"].tolist(), t.definitions.tables["regions"]["name"]))
    # str with the undecodable bytes as lone surrogates (errors="surrogateescape")
    assert names[3].encode("utf-8", "surrogateescape") == LATIN1
    assert names[4].encode("utf-8", "surrogateescape") == KOI8R
    assert names[3] == LATIN1.decode("utf-8", "surrogateescape") and "\udce9" in names[3]
    texts = [s.encode("utf-8", "surrogateescape") for s in t.table("text")["text"]]
    assert KOI8R + b" run started: solver  cg , tol=1e-8" in texts


def test_non_utf8_names_round_trip_through_otf_output(tmp_path):
    d = _foreign_names(tmp_path)
    for n in (None, 2):
        out = tmp_path / f"o{n}" / "m.otf"
        out.parent.mkdir()
        r = run_cli(["merge", str(d / "ring8.otf"), "-o", str(out), "-q"], nranks=n)
        assert r.returncode == 0, r.stderr
        assert (out.parent / "m.0.def").read_bytes() == (d / "ring8.0.def").read_bytes()
        assert (out.parent / "m.1.events").read_bytes() == (d / "ring8.1.events").read_bytes()


def test_info_on_non_utf8_names(tmp_path):
    d = _foreign_names(tmp_path)
    r = run_cli(["info", str(d / "ring8.otf")])
    assert r.returncode == 0, r.stderr
    assert "creator:" in r.stdout


def test_generated_trace_passes_the_reference_checks(tmp_path):
    """A trace of scripts/gen_otf.py (partrace's own writer) names only defined tokens."""
    import partrace
    out = tmp_path / "g.otf"
    import subprocess
    import sys
    from tests.conftest import ROOT
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_otf.py"), str(out), "--processes", "4",
                    "--streams", "2", "--events", "20000"], check=True, capture_output=True)
    ev = partrace.open(out).table("events")
    assert len(ev) > 19000
    assert np.isin(ev["location"], partrace.open(out).definitions.tables["locations"]["id"]).all()

"""OTF markers per stream, as the OTF library keeps them: a point event of a non-OTF input is a
marker spot in its process's stream's marker file (NAME.<s>.marker), NAME.0.marker holds the DefMarker
lines (OTF_Writer_writeDefMarker's place), and the library's reader reads NAME.0.marker, then the
marker file of every stream in the master file (OTF_Reader_readMarkers).  An OTF input keeps its
markers where it had them.  (Checked by hand with the real otfprint 1.12.4: the same marker records
as the single NAME.0.marker layout.)"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import partrace
from partrace.model import Kind
from tests.conftest import DATA, ROOT, run_cli

from tests.formats.test_otf_helpers import decode_all
from tests.output.test_otf_output_generic import check_point_markers

pytestmark = pytest.mark.mpi


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.parent.iterdir())}


def _merge(trace, out: Path, nranks=None, extra=()) -> None:
    out.parent.mkdir(exist_ok=True)
    r = run_cli(["merge", str(trace), "-o", str(out), "-q", *extra], nranks=nranks)
    assert r.returncode == 0, r.stderr


def _master(data: bytes) -> dict[int, list[int]]:
    return {int(s, 16): [int(p, 16) for p in ps.split(",")]
            for s, _, ps in (line.partition(":") for line in data.decode().split())}


def _spot_processes(data: bytes) -> list[int]:
    return [int(p, 16) for p in re.findall(rb"^MS[0-9a-f]+T[0-9a-f]+P([0-9a-f]+)V", data, re.M)]


@pytest.fixture(scope="module")
def ovni(tmp_path_factory):
    """A generated ovni trace big enough for many windows at a 1 MiB budget."""
    d = tmp_path_factory.mktemp("ovni")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_ovni.py"), str(d), "--looms", "1",
                        "--procs", "2", "--threads", "3", "--events", "6000"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return d / "ovni"


@pytest.mark.parametrize("streams", ["0", "4"])
def test_spots_sit_in_their_streams_for_any_ranks_and_budget(ovni, tmp_path, streams):
    _merge(ovni, tmp_path / "one" / "x.otf", extra=["--streams", streams])
    want = _files(tmp_path / "one" / "x.otf")
    for n, extra in ((2, []), (3, ["--memory", "1M"]), (None, ["--memory", "1M"])):
        out = tmp_path / f"n{n}{len(extra)}" / "x.otf"
        _merge(ovni, out, n, ["--streams", streams, *extra])
        got = _files(out)
        assert list(got) == list(want), (n, extra)
        for name in want:
            assert got[name] == want[name], (n, extra, name)
    # NAME.0.marker: the DefMarker lines only; every spot in the stream file of its process
    assert re.fullmatch(rb'(MD[0-9a-f]+NM"[^"\n]*"Y3\n)+', want["x.0.marker"])
    master = _master(want["x.otf"])
    spots = 0
    for s, procs in master.items():
        assert f"x.{s:x}.events" in want
        mine = _spot_processes(want.get(f"x.{s:x}.marker", b""))
        assert set(mine) <= set(procs), s
        spots += len(mine)
    ev = partrace.open(ovni).table("events")
    assert spots == int(((ev["kind"] == Kind.EVENT) & (ev["region"] != 0)).sum()) > 1000
    assert sum(f"x.{s:x}.marker" in want for s in master) > 1


def test_otf_to_hdf5_keeps_every_marker(ovni, tmp_path):
    """OTF (markers per stream) -> HDF5 through our reader: every marker, value by value equal to the
    point events of the HDF5 merge of the same input."""
    _merge(ovni, tmp_path / "o" / "x.otf", extra=["--streams", "3"])
    _merge(tmp_path / "o" / "x.otf", tmp_path / "h" / "back.h5", 2)
    _merge(ovni, tmp_path / "h" / "direct.h5", 2)
    back, direct = partrace.open(tmp_path / "h" / "back.h5"), partrace.open(tmp_path / "h" / "direct.h5")
    mk, kv = back.table("markers"), back.table("keyvalues")
    check_point_markers(tmp_path / "h" / "direct.h5", back.definitions, mk, kv)
    # and by name: (time, process name, marker name) == (time, location name, region name)
    ev = direct.table("events")
    point = np.flatnonzero((ev["kind"] == Kind.EVENT) & (ev["region"] != 0))

    def names(defs, table):
        t = defs.tables[table]
        return dict(zip(t["id"].tolist(), map(str, t["name"])))
    sloc, sreg = names(direct.definitions, "locations"), names(direct.definitions, "regions")
    oloc, omk = names(back.definitions, "locations"), names(back.definitions, "marker_defs")
    want = Counter((int(ev["time"][i]), sloc[int(ev["location"][i])], sreg[int(ev["region"][i])]) for i in point)
    got = Counter((int(t), oloc[int(p)], omk[int(m)]) for t, p, m in zip(mk["time"], mk["location"], mk["marker"]))
    assert got == want and len(mk) == len(point) > 1000


def test_stream_with_markers_only(tmp_path):
    """A process with point events only: its stream is listed, with an events file of one time and
    one process line (the library's reader opens the events file of every stream listed and fails on
    an empty one), and its markers read back."""
    from tests.output.test_otf_windows import _decoded
    from partrace.engine.mpi import serial
    from partrace.formats.otf.generic import point_events
    from partrace.output.otf_sink import OTFSink
    defs, schema, tables = _decoded(DATA / "ovni/v1-zoo-small/ovni")
    ev = tables["events"]
    point = point_events(ev)
    loc = int(np.bincount(ev["location"][point]).argmax())       # the location with most point events
    tables["events"] = ev = ev.take(np.flatnonzero((ev["location"] != loc) | point))
    out = tmp_path / "x.otf"
    comm, sink = serial(), OTFSink(out, streams=0)
    sink.prepare(comm, defs, schema)
    sink.write(comm, tables)
    sink.commit(comm)
    files = _files(out)
    s = next(s for s, ps in _master(files["x.otf"]).items() if ps == [loc])
    first = np.flatnonzero(point_events(ev) & (ev["location"] == loc))[0]
    assert files[f"x.{s:x}.events"] == f"{int(ev['time'][first]):x}\n*{loc:x}\n".encode()
    assert set(_spot_processes(files[f"x.{s:x}.marker"])) == {loc}
    _, odefs, otabs = decode_all(out)
    assert not (otabs["events"]["location"] == loc).any()
    assert (otabs["markers"]["location"] == loc).sum() == (point_events(ev) & (ev["location"] == loc)).sum() > 0
    assert len(otabs["markers"]) == int(point_events(ev).sum())


def _local_marker_copy(src: Path, dst: Path) -> Path:
    """The OTF trace `src` with its marker spots moved from NAME.0.marker into their processes'
    streams' marker files (time order per file)."""
    shutil.copytree(src.parent, dst)
    master = dst / src.name
    stub = master.with_suffix("")
    lines = Path(f"{stub}.0.marker").read_bytes().splitlines(keepends=True)
    stream_of = {p: s for s, ps in _master(master.read_bytes()).items() for p in ps}
    per = {}
    for line in lines:
        m = re.match(rb"MS[0-9a-f]+T([0-9a-f]+)P([0-9a-f]+)V", line)
        if m:
            per.setdefault(stream_of[int(m.group(2), 16)], []).append((int(m.group(1), 16), int(m.group(2), 16), line))
    assert len(per) > 1
    Path(f"{stub}.0.marker").write_bytes(b"".join(l for l in lines if l.startswith(b"MD")))
    for s, spots in per.items():
        Path(f"{stub}.{s:x}.marker").write_bytes(b"".join(l for *_, l in sorted(spots, key=lambda x: x[:2])))
    return master


def _marker_rows(otf: Path) -> list[tuple]:
    _, _, tabs = decode_all(otf)
    mk = tabs["markers"]
    return sorted(zip(mk["time"].tolist(), mk["location"].tolist(), mk["marker"].tolist(), map(str, mk["text"])))


@pytest.mark.parametrize("nranks", [None, 2])
def test_otf_input_keeps_its_stream_marker_files(tmp_path, nranks):
    """Markers in stream marker files (the library reads them; otfmerge and OTF_Writer write NAME.0.marker
    only) stay in their streams' files, byte for byte; those of NAME.0.marker stay there (other tests)."""
    orig = DATA / "otf/ring8/trace/ring8.otf"
    src = _local_marker_copy(orig, tmp_path / "in")
    assert _marker_rows(src) == _marker_rows(orig)       # our reader reads both layouts alike
    out = tmp_path / "out" / "x.otf"
    _merge(src, out, nranks)
    got = _files(out)
    for p in sorted(src.parent.glob("ring8.*.marker")):
        assert got["x" + p.name[len("ring8"):]] == p.read_bytes(), p.name
    assert sorted(n for n in got if n.endswith(".marker")) == sorted(
        "x" + p.name[len("ring8"):] for p in src.parent.glob("ring8.*.marker"))
    assert _marker_rows(out) == _marker_rows(orig)


def test_definitions_in_a_stream_marker_file_are_refused(tmp_path):
    src = _local_marker_copy(DATA / "otf/ring8/trace/ring8.otf", tmp_path / "in")
    path = src.with_suffix(".1.marker")
    path.write_bytes(b'MD9NM"local"Y3\n' + path.read_bytes())
    r = run_cli(["merge", str(src), "-o", str(tmp_path / "x.h5")])
    assert r.returncode != 0
    assert f"{path}:line 1: expected marker spots only, got DefMarker" in r.stderr

"""Ids keep the width their format gives them: an OTF token is any unsigned 32-bit number
(VampirTrace numbers threads 0x80000001, ...), an OTF2 location ref any 64-bit one (Score-P
numbers a process's threads k * 2**32 + rank).  Formats whose ids partrace keeps in 32 signed
bits refuse a wider one, never wrap it."""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from partrace.errors import LimitError
from partrace.model import Table, column, conform

from ..conftest import run_cli
from ..support.compare import assert_same_content, h5_content

DATA = Path(__file__).resolve().parents[1] / "data"
VT_THREAD = 0x80000000      # VampirTrace's thread bit on a process token


def test_cast_keeps_every_id_that_fits_and_refuses_the_first_that_does_not():
    loc = column("location")
    edge = np.array([1, 2**31 - 1, -2**31], np.int64)
    assert conform(Table({"location": edge}), [loc])["location"].tolist() == edge.tolist()
    for bad in (2**31, -2**31 - 1):
        with pytest.raises(LimitError, match=f"'location': value {bad} does not fit"):
            conform(Table({"location": np.array([1, bad], np.int64)}), [loc])
    big = np.array([2**31], np.uint64)
    with pytest.raises(LimitError):
        conform(Table({"region": big}), [column("region")])


def _merge(src, out: Path, nranks=None) -> Path:
    r = run_cli(["merge", str(src), "-o", str(out), "-q"], nranks=nranks)
    assert r.returncode == 0, r.stderr
    return out


def _ring8_with_function(tmp_path, token: str) -> tuple[Path, int]:
    """ring8 with function 1 renumbered `token` (hex); the first line that names it."""
    trace = tmp_path / "t"
    shutil.copytree(DATA / "otf" / "ring8" / "trace", trace)
    d = trace / "ring8.0.def"
    d.write_text(d.read_text().replace('DF1G1NM"main"X2', f'DF{token}G1NM"main"X2'))
    first = None
    for f in sorted(trace.glob("*.events")):
        lines = f.read_text().split("\n")
        for i, line in enumerate(lines):
            new = re.sub(r"^([EL])1(X|$)", rf"\g<1>{token}\2", line)
            if new != line and first is None and f.name == "ring8.1.events":
                first = i + 1
            lines[i] = new
        f.write_text("\n".join(lines))
    return trace / "ring8.otf", first


def test_otf_function_token_above_31_bits_reads_and_writes_back(tmp_path):
    src, _ = _ring8_with_function(tmp_path, "80000000")
    plain = h5_content(_merge(DATA / "otf" / "ring8" / "trace" / "ring8.otf", tmp_path / "a.h5"))
    wide = h5_content(_merge(src, tmp_path / "b.h5"))
    region = plain["events"]["region"].astype(np.int64)
    assert (region == 1).sum() > 0
    assert np.array_equal(wide["events"]["region"], np.where(region == 1, 0x80000000, region))
    assert 0x80000000 in wide["regions"]["id"].tolist()
    # and OTF written from it names the function by the same token
    back = h5_content(_merge(_merge(src, tmp_path / "c.otf"), tmp_path / "d.h5"))
    assert np.array_equal(back["events"]["region"], wide["events"]["region"])


def test_otf_token_above_32_bits_is_an_error_at_its_line(tmp_path):
    """Not an OTF token (the format's tokens are 32-bit): damage, said at its line."""
    src, first = _ring8_with_function(tmp_path, "100000000")
    r = run_cli(["merge", str(src), "-o", str(tmp_path / "x.h5")])
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (f"partrace: error: {src.parent / 'ring8.1.events'}:line "
                                f"{first}: an id above 2**32-1 (OTF tokens are unsigned "
                                f"32-bit numbers)")
    assert not (tmp_path / "x.h5").exists()


def _vt_token(tok: int) -> int:
    return tok | VT_THREAD if tok >= 0x10000 else tok


def _retoken(pattern: str, text: str, flags=0) -> str:
    """`text` with the token in group 2 of each match of `pattern` numbered as VampirTrace."""
    return re.sub(pattern, lambda m: m.group(1) + "%x" % _vt_token(int(m.group(2), 16)), text,
                  flags=flags)


def vampirtrace_threads(dest: Path) -> Path:
    """hybrid16 with its threads numbered as VampirTrace numbers them (0x80000000 | token):
    processes 1-4, their threads 0x80010001, ... (definitions, master file, stream lines)."""
    shutil.copytree(DATA / "otf" / "hybrid16" / "trace", dest)
    for f in dest.iterdir():
        s = f.read_text()
        if f.suffix == ".def":
            s = _retoken(r"^(DP)([0-9a-f]+)", s, re.M)
            s = re.sub(r"(?<=M)[0-9a-f,]+(?=,NM)", lambda m: _retoken(r"(^|,)([0-9a-f]+)",
                                                                     m.group(0)), s)
        elif f.suffix == ".otf":
            s = _retoken(r"(,)([0-9a-f]+)", s)
        else:
            s = _retoken(r"^(\*)([0-9a-f]+)", s, re.M)
        f.write_text(s)
    assert "80010001" in (dest / "hybrid16.otf").read_text()
    return dest / "hybrid16.otf"


@pytest.fixture(scope="module")
def vt(tmp_path_factory):
    d = tmp_path_factory.mktemp("vt")
    return vampirtrace_threads(d / "trace"), d


def test_vampirtrace_thread_tokens_read_as_the_same_trace(vt):
    src, d = vt
    plain = h5_content(_merge(DATA / "otf" / "hybrid16" / "trace" / "hybrid16.otf",
                              d / "plain.h5"))
    wide = h5_content(_merge(src, d / "wide.h5"))
    loc = plain["events"]["location"].astype(np.int64)
    assert (loc >= 0x10000).sum() > 1000
    assert wide["events"]["location"].dtype == np.uint32
    assert np.array_equal(wide["events"]["location"], [_vt_token(x) for x in loc.tolist()])
    for name, col in plain["events"].items():
        if name != "location":
            assert np.array_equal(col, wide["events"][name]), name
    assert sorted(wide["locations"]["id"].tolist()) == sorted(
        _vt_token(x) for x in plain["locations"]["id"].tolist())


def test_vampirtrace_thread_tokens_same_on_1_and_3_ranks(vt):
    src, d = vt
    assert_same_content(_merge(src, d / "r1.h5"), _merge(src, d / "r3.h5", nranks=3))


def test_vampirtrace_thread_tokens_written_back_to_otf_and_otf2(vt):
    src, d = vt
    wide = h5_content(_merge(src, d / "w.h5"))
    back = h5_content(_merge(_merge(src, d / "w.otf"), d / "back.h5"))
    assert np.array_equal(back["events"]["location"], wide["events"]["location"])
    otf2 = pytest.importorskip("otf2")

    def records(anchor):
        """The refs of the trace's own locations (not the metric locations a writer adds),
        and every record by its location's name."""
        with otf2.reader.open(str(anchor)) as trace:
            refs = sorted(loc._ref for loc in trace.definitions.locations
                          if loc.type != otf2.enums.LocationType.METRIC)
            return refs, [(loc.name, ev.time, type(ev).__name__) for loc, ev in trace.events]

    refs, got = records(_merge(src, d / "w.otf2"))
    plain_refs, plain = records(_merge(DATA / "otf" / "hybrid16" / "trace" / "hybrid16.otf",
                                       d / "plain.otf2"))
    assert refs == sorted(wide["locations"]["id"].tolist())
    assert refs == sorted(map(_vt_token, plain_refs))
    assert sorted(got) == sorted(plain) and len(got) > 4000


# -- OTF2: location refs beyond 32 bits ------------------------------------------------------
SCOREP_THREADS = 3 * 2**32      # Score-P's refs of rank 0's extra threads: k * 2**32 + rank


@pytest.fixture(scope="module")
def scorep_refs(tmp_path_factory):
    """The library-written mpi3 archive, its OpenMP threads' refs as Score-P numbers them."""
    sys.path.insert(0, str(DATA / "otf2"))
    try:
        import make_archives
    finally:
        sys.path.pop(0)
    pytest.importorskip("otf2")
    d = tmp_path_factory.mktemp("scorep")
    make_archives.mpi3(d / "a", thread_ref=SCOREP_THREADS)
    return d / "a" / "traces.otf2", d


def test_otf2_location_refs_beyond_32_bits_read_every_event(scorep_refs):
    from .test_otf2_input import library_events, partrace_events
    anchor, _ = scorep_refs
    want = library_events(anchor)
    assert sorted(want) == [0, 1, 2, SCOREP_THREADS, SCOREP_THREADS + 1]
    assert partrace_events(anchor) == want


def test_otf2_location_refs_beyond_32_bits_merge_and_write_back(scorep_refs):
    import otf2
    from .test_otf2_input import named_records
    anchor, d = scorep_refs
    assert_same_content(_merge(anchor, d / "r1.h5"), _merge(anchor, d / "r3.h5", nranks=3))
    with h5py.File(d / "r1.h5") as f:
        refs = dict(zip(f["definitions/otf2_locations/id"][:].tolist(),
                        f["definitions/otf2_locations/ref"][:].tolist()))
    assert sorted(refs.values()) == [0, 1, 2, SCOREP_THREADS, SCOREP_THREADS + 1]
    back = _merge(anchor, d / "back.otf2", nranks=3)
    assert named_records(back) == named_records(anchor)
    with otf2.reader.open(str(back)) as trace:
        kept = sorted(loc._ref for loc in trace.definitions.locations
                      if not str(loc.type).endswith("METRIC"))
        added = [loc._ref for loc in trace.definitions.locations
                 if str(loc.type).endswith("METRIC")]
    # the threads keep their refs; the metric locations the replay adds (a thread's Metric
    # records that Pipit cannot take) come after the largest, beyond 32 bits too
    assert kept == sorted(refs.values())
    assert all(ref > max(kept) for ref in added)


def test_hdf5_written_before_the_ref_column_converts_back_to_the_same_archive(tmp_path):
    """A file of an earlier version (int32 ids, refs as id - ref_shift) still reads, and its
    OTF2 replay names the source's locations by their own refs."""
    pytest.importorskip("otf2")
    from .test_otf2_input import named_records
    old = DATA / "hdf5" / "mpi3-int32-ids.h5"
    with h5py.File(old) as f:
        assert "ref" not in f["definitions/otf2_locations"]
        assert f["events/location"].dtype == np.int32
    back = _merge(old, tmp_path / "back.otf2")
    assert named_records(back) == named_records(DATA / "otf2" / "mpi3" / "traces.otf2")

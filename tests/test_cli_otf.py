"""The whole job on the real OTF fixtures, through the CLI, on 1..4 ranks.

* merge to HDF5: identical data for every rank count, one row per record;
* merge to OTF on M streams: the same process->stream map and per-process
  record sequences as the real otfmerge outputs, byte-identical files for
  every rank count;
* OTF -> HDF5 -> OTF gives back the input files byte for byte;
* bad input: one line naming file and line, exit 2, nothing written.
"""
import shutil

import numpy as np
import pytest

from tests.conftest import DATA, run_cli
from tests.formats.test_otf_helpers import decode_all
from tests.support.compare import assert_same_content

pytestmark = pytest.mark.mpi

RING8 = DATA / "otf" / "ring8" / "trace" / "ring8.otf"
HYBRID16 = DATA / "otf" / "hybrid16" / "trace" / "hybrid16.otf"


def ok(r):
    assert r.returncode == 0, r.stderr
    return r


def per_process(path):
    """{table: {process: rows as tuples}} of a decoded OTF trace (src_order left out)."""
    _, _, tables = decode_all(path)
    out = {}
    for name, t in tables.items():
        cols = [c for c in t.names if c not in ("src_order", "seq")]
        rows = {}
        order = np.lexsort((t["seq"], t["location"]))
        for i in order:
            rows.setdefault(int(t["location"][i]), []).append(
                tuple(t[c][i].tobytes() if t[c].dtype != object else t[c][i] for c in cols))
        out[name] = rows
    return out


def test_hdf5_identical_for_any_rank_count(tmp_path):
    outs = []
    for n in (None, 3, 6):     # 3: streams split unevenly; 6 ranks > 4 streams: idle ranks
        out = tmp_path / f"h{n}.h5"
        ok(run_cli(["merge", str(HYBRID16), "-o", str(out), "-q"], nranks=n))
        outs.append(out)
    for out in outs[1:]:
        assert_same_content(outs[0], out)


@pytest.mark.parametrize("trace,merged,m", [
    (RING8, "ring8/merged_n3/ring8_n3.otf", 3),
    (RING8, "ring8/merged_n1/ring8_n1.otf", 1),
    (HYBRID16, "hybrid16/merged_n5/hybrid16_n5.otf", 5),
    (HYBRID16, "hybrid16/merged_n16/hybrid16_n16.otf", 16),
])
def test_streams_like_otfmerge(tmp_path, trace, merged, m):
    reference = DATA / "otf" / merged
    outs = []
    for n in (None, 2, 4):
        out = tmp_path / f"n{n}" / "out.otf"
        out.parent.mkdir()
        ok(run_cli(["merge", str(trace), "-o", str(out), "--streams", str(m), "-q"], nranks=n))
        outs.append(out)
    # same map as otfmerge
    assert outs[0].read_text() == reference.read_text()
    # byte-identical files whatever the rank count
    names = sorted(p.name for p in outs[0].parent.iterdir())
    for out in outs[1:]:
        assert sorted(p.name for p in out.parent.iterdir()) == names
        for name in names:
            assert (out.parent / name).read_bytes() == (outs[0].parent / name).read_bytes(), name
    # the same records per process as the real otfmerge output
    ours, theirs = per_process(outs[0]), per_process(reference)
    for table in ("events", "snapshots", "statistics", "markers", "keyvalues", "text"):
        assert ours[table] == theirs[table], table
    # definitions: identical but for otfmerge's new random unique id
    stub = reference.name[:-4]
    ref_def = [line for line in (reference.parent / f"{stub}.0.def").read_text().splitlines()
               if not line.startswith("DUI")]
    our_def = [line for line in (outs[0].parent / "out.0.def").read_text().splitlines()
               if not line.startswith("DUI")]
    assert our_def == ref_def


def test_otf_hdf5_otf_round_trip_is_byte_identical(tmp_path):
    h5 = tmp_path / "h.h5"
    ok(run_cli(["merge", str(HYBRID16), "-o", str(h5), "-q"], nranks=3))
    back = tmp_path / "back" / "hybrid16.otf"
    back.parent.mkdir()
    ok(run_cli(["convert", str(h5), "-o", str(back), "-q"], nranks=2))
    src = sorted(p.name for p in HYBRID16.parent.iterdir())
    assert sorted(p.name for p in back.parent.iterdir()) == src
    for name in src:
        assert (back.parent / name).read_bytes() == (HYBRID16.parent / name).read_bytes(), name


def test_one_row_per_record_and_required_datasets(tmp_path):
    import h5py
    out = tmp_path / "r.h5"
    ok(run_cli(["merge", str(RING8), "-o", str(out), "-q"], nranks=2))
    _, defs, tables = decode_all(RING8)
    with h5py.File(out) as f:
        assert f["events/time"].dtype == np.int64
        assert f["events/time"].attrs["unit"] == "ns"
        enum = h5py.check_enum_dtype(f["events/kind"].dtype)
        assert enum["ENTER"] == 1 and enum["LEAVE"] == 2
        assert len(f["events/time"]) == len(tables["events"])
        assert np.all(np.diff(f["events/time"][:]) >= 0)
        assert sorted(f["locations/id"][:]) == list(range(1, 9))       # OTF process tokens
        names = dict(zip(f["regions/id"][:], (n.decode() for n in f["regions/name"][:])))
        assert names[8] == "MPI_Send"
        assert f.attrs["source_format"] == "otf"
        for table in ("snapshots", "statistics", "markers", "keyvalues", "text"):
            assert table in f


def _broken_copy(tmp_path, stream_file, mutate):
    dst = tmp_path / "broken"
    shutil.copytree(RING8.parent, dst)
    target = dst / stream_file
    lines = target.read_bytes().split(b"\n")
    mutate(lines)
    target.write_bytes(b"\n".join(lines))
    return dst / "ring8.otf"


@pytest.mark.parametrize("mutate,expect", [
    (lambda lines: lines.__setitem__(40, b"E3Xzz!"), "ring8.3.events:line 41"),
    (lambda lines: lines.__setitem__(40, b"QQ12"), "ring8.3.events:line 41"),
    (lambda lines: lines.__setitem__(40, b'#"unterminated'), "ring8.3.events:line 41"),
])
def test_bad_line_is_one_clear_error_and_no_output(tmp_path, mutate, expect):
    trace = _broken_copy(tmp_path, "ring8.3.events", mutate)
    for n, out in ((None, tmp_path / "o.h5"), (3, tmp_path / "o3.h5"), (2, tmp_path / "o.otf")):
        # --progress none: a slow run logs progress lines, which are not checked here
        r = run_cli(["merge", str(trace), "-o", str(out), "--progress", "none"], nranks=n,
                    timeout=60)
        assert r.returncode == 2, r.stderr
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and expect in lines[0], r.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]


def test_missing_stream_file(tmp_path):
    trace = _broken_copy(tmp_path, "ring8.3.events", lambda lines: None)
    (trace.parent / "ring8.5.events").unlink()
    r = run_cli(["merge", str(trace), "-o", str(tmp_path / "o.h5")], nranks=2, timeout=60)
    assert r.returncode == 2 and "ring8.otf" in r.stderr and "5" in r.stderr, r.stderr
    assert not (tmp_path / "o.h5").exists()


@pytest.mark.parametrize("nranks", [None, 2])
def test_zlib_output_is_the_plain_output_compressed(tmp_path, nranks):
    ok(run_cli(["merge", str(RING8), "-o", str(tmp_path / "p.otf"), "--streams", "2"], nranks))
    ok(run_cli(["merge", str(RING8), "-o", str(tmp_path / "z.otf"), "--streams", "2",
                "--compress", "zlib"], nranks))
    import zlib
    plain = sorted(p.name[2:] for p in tmp_path.glob("p.*") if p.name != "p.otf")
    packed = sorted(p.name[2:-2] for p in tmp_path.glob("z.*.z"))
    assert packed == plain and plain
    for name in plain:      # OTF ends its zlib files with a full flush, no end-of-stream block
        text = zlib.decompressobj().decompress((tmp_path / f"z.{name}.z").read_bytes())
        assert text == (tmp_path / f"p.{name}").read_bytes(), name


def test_compression_of_the_other_output_kind_is_refused(tmp_path):
    r = run_cli(["merge", str(RING8), "-o", str(tmp_path / "x.h5"), "--compress", "zlib"])
    assert r.returncode == 2 and "--compress zlib applies to OTF output" in r.stderr
    r = run_cli(["merge", str(RING8), "-o", str(tmp_path / "x.otf"), "--compress", "gzip"])
    assert r.returncode == 2 and "applies to HDF5 output" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", ["otf", "h5"])
def test_a_missing_output_folder_is_one_clear_line(tmp_path, suffix):
    out = tmp_path / "no" / "such" / f"x.{suffix}"
    r = run_cli(["merge", str(RING8), "-o", str(out)], 2)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"partrace: error: {out.parent}: output folder does not exist"]


@pytest.mark.mpi
def test_local_definitions_are_read_by_the_stream_ranks(tmp_path):
    """A stream's own NAME.<s>.def is read where that stream is decoded (the survey):
    its records reach the definitions, the same on 1, 2 and 3 ranks."""
    from partrace.formats.otf import OTF
    from tests.support.compare import h5_content, merge_on_rank_counts
    trace = tmp_path / "t"
    shutil.copytree(RING8.parent, trace)
    (trace / "ring8.3.def").write_text('DCMT"a comment kept in stream 3"\n')
    reader = OTF.open(trace / "ring8.otf")
    assert reader.read_definitions(reader.survey_all()).attrs["comments"][-1] == \
        "a comment kept in stream 3" == reader.read_definitions().attrs["comments"][-1]
    out = merge_on_rank_counts(trace / "ring8.otf", tmp_path, ranks=(None, 2, 3))
    assert "a comment kept in stream 3" in str(h5_content(out)["definition_attrs"])

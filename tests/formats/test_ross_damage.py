"""Damaged and hostile ROSS input (issue 11): damaged copies of the real fixtures, made here.

Each case either fails as one line naming the damaged file, the byte and what was
expected (API: TraceError; CLI: exit 2, no output, input unchanged), or decodes with
every record accounted for.  Never data lost with exit 0, never a hang or a blow-up.
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.ross import ROSS
from partrace.formats.ross import layouts as L
from partrace.model import Kind
from tests.conftest import ROOT, SYNTH, run_cli
from tests.support import damage
from tests.formats.test_ross import DATA, EVT_RUN, GVT_RUN, SEQ_RUN, decode_all

GVT, EVTRACE, MODEL, VT = ("ross-stats-gvt.bin", "ross-stats-evtrace.bin",
                           "ross-stats-model.bin", "ross-stats-analysis-lps.bin")
U32_MAX = 0xFFFFFFFF


def copy_run(tmp_path, run):
    """A writable copy of a fixture's stats folder."""
    dst = tmp_path / "in" / "stats"
    shutil.copytree(DATA / run / "stats", dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    return dst


def patch(path, offset: int, value: int, dtype: str = "<u4"):
    b = bytearray(path.read_bytes())
    raw = np.array([value], dtype).tobytes()
    b[offset:offset + len(raw)] = raw
    path.write_bytes(bytes(b))


def api_error(trace) -> TraceError:
    with pytest.raises(TraceError) as e:
        decode_all(trace, region_size=256)     # several regions: the scan and decode both see it
    return e.value


def cli_error(tmp_path, trace, bad, where: str | None, nranks=None, fmt=None, info=False):
    """CLI merge (and info): exit 2, one line naming ``bad`` (and ``where``), no output left,
    input unchanged.  Returns the error line."""
    return damage.cli_fails(trace, tmp_path / "out", bad, where, nranks, info=info,
                            options=["--format", fmt] if fmt else [])


def record_offsets(run, table) -> np.ndarray:
    t, _, _ = decode_all(DATA / run)
    return np.sort(t[table]["offset"].astype(np.int64))


# ---- 1. a damaged or short file of the trace is an error, never skipped -------------------

FIRST_RECORD_DAMAGE = [   # (run, file, offset, value, error byte, text)
    (GVT_RUN, GVT, 0, 7, 0, "unknown sample type 7"),                # sample_type
    (GVT_RUN, GVT, 4, 105, 4, "sample_size 105"),                    # one bit of sample_size
    (EVT_RUN, MODEL, 0, 2, 0, "unknown sample type 2"),
    (EVT_RUN, MODEL, 40, 9, 40, "stats_type 9"),
    (SEQ_RUN, VT, 44, 4, 44, "flag 4"),
    (EVT_RUN, EVTRACE, 20, 1 << 24, 0, "runs past the end"),         # model_data_sz
]


@pytest.mark.parametrize("run,name,offset,value,at,text", FIRST_RECORD_DAMAGE)
def test_damaged_first_record_is_an_error(tmp_path, run, name, offset, value, at, text):
    stats = copy_run(tmp_path, run)
    bad = stats / name
    patch(bad, offset, value)
    e = api_error(stats)
    assert (e.path, e.where) == (str(bad), f"byte {at}") and text in e.message
    assert text in cli_error(tmp_path, stats, bad, f"byte {at}")


@pytest.mark.parametrize("run,name", [(GVT_RUN, GVT), (EVT_RUN, EVTRACE), (EVT_RUN, MODEL),
                                      (SEQ_RUN, VT)])
def test_file_shorter_than_a_record_is_an_error(tmp_path, run, name):
    stats = copy_run(tmp_path, run)
    bad = stats / name
    bad.write_bytes(bad.read_bytes()[:20])
    e = api_error(stats)
    assert (e.path, e.where) == (str(bad), "byte 0") and "truncated" in e.message
    cli_error(tmp_path, stats, bad, "byte 0", info=True)


@pytest.mark.parametrize("first,later", [((EVTRACE, 20, 1 << 24, 0), (MODEL, 0, 2, 0)),
                                         ((VT, 44, 4, 44), (MODEL, 0, 2, 0))])
@pytest.mark.parametrize("nranks", [None, 2, 3])
def test_two_damaged_files_name_the_first_in_file_order(tmp_path, first, later, nranks):
    """Ranks list the files in parts at once (2 ranks: the VT file, then the other two; 3
    ranks: one each); the error is the first file's, as when one process lists them all."""
    stats = copy_run(tmp_path, SEQ_RUN)
    for name, offset, value, _ in (first, later):
        patch(stats / name, offset, value)
    cli_error(tmp_path, stats, stats / first[0], f"byte {first[3]}", nranks=nranks)


def test_file_cut_inside_its_last_record_names_that_record(tmp_path):
    stats = copy_run(tmp_path, GVT_RUN)
    bad = stats / GVT
    last = int(record_offsets(GVT_RUN, "gvt_lp")[-1])
    bad.write_bytes(bad.read_bytes()[:-10])
    e = api_error(stats)
    assert e.where == f"byte {last}" and "past the end" in e.message
    cli_error(tmp_path, stats, bad, f"byte {last}", nranks=2)


def test_files_ross_does_not_write_are_ignored_and_nothing_is_lost(tmp_path):
    stats = copy_run(tmp_path, EVT_RUN)
    (stats / "README.txt").write_text("notes about this run\n")
    (stats / "ross-stats-gvt.bin.bak").write_bytes(b"\x07" * 10)   # not a ROSS output name
    (stats / "plot.bin").write_bytes(b"\x01" * 30)
    (stats / "ross-stats-gvt.csv").write_text("a,b\n")
    clean, clean_defs, _ = decode_all(DATA / EVT_RUN / "stats")
    got, defs, reader = decode_all(stats)
    assert sorted(p.name for p in reader.source_files()) == [EVTRACE, MODEL]
    assert list(got) == list(clean) and defs.attrs["npe"] == clean_defs.attrs["npe"]
    for name in clean:
        assert got[name].names == clean[name].names
        for col in clean[name].names:
            assert np.array_equal(got[name][col], clean[name][col]), (name, col)
    out = tmp_path / "o.h5"
    r = run_cli(["merge", str(stats), "-o", str(out)])
    assert r.returncode == 0, r.stderr
    assert f"{sum(map(len, clean.values())):,} rows" in r.stderr, r.stderr


# ---- 2. ids and size fields never size an allocation -----------------------------------------

def limited_run(args, gib=3):
    """partrace ARGS with the address space capped: a blow-up fails instead of swapping."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (gib << 30, gib << 30))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PARTRACE_FORMATS": SYNTH}
    return subprocess.run([sys.executable, "-m", "partrace", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=ROOT, preexec_fn=cap)


def peak_mib(summary: str) -> float:
    return float(summary.split("peak memory ")[1].split(" MiB")[0])


def assert_same_but(clean: dict, got: dict, table: str, row_offset: int, changed: set):
    """Every table equal, row for row; in ``table`` the record at ``row_offset`` may differ
    only in the ``changed`` columns (its location among them)."""
    assert list(got) == list(clean)
    for name in clean:
        a, b = clean[name], got[name]
        assert len(a) == len(b) and a.names == b.names, name
        oa, ob = np.argsort(a["offset"], kind="stable"), np.argsort(b["offset"], kind="stable")
        hit = (a["offset"][oa] == row_offset) if name == table else np.zeros(len(a), bool)
        for col in a.names:
            if col in ("location", "peer", "seq"):   # location ids shift: checked by name,
                continue                             # seq: by the rule below
            x, y = a[col][oa], b[col][ob]
            same = x == y if x.ndim == 1 else (x == y).all(axis=1)
            if col in changed:
                assert same[~hit].all(), (name, col)
            else:
                assert same.all(), (name, col)
        loc, seq = b["location"][ob], b["seq"][ob]     # seq counts each location's records
        for i in np.unique(loc):
            assert seq[loc == i].tolist() == list(range(int((loc == i).sum()))), name


def location_names(defs, ids) -> list:
    loc = defs.tables["locations"]
    name = dict(zip(loc["id"].tolist(), loc["name"].tolist()))
    return [name.get(i, "none") for i in np.asarray(ids).tolist()]


def test_huge_lp_id_is_one_more_location_not_gigabytes(tmp_path):
    stats = copy_run(tmp_path, GVT_RUN)
    first_lp = int(record_offsets(GVT_RUN, "gvt_lp")[0])
    patch(stats / GVT, first_lp + 24 + 8, 0x7FFFFFFF)           # lp_id of the first LP sample
    clean, cdefs, _ = decode_all(DATA / GVT_RUN / "stats")
    got, defs, _ = decode_all(stats, region_size=256)
    assert_same_but(clean, got, "gvt_lp", first_lp, {"lp_id", "seq"})
    lp = got["gvt_lp"]
    row = int(np.flatnonzero(lp["offset"] == first_lp)[0])
    assert lp["lp_id"][row] == 0x7FFFFFFF
    assert location_names(defs, lp["location"][row:row + 1]) == ["LP 2147483647"]
    assert len(defs.tables["locations"]) == len(cdefs.tables["locations"]) + 1
    # every other row keeps its location (by name)
    keep = lp["offset"] != first_lp
    assert location_names(defs, lp["location"][keep]) == [f"LP {g}" for g in lp["lp_id"][keep]]
    r = limited_run(["merge", str(stats), "-o", str(tmp_path / "o.h5")])
    assert r.returncode == 0, r.stderr
    assert "338 rows" in r.stderr and peak_mib(r.stderr) < 1024, r.stderr
    r = limited_run(["info", str(stats)])
    assert r.returncode == 0 and "nlp: 17" in r.stdout, r.stderr


def test_flipped_kp_id_bit_is_one_more_location(tmp_path):
    """A high bit flipped in a local KP id (it used to make npe * 2**20 KP locations)."""
    stats = copy_run(tmp_path, GVT_RUN)
    first_kp = int(record_offsets(GVT_RUN, "gvt_kp")[0])
    patch(stats / GVT, first_kp + 24 + 4, 1 << 20)
    clean, cdefs, _ = decode_all(DATA / GVT_RUN / "stats")
    got, defs, _ = decode_all(stats)
    assert_same_but(clean, got, "gvt_kp", first_kp, {"kp_id", "seq"})
    assert defs.attrs["nkp"] == cdefs.attrs["nkp"] + 1
    kp = got["gvt_kp"]
    row = kp["offset"] == first_kp
    assert location_names(defs, kp["location"][row]) == [f"KP {kp['pe_id'][row][0]}.{1 << 20}"]
    r = limited_run(["info", str(stats)])
    assert r.returncode == 0, r.stderr


def test_huge_event_source_lp_keeps_both_rows(tmp_path):
    stats = copy_run(tmp_path, EVT_RUN)
    patch(stats / EVTRACE, 0, 0x7FFFFFFF)                       # src_lp of the first record
    clean, _, _ = decode_all(DATA / EVT_RUN / "stats")
    got, defs, _ = decode_all(stats, region_size=100)
    assert_same_but(clean, got, "events", 0, {"src_lp", "seq"})
    ev = got["events"].take(np.flatnonzero(got["events"]["offset"] == 0))
    assert len(ev) == 2                                          # the SEND and the RECV row
    assert location_names(defs, ev["location"]) == ["LP 2147483647", f"LP {ev['dest_lp'][0]}"]
    assert location_names(defs, ev["peer"]) == [f"LP {ev['dest_lp'][0]}", "LP 2147483647"]
    r = limited_run(["merge", str(stats), "-o", str(tmp_path / "o.h5")])
    assert r.returncode == 0 and f"{sum(map(len, clean.values())):,} rows" in r.stderr, r.stderr


def test_vt_model_id_beyond_32_bits_is_an_error(tmp_path):
    stats = copy_run(tmp_path, SEQ_RUN)
    patch(stats / VT, 20, 1)                    # high half of the u64 pe_id of the first sample
    e = api_error(stats)
    assert (e.path, e.where) == (str(stats / VT), "byte 16") and "high half 1" in e.message
    cli_error(tmp_path, stats, stats / VT, "byte 16")


SIZE_MINUS_ONE = [   # (run, file, table of the damaged record, size field offset, error at)
    (EVT_RUN, EVTRACE, "events", 20, 0, "runs past the end"),             # model_data_sz
    (EVT_RUN, MODEL, "model_gvt", 44, 0, "runs past the end"),            # model_size
    (SEQ_RUN, VT, "vt_model", 40, 40, "runs past the end"),               # sample_size (i32)
    (GVT_RUN, GVT, "gvt_lp", 4, 4, "sample_size -1"),
]


@pytest.mark.parametrize("run,name,table,field,at,text", SIZE_MINUS_ONE)
def test_size_field_minus_one_is_an_error_not_an_allocation(tmp_path, run, name, table, field,
                                                            at, text):
    stats = copy_run(tmp_path, run)
    offsets = np.unique(record_offsets(run, table))
    rec = int(offsets[len(offsets) // 2])           # a record in the middle of the file
    patch(stats / name, rec + field, U32_MAX)
    e = api_error(stats)
    assert (e.path, e.where) == (str(stats / name), f"byte {rec + at}") and text in e.message
    r = limited_run(["merge", str(stats), "-o", str(tmp_path / "o.h5")], gib=3)
    assert r.returncode == 2 and f"{stats / name}:byte {rec + at}: " in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "o.h5").exists()
    cli_error(tmp_path, stats, stats / name, f"byte {rec + at}", nranks=2)


# ---- 3. FIFOs and directories in place of a file ---------------------------------------------

def test_fifo_in_the_stats_folder_is_an_error_not_a_hang(tmp_path):
    stats = copy_run(tmp_path, EVT_RUN)
    fifo = stats / GVT
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="not a regular file") as e:
        ROSS.open(stats)
    assert e.value.path == str(fifo)
    assert "FIFO" in cli_error(tmp_path, stats, fifo, None, info=True)
    assert "FIFO" in cli_error(tmp_path, stats, fifo, None, nranks=2)
    # named directly (the format given: other formats' sniffers are not ROSS's to fix)
    assert "FIFO" in cli_error(tmp_path, fifo, fifo, None, fmt="ross")


def test_directory_in_place_of_a_file_is_an_error(tmp_path):
    stats = copy_run(tmp_path, EVT_RUN)
    (stats / MODEL).unlink()
    (stats / MODEL).mkdir()
    with pytest.raises(TraceError, match="not a regular file") as e:
        ROSS.open(stats)
    assert e.value.path == str(stats / MODEL)
    assert "directory" in cli_error(tmp_path, stats, stats / MODEL, None)
    assert "directory" in cli_error(tmp_path, stats / MODEL, stats / MODEL, None)


# ---- 4. LP samples of ROSS before Dec 2023 (36 bytes, no process_event_cycles) ---------------

def old_layout_copy(tmp_path) -> tuple:
    """The GVT fixture re-encoded as ROSS before Dec 2023 wrote it: every LP sample rebuilt
    from its decoded values in the 36-byte layout; PE and KP records byte for byte."""
    clean, defs, _ = decode_all(DATA / GVT_RUN / "stats")
    raw = (DATA / GVT_RUN / "stats" / GVT).read_bytes()
    old_dt = L.HEADER_DTYPES[L.LP_V1]
    lp = clean["gvt_lp"]
    old = np.zeros(len(lp), old_dt)
    for f in old_dt.names:
        old[f] = lp[f]
    old["sample_size"] = 36
    parts, new_offset = [], {}
    lp_row = {int(o): i for i, o in enumerate(lp["offset"].tolist())}
    sizes = {L.PE: 128, L.KP: 68}
    spans = sorted([(int(o), sizes[L.PE]) for o in clean["gvt_pe"]["offset"]]
                   + [(int(o), sizes[L.KP]) for o in clean["gvt_kp"]["offset"]]
                   + [(o, None) for o in lp_row])
    pos = 0
    for off, n in spans:
        new_offset[off] = pos
        chunk = raw[off:off + n] if n else old[lp_row[off]].tobytes()
        parts.append(chunk)
        pos += len(chunk)
    path = tmp_path / "in" / "stats" / GVT
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(parts))
    assert len(raw) - path.stat().st_size == 12 * len(lp)      # only the LP samples shrank
    return path, clean, defs, new_offset


def test_old_lp_layout_decodes_every_value(tmp_path):
    path, clean, cdefs, new_offset = old_layout_copy(tmp_path)
    got, defs, _ = decode_all(path.parent, region_size=300)
    assert defs.attrs["files"]["gvt"]["lp_sample_bytes"] == 36
    assert cdefs.attrs["files"]["gvt"]["lp_sample_bytes"] == 48
    assert list(got) == list(clean)
    schema = ROSS.open(path.parent).schema(defs)
    lp_cols = {c.name: c for c in schema["gvt_lp"]}
    assert not set(L.LP_V1_MISSING) & set(lp_cols)              # absent, and said so:
    assert "process_event_cycles" in lp_cols["sample_size"].description
    for name in clean:
        a, b = clean[name], got[name]
        assert len(a) == len(b), name
        b = b.take(np.argsort(b["offset"], kind="stable"))
        a = a.take(np.argsort(a["offset"], kind="stable"))
        assert b["offset"].tolist() == [new_offset[o] for o in a["offset"].tolist()]
        for col in a.names:
            if col == "offset" or col in L.LP_V1_MISSING:
                continue
            want = np.full(len(a), 36) if (name == "gvt_lp" and col == "sample_size") else a[col]
            assert np.array_equal(b[col], want, equal_nan=a[col].dtype.kind == "f"), (name, col)
    assert len(got["gvt_lp"]) == 208 and len(got["gvt_pe"]) == 26 and len(got["gvt_kp"]) == 104
    assert np.array_equal(got["gvt_lp"]["sample_size"], np.full(len(got["gvt_lp"]), 36))
    assert np.array_equal(defs.tables["locations"]["name"], cdefs.tables["locations"]["name"])
    r = run_cli(["merge", str(path.parent), "-o", str(tmp_path / "o.h5")], nranks=2)
    assert r.returncode == 0 and "338 rows" in r.stderr, r.stderr


def test_mixed_or_unknown_lp_layout_is_an_error(tmp_path):
    path, clean, _, new_offset = old_layout_copy(tmp_path)
    lp_offsets = sorted(new_offset[o] for o in clean["gvt_lp"]["offset"].tolist())
    # a 48 in a 36-byte file: the layouts cannot both be right
    orig = path.read_bytes()
    patch(path, lp_offsets[-1] + 4, 48, "<i4")
    path.write_bytes(path.read_bytes() + bytes(12))     # keep the record whole
    e = api_error(path.parent)
    assert e.where == f"byte {lp_offsets[-1] + 4}" and "one layout per file" in e.message
    cli_error(tmp_path, path.parent, path, f"byte {lp_offsets[-1] + 4}")
    # neither size: the version cannot be told
    path.write_bytes(orig)
    patch(path, lp_offsets[3] + 4, 40, "<i4")
    e = api_error(path.parent)
    assert e.where == f"byte {lp_offsets[3] + 4}" and "LP 48 or 36" in e.message


def test_unreadable_file_is_an_error(tmp_path, monkeypatch):
    """An OSError while mapping a file (permissions, I/O) names the file (the tests run
    as root, which reads any mode, so the error is injected at the mapping)."""
    stats = copy_run(tmp_path, EVT_RUN)

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(np, "memmap", refuse)
    with pytest.raises(TraceError) as e:
        ROSS.open(stats).units()
    assert e.value.path == str(stats / EVTRACE) and "cannot read: Permission denied" in str(e.value)


def zero_size_events(tmp_path, copies=20):
    """The real event records of the sequential run, re-encoded as stock phold writes them
    (0 bytes of model data), the run repeated ``copies`` times."""
    clean, _, _ = decode_all(DATA / SEQ_RUN / "stats")
    send = clean["events"].take(np.flatnonzero(clean["events"]["kind"] == Kind.SEND))
    hdr = np.zeros(len(send), L.HEADER_DTYPES[L.EVTRACE])
    for f in hdr.dtype.names:
        hdr[f] = send[f]
    hdr["model_data_sz"] = 0
    path = tmp_path / "in" / "stats" / EVTRACE
    path.parent.mkdir(parents=True)
    return np.tile(hdr, copies), path


def test_size_that_swallows_the_records_after_it_is_an_error(tmp_path):
    """A size field corrupted to exactly the bytes left would end the parse at EOF with the
    records after it gone into its model data; ROSS writes one size per destination LP,
    so the record stands out."""
    hdr, path = zero_size_events(tmp_path)
    k = len(hdr) // 2
    hdr["model_data_sz"][k] = (len(hdr) - k - 1) * 24
    path.write_bytes(hdr.tobytes())
    e = api_error(path.parent)
    assert e.where == f"byte {k * 24}" and f"model_data_sz {(len(hdr) - k - 1) * 24} for LP " \
        f"{hdr['dest_lp'][k]}" in e.message
    cli_error(tmp_path, path.parent, path, f"byte {k * 24}", nranks=2)
    # the same in the real 12-byte records: the second last record swallows the last
    stats = copy_run(tmp_path / "real", SEQ_RUN)
    offs = record_offsets(SEQ_RUN, "events")[::2]
    patch(stats / EVTRACE, int(offs[-2]) + 20, 12 + 36)
    e = api_error(stats)
    assert e.where == f"byte {offs[-2]}" and "model_data_sz 48" in e.message


def test_one_huge_model_size_among_empty_ones_does_not_pad_every_row(tmp_path):
    """One record with a big size (to an LP of its own, so it breaks no rule) among
    records of size 0 must not give an (n, size) column of zero padding."""
    hdr, path = zero_size_events(tmp_path)
    k = len(hdr) // 2
    hdr["model_data_sz"][k] = (len(hdr) - k - 1) * 24
    hdr["dest_lp"][k] = 0x7FFFFFFF
    path.write_bytes(hdr.tobytes())
    got, defs, _ = decode_all(path.parent)
    assert defs.attrs["model_data_width"]["events"] == "variable"
    ev = got["events"]
    assert len(ev) == 2 * (k + 1)               # every record the file holds, as ROSS would read it
    big = ev["model_data"][ev["offset"] == k * 24]
    assert [len(b) for b in big] == [hdr["model_data_sz"][k]] * 2
    assert big[0] == hdr[k + 1:].tobytes()
    r = limited_run(["merge", str(path.parent), "-o", str(tmp_path / "o.h5")], gib=3)
    assert r.returncode == 0 and peak_mib(r.stderr) < 1024, r.stderr

"""Damaged and hostile DUMPI traces: every damage is one clear error naming the file
(and the byte where the damage is inside it), never a silent skip, a hang or an
internal error; files beside the trace that are not its own change nothing.

Each case damages a copy of a real fixture (tests/data/dumpi/coll-4rank) and checks
the reader API and the CLI (plain and under mpiexec): exit 2, one stderr line, no
output, input untouched.
"""
from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.dumpi import DUMPI
from tests.support.dumpi_encode import Call, rank_path, write_meta, write_rank
from partrace.formats.dumpi.layout import read_rank_file
from partrace.formats.dumpi.tables import SIDE_ARG_ID
from partrace.model import Table
from tests.support import damage
from tests.support.damage import decode_units

DATA = Path(__file__).resolve().parents[1] / "data" / "dumpi"
SRC = DATA / "coll-4rank"
PREFIX = "coll4-2026.11.22.05.47.23"


# -- helpers ----------------------------------------------------------------------
def copy(tmp_path: Path) -> Path:
    dst = tmp_path / "in" / SRC.name
    shutil.copytree(SRC, dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    return dst


def meta(trace: Path) -> Path:
    return trace / f"{PREFIX}.meta"


def rank(trace: Path, r: int) -> Path:
    return trace / f"{PREFIX}-{r:04d}.bin"


def decode_all(path: Path) -> dict[str, dict[str, Table]]:
    """Per rank file, its tables (those its chunks hold) concatenated."""
    return decode_units(DUMPI.open(path))


def check(path: Path, tmp_path: Path, damaged: Path, where: str | None, match: str,
          nranks: int | None = None) -> None:
    damage.check(decode_all, path, tmp_path, damaged, where, match, nranks)


def cli_fails(path: Path, tmp_path: Path, damaged: Path, where: str | None) -> str:
    return damage.cli_fails(path, tmp_path / "out-None", damaged, where)


def api_error(path: Path) -> TraceError:
    return damage.api_error(decode_all, path)


def numprocs_line(trace: Path) -> str:
    lines = meta(trace).read_text().splitlines()
    return f"line {[i for i, x in enumerate(lines, 1) if x.startswith('numprocs=')][0]}"


def set_numprocs(trace: Path, n: int) -> None:
    m = meta(trace)
    m.write_text(m.read_text().replace("numprocs=4", f"numprocs={n}"))


def patch(path: Path, at: int, blob: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[at:at + len(blob)] = blob
    path.write_bytes(bytes(data))


# -- metafile against the rank files beside it --------------------------------------
@pytest.mark.parametrize("nranks", [None, 2])
def test_numprocs_below_the_rank_files(tmp_path, nranks):
    """sst-dumpi's readers (dumpi/bin/metadata.cc) read the files of ranks 0..numprocs-1
    only: so does partrace, with one warning naming the others; the ranks read are
    dumpi2ascii's, call for call."""
    import json
    import warnings

    from partrace.model import Kind
    from tests.conftest import run_cli
    from tests.formats.test_dumpi_fixtures import parse_ascii
    trace = copy(tmp_path)
    set_numprocs(trace, 2)
    r = run_cli(["info", str(trace), "--json"], nranks=nranks)
    assert r.returncode == 0, r.stderr
    said = r.stderr.splitlines()
    assert said == [f"partrace: warning: {meta(trace)}: {numprocs_line(trace)}: numprocs=2 but "
                    f"2 more rank file(s) of prefix '{PREFIX}' lie beside it: {PREFIX}-0002.bin, "
                    f"{PREFIX}-0003.bin; not read, as sst-dumpi's readers do not read them"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reader = DUMPI.open(trace)
        defs = reader.read_definitions()
        units = list(reader.units())
        assert sorted(u.info[1] for u in units) == [0, 1]
        rows = 0
        for u in units:
            (chunk,) = reader.decode(u, defs)
            ev = chunk["events"]
            ref = parse_ascii(Path(u.info[0]).with_suffix(".txt"))["calls"]
            assert ev["time"][ev["kind"] == Kind.ENTER].tolist() == [c["wall_in"] for c in ref]
            assert ev["time"][ev["kind"] == Kind.LEAVE].tolist() == [c["wall_out"] for c in ref]
            rows += len(ev)
    assert json.loads(r.stdout)["events"] == rows


def test_numprocs_above_the_rank_files(tmp_path):
    """sst-dumpi's metadata.cc refuses this too ("Failed to find binary trace files")."""
    trace = copy(tmp_path)
    set_numprocs(trace, 5)
    check(meta(trace), tmp_path, rank(trace, 4), None,
          f"rank 4 file is missing (metafile {meta(trace)} says numprocs=5)")


def test_numprocs_zero(tmp_path):
    trace = copy(tmp_path)
    set_numprocs(trace, 0)
    check(trace, tmp_path, meta(trace), numprocs_line(trace), "numprocs=0: expected at least 1 rank")


# -- truncation and corruption of a rank file ----------------------------------------
@pytest.mark.parametrize("nranks", [None, 2])
def test_last_8_bytes_missing(tmp_path, nranks):
    """The fuzz case: used to be 'internal error: IndexError: DUMPI call stream is not
    loaded'.  The cut shifts the index record: its offsets no longer fit the file."""
    trace = copy(tmp_path)
    f = rank(trace, 1)
    data = f.read_bytes()
    f.write_bytes(data[:-8])
    where = f"byte {len(data) - 8 - 64 + 8}"      # where the shifted index record's magic is
    check(trace, tmp_path, f, where, "bad index record: footer offset 8 overlaps the header",
          nranks)


def test_every_truncation_is_an_error_at_a_byte(tmp_path):
    trace = copy(tmp_path)
    f = rank(trace, 2)
    data = f.read_bytes()
    seen = set()
    for keep in list(range(0, len(data), 37)) + list(range(len(data) - 80, len(data))):
        f.write_bytes(data[:keep])
        e = api_error(trace)
        assert e.path == str(f) and e.where.startswith("byte "), (keep, str(e))
        assert 0 <= int(e.where.split()[1]) <= keep, (keep, str(e))
        seen.add(e.message.split(" (")[0][:40])
    assert len(seen) >= 2          # several kinds of damage were met, each named


def _index(path: Path) -> dict:
    return read_rank_file(path).index


@pytest.mark.parametrize("field,at,blob,where,match", [
    # the first record (MPI_Init at byte 16: label, mask 0x48, thread, wall times) has
    # its argv count at byte 33 and its first string's length at byte 37
    ("stream", 33, struct.pack(">I", 0x7FFFFFFF), lambda ix: 16,
     "call record runs past the end of the call stream"),
    ("stream", 37, struct.pack(">I", 0xFFFFFFF0), lambda ix: 16,
     "call record runs past the end of the call stream"),
    ("stream", 16, struct.pack(">H", 400), lambda ix: 16, "unknown DUMPI function id 400"),
    ("eos", -2, struct.pack(">H", 7), lambda ix: ix["header"] - 2,
     "expected end-of-stream label 293"),
    ("hostname", 11, struct.pack(">H", 0xFFFF), lambda ix: ix["header"] + 13,
     "expected hostname (65535 bytes), file ends at"),
    ("hostname", 11, struct.pack(">H", 200), lambda ix: ix["header"],
     "header record runs to byte"),
    ("footer", 0, b"\1", lambda ix: ix["footer"], "expected footer magic"),
    ("sizelbl", 0, struct.pack(">I", 0x40000000), lambda ix: ix["sizelbl"] + 4,
     "expected datatype sizes (4294967296 bytes)"),
    ("perflbl", 0, struct.pack(">I", 0xFFFFFFFF), None, "expected perf label"),
    ("addrlbl", 0, struct.pack(">I", 0xFFFFFFFF), None, "file ends at"),
])
def test_counts_and_labels_out_of_range(tmp_path, field, at, blob, where, match):
    """Sizes and counts read from the file are checked against the bytes left before
    anything is allocated or read: a TraceError at the byte, never a MemoryError."""
    trace = copy(tmp_path)
    f = rank(trace, 1)
    ix = _index(f)
    base = {"stream": 0, "eos": ix["header"], "hostname": ix["header"]}.get(field, ix.get(field))
    patch(f, base + at, blob)
    e = api_error(trace)
    assert e.path == str(f) and match in e.message, str(e)
    if where is not None:
        assert e.where == f"byte {where(ix)}", str(e)
    if field in ("stream", "sizelbl"):
        assert match in cli_fails(trace, tmp_path, f, e.where)


def test_index_offsets_outside_their_places(tmp_path):
    trace = copy(tmp_path)
    f = rank(trace, 0)
    size = f.stat().st_size
    ix = list(struct.unpack(">8Q", f.read_bytes()[-64:]))
    for slot, value, match in ((5, 5000, "body offset 5000 outside the file"),
                               (5, ix[4] - 4, f"call stream at {ix[4] - 4} does not end "
                                "before the header"),
                               (1, 100, "sizelbl offset 100 is not between the footer end")):
        bad = list(ix)
        bad[slot] = value
        patch(f, size - 64, struct.pack(">8Q", *bad))
        e = api_error(trace)
        assert (e.path, e.where) == (str(f), f"byte {size - 64}") and match in e.message, str(e)
    cli_fails(trace, tmp_path, f, f"byte {size - 64}")


# -- FIFOs and folders in place of trace files (never opened: no hang) -----------------
def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize("make", [_fifo, _folder], ids=["fifo", "folder"])
@pytest.mark.parametrize("victim,given", [("meta", "folder"), ("bin", "folder"), ("bin", "meta")])
def test_not_a_regular_file(tmp_path, make, victim, given):
    """(A metafile given by name that is a FIFO: the test below.)"""
    trace = copy(tmp_path)
    path = trace if given == "folder" else meta(trace)
    damaged = meta(trace) if victim == "meta" else rank(trace, 3)
    make(damaged)
    what = "a FIFO, device or socket" if make is _fifo else "a folder"
    check(path, tmp_path, damaged, None, f"not a regular file ({what})")


@pytest.mark.parametrize("nranks", [None, 2])
def test_fifo_metafile_given_directly(tmp_path, nranks):
    trace = copy(tmp_path)
    _fifo(meta(trace))
    # the API opens it as DUMPI (which names what it expected); the CLI's format detection
    # refuses it before any format's sniffer would open (and block on) it
    check(meta(trace), tmp_path, meta(trace), None, "not a regular file (a FIFO, device or socket)",
          nranks)


def test_fifo_rank_file_given_directly(tmp_path):
    trace = copy(tmp_path)
    _fifo(rank(trace, 0))
    check(rank(trace, 0), tmp_path, rank(trace, 0), None, "not a regular file")


# -- header versions ----------------------------------------------------------------
def _set_version(f: Path, version: tuple[int, int, int]) -> None:
    patch(f, _index(f)["header"], bytes(version))


def replace_bytes(f: Path, at: int, end: int, blob: bytes) -> None:
    """Bytes [at, end) of a rank file become ``blob``; index offsets after ``at`` follow."""
    data = f.read_bytes()
    delta = len(blob) - (end - at)
    data = data[:at] + blob + data[end:]
    fields = list(struct.unpack(">8Q", data[-64:]))
    fields[1:] = [x + delta if x > at else x for x in fields[1:]]
    f.write_bytes(data[:-64] + struct.pack(">8Q", *fields))


def _same_rows(a: dict, b: dict, skip=()) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].keys() == b[key].keys()
        for name, t in a[key].items():
            for col in t.names:
                if col in skip:
                    continue
                x, y = t[col], b[key][name][col]
                assert (list(x) == list(y)) if x.dtype == object else np.array_equal(x, y), \
                    (key, name, col)


@pytest.mark.parametrize("version", [(0, 6, 9), (7, 0, 0), (12, 0, 0), (13, 2, 1)])
def test_versions_with_the_same_records_decode_alike(tmp_path, version):
    """Headers of the releases whose records did not change since 0.6.9 (no version
    check in sst-dumpi's readers after that) give the same rows."""
    trace = copy(tmp_path)
    for r in range(4):
        _set_version(rank(trace, r), version)
    reader = DUMPI.open(trace)
    assert reader.read_definitions().attrs["version"] == ".".join(map(str, version))
    _same_rows(decode_all(SRC), decode_all(trace))


def argc_twice(f: Path) -> None:
    data = f.read_bytes()
    assert data[16:19] == bytes([0, 124, 0x48])            # MPI_Init, as dumpi2ascii shows
    replace_bytes(f, 33, 37, data[33:37] * 2)


def test_before_0_6_2_init_wrote_argc_twice(tmp_path):
    """The fixture re-encoded as a 0.6.1 writer did it: MPI_Init's argc (at byte 33 of
    each rank file, after label, mask 0x48, thread and wall times) written twice."""
    trace = copy(tmp_path)
    for r in range(4):
        argc_twice(rank(trace, r))
        _set_version(rank(trace, r), (0, 6, 1))
    a, b = decode_all(SRC), decode_all(trace)
    _same_rows(a, b)
    assert list(b["0001"]["strings"]["text"]) == ["/home/usr/bin/dt_coll"]
    headers = DUMPI.open(trace).read_definitions().tables["rank_headers"]
    assert headers["version"].tolist() == ["0.6.1"] * 4


def test_before_0_5_no_mesh_size_in_the_header(tmp_path):
    """dumpi/common/io.c reads the header's meshsize array only from 0.5 on: the
    fixture's header re-encoded with mesh coordinates, as 13.0.0 and as 0.4.0 wrote it
    (with MPI_Init's argc twice, as before 0.6.2)."""
    new, old = copy(tmp_path / "new"), copy(tmp_path / "old")
    for r in range(4):
        argc_twice(rank(old, r))
        _set_version(rank(old, r), (0, 4, 0))
    for trace, version, size in ((new, (13, 0, 0), [4, 4]), (old, (0, 4, 0), [])):
        f = rank(trace, 0)
        ix = _index(f)
        data = f.read_bytes()
        head = data[ix["header"]:ix["footer"]]
        assert head.endswith(struct.pack(">II", 0, 0))        # meshdim 0: two empty arrays
        mesh = struct.pack(">I2i", 2, 1, 2) + (struct.pack(">I2i", 2, *size) if size else b"")
        replace_bytes(f, ix["header"], ix["footer"], bytes(version) + head[3:-8] + mesh)
    for trace, size in ((new, [4, 4]), (old, [])):
        rf = read_rank_file(rank(trace, 0))
        assert (rf.meshcrd, rf.meshsize) == ([1, 2], size)
        assert rf.calls == read_rank_file(rank(SRC, 0)).calls
    _same_rows(decode_all(new), decode_all(old))


def _one_int_instead_of(f: Path, values: list[int], version) -> None:
    """An array argument (u32 count + ints) rewritten as older writers wrote it: its
    first int alone."""
    data = f.read_bytes()
    blob = struct.pack(f">I{len(values)}i", len(values), *values)
    at = data.index(blob)
    replace_bytes(f, at, at + len(blob), struct.pack(">i", values[0]))
    _set_version(f, version)


@pytest.mark.parametrize("name,args,arg,version", [
    ("MPI_Type_struct", dict(count=3, lengths=[5, 6, 7], indices=[1001, 1002, 1003],
                             oldtypes=[9, 9, 9], newtype=40), "indices", (0, 6, 8)),
    ("MPI_Cart_get", dict(ndim=2, comm=2, maxdims=2, dims=[3, 4], periods=[0, 1],
                          coords=[1001, 1002]), "coords", (0, 6, 7))])
def test_older_array_layouts(tmp_path, name, args, arg, version):
    """Before 0.6.9 (Type_struct) and 0.6.8 (Cart_get) one int was written in place of
    the array; sst-dumpi reads it as the first element, the others 0."""
    calls = [Call("MPI_Barrier", dict(comm=2)), Call(name, args), Call("MPI_Barrier", dict(comm=2))]
    for sub in ("new", "old"):
        (tmp_path / sub).mkdir()
        write_meta(tmp_path / sub, "t", 1)
        write_rank(rank_path(tmp_path / sub, "t", 0), calls)
    _one_int_instead_of(rank_path(tmp_path / "old", "t", 0), args[arg], version)
    a, b = decode_all(tmp_path / "new"), decode_all(tmp_path / "old")
    first_only = [args[arg][0]] + [0] * (len(args[arg]) - 1)
    for dec, values in ((a, args[arg]), (b, first_only)):
        arrays = dec["0000"]["arrays"]
        sel = (arrays["call"] == 1) & (arrays["arg"] == SIDE_ARG_ID[arg])
        assert arrays["value"][sel].tolist() == values
        assert dec["0000"][f"calls/{name}"][f"{arg}_count"].tolist() == [len(values)]
    same = [k for k in range(len(a["0000"]["arrays"]))
            if not (a["0000"]["arrays"]["call"][k] == 1
                    and a["0000"]["arrays"]["arg"][k] == SIDE_ARG_ID[arg])]
    assert len(b["0000"]["arrays"]) == len(a["0000"]["arrays"])
    for col in ("call", "arg", "i0", "value"):
        assert np.array_equal(a["0000"]["arrays"][col][same], b["0000"]["arrays"][col][same])
    _same_rows({k: {n: t for n, t in v.items() if n != "arrays"} for k, v in a.items()},
               {k: {n: t for n, t in v.items() if n != "arrays"} for k, v in b.items()})


@pytest.mark.parametrize("skip", [1, 2, 3])
def test_older_index_records(tmp_path, skip):
    """Index records before 0.6.6 lack sizelbl (and before late 2009 addrlbl, perflbl):
    sst-dumpi finds the magic further in; the same calls decode, without datatype sizes
    (so byte counts are 0)."""
    trace = copy(tmp_path)
    for r in range(4):
        f = rank(trace, r)
        data = f.read_bytes()
        fields = list(struct.unpack(">8Q", data[-64:]))
        # the dropped labels' records stay in the file, unreferenced
        f.write_bytes(data[:-64] + struct.pack(f">{8 - skip}Q", fields[0], *fields[1 + skip:]))
    defs = DUMPI.open(trace).read_definitions()
    clean = DUMPI.open(SRC).read_definitions()
    assert len(defs.tables["datatype_sizes"]) == 0 < len(clean.tables["datatype_sizes"])
    dropped = ("sizelbl", "addrlbl", "perflbl")[:skip]        # first fields of the record
    for r in range(4):
        old, full = defs.source["ranks"][r]["index"], clean.source["ranks"][r]["index"]
        assert old == {k: 0 if k in dropped else v for k, v in full.items()}
    _same_rows(decode_all(SRC), decode_all(trace), skip={"size", "received"})


# -- files that are not the trace's ---------------------------------------------------
def test_files_beside_the_trace_are_not_counted_or_read(tmp_path):
    clean = copy(tmp_path / "clean")
    dirty = copy(tmp_path / "dirty")
    (dirty / "notes.txt").write_text("x" * 50000)
    (dirty / "other-2020.01.01.00.00.00-0000.bin").write_bytes(b"\0" * 4096)  # another prefix
    (dirty / f"{PREFIX}-0001.bin.bak").write_bytes(rank(clean, 1).read_bytes())
    (dirty / f"{PREFIX}-0002.txt.d").mkdir()
    os.mkfifo(dirty / "a-fifo")
    own = [meta(clean)] + [rank(clean, r) for r in range(4)]
    for path, trace in ((clean, clean), (dirty, dirty), (meta(dirty), dirty)):
        assert [p.name for p in DUMPI.open(path).source_files()] == [p.name for p in own]
    infos = [damage.info_json(trace, nranks=2) for trace in (clean, dirty)]
    assert infos[0] == infos[1]
    assert infos[0]["size_bytes"] == sum(p.stat().st_size for p in own)
    assert infos[0]["files"] == 5
    _same_rows(decode_all(clean), decode_all(dirty))

"""DUMPI read as libundumpi reads it: records of a function the footers count no call of,
rank files of a version newer than sst-dumpi's, an end-of-stream label inside the stream,
metafiles as sst-dumpi's metadata.cc reads them.

libundumpi (``undumpi_read_stream``) reads every record of the call stream whatever the
footer counts (the footer is read only by ``undumpi_read_footer``, and checked by no
reader).  The case: a copy of the real p2p-4rank fixture whose footers are edited to
count no MPI_Ssend call on any rank; every call, argument, status and message is compared
with dumpi2ascii's decode of the clean files beside it (the edit touches only the footer),
the footer table with that decode's footer less the edited counts; where dumpi2ascii is
built on this machine, its decode of the edited copy is compared too.
"""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

from partrace.formats.dumpi import DUMPI
from partrace.formats.dumpi.functable import FUNCTIONS
from partrace.formats.dumpi.layout import FOOT_MAGIC, NUM_FOOTER, read_rank_file
from partrace.formats.dumpi.walk import Walk

from tests.formats import test_dumpi_fixtures as fixtures

DUMPI2ASCII = Path(os.environ.get("DUMPI2ASCII", "/tmp/pace/inst-dumpi/bin/dumpi2ascii"))
SSEND = next(f for f, n, _a in FUNCTIONS if n == "MPI_Ssend")


def uncounted(tmp_path: Path, fid: int, fixture: str = "p2p-4rank") -> Path:
    """A copy of ``fixture`` whose footers count no call (and no ignored call) of ``fid``."""
    folder = tmp_path / fixture
    shutil.copytree(fixtures.DATA / fixture, folder)
    for f in sorted(folder.glob("*.bin")):
        at = read_rank_file(f).index["footer"]
        raw = bytearray(f.read_bytes())
        assert struct.unpack_from(">Q", raw, at)[0] == FOOT_MAGIC
        for slot in (fid, NUM_FOOTER + fid):             # calls, ignored
            struct.pack_into(">I", raw, at + 8 + 4 * slot, 0)
        f.write_bytes(bytes(raw))
    return folder


def decoded(folder: Path):
    """The fixture tuple of test_dumpi_fixtures (reader, defs, schema, decoded, refs) for
    ``folder``, refs parsed from the dumpi2ascii text beside each rank file."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        trace = fixtures.decode_fixture(folder)
    return trace, [str(w.message) for w in said]


def _reads_as_its_refs(trace) -> None:
    """Every call, argument and message of ``trace`` as its refs (dumpi2ascii) give them."""
    for check in (fixtures.test_header_footer_sizes, fixtures.test_calls_times_and_threads,
                  fixtures.test_every_argument, fixtures.test_message_and_collective_rows):
        check(trace)


def _dumpi2ascii_reads_as_refs(files: list[Path], refs: dict, tmp_path: Path) -> None:
    """dumpi2ascii -a of each edited rank file gives what the refs say (skips where
    dumpi2ascii is not built)."""
    if not DUMPI2ASCII.exists():
        pytest.skip(f"dumpi2ascii not built here ({DUMPI2ASCII}): compared with the clean "
                    "files' decode only")
    for rank, f in enumerate(files):
        assert _dumpi2ascii(f, tmp_path) == refs[rank]


def test_records_the_footers_do_not_count_are_read(tmp_path):
    folder = uncounted(tmp_path, SSEND)
    trace, said = decoded(folder)
    _r, defs, schema, _dec, refs = trace
    # the clean decode's footer less the edited slot: what dumpi2ascii prints of the copy
    for ref in refs.values():
        assert ref["footer"]["MPI_Ssend"] != (0, 0)
        ref["footer"]["MPI_Ssend"] = (0, 0)
    assert "calls/MPI_Ssend" in schema
    assert "MPI_Ssend" in defs.attrs["recorded_functions"]
    # one warning, naming the first rank file and its first MPI_Ssend record's byte
    assert len(said) == 1, said
    first = sorted(folder.glob("*-0000.bin"))[0]
    assert said[0].startswith(f"{first}: byte ")
    at = int(said[0][len(f"{first}: byte "):].split(":")[0])
    assert struct.unpack_from(">H", first.read_bytes(), at)[0] == SSEND   # its label
    assert "1 MPI_Ssend record(s) its footer counts no recorded call of (in all, 1 " \
           "function(s) in 4 rank file(s): MPI_Ssend); read as libundumpi reads them" in said[0]
    _reads_as_its_refs(trace)
    _dumpi2ascii_reads_as_refs(sorted(folder.glob("*.bin")), refs, tmp_path)


def test_communicator_calls_the_footers_do_not_count_are_read(tmp_path):
    """coll-4rank's footers edited to count no MPI_Comm_split: its records are still read,
    and the communicators it makes are as the clean files': the definitions' communicator
    tables, and each event's communicator."""
    split = next(f for f, n, _a in FUNCTIONS if n == "MPI_Comm_split")
    clean, said = decoded(fixtures.DATA / "coll-4rank")
    assert said == []
    trace, said = decoded(uncounted(tmp_path, split, "coll-4rank"))
    _r, defs, schema, dec, refs = trace
    for ref in refs.values():
        assert ref["footer"]["MPI_Comm_split"] != (0, 0)
        ref["footer"]["MPI_Comm_split"] = (0, 0)
    assert len(said) == 1 and "MPI_Comm_split record(s) its footer counts no recorded call" \
        " of (in all, 1 function(s) in 4 rank file(s): MPI_Comm_split)" in said[0], said
    assert "calls/MPI_Comm_split" in schema
    made = clean[1].tables["communicators"]
    splits = made["id"][[n.startswith("MPI_Comm_split") for n in made["name"]]]
    assert all(np.isin(splits, chunk["events"]["comm"]).any() for chunk in clean[3].values())
    for name in ("communicators", "communicator_members", "communicator_handles"):
        a, b = defs.tables[name], clean[1].tables[name]
        assert a.names == b.names and all(np.array_equal(a[c], b[c]) for c in a.names), name
    for rank, chunk in dec.items():
        for c in ("call", "kind", "comm", "peer", "root"):
            assert np.array_equal(chunk["events"][c], clean[3][rank]["events"][c]), (rank, c)
    _reads_as_its_refs(trace)


def _dumpi2ascii(f: Path, tmp_path: Path) -> dict:
    r = subprocess.run([str(DUMPI2ASCII), "-a", str(f)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    out = tmp_path / (f.stem + ".edited.txt")
    out.write_text(r.stdout)
    return fixtures.parse_ascii(out)


@pytest.mark.parametrize("version", [(14, 0, 0), (127, 1, 2)])
def test_newer_versions_are_read_with_a_warning(tmp_path, version):
    """dumpi_open_input_file warns of a file newer than sst-dumpi and reads it on with its
    own layouts; so does partrace (one warning for all such rank files).  (A version byte
    over 127 is a negative char to sst-dumpi, an old version whose layouts it then
    applies: not a case here.)"""
    folder = tmp_path / "p2p-4rank"
    shutil.copytree(fixtures.DATA / "p2p-4rank", folder)
    files = sorted(folder.glob("*.bin"))
    text = ".".join(map(str, version))
    for f in files[2:]:
        at = read_rank_file(f).index["header"]
        raw = bytearray(f.read_bytes())
        raw[at:at + 3] = bytes(version)
        f.write_bytes(bytes(raw))
    trace, said = decoded(folder)
    _r, defs, _schema, _dec, refs = trace
    assert said == [f"{files[2]}: byte {read_rank_file(files[2]).index['header']}: DUMPI "
                    f"version {text} (and 1 more rank file(s)) is newer than sst-dumpi 13.0.0; "
                    f"read with its layouts, as sst-dumpi reads it (forward compatibility is "
                    f"not guaranteed)"]
    for rank in (2, 3):
        refs[rank]["header"]["version"] = text       # all that the edit changes
    _reads_as_its_refs(trace)
    _dumpi2ascii_reads_as_refs(files, refs, tmp_path)


def _reads_as_the_fixture(folder: Path) -> None:
    """Every call, argument and message of ``folder`` as dumpi2ascii printed the fixture's."""
    trace, said = decoded(folder)
    assert said == []
    _reads_as_its_refs(trace)


def test_metafile_read_as_sst_dumpi_reads_it(tmp_path):
    """dumpi/bin/metadata.cc skips lines without '=' and reads numprocs with ``>> int``
    (the integer its value starts with)."""
    folder = tmp_path / "p2p-4rank"
    shutil.copytree(fixtures.DATA / "p2p-4rank", folder)
    meta = next(folder.glob("*.meta"))
    text = meta.read_text()
    assert "numprocs=4\n" in text
    meta.write_text("# written by hand\n" + text.replace("numprocs=4\n", "numprocs=4 ranks\n")
                    + "a line without an equals sign\n")
    _reads_as_the_fixture(folder)


@pytest.mark.parametrize("width", [5, 1])
def test_rank_files_of_another_number_width(tmp_path, width):
    """metadata.cc looks for rank numbers of 4 digits, then 5..9, then 0..3 wide."""
    folder = tmp_path / "p2p-4rank"
    shutil.copytree(fixtures.DATA / "p2p-4rank", folder)
    for f in sorted(folder.glob("*.bin")):
        stem, rank = f.stem.rsplit("-", 1)
        f.rename(f.with_name(f"{stem}-{int(rank):0{width}d}.bin"))
        txt = f.with_suffix(".txt")
        txt.rename(txt.with_name(f"{stem}-{int(rank):0{width}d}.txt"))
    _reads_as_the_fixture(folder)


def test_end_of_stream_label_inside_the_stream(tmp_path):
    """undumpi_read_single_call stops at label 293 wherever it is: rank 0's fourth record
    label made 293, its first three calls are read (dumpi2ascii prints those three) and one
    warning says how many bytes are left unread."""
    folder = tmp_path / "p2p-4rank"
    shutil.copytree(fixtures.DATA / "p2p-4rank", folder)
    f = sorted(folder.glob("*-0000.bin"))[0]
    raw = bytearray(f.read_bytes())
    rf = read_rank_file(f)
    # the fourth record's offset, from a walk of the clean file (dumpi2ascii's three calls
    # before it, below, show it is the fourth record's)
    at = int(Walk(np.frombuffer(bytes(raw), np.uint8), rf).off[3])
    struct.pack_into(">H", raw, at, 293)
    f.write_bytes(bytes(raw))
    trace, said = decoded(folder)
    assert said == [f"{f}: byte {at}: end-of-stream label 293 before the end of the call "
                    f"stream; the {rf.stream_end - at} bytes after it are not read, as "
                    f"libundumpi stops reading there"]
    refs = trace[4]
    refs[0]["calls"] = refs[0]["calls"][:3]
    fixtures.test_calls_times_and_threads(trace)
    fixtures.test_every_argument(trace)
    if not DUMPI2ASCII.exists():
        pytest.skip(f"dumpi2ascii not built here ({DUMPI2ASCII}): compared with the clean "
                    "files' decode only")
    assert _dumpi2ascii(f, tmp_path)["calls"] == refs[0]["calls"]


def test_statuses_before_0_6_3_have_no_tag(tmp_path):
    """iodefs.h reads a status of a file written before 0.6.3 as 10 bytes (no tag) and
    gives it MPI_ANY_TAG: a rank file so written (version 0.6.2) reads the same way."""
    from tests.support.dumpi_encode import Call, rank_path, write_meta, write_rank
    recv = [(64, 1, 0, 0, 5)]
    wait = [(8, 2, 0, 0, 6), (16, 3, 1, 0, 7)]
    calls = [Call("MPI_Recv", dict(count=8, datatype=9, source=1, tag=5, comm=2, status=recv),
                  wall=(1000, 2000)),
             Call("MPI_Waitall", dict(count=2, requests=[4, 5], statuses=wait),
                  wall=(3000, 4000)),
             Call("MPI_Barrier", dict(comm=2), wall=(5000, 6000))]
    write_meta(tmp_path, "old", 1)
    f = rank_path(tmp_path, "old", 0)
    write_rank(f, calls, version=(0, 6, 2))
    reader = DUMPI.open(tmp_path)
    defs = reader.read_definitions()
    (chunk,) = list(reader.decode(reader.units()[0], defs))
    st = chunk["statuses"]
    got = list(zip(st["call"].tolist(), st["bytes"].tolist(), st["source"].tolist(),
                   st["cancelled"].tolist(), st["error"].tolist(), st["tag"].tolist()))
    want = [(0, *s[:4], -1) for s in recv] + [(1, *s[:4], -1) for s in wait]
    assert got == want
    assert chunk["calls/MPI_Barrier"]["call"].tolist() == [2]      # the stream stays in step
    if not DUMPI2ASCII.exists():
        pytest.skip(f"dumpi2ascii not built here ({DUMPI2ASCII}): compared with sst-dumpi's "
                    "reading code only")
    ref = _dumpi2ascii(f, tmp_path)
    assert [c["name"] for c in ref["calls"]] == ["MPI_Recv", "MPI_Waitall", "MPI_Barrier"]
    printed = [fixtures.ints(s) for c in ref["calls"] for t, _n, text in c["args"]
               if t == "MPI_Status" for s in re.findall(r"\{(.*?)\}", text)]
    # dumpi2ascii prints bytes, cancelled, source, tag, error
    assert printed == [[b, c, s, t, e] for _call, b, s, c, e, t in want]

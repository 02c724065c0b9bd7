"""The plan's survey of a DUMPI stream (comms.survey_stream: the skim of skim.py, and the full
walk of the communicator and group records only) against the records themselves.

The record counts are compared with dumpi2ascii's decode beside each real fixture, call by
call; the first offsets and the communicator/group calls with the full walk of the decoder
(scan.walk, whose rows the fixture tests compare with dumpi2ascii's), on every DUMPI trace
of tests/data; and on damaged copies (every byte of a stream changed, every truncation),
the survey stops at the same record with the same error as the decoder's walk, or reads
what it reads.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from partrace.errors import LimitError, TraceError
from partrace.formats.dumpi.comms import TRIGGER, survey_stream
from partrace.formats.dumpi.functable import FUNCTIONS
from partrace.formats.dumpi.layout import read_rank_file
from partrace.formats.dumpi.walk import Walk, slot_arrays
from partrace.kernels import jit

from tests.formats import test_dumpi_fixtures as fixtures

DATA = Path(__file__).resolve().parent.parent / "data"
RANK_FILES = sorted(p for p in [*(DATA / "dumpi").rglob("*.bin"),
                                *(DATA / "corpus" / "dumpi").rglob("*.bin")])
NAMES = {name: fid for fid, name, _a in FUNCTIONS}


def walked(rf) -> tuple:
    """What the survey says of ``rf``, from one full walk of its stream (the decoder's):
    (TRIGGER calls as (call, function, args), records per function, first offsets,
    early end); or the walk's error.  The walk compiled, whatever the survey's mode."""
    buf = np.memmap(rf.path, np.uint8, mode="r")
    small, jit._small = jit._small, False
    try:
        w = Walk(buf, rf)
    except (TraceError, LimitError) as e:
        return type(e), str(e)
    finally:
        jit._small = small
    ops = []
    for c in np.flatnonzero(np.isin(w.func, sorted(TRIGGER))):
        args = {}
        for k, (name, kind, _r, _c) in enumerate(FUNCTIONS[int(w.func[c])][2]):
            if kind in ("a32", "aa32"):
                args[name] = slot_arrays(w, c, k, nested=kind == "aa32")
            elif kind in ("i32", "u16", "u8", "i64"):
                args[name] = int(w.vals[k, c])
        ops.append((int(c), int(w.func[c]), args))
    counts = np.bincount(w.func, minlength=len(FUNCTIONS))
    first = np.full(len(FUNCTIONS), -1, np.int64)
    fids, at = np.unique(w.func, return_index=True)
    first[fids] = w.off[at]
    return ops, counts.tolist(), first.tolist(), w.early_end


def surveyed(rf) -> tuple:
    """The survey of ``rf`` in the form of :func:`walked`."""
    try:
        s = survey_stream(rf)
    except (TraceError, LimitError) as e:
        return type(e), str(e)
    return ([(op.call, op.fid, op.args) for op in s.ops], s.counts.tolist(), s.first.tolist(),
            s.early_end)


@pytest.fixture(params=["numba", "python"])
def mode(request, monkeypatch):
    """The skim compiled, and run as Python (small mode)."""
    monkeypatch.setattr(jit, "_small", request.param == "python")
    return request.param


@pytest.mark.parametrize("trace", ["p2p-4rank", "coll-4rank", "papi-3rank"])
def test_counts_are_dumpi2asciis(trace, mode):
    for f in sorted((DATA / "dumpi" / trace).glob("*.bin")):
        s = survey_stream(read_rank_file(f))
        want = Counter(NAMES[m[1]] for line in f.with_suffix(".txt").read_text().splitlines()
                       if (m := fixtures.STAMP.match(line)) and m[2] == "entering")
        assert sum(want.values()) > 20, f
        got = {int(fid): int(s.counts[fid]) for fid in np.flatnonzero(s.counts)}
        assert got == dict(want), f


@pytest.mark.parametrize("path", RANK_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_rank_file_surveys_as_it_walks(path, mode):
    rf = read_rank_file(path)
    assert surveyed(rf) == walked(rf)


def test_communicator_calls_are_found(mode):
    """Of the traces above, those with communicator and group calls: each rank's (its
    TRIGGER calls, as the walk reads them) are there (a check that the comparison above
    covered them)."""
    found = {p.parent.name for p in RANK_FILES if surveyed(read_rank_file(p))[0]}
    assert {"coll-4rank", "sstmacro-testbgp"} <= found


def _changed(f: Path, at: int, value: int) -> None:
    raw = bytearray(f.read_bytes())
    raw[at] = value
    f.write_bytes(bytes(raw))


@pytest.mark.parametrize("source,values", [("coll-4rank", (0x00, 0xFF)), ("papi-3rank", (0xFF,))])
def test_every_byte_changed_surveys_as_it_walks(tmp_path, source, values):
    """Each byte of the stream of a rank file set to other values in turn (labels, masks,
    lengths, values: each record's every field): the survey gives what the walk gives, or
    the same error at the same byte.  (Compiled only: the kernels as Python are compared
    on the traces and on the cuts below.)"""
    src = sorted((DATA / "dumpi" / source).glob("*.bin"))[0]
    rf = read_rank_file(src)
    data = src.read_bytes()
    f = tmp_path / src.name
    kinds = Counter()
    for at in range(rf.stream_start, rf.stream_end):
        for value in values:
            if data[at] == value:
                continue
            f.write_bytes(data)
            _changed(f, at, value)
            edited = read_rank_file(f)
            want = walked(edited)
            assert surveyed(edited) == want, (at, value)
            kinds[want[0] if isinstance(want[0], type) else "read"] += 1
    assert kinds[TraceError] and kinds["read"], kinds     # both damage and readable edits


def test_an_end_of_stream_label_at_each_record(tmp_path, mode):
    """libundumpi stops at an end-of-stream label (293) wherever it is: the survey stops
    there too, at each record in turn, as the walk does."""
    src = sorted((DATA / "dumpi" / "coll-4rank").glob("*.bin"))[0]
    rf = read_rank_file(src)
    data = src.read_bytes()
    f = tmp_path / src.name
    offsets = Walk(np.frombuffer(data, np.uint8), rf).off
    for at in offsets.tolist():
        f.write_bytes(data[:at] + bytes([1, 0x25]) + data[at + 2:])
        edited = read_rank_file(f)
        got = surveyed(edited)
        assert got == walked(edited) and got[3] == at, at


def test_every_truncation_surveys_as_it_walks(tmp_path, mode):
    src = sorted((DATA / "dumpi" / "coll-4rank").glob("*.bin"))[1]
    rf = read_rank_file(src)
    for keep in range(rf.stream_start, rf.stream_end):
        # the stream cut there (it ends where the index says the header starts)
        edited = replace(rf, index={**rf.index, "header": keep + 2})
        assert edited.stream_end == keep
        assert surveyed(edited) == walked(edited), keep

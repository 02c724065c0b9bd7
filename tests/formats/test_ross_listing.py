"""Listing a ROSS run in parts (formats/ross/listing.py): each rank hops a stretch of the
regions from a guessed record start, and the stretches are checked in file order.

Whatever the input (real, damaged at random, or built to mislead the guess), the parts
must give exactly what one hop from byte 0 gives: the same regions, or the same first
error.  The reference here is that serial hop written out plainly, not partrace's listing.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.ross import ROSS
from partrace.formats.ross import layouts as L
from partrace.formats.ross.files import kind_of
from partrace.formats.ross.hop import ERROR_TEXT, OK, hop_range
from tests.formats.test_ross import DATA, RUNS, met_log
from tests.support import damage

RANKS = (2, 3, 7, 16)


def serial(path: Path, region: int):
    """(regions, error) of one file as a plain hop from byte 0 meets them: regions in
    which records start, up to the first error (a hop error, or an LP sample whose layout
    differs from the file's first one, checked once a region hopped)."""
    buf = np.fromfile(path, np.uint8)
    family = L.FAMILY[kind_of(path)]
    out, pos, layout = [], 0, None
    for k in range(-(-len(buf) // region)):
        starts, codes, nxt, err, epos, val = hop_range(buf, pos, min((k + 1) * region, len(buf)),
                                                       family)
        if err != OK:
            return out, (f"byte {epos}", ERROR_TEXT[err].format(v=val))
        lp = np.flatnonzero((codes == L.LP) | (codes == L.LP_V1))
        if len(lp):
            layout = int(codes[lp[0]]) if layout is None else layout
            bad = lp[codes[lp] != layout]
            if len(bad):
                return out, (f"byte {starts[bad[0]] + 4}", "one layout per file")
        if len(starts):
            out.append((k, pos, nxt))
        pos = nxt
    return out, None


def expected(folder: Path, region: int):
    """{file: regions} of the run, or (file, where, text) of its first error in file order."""
    got = {}
    for p in ROSS.open(folder).files:
        regions, error = serial(p, region)
        if error:
            return (str(p), *error)
        got[str(p)] = regions
    return got


def in_parts(folder: Path, region: int, nranks: int):
    """The same, from ``nranks`` readers listing their parts, met on every one of them
    (each must say the same)."""
    readers = [ROSS.open(folder, region_size=region) for _ in range(nranks)]
    parts = [r.list_part(rank, nranks) for rank, r in enumerate(readers)]
    said = []
    for r in readers:
        try:
            units = r.units_from(parts)
        except TraceError as e:
            said.append((e.path, e.where, e.message))
            continue
        got = {str(p): [] for p in r.files}
        for u in units:
            got[u.info["path"]].append((int(u.key.rsplit(":", 1)[1]), u.info["start"],
                                        u.info["end"]))
        said.append({p: sorted(v) for p, v in got.items()})
    assert all(s == said[0] for s in said[1:])
    return said[0]


def same(got, want) -> None:
    if isinstance(want, tuple):         # an error: the file, the byte, what the hop says
        assert isinstance(got, tuple), (got, want)
        assert got[:2] == want[:2] and want[2] in got[2], (got, want)
    else:
        assert got == want


def copy_run(tmp_path: Path, run: str) -> Path:
    dst = tmp_path / "stats"
    shutil.copytree(DATA / run / "stats", dst)
    return dst


@pytest.mark.parametrize("run", RUNS)
def test_randomly_damaged_runs_list_in_parts_as_one_hop_lists_them(tmp_path, run):
    """Bytes overwritten at random (ids, sizes, types: whatever lies there) or the file cut
    short: at 2 to 16 ranks and odd region sizes, the regions or the first error of a plain
    hop from byte 0, never a speculative chain's own error."""
    rng = np.random.default_rng(11)
    stats = copy_run(tmp_path, run)
    files = sorted(stats.iterdir())
    clean = {p: p.read_bytes() for p in files}
    values = [0, 1, 2, 3, 24, 36, 48, 0xFFFFFFFF, 1 << 24]
    errors = 0
    for case in range(24):
        victim = files[case % len(files)]
        raw = bytearray(clean[victim])
        if case % 6 == 5:
            raw = raw[:int(rng.integers(1, len(raw)))]
        else:
            at = int(rng.integers(0, len(raw) - 4))
            value = values[int(rng.integers(len(values)))] if case % 2 else int(
                rng.integers(0, 1 << 32))
            raw[at:at + 4] = np.array([value], "<u4").tobytes()
        victim.write_bytes(bytes(raw))
        for region in (97, 256):
            want = expected(stats, region)
            errors += isinstance(want, tuple)
            for nranks in RANKS:
                same(in_parts(stats, region, nranks), want)
        victim.write_bytes(clean[victim])
    assert errors        # the damage reached the hop, not only the values


def _evtrace(tmp_path: Path, records: list[bytes]) -> Path:
    stats = tmp_path / "stats"
    stats.mkdir()
    (stats / "ross-stats-evtrace.bin").write_bytes(b"".join(records))
    return stats


def _event(src: int, dest: int, body: bytes = b"") -> bytes:
    return np.array([(src, dest, 1.0, 2.0, 3.0, len(body))], L.HEADER_DTYPES[L.EVTRACE]) \
        .tobytes() + body


def test_a_chain_that_never_meets_the_true_one_is_hopped_again(tmp_path, monkeypatch):
    """Each record's model data is itself a well-formed event header of the same size, so
    the records that start half-way are a second chain, all through the file, that never
    meets the true one (the last one ends in a size that runs past the file: an error only
    on the false chain).  A guess that lands on it is hopped again from the true entry."""
    body = _event(7, 8)[:20] + np.array([24], "<u4").tobytes()
    last = _event(7, 8)[:20] + np.array([0xFFFF0000], "<u4").tobytes()
    stats = _evtrace(tmp_path, [_event(i % 5, (i + 1) % 5, body) for i in range(300)]
                     + [_event(1, 2, last)])
    met = met_log(monkeypatch)
    want = expected(stats, 256)
    assert isinstance(want, dict)
    for nranks in RANKS:
        same(in_parts(stats, 256, nranks), want)
    assert None in met           # some guesses landed on the false chain


def test_a_record_longer_than_whole_stretches(tmp_path):
    """A record whose model data (zeros: a run of 24-byte "records" of its own) spans the
    stretches of several ranks: those ranks' guesses are inside it, and none of them counts."""
    records = [_event(i % 3, 1) for i in range(40)] + [_event(2, 1, bytes(5000))] \
        + [_event(i % 3, 2) for i in range(40)]
    stats = _evtrace(tmp_path, records)
    want = expected(stats, 200)
    for nranks in RANKS:
        same(in_parts(stats, 200, nranks), want)


@pytest.mark.mpi
def test_an_error_deep_in_a_file_is_the_serial_ones_at_any_rank_count(tmp_path):
    """The merge's listing in parts on 3 ranks, small regions (the damaged record is deep
    in another rank's stretch): the same line as the serial hop's."""
    from tests.formats.test_ross_damage import record_offsets
    from tests.formats.test_ross import GVT_RUN
    stats = copy_run(tmp_path, GVT_RUN)
    gvt = stats / "ross-stats-gvt.bin"
    at = int(record_offsets(GVT_RUN, "gvt_lp")[150])
    raw = bytearray(gvt.read_bytes())
    raw[at:at + 4] = np.array([9], "<i4").tobytes()     # sample_type 9
    gvt.write_bytes(bytes(raw))
    want = expected(stats, 256)
    assert want[:2] == (str(gvt), f"byte {at}")
    for nranks in (None, 3):
        line = damage.cli_fails(stats, tmp_path / f"out{nranks}", gvt, f"byte {at}", nranks,
                                options=["--reader-option", "region_size=256"])
        assert "unknown sample type 9" in line


def test_a_run_too_big_for_the_unit_list_gets_larger_regions(monkeypatch):
    """Every rank holds the list of all units: past MAX_REGIONS of the default size the
    regions grow by whole MiB, from the files' bytes alone (so alike on every rank), and
    the definitions say which size was used.  Here the cap is lowered to fit the fixture."""
    from partrace.formats.ross import reader as R
    run = DATA / "pi-np1-seq-allmodes"
    total = sum(p.stat().st_size for p in ROSS.open(run).files)
    assert R.default_region_size(ROSS.open(run).files) == R.DEFAULT_REGION
    monkeypatch.setattr(R, "DEFAULT_REGION", 1024)
    monkeypatch.setattr(R, "MAX_REGIONS", 4)
    size = R.default_region_size(ROSS.open(run).files)
    assert size == 1 << 20 and size >= total / 4        # whole MiB, at most 4 regions
    monkeypatch.setattr(R, "MAX_REGIONS", 1 << 16)
    assert R.default_region_size(ROSS.open(run).files) == 1024
    reader = ROSS.open(run)
    assert reader.region_size == 1024 and reader.read_definitions().attrs["region_size"] == 1024
    assert len(reader.units()) == sum(-(-p.stat().st_size // 1024) for p in reader.files)

"""The ROSS survey's one compiled pass (scan.code_facts, dense) against the sorting reference
(the same facts by numpy sorts, ``dense=False``) on every record type of the real fixtures,
cut in regions of several sizes, and on damaged copies that take the rare branches: a record
whose model data size differs from its LP's first, an id too large to count densely, and
records that start off the 4-byte grid (read by bytes, not words)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.ross import ROSS
from partrace.formats.ross import layouts as L
from partrace.formats.ross import listing, scan
from partrace.formats.ross.files import kind_of
from tests.formats.test_ross import DATA, EVT_RUN, RUNS, SEQ_RUN

EVTRACE = "ross-stats-evtrace.bin"


def same(a, b) -> None:
    """Equal values, dtypes and shapes, nested."""
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b)
    else:
        assert a is None and b is None


def both_ways(path, region_size: int) -> int:
    """Every (region, record type) of a file surveyed both ways; the records compared."""
    buf, family = scan.open_bytes(path), L.FAMILY[kind_of(path)]
    compared = 0
    for _, start, end in listing.region_bounds(path, region_size):
        starts, codes, _ = scan.hop_checked(path, buf, start, end, family)
        for code in np.unique(codes).tolist():
            sel = starts[codes == code]
            same(scan.code_facts(buf, sel, code), scan.code_facts(buf, sel, code, dense=False))
            compared += len(sel)
    return compared


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("region_size", [97, 4096, 1 << 22])
def test_dense_pass_equals_the_sorting_reference(run, region_size):
    files = sorted((DATA / run / "stats").glob("*.bin"))
    counted = {p.name: both_ways(p, region_size) for p in files}
    assert all(counted.values()), counted          # every file had records to compare


def events_copy(tmp_path):
    dst = tmp_path / "stats"
    dst.mkdir()
    shutil.copy(DATA / SEQ_RUN / "stats" / EVTRACE, dst / EVTRACE)
    (dst / EVTRACE).chmod(0o644)
    buf = scan.open_bytes(dst / EVTRACE)
    starts, _, _ = scan.hop_checked(dst / EVTRACE, buf, 0, len(buf), L.FAMILY["evtrace"])
    return dst / EVTRACE, bytearray((dst / EVTRACE).read_bytes()), starts


def test_a_size_that_differs_and_bytes_off_the_word_grid(tmp_path):
    """One record's model data grown by 1 byte (the byte inserted, so the file still parses):
    its destination LP has two sizes, and every record after it starts off the 4-byte grid."""
    path, b, starts = events_copy(tmp_path)
    dests = scan.u32_at(np.frombuffer(bytes(b), np.uint8), starts + 4)
    k = next(i for i in range(len(starts) // 2, len(starts)) if dests[i] in dests[:i])
    at = int(starts[k])
    size = int(np.frombuffer(b, "<u4", 1, at + 20)[0])
    b[at + 20:at + 24] = np.array([size + 1], "<u4").tobytes()
    b[at + 24 + size:at + 24 + size] = b"\x00"
    path.write_bytes(bytes(b))
    assert both_ways(path, 4096) == len(starts)
    buf = scan.open_bytes(path)
    got = scan.code_facts(buf, scan.hop_checked(path, buf, 0, len(buf), 2)[0], L.EVTRACE)
    dest = int(np.frombuffer(b, "<u4", 1, at + 4)[0])
    pairs, offs = got[3]
    mine = (pairs >> np.uint64(32)).astype(np.int64) == dest
    assert sorted((pairs[mine] & np.uint64(0xFFFFFFFF)).tolist()) == [size, size + 1]
    assert at in offs[mine].tolist()                  # the odd record is where it starts
    with pytest.raises(TraceError) as e:               # and the definitions refuse it
        ROSS.open(path.parent).read_definitions()
    assert e.value.where == f"byte {at}" and f"model_data_sz {size + 1} for LP {dest}" in \
        e.value.message


def test_an_id_too_large_to_count_densely(tmp_path):
    """A source LP id of 2^32 - 16: the dense count gives way to the sort, same facts."""
    path, b, starts = events_copy(tmp_path)
    k = len(starts) // 3
    b[int(starts[k]):int(starts[k]) + 4] = np.array([0xFFFFFFF0], "<u4").tobytes()
    path.write_bytes(bytes(b))
    buf = scan.open_bytes(path)
    assert scan._count_dense(buf, starts, L.EVTRACE) is None
    assert both_ways(path, 1 << 22) == len(starts)
    keys, counts = scan.code_facts(buf, starts, L.EVTRACE)[0]
    assert keys[-1] == 0xFFFFFFF0 and counts[-1] == 1
    assert counts.sum() == 2 * len(starts)


def test_survey_of_a_whole_run_counts_every_record():
    """The survey's record counts equal the records the decode gives (two rows an event)."""
    reader = ROSS.open(DATA / EVT_RUN / "stats", region_size=512)
    facts = reader.survey_all()
    events = facts[str(DATA / EVT_RUN / "stats" / EVTRACE)]
    n = sum(len(c["events"]) for u in reader.units()
            for c in reader.decode(u, reader.read_definitions()) if "events" in c)
    assert 2 * events.counts[L.EVTRACE] == n == events.keys[L.EVTRACE][1].sum()

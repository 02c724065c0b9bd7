"""OTF output gathers each written column once, from the window straight into the order it is
formatted in (the sink's rows of a stream composed with the writer's own picks, cuts and orders:
taken.take_rows).  The files are the bytes the writer makes from plain copies of each stream's
rows, on real fixtures (ovni: point events as marker spots, byte-array payloads; DUMPI; OTF) at
1 and 2 streams, in one window and in several (rows held from one window to the next: a stream's
rows in two pieces), with small formatter and marker blocks (rows cut from rows picked)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from partrace.model import Table
from tests.conftest import DATA
from tests.output.test_otf_windows import _decoded, _files, _quantile_keys, _window_of

TRACES = ["ovni/v1-zoo-small/ovni", "dumpi/p2p-4rank", "otf/hybrid16/trace/hybrid16.otf"]


@pytest.fixture(scope="module", params=TRACES)
def decoded(request):
    return _decoded(DATA / request.param)


def _write(decoded, out: Path, streams: int, windows: int) -> dict[str, bytes]:
    from partrace.engine.mpi import serial
    from partrace.output.otf_sink import OTFSink
    defs, schema, tables = decoded
    cuts = _quantile_keys(tables["events"], windows)       # the same keys cut every table
    win = {name: _window_of(t, cuts) for name, t in tables.items()}
    comm, sink = serial(), OTFSink(out, streams=streams)
    out.parent.mkdir()
    sink.prepare(comm, defs, schema)
    # the sink is told an earlier start of the next window than the cut (a safe horizon): it
    # holds the window's last rows, and the next window's streams take rows from two pieces
    times = tables["events"]["time"]
    early = [int(times[max(0, np.searchsorted(times, c[0]) - len(times) // (3 * windows))]) for c in cuts]
    for w in range(windows):
        sink.next_keys = {name: ((early[w], 0, 0) if w < len(early) else None) for name in tables}
        sink.write(comm, {name: t.take(np.flatnonzero(win[name] == w)) for name, t in tables.items()})
    sink.commit(comm)
    return _files(out)


@pytest.mark.parametrize("streams", [1, 2])
def test_one_gather_writes_the_bytes_of_plain_copies(decoded, streams, tmp_path, monkeypatch):
    from partrace.formats.otf import generic, writer
    from partrace.output import otf_sink
    monkeypatch.setattr(writer, "ROWS_PER_PASS", 61)
    monkeypatch.setattr(generic, "MARKER_BLOCK", 17)
    got = {w: _write(decoded, tmp_path / f"w{w}" / "x.otf", streams, w) for w in (1, 5)}
    # the plain way: each stream's rows copied (every column), then picked and cut by the writer
    monkeypatch.setattr(otf_sink, "_take", lambda pieces, idx, schema: Table.concat(pieces, schema).take(idx))
    want = _write(decoded, tmp_path / "plain" / "x.otf", streams, 5)
    assert sum(len(b) for n, b in want.items() if n.endswith((".events", ".marker"))) > 10_000
    for w, files in got.items():
        assert list(files) == list(want), w
        for name in want:
            assert files[name] == want[name], (w, name)


def test_stream_rows_compose_as_takes_of_the_joined_pieces(decoded):
    """Rows of rows (index arrays in any order, slices) of pieces laid end to end (the sink's) or
    of one table (taken.take_rows of a plain table): each column equals the same rows taken from
    the pieces joined, whether or not the outer rows read it first."""
    from partrace.formats.otf.taken import take_rows
    from partrace.output.otf_sink import _take
    _, schema, tables = decoded
    events, cols = tables["events"], schema["events"]
    cut = len(events) // 3
    pieces = [events.take(np.arange(cut)), events.take(np.arange(cut, len(events)))]
    joined = Table.concat(pieces, cols)
    rng = np.random.default_rng(11)
    for idx in (np.sort(rng.choice(len(events), len(events) // 2, replace=False)),
                np.arange(cut - 5, cut + 40), np.arange(3, cut - 3)):
        for rows, first_read in ((_take(pieces, idx, cols), False), (_take(pieces, idx, cols), True),
                                 (take_rows(joined, idx), False), (take_rows(joined, idx), True)):
            if first_read:
                rows["time"], rows["location"]
            for sel in (rng.permutation(len(idx))[: len(idx) // 2], slice(2, len(idx) - 1)):
                inner = rows.take_rows(sel)
                want = idx[sel]
                for sub in (slice(1, None), rng.permutation(len(want))):
                    picked = inner.take_rows(sub)
                    for c in cols:
                        assert np.array_equal(picked[c.name], joined[c.name][want[sub]]), (c.name, sel, sub)


def test_columns_gathered_into_uint64_rows_equal_numpy_casts(decoded):
    """column_into (the OTF writer's fields, gathered straight into its uint64 matrix) of rows
    of rows of pieces, or of one table, equals numpy's astype(np.uint64) of the same rows
    taken from the pieces joined: every integer column, its negated values too (signed
    columns sign-extended as astype does), whether or not the rows read it first."""
    from partrace.formats.otf.taken import column_into, take_rows
    from partrace.output.otf_sink import _take
    _, schema, tables = decoded
    events, cols = tables["events"], schema["events"]
    ints = [c.name for c in cols if not c.is_object and np.dtype(c.dtype).subdtype is None
            and np.dtype(c.dtype).kind in "iu"]
    signed = {n for n in ints if np.dtype(events[n].dtype).kind == "i"}
    negated = Table({n: (-events[n] if n in signed else events[n]) for n in events.names})
    cut = len(events) // 3
    rng = np.random.default_rng(5)
    for tab in (events, negated):
        pieces = [tab.take(np.arange(cut)), tab.take(np.arange(cut, len(tab)))]
        joined = Table.concat(pieces, cols)
        idx = np.sort(rng.choice(len(tab), len(tab) // 2, replace=False))
        first = np.arange(cut)          # rows of one piece: a slice of it
        for rows, want, first_read in ((_take(pieces, idx, cols), idx, False),
                                       (_take(pieces, idx, cols), idx, True),
                                       (take_rows(joined, idx), idx, True),
                                       (_take(pieces, first, cols), first, False)):
            if first_read:
                [rows[n] for n in ints]
            sel = rng.permutation(len(want))[: len(want) // 2]
            for picked, at in ((rows, want), (rows.take_rows(sel), want[sel])):
                for n in ints:
                    out = np.full((3, len(picked)), 7, np.uint64)[1]       # a row of a matrix
                    column_into(picked, n, out)
                    assert np.array_equal(out, joined[n][at].astype(np.uint64)), n
    assert signed


def test_raw_bits_written_in_place_equal_the_copies(decoded):
    """The key-value bits of every numeric events column, written into the formatter's uint64
    matrix without a temporary (generic._put_raw_bits), are generic._raw_bits of the column:
    signed integers masked to their width, floats as their IEEE bits."""
    from partrace.formats.otf.generic import _put_raw_bits, _raw_bits
    _, schema, tables = decoded
    events = tables["events"]
    numeric = [c.name for c in schema["events"]
               if not c.is_object and np.dtype(c.dtype).subdtype is None]
    kinds = set()
    for name in numeric:
        col = np.asarray(events[name])
        for a in (col, -col if col.dtype.kind in "if" else col):     # negative values too
            out = np.zeros((3, len(a)), np.uint64)[1]       # a row of a matrix, as written
            _put_raw_bits(a, out)
            assert np.array_equal(out, _raw_bits(a)), name
        kinds.add(col.dtype.kind)
    assert "i" in kinds or "u" in kinds


def test_a_row_of_an_unknown_location_is_refused(decoded, tmp_path):
    """One rank sends no row anywhere (destinations skips the location lookup): the stream
    lookup when the rows are written still names the location no stream has."""
    from partrace.engine.mpi import RankFailed, serial
    from partrace.output.otf_sink import OTFSink
    defs, schema, tables = decoded
    comm, sink = serial(), OTFSink(tmp_path / "x.otf", streams=2)
    sink.prepare(comm, defs, schema)
    events = tables["events"]
    bad = int(defs.tables["locations"]["id"].max()) + 7
    loc = np.asarray(events["location"]).copy()
    loc[len(loc) // 2] = bad
    events = Table({**{n: events[n] for n in events.names}, "location": loc})
    assert np.array_equal(sink.destinations(comm, "events", events), np.zeros(len(events)))
    sink.next_keys = None
    with pytest.raises(RankFailed, match=f"location {bad} is not in the trace's locations table"):
        sink.write(comm, {"events": events})
        sink.commit(comm)       # an OTF input's rows may be held until then
    sink.discard(comm)

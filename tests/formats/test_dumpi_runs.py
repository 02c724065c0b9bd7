"""DUMPI rows as the engine holds them in memory (sorted runs at their narrowest forms):
every column reads back as decoded; the columns that are another column moved by one
constant (``peer_rank`` = ``peer`` - 1 on MPI_COMM_WORLD, a CPU clock kept in step with
the wall clock) hold no bytes of their own, and the events' ``call`` (each call's rows
share its index) one bit a row."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from partrace.engine.narrow import Shifted, Stairs, piece, put
from partrace.engine.order import sort_by_key
from partrace.engine.runs import Run, held_bytes
from partrace.formats.dumpi import DUMPI
from partrace.formats.dumpi.decode import decode_rank
from tests.support.dumpi_encode import Call, rank_path, write_meta, write_rank
from partrace.model import Kind, Table

from tests.formats.test_dumpi_fixtures import DATA, TRACES, parse_ascii


SENDS = {f"MPI_{n}" for n in ("Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend",
                                "Irsend", "Sendrecv", "Sendrecv_replace")}


def decoded_runs(folder):
    """(rank file, table name, decoded rows in key order, their run) of every chunk."""
    reader = DUMPI.open(folder)
    defs = reader.read_definitions()
    for unit in reader.units():
        for chunk in reader.decode(unit, defs):
            for name, table in chunk.items():
                rows = sort_by_key(table)
                yield Path(unit.info[0]), name, rows, Run(dict(rows.columns))


def same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


def read_back(run: Run, rows: Table) -> None:
    """Every column of the run, whole, in pieces and put into a buffer, is the rows'."""
    n = len(rows)
    cuts = sorted({0, n // 3, n // 2 + 1, n} | {c for c in (4095, 4097, 8193) if c < n})
    for col, want in rows.columns.items():
        held = run.columns[col]
        same(held[0:n], want)
        for a, b in zip(cuts, cuts[1:]):
            p = piece(held, a, b)
            same(p[0:b - a] if not isinstance(p, np.ndarray) else p, want[a:b])
            dest = np.empty_like(want[a:b])
            put(held, a, b, dest)
            same(dest, want[a:b])


@pytest.mark.parametrize("trace", TRACES)
def test_runs_of_the_real_traces_read_back_as_decoded(trace):
    """libdumpi's traces: peer_rank is held as peer moved by one (all their messages are
    on MPI_COMM_WORLD, where the recorded rank is the world rank) and reads back as
    dumpi2ascii prints the messages' dest/source."""
    shifted = compared = 0
    for path, name, rows, run in decoded_runs(DATA / trace):
        read_back(run, rows)
        if name != "events" or type(run.columns["peer_rank"]) is not Shifted:
            continue
        shifted += 1
        assert run.columns["peer_rank"].nbytes == 0
        msg = np.isin(rows["kind"], [Kind.SEND, Kind.RECV])
        same(rows["peer_rank"][msg], rows["peer"][msg].astype(np.int64) - 1)
        # the SEND rows' ranks are the dest arguments dumpi2ascii prints
        calls = parse_ascii(path.with_suffix(".txt"))["calls"]
        assert not any(c["name"] in ("MPI_Start", "MPI_Startall") for c in calls)
        dests = [int(text) for c in calls if c["name"] in SENDS
                 for _t, arg, text in c["args"] if arg == "dest"]
        sent = rows["peer_rank"][rows["kind"] == Kind.SEND]
        assert sorted(sent.tolist()) == sorted(dests)
        compared += len(dests)
    assert shifted and compared


def clocks_trace(tmp_path, cpu_behind: int, off_by_one: int | None = None):
    """One rank of 200 MPI_Send calls whose CPU clock is the wall clock minus
    ``cpu_behind`` (call ``off_by_one``: one ns more)."""
    calls = [Call("MPI_Init", {"argv": ["p"]}, wall=(cpu_behind + 10, cpu_behind + 20),
                  cpu=(10, 20))]
    for i in range(200):
        w = cpu_behind + 1000 + 100 * i
        c = (w - cpu_behind, w - cpu_behind + 7 + (i == off_by_one))
        calls.append(Call("MPI_Send", {"count": i, "datatype": 2, "dest": 0, "tag": 1,
                                       "comm": 2}, wall=(w, w + 7), cpu=c))
    calls.append(Call("MPI_Finalize", wall=(cpu_behind + 10**6, cpu_behind + 10**6 + 1),
                      cpu=(10**6, 10**6 + 1)))
    write_meta(tmp_path, "clk", 1)
    write_rank(rank_path(tmp_path, "clk", 0), calls)
    return calls


@pytest.mark.parametrize("off_by_one", [None, 150])
def test_a_cpu_clock_in_step_with_the_wall_clock_holds_nothing(tmp_path, off_by_one):
    """cpu_time = time - 5 s on every row: held as that offset; one call a ns off: held
    as its own offsets.  Either way it reads back as the CPU times written."""
    calls = clocks_trace(tmp_path, 5 * 10**9, off_by_one)
    (_rank, _name, rows, run), = [r for r in decoded_runs(tmp_path) if r[1] == "events"]
    read_back(run, rows)
    cpu = run.columns["cpu_time"]
    assert (type(cpu) is Shifted) == (off_by_one is None)
    if off_by_one is None:
        assert cpu.nbytes == 0 and held_bytes(run.columns) < held_bytes(
            {k: v for k, v in run.columns.items() if k != "cpu_time"}) + 8
    # a row at its call's entry (ENTER, SEND) has the entry CPU time, the others the exit's
    want = [calls[c].cpu[0] if t == calls[c].wall[0] else calls[c].cpu[1]
            for c, t in zip(rows["call"].tolist(), rows["time"].tolist())]
    assert len(set(want)) > 300
    same(rows["cpu_time"], np.array(want, np.int64))


def test_the_events_call_column_holds_a_bit_a_row(tmp_path):
    """3,000 sends (9,000+ event rows: several of Stairs' marks) in chunks of 1,000 calls
    (the last of 2) and whole: ``call`` is held as Stairs, reads back as decoded in pieces
    across the marks, and is each row's call in the rank file (ENTER, SEND, LEAVE of i)."""
    calls = [Call("MPI_Init", {"argv": ["p"]}, wall=(10, 20))]
    for i in range(3000):
        w = 1000 + 100 * i
        calls.append(Call("MPI_Send", {"count": 4, "datatype": 2, "dest": 0, "tag": 1,
                                       "comm": 2}, wall=(w, w + 7)))
    calls.append(Call("MPI_Finalize", wall=(10**6, 10**6 + 1)))
    write_meta(tmp_path, "st", 1)
    write_rank(rank_path(tmp_path, "st", 0), calls)
    reader = DUMPI.open(tmp_path)
    defs = reader.read_definitions()
    for chunk_calls in (1000, None):
        schema = reader.schema(defs)
        chunks = list(decode_rank(rank_path(tmp_path, "st", 0), 0, schema, defs,
                                  chunk_calls=chunk_calls))
        assert len(chunks) == (4 if chunk_calls else 1)
        for chunk in chunks:
            rows = sort_by_key(chunk["events"])
            run = Run(dict(rows.columns))
            if len(rows) > 64:      # the last chunk's 2 calls: too few rows to be worth it
                assert type(run.columns["call"]) is Stairs
                assert run.columns["call"].nbytes * 6 < len(rows)
            read_back(run, rows)
            want = {Kind.ENTER: "wall_in", Kind.SEND: "wall_in", Kind.LEAVE: "wall_out"}
            for c, k, t in zip(rows["call"].tolist(), rows["kind"].tolist(),
                               rows["time"].tolist()):
                assert t == calls[c].wall[0 if want[k] == "wall_in" else 1]


def two_ranks_trace(folder, sends: int = 500, cpu_behind: int = 5 * 10**9):
    """2 ranks exchanging ``sends`` messages each (Isend, Irecv, Waitall), the CPU clock
    the wall clock less ``cpu_behind``; the metafile."""
    for rank in range(2):
        calls = [Call("MPI_Init", {"argv": ["p"]}, wall=(10, 20))]
        for i in range(sends):
            w = 1000 + 300 * i + 13 * rank
            calls += [Call("MPI_Isend", {"count": 4, "datatype": 2, "dest": 1 - rank, "tag": i % 5,
                                         "comm": 2, "request": 1}, wall=(w, w + 7)),
                      Call("MPI_Irecv", {"count": 4, "datatype": 2, "source": 1 - rank,
                                         "tag": i % 5, "comm": 2, "request": 2},
                           wall=(w + 100, w + 107)),
                      Call("MPI_Waitall", {"count": 2, "requests": [1, 2],
                                           "statuses": [(16, 1 - rank, 0, 0, i % 5)] * 2},
                           wall=(w + 200, w + 207))]
        calls.append(Call("MPI_Finalize", wall=(10**7, 10**7 + 1)))
        for c in calls:
            c.cpu = (c.wall[0] + cpu_behind, c.wall[1] + cpu_behind)
        write_rank(rank_path(folder, "two", rank), calls, wall_offset=0, cpu_offset=0)
    return write_meta(folder, "two", 2)


def test_a_merge_in_many_windows_and_spilled_is_the_merge_in_one(tmp_path):
    """The events' call (Stairs), cpu_time and peer_rank (Shifted) through windows of
    spans from several runs and spilled runs: 3,000 calls merged
    within 2 MiB (6 windows, rows spilled) hold what the 2G merge holds, and
    its events are the decoded rows in key order."""
    from partrace.api import merge
    from tests.support.compare import assert_same_content, h5_content
    meta = two_ranks_trace(tmp_path)
    small = merge(meta, tmp_path / "small.h5", memory=2 << 20, tmpdir=tmp_path)
    whole = merge(meta, tmp_path / "whole.h5")
    assert small.windows > 3 and small.spilled_bytes and whole.windows == 1
    assert_same_content(tmp_path / "small.h5", tmp_path / "whole.h5")
    decoded = []
    for _p, name, rows, run in decoded_runs(tmp_path):
        if name == "events":
            held = run.columns
            assert type(held["call"]) is Stairs and type(held["cpu_time"]) is Shifted \
                and type(held["peer_rank"]) is Shifted
            decoded.append(rows)
    events = sort_by_key(Table({c: np.concatenate([t[c] for t in decoded])
                                for c in decoded[0].columns}))
    got = h5_content(tmp_path / "small.h5")["events"]
    for col in ("time", "location", "call", "cpu_time", "peer", "peer_rank", "kind"):
        same(np.asarray(got[col]), events[col])
    same(np.asarray(got["cpu_time"]), np.asarray(got["time"]) + 5 * 10**9)

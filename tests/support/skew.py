"""Traces whose clocks are off by known amounts, for the clock-condition tests.

A :class:`Schedule` is the truth: messages between processes at true times, each
sent at its start and received after a latency of at least ``latency``.  Each
process then reads the true time ``t`` on its own clock, ``t + offset + drift *
(t - T0)``, and the trace is written with those local times: as DUMPI rank files
(one MPI_Send / MPI_Recv call a message, the send at the call's start, the
receive at its end), as OTF streams (partrace's OTF writer), or, for a real OTF
trace, by adding an offset to every timestamp of one stream file.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

T0 = 1_000_000_000      # true time of the first message (ns): DUMPI stores whole seconds
CALL = 800              # ns an MPI_Send / MPI_Recv call lasts on its own side
WORLD = 2               # DUMPI's MPI_COMM_WORLD handle (as scripts/gen_dumpi.py writes)


@dataclass
class Schedule:
    """Messages in true time: ``sender``, ``receiver`` (0-based ranks), ``tag``,
    ``sent`` and ``received`` (ns), sorted by ``sent``; each rank's calls never overlap."""

    ranks: int
    sender: np.ndarray
    receiver: np.ndarray
    tag: np.ndarray
    sent: np.ndarray
    received: np.ndarray


def schedule(ranks: int, messages: int, *, latency: int = 2_000, jitter: int = 6_000,
             gap: int = 20_000, seed: int = 1) -> Schedule:
    """Random messages between random pairs, one every ``gap`` ns, each taking ``latency``
    plus up to ``jitter`` ns (gap > latency + jitter + 2 CALL: no rank's calls overlap)."""
    assert gap > latency + jitter + 2 * CALL
    rng = np.random.default_rng(seed)
    s = rng.integers(0, ranks, messages)
    r = (s + rng.integers(1, ranks, messages)) % ranks
    sent = T0 + np.arange(messages, dtype=np.int64) * gap
    received = sent + latency + rng.integers(0, jitter + 1, messages)
    return Schedule(ranks, s, r, rng.integers(0, 3, messages), sent, received)


@dataclass
class Clocks:
    """Each rank's clock: ``offset`` (ns) and ``drift`` (ns per ns) against true time."""

    offset: np.ndarray
    drift: np.ndarray

    @staticmethod
    def exact(ranks: int) -> "Clocks":
        return Clocks(np.zeros(ranks, np.int64), np.zeros(ranks))

    def local(self, rank, t) -> np.ndarray:
        """True times ``t`` as rank ``rank`` reads them (ns, rounded down)."""
        t = np.asarray(t, np.int64)
        return t + self.offset[rank] + np.floor(self.drift[rank] * (t - T0)).astype(np.int64)

    def offset_at(self, a: int, b: int, t: int) -> float:
        """b's clock minus a's at true time t."""
        return float(self.local(b, t) - self.local(a, t))


def observed(sched: Schedule, clocks: Clocks) -> tuple[np.ndarray, np.ndarray]:
    """(send time on the sender's clock, receive time on the receiver's) of each message."""
    return (clocks.local(sched.sender, sched.sent), clocks.local(sched.receiver, sched.received))


def write_dumpi(folder: Path, sched: Schedule, clocks: Clocks, prefix: str = "skew") -> Path:
    """A DUMPI trace: per rank MPI_Init, then its MPI_Send / MPI_Recv calls in true order,
    then MPI_Finalize, every time on the rank's own clock."""
    from tests.support.dumpi_encode import Call, rank_path, write_meta, write_rank
    folder.mkdir(parents=True, exist_ok=True)
    write_meta(folder, prefix, sched.ranks)
    end = int(sched.received.max(initial=T0)) + 10 * CALL
    for rank in range(sched.ranks):
        def local(t):
            return int(clocks.local(rank, t))
        calls = [Call("MPI_Init", {"argv": ["skew"]}, wall=(local(T0 - 5 * CALL),) * 2)]
        moves = []
        for i in np.flatnonzero(sched.sender == rank).tolist():
            t = int(sched.sent[i])
            moves.append((t, Call("MPI_Send", dict(count=8, datatype=9,
                                                   dest=int(sched.receiver[i]),
                                                   tag=int(sched.tag[i]), comm=WORLD),
                                  wall=(local(t), local(t + CALL)))))
        for i in np.flatnonzero(sched.receiver == rank).tolist():
            t = int(sched.received[i])
            src, tag = int(sched.sender[i]), int(sched.tag[i])
            moves.append((t - CALL, Call("MPI_Recv", dict(
                count=8, datatype=9, source=src, tag=tag, comm=WORLD,
                status=[(64, src, 0, 0, tag)]), wall=(local(t - CALL), local(t)))))
        calls += [c for _, c in sorted(moves, key=lambda m: m[0])]
        calls.append(Call("MPI_Finalize", {}, wall=(local(end),) * 2))
        write_rank(rank_path(folder, prefix, rank), calls)
    return folder


REGIONS = {1: "main", 2: "MPI_Send", 3: "MPI_Recv"}


def write_otf(path: Path, sched: Schedule, clocks: Clocks, streams: int = 0) -> Path:
    """An OTF trace NAME.otf (processes 1..ranks, ``streams`` streams; 0: one a process):
    main, and per message MPI_Send around a SEND record, MPI_Recv around a RECV record."""
    from partrace.formats.otf import writer
    from partrace.model import Definitions, Kind, Table
    from tests.support.otf_write import write_stream
    n = sched.ranks
    ids = np.arange(1, n + 1, dtype=np.int64)

    def obj(xs):
        return np.array(list(xs), dtype=object)
    defs = Definitions("generated", tables={
        "locations": Table({"id": ids, "name": obj(f"Process {i - 1}" for i in ids),
                            "parent": np.zeros(n, np.int64)}),
        "regions": Table({"id": np.array(list(REGIONS), np.int64), "name": obj(REGIONS.values()),
                          "group": np.array([1, 2, 2], np.int64)}),
        "region_groups": Table({"id": np.array([1, 2], np.int64),
                                "name": obj(["Application", "MPI"])}),
        "communicators": Table({"id": np.array([1], np.int64), "name": obj(["MPI_COMM_WORLD"])}),
        "communicator_members": Table({"comm": np.ones(n, np.int64), "location": ids}),
    }, attrs={"generator": "tests/support/skew.py"}, source=None)
    end = int(sched.received.max(initial=T0)) + 10 * CALL
    per_rank = []
    for rank in range(n):
        out, back = np.flatnonzero(sched.sender == rank), np.flatnonzero(sched.receiver == rank)
        ts, tr = sched.sent[out], sched.received[back]
        # per row: true time, order among rows of one time, kind, region, peer, tag
        parts = [(ts, 0, Kind.ENTER, 2, 0, 0),
                 (ts, 1, Kind.SEND, 0, sched.receiver[out] + 1, sched.tag[out]),
                 (ts + CALL, 2, Kind.LEAVE, 2, 0, 0),
                 (tr - CALL, 0, Kind.ENTER, 3, 0, 0),
                 (tr, 1, Kind.RECV, 0, sched.sender[back] + 1, sched.tag[back]),
                 (tr, 2, Kind.LEAVE, 3, 0, 0),
                 ([T0 - 5 * CALL], 0, Kind.ENTER, 1, 0, 0), ([end], 0, Kind.LEAVE, 1, 0, 0)]
        t, step_, kind, region, peer, tag = (
            np.concatenate([np.broadcast_to(np.asarray(part[j], np.int64), (len(part[0]),))
                            for part in parts]) for j in range(6))
        kind = kind.astype(np.uint8)
        o = np.lexsort((step_, t))
        message = (kind[o] == Kind.SEND) | (kind[o] == Kind.RECV)
        per_rank.append({"time": clocks.local(rank, t[o]), "location": np.full(len(o), rank + 1),
                         "seq": np.arange(len(o), dtype=np.int64), "kind": kind[o],
                         "region": region[o], "peer": peer[o], "tag": tag[o],
                         "comm": message.astype(np.int64),
                         "size": np.where(message, 64, 0).astype(np.uint64)})
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    stub = Path(path).with_suffix("")
    smap = writer.stream_map(list(range(1, n + 1)), streams)
    for s, procs in smap.items():
        parts = [per_rank[p - 1] for p in procs]
        c = {k: np.concatenate([x[k] for x in parts]) for k in parts[0]}
        order = np.lexsort((c["seq"], c["location"], c["time"]))
        write_stream(stub, s, {"events": Table({k: v[order] for k, v in c.items()})}, defs)
    writer.write_global(stub, defs, smap)
    return Path(path)


def shift_otf_stream(src: Path, dst: Path, stream: int, ticks: int) -> Path:
    """A copy of the OTF trace folder ``src`` in ``dst`` with ``ticks`` added to every
    timestamp of stream ``stream``'s events file (a line of hex digits alone)."""
    import re
    import shutil
    shutil.copytree(src, dst)
    events = next(dst.glob(f"*.{stream:x}.events"))
    lines = events.read_bytes().split(b"\n")
    stamp = re.compile(rb"^[0-9a-f]+$")
    events.write_bytes(b"\n".join(b"%x" % (int(x, 16) + ticks) if stamp.match(x) else x
                                  for x in lines))
    return dst

"""Request tracking, communicators, collective byte counts and chunking, checked against
dumpi2ascii's printed arguments and statuses (real libdumpi fixtures) value by value,
and against hand-derived answers on small encoded traces (persistent requests,
Test*, Comm_create, chunk boundaries)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from partrace.formats.dumpi import DUMPI
from partrace.formats.dumpi.comms import CommMap
from partrace.formats.dumpi.decode import decode_rank
from tests.support.dumpi_encode import Call, rank_path, write_meta, write_rank
from partrace.model import Kind, Table

from tests.formats.test_dumpi_fixtures import DATA, ints, parse_ascii

UNDEFINED = -32766          # MPICH's MPI_UNDEFINED, as libdumpi records an index


def load(folder):
    reader = DUMPI.open(folder)
    defs = reader.read_definitions()
    out = {}
    for u in reader.units():
        chunks = list(reader.decode(u, defs))
        schema = reader.schema(defs)
        out[u.info[1]] = {name: Table.concat([c[name] for c in chunks if name in c],
                                             schema[name])
                          for name in schema}
    refs = {u.info[1]: parse_ascii(Path(u.info[0]).with_suffix(".txt"))
            for u in reader.units() if Path(u.info[0]).with_suffix(".txt").is_file()}
    return reader, defs, out, refs


def args_of(call) -> dict[str, str]:
    return {name: text for _t, name, text in call["args"]}


def statuses(text: str) -> list[tuple[int, int, int, int, int]]:
    """(bytes, cancelled, source, tag, error) per printed status; [] when <IGNORED>."""
    return [tuple(ints(s)) for s in re.findall(r"\{(.*?)\}", text)]


# --- requests, against dumpi2ascii -------------------------------------------------------

def reference_requests(calls):
    """From the printed calls alone: each completed element takes the latest post of its
    handle not yet taken.  Returns requests rows and RECV rows as tuples."""
    posts: dict[int, list] = {}
    req_rows, recv_rows = [], []
    for i, c in enumerate(calls):
        a, name = args_of(c), c["name"]
        if name in ("MPI_Isend", "MPI_Irecv"):
            posts.setdefault(ints(a["request"])[0], []).append((i, name, a))
            continue
        done = []                                   # (element, handle, status or None)
        if name in ("MPI_Wait", "MPI_Test"):
            if name == "MPI_Wait" or int(a["flag"]):
                st = statuses(a["status"])
                done.append((0, ints(a["request"])[0], st[0] if st else None))
        elif name in ("MPI_Waitany", "MPI_Testany"):
            k = int(a["index"])
            if 0 <= k < int(a["count"]) and (name == "MPI_Waitany" or int(a["flag"])):
                st = statuses(a["status"])
                done.append((k, ints(a["requests"])[k], st[0] if st else None))
        elif name == "MPI_Waitall":
            st = statuses(a["statuses"])
            done += [(k, r, st[k] if st else None) for k, r in enumerate(ints(a["requests"]))]
        elif name in ("MPI_Waitsome", "MPI_Testsome"):
            n = int(a["outcount"])
            st = statuses(a["statuses"])
            reqs = ints(a["requests"])
            done += sorted((k, reqs[k], st[j] if st else None)
                           for j, k in enumerate(ints(a["indices"])[:max(n, 0)]))
        for k, handle, st in done:
            if handle <= 1:                             # MPI_REQUEST_NULL
                continue
            post = posts.get(handle, [])
            p = post.pop() if post else None
            req_rows.append((i, k, handle, p[0] if p else -1,
                             int(p is not None and p[1] == "MPI_Irecv")))
            if p and p[1] == "MPI_Irecv":
                if st:
                    recv_rows.append((i, st[2] + 1, st[2], st[3], st[0], handle))
                else:
                    src = ints(p[2]["source"])[0]
                    recv_rows.append((i, src + 1, src, ints(p[2]["tag"])[0],
                                      ints(p[2]["count"])[0] * 4, handle))
    return req_rows, recv_rows


def test_requests_against_dumpi2ascii():
    _r, _d, dec, refs = load(DATA / "p2p-4rank")
    completing = {"MPI_Wait", "MPI_Test", "MPI_Waitany", "MPI_Testany", "MPI_Waitall",
                  "MPI_Testall", "MPI_Waitsome", "MPI_Testsome"}
    n_recv = 0
    for rank, ref in refs.items():
        want_req, want_recv = reference_requests(ref["calls"])
        rq = dec[rank]["requests"]
        got_req = list(zip(rq["call"], rq["index"], rq["request"], rq["post_call"],
                           rq["receive"]))
        assert got_req == want_req
        assert all(ref["calls"][p]["name"] in ("MPI_Isend", "MPI_Irecv")
                   for p in rq["post_call"])
        ev = dec[rank]["events"]
        rows = np.nonzero(ev["kind"] == Kind.RECV)[0]
        got = [(ev["call"][r], ev["peer"][r], ev["peer_rank"][r], ev["tag"][r], ev["size"][r],
                ev["request"][r]) for r in rows if ref["calls"][ev["call"][r]]["name"]
               in completing]
        assert got == want_recv
        # every Irecv of this program is completed: one RECV row each
        assert len(got) == sum(c["name"] == "MPI_Irecv" for c in ref["calls"])
        n_recv += len(got)
        # RECV rows carry the completing call's exit time, on this rank
        for r in rows:
            assert ev["time"][r] == ref["calls"][ev["call"][r]]["wall_out"]
    assert n_recv == 32


# --- persistent requests, Test*, handle reuse, chunking (encoded; answers by hand) ------

def persistent_trace(folder):
    t = iter(range(10**9, 10**9 + 10**6, 100))

    def call(name, **a):
        x = next(t)
        return Call(name, a, wall=(x, x + 50))

    rank0 = [
        call("MPI_Init", argv=["p"]),
        call("MPI_Recv_init", count=4, datatype=9, source=1, tag=5, comm=2, request=7),      # 1
        call("MPI_Send_init", count=2, datatype=14, dest=1, tag=6, comm=2, request=8),       # 2
        call("MPI_Startall", count=2, requests=[7, 8]),                                      # 3
        call("MPI_Testall", count=2, requests=[7, 8], flag=0, statuses=[]),                  # 4
        call("MPI_Testall", count=2, requests=[7, 8], flag=1,
             statuses=[(16, 1, 0, 0, 5), (0, -2, 0, 0, -1)]),                                # 5
        call("MPI_Start", request=7),                                                        # 6
        call("MPI_Testany", count=2, requests=[1, 7], index=1, flag=1,
             status=[(12, 1, 0, 0, 5)]),                                                     # 7
        call("MPI_Irecv", count=3, datatype=9, source=-1, tag=9, comm=2, request=9),         # 8
        call("MPI_Irecv", count=1, datatype=9, source=1, tag=10, comm=2, request=10),        # 9
        call("MPI_Testsome", count=2, requests=[9, 10], outcount=2, indices=[1, 0],
             statuses=[(4, 1, 0, 0, 10), (12, 1, 0, 0, 9)]),                                 # 10
        call("MPI_Irecv", count=2, datatype=9, source=1, tag=11, comm=2, request=9),         # 11
        call("MPI_Wait", request=9, status=[]),                                              # 12
        call("MPI_Start", request=8),                                                        # 13
        call("MPI_Wait", request=8, status=[(0, -2, 0, 0, -1)]),                             # 14
        call("MPI_Waitany", count=1, requests=[1], index=UNDEFINED, status=[]),              # 15
        call("MPI_Finalize"),                                                                # 16
    ]
    write_meta(folder, "pers", 2)
    write_rank(rank_path(folder, "pers", 0), rank0)
    write_rank(rank_path(folder, "pers", 1), [call("MPI_Init", argv=["p"]),
                                              call("MPI_Finalize")])
    return rank0


def test_persistent_and_test_calls(tmp_path):
    persistent_trace(tmp_path)
    _r, _d, dec, _refs = load(tmp_path)
    rq = dec[0]["requests"]
    assert list(zip(rq["call"], rq["index"], rq["request"], rq["post_call"], rq["init_call"],
                    rq["receive"])) == [
        (5, 0, 7, 3, 1, 1), (5, 1, 8, 3, 2, 0), (7, 1, 7, 6, 1, 1),
        (10, 0, 9, 8, -1, 1), (10, 1, 10, 9, -1, 1), (12, 0, 9, 11, -1, 1),
        (14, 0, 8, 13, 2, 0)]
    ev = dec[0]["events"]
    recv = ev["kind"] == Kind.RECV
    # (call, peer location, peer rank, tag, bytes, request); call 12: status ignored, so
    # from the Irecv at 11: source 1, tag 11, 2 MPI_INT
    assert list(zip(ev["call"][recv], ev["peer"][recv], ev["peer_rank"][recv], ev["tag"][recv],
                    ev["size"][recv], ev["request"][recv])) == [
        (5, 2, 1, 5, 16, 7), (7, 2, 1, 5, 12, 7), (10, 2, 1, 9, 12, 9),
        (10, 2, 1, 10, 4, 10), (12, 2, 1, 11, 8, 9)]
    send = ev["kind"] == Kind.SEND            # persistent send: at each Start, 2 doubles
    assert list(zip(ev["call"][send], ev["peer"][send], ev["tag"][send], ev["size"][send],
                    ev["request"][send])) == [(3, 2, 6, 16, 8), (13, 2, 6, 16, 8)]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 16])
def test_chunks_give_the_same_tables(tmp_path, chunk):
    persistent_trace(tmp_path)
    reader = DUMPI.open(tmp_path)
    defs = reader.read_definitions()
    schema = reader.schema(defs)
    path = rank_path(tmp_path, "pers", 0)
    whole = list(decode_rank(path, 0, schema, defs, chunk_calls=1 << 20))
    parts = list(decode_rank(path, 0, schema, defs, chunk_calls=chunk))
    assert len(whole) == 1 and len(parts) == -(-17 // chunk)
    for name in schema:
        a = Table.concat([c[name] for c in whole if name in c], schema[name])
        b = Table.concat([c[name] for c in parts if name in c], schema[name])
        for col in a.names:
            assert list(a[col]) == list(b[col]), (chunk, name, col)
    assert list(Table.concat([c["events"] for c in parts], schema["events"])["seq"]) == \
        list(range(2 * 17 + 7))


@pytest.mark.parametrize("chunk", [1, 4, 16])
def test_chunks_of_a_real_trace_give_the_same_tables(chunk):
    """A chunk without a collective or message row (p2p-4rank's ranks make a few
    collectives among their point-to-point calls) still says -1 (none) in its rank
    columns, as a whole decode does, never 0 (rank 0)."""
    reader = DUMPI.open(DATA / "p2p-4rank")
    defs = reader.read_definitions()
    schema = reader.schema(defs)
    for unit in reader.units():
        path, rank = Path(unit.info[0]), unit.info[1]
        whole = list(decode_rank(path, rank, schema, defs, chunk_calls=1 << 20))
        parts = list(decode_rank(path, rank, schema, defs, chunk_calls=chunk))
        assert len(whole) == 1 and len(parts) > 1
        for name in schema:
            a = Table.concat([c[name] for c in whole if name in c], schema[name])
            b = Table.concat([c[name] for c in parts if name in c], schema[name])
            for col in a.names:
                assert a[col].dtype == b[col].dtype, (chunk, name, col)
                assert list(a[col]) == list(b[col]), (chunk, name, col)
        ev = Table.concat([c["events"] for c in parts], schema["events"])
        coll, msg = ev["kind"] == Kind.COLLECTIVE, np.isin(ev["kind"], [Kind.SEND, Kind.RECV])
        assert coll.any() and (ev["root_rank"][~coll] == -1).all()
        assert msg.any() and (ev["peer_rank"][~msg] == -1).all()


@pytest.mark.parametrize("chunk", [2, 3, 100])
def test_thread_column_in_one_and_many_thread_chunks(tmp_path, chunk):
    """Every row of a call carries its call's thread; a chunk whose calls share one thread
    gives it as a view of that one value (no pass), a mixed chunk as a column."""
    threads = [0, 0, 3, 3, 0, 3, 7, 0]
    calls = [Call("MPI_Init", {"argv": ["p"]}, wall=(10, 20), thread=threads[0])]
    for i, th in enumerate(threads[1:-1], 1):
        args = dict(count=1, datatype=9, dest=1, tag=i, comm=2)
        calls.append(Call("MPI_Send", args, wall=(100 * i, 100 * i + 5), thread=th))
    calls.append(Call("MPI_Finalize", wall=(10**4, 10**4 + 1), thread=threads[-1]))
    write_meta(tmp_path, "thr", 2)
    write_rank(rank_path(tmp_path, "thr", 0), calls)
    write_rank(rank_path(tmp_path, "thr", 1), [Call("MPI_Init", {"argv": ["p"]}),
                                                Call("MPI_Finalize", wall=(1, 2))])
    reader = DUMPI.open(tmp_path)
    defs = reader.read_definitions()
    schema = reader.schema(defs)
    parts = list(decode_rank(rank_path(tmp_path, "thr", 0), 0, schema, defs,
                             chunk_calls=chunk))
    for c in parts:
        ev = c["events"]
        one = len(set(ev["thread"].tolist())) == 1
        assert (ev["thread"].strides == (0,)) == one and ev["thread"].dtype == np.uint16
    ev = Table.concat([c["events"] for c in parts], schema["events"])
    assert list(ev["thread"]) == [threads[c] for c in ev["call"]]
    assert list(ev["kind"][ev["thread"] == 7]) == [Kind.ENTER, Kind.SEND, Kind.LEAVE]
    send = Table.concat([c["calls/MPI_Send"] for c in parts if "calls/MPI_Send" in c],
                        schema["calls/MPI_Send"])
    assert list(send["thread"]) == threads[1:-1] and list(send["call"]) == list(range(1, 7))


# --- communicators ---------------------------------------------------------------------

def test_communicators_against_dumpi2ascii():
    _r, defs, dec, refs = load(DATA / "coll-4rank")
    n = len(refs)
    members = defs.tables["communicator_members"]

    def of(comm):
        return list(members["location"][members["comm"] == comm])

    splits = {r: args_of(next(c for c in ref["calls"] if c["name"] == "MPI_Comm_split"))
              for r, ref in refs.items()}
    checked = 0
    for rank, ref in refs.items():
        cm = CommMap(defs.tables, rank + 1)
        for i, c in enumerate(ref["calls"]):
            a = args_of(c)
            if c["name"] == "MPI_Comm_size":             # the size MPI itself returned
                comm = cm.comm([ints(a["comm"])[0]], [i])[0]
                assert len(of(comm)) == int(a["size"])
                checked += 1
            if c["name"] == "MPI_Comm_split":            # MPI's rule: by color, key, rank
                color = int(a["color"])
                want = sorted((int(splits[r]["key"]), r) for r in range(n)
                              if int(splits[r]["color"]) == color)
                comm = cm.comm([ints(a["newcomm"])[0]], [i + 1])[0]
                assert of(comm) == [r + 1 for _k, r in want]
                checked += 1
            if c["name"] == "MPI_Comm_dup":
                comm = cm.comm([ints(a["newcomm"])[0]], [i + 1])[0]
                assert of(comm) == list(range(1, n + 1)) and comm != 1
            if c["name"] == "MPI_Comm_free":
                assert cm.comm([ints(a["comm"])[0]], [i + 1])[0] == 0
        # collectives on split communicators: root location = member at the root rank
        ev = dec[rank]["events"]
        for r in np.nonzero(ev["kind"] == Kind.COLLECTIVE)[0]:
            a = args_of(ref["calls"][ev["call"][r]])
            assert ev["comm_handle"][r] == ints(a["comm"])[0]
            assert ev["collop"][r] == ev["region"][r]
            if "root" in a:
                assert ev["root_rank"][r] == int(a["root"])
                assert ev["root"][r] == of(ev["comm"][r])[int(a["root"])]
            else:
                assert ev["root"][r] == 0 and ev["root_rank"][r] == -1
    assert checked == 3 * n               # 2 Comm_size and 1 Comm_split per rank
    assert set(defs.tables["communicators"]["id"]) == set(members["comm"])
    coll = defs.tables["collectives"]
    types = dict(zip(coll["name"], coll["type"]))
    assert (types["MPI_Barrier"], types["MPI_Bcast"], types["MPI_Reduce"],
            types["MPI_Alltoallv"]) == (1, 2, 3, 4)
    assert list(defs.tables["region_groups"]["name"]) == ["MPI"]


def test_comm_create_from_groups(tmp_path):
    """Group_incl picks world ranks 3 and 1; Comm_create gives them a communicator."""
    write_meta(tmp_path, "cc", 4)
    for r in range(4):
        inside = r in (1, 3)
        calls = [Call("MPI_Comm_group", dict(comm=2, group=5)),
                 Call("MPI_Group_incl", dict(group=5, count=2, ranks=[3, 1], newgroup=6)),
                 Call("MPI_Comm_create", dict(oldcomm=2, group=6, newcomm=4 if inside else 1)),
                 Call("MPI_Group_free", dict(group=6))]
        if r == 3:               # dest 1 of the new communicator = world rank 1
            calls.append(Call("MPI_Send", dict(count=1, datatype=9, dest=1, tag=0, comm=4)))
        write_rank(rank_path(tmp_path, "cc", r), calls)
    _r, defs, dec, _refs = load(tmp_path)
    m = defs.tables["communicator_members"]
    cm = CommMap(defs.tables, 4)
    comm = cm.comm([4], [3])[0]
    assert list(m["location"][m["comm"] == comm]) == [4, 2]
    assert CommMap(defs.tables, 2).comm([4], [3])[0] == comm
    ev = dec[3]["events"]
    s = ev["kind"] == Kind.SEND
    assert list(zip(ev["peer"][s], ev["peer_rank"][s], ev["comm"][s])) == [(2, 1, comm)]


# --- collective byte counts, against dumpi2ascii ------------------------------------------

def expected_bytes(name: str, a: dict, sz: dict, rank: int) -> tuple[int, int]:
    def n(key):
        return int(ints(a[key])[0]) if key in a and a[key] != "<IGNORED>" else 0

    def total(key):
        return sum(ints(a[key])) if key in a and a[key] != "<IGNORED>" else 0

    def size(key):
        return sz[ints(a[key])[0]] if key in a else 0

    if name == "MPI_Barrier":
        return 0, 0
    if name in ("MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Scan", "MPI_Exscan"):
        return n("count") * size("datatype"), n("count") * size("datatype")
    if name == "MPI_Reduce_scatter":
        assert ints(a["comm"])[0] == 2                   # MPI_COMM_WORLD: comm rank = rank
        return total("recvcounts") * size("datatype"), \
            ints(a["recvcounts"])[rank] * size("datatype")
    sent = (total("sendcounts") if "sendcounts" in a else n("sendcount")) * size("sendtype")
    recv = (total("recvcounts") if "recvcounts" in a else n("recvcount")) * size("recvtype")
    return sent, recv


def test_collective_bytes_against_dumpi2ascii():
    _r, _d, dec, refs = load(DATA / "coll-4rank")
    seen = set()
    for rank, ref in refs.items():
        sz = {d: s for d, _n, s in ref["sizes"]}
        ev = dec[rank]["events"]
        for r in np.nonzero(ev["kind"] == Kind.COLLECTIVE)[0]:
            c = ref["calls"][ev["call"][r]]
            want = expected_bytes(c["name"], args_of(c), sz, rank)
            assert (ev["size"][r], ev["received"][r]) == want, (rank, c["name"])
            seen.add(c["name"])
    assert {"MPI_Gatherv", "MPI_Scatterv", "MPI_Allgatherv", "MPI_Alltoallv",
            "MPI_Reduce_scatter"} <= seen


def test_alltoallw_bytes(tmp_path):
    """Alltoallw: counts times the size of each peer's datatype (MPI_INT 4, MPI_DOUBLE 8)."""
    write_meta(tmp_path, "w", 1)
    write_rank(rank_path(tmp_path, "w", 0), [Call("MPI_Alltoallw", dict(
        commsize=2, sendcounts=[3, 1], senddispls=[0, 0], sendtypes=[9, 14],
        recvcounts=[2, 5], recvdispls=[0, 0], recvtypes=[14, 9], comm=2))])
    _r, _d, dec, _refs = load(tmp_path)
    ev = dec[0]["events"]
    c = ev["kind"] == Kind.COLLECTIVE
    assert (list(ev["size"][c]), list(ev["received"][c])) == ([3 * 4 + 1 * 8], [2 * 8 + 5 * 4])


def _latest_before(kreq, kcall, r, c) -> int:
    """By definition: the last key of handle r with a call before c (-1 = none)."""
    hits = [j for j in range(len(kreq)) if kreq[j] == r and kcall[j] < c]
    return hits[-1] if hits else -1


def test_post_search_finds_the_latest_earlier_post_of_the_handle_in_any_query_order(jit_mode):
    """kernels.before (its cursor per handle assumes rising calls, and must still answer
    queries that go back, jump far ahead or name a handle without posts)."""
    from partrace.formats.dumpi.kernels import before
    rng = np.random.default_rng(7)
    for trial in range(120):
        n, m = (int(x) for x in rng.integers(0, 60, 2))
        kreq, kcall = rng.integers(0, 4, n), rng.integers(0, 40, n) * (1 + trial % 3)
        order = np.lexsort((kcall, kreq))
        kreq, kcall = kreq[order].astype(np.int64), kcall[order].astype(np.int64)
        req = rng.integers(0, 5, m).astype(np.int64)
        call = rng.integers(0, 130, m).astype(np.int64)
        if trial % 2:
            call.sort()                                   # completions in call order
        got = before(kreq, kcall, req, call)
        assert got.tolist() == [_latest_before(kreq, kcall, r, c) for r, c in zip(req, call)]

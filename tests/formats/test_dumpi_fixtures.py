"""Decode real libdumpi traces and compare with dumpi2ascii's output beside them."""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest

from partrace.formats import detect
from partrace.formats.dumpi import DUMPI
from partrace.model import Kind

DATA = Path(__file__).resolve().parent.parent / "data" / "dumpi"
TRACES = ["p2p-4rank", "coll-4rank"]

STAMP = re.compile(r"^(MPI\w+) (entering|returning) at walltime (\d+)\.(\d{9}), "
                   r"cputime (\d+)\.(\d{9}) seconds in thread (\d+)\.$")
ARG = re.compile(r"^(.+?) ([\w.]+)(?:\[(\d+)\])?=(.*)$")
FOOT = re.compile(r"^(\w+) called (\d+) times and ignored (\d+) times$")
SIZE = re.compile(r"^Datatype (\d+) \((.+)\) has size (-?\d+)$")


def parse_ascii(path: Path) -> dict:
    """dumpi2ascii -a output -> header, calls (with args), footer, datatype sizes."""
    out = {"header": {}, "calls": [], "footer": {}, "sizes": []}
    cur = None
    for line in path.read_text().splitlines():
        m = STAMP.match(line)
        if m:
            name, what = m[1], m[2]
            wall = int(m[3]) * 10**9 + int(m[4])
            cpu = int(m[5]) * 10**9 + int(m[6])
            if what == "entering":
                cur = {"name": name, "wall_in": wall, "cpu_in": cpu, "thread": int(m[7]),
                       "args": []}
            else:
                assert cur["name"] == name
                cur.update(wall_out=wall, cpu_out=cpu)
                out["calls"].append(cur)
                cur = None
            continue
        if cur is not None:
            m = ARG.match(line)
            assert m, line
            cur["args"].append((m[1], m[2], m[4]))
            continue
        if (m := FOOT.match(line)):
            out["footer"][m[1]] = (int(m[2]), int(m[3]))
        elif (m := SIZE.match(line)):
            out["sizes"].append((int(m[1]), m[2], int(m[3])))
        elif "=" in line and not out["calls"]:
            k, _, v = line.partition("=")
            out["header"][k] = v
    return out


def ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


@pytest.fixture(scope="module", params=TRACES)
def trace(request):
    return decode_fixture(DATA / request.param)


def decode_fixture(folder: Path):
    """(reader, defs, schema, decoded, refs) of a trace folder whose rank files decode in
    one chunk each, refs parsed from the dumpi2ascii text beside each rank file."""
    reader = DUMPI.open(folder)
    defs = reader.read_definitions()
    schema = reader.schema(defs)
    decoded = {}
    for unit in reader.units():
        chunks = list(reader.decode(unit, defs))
        assert len(chunks) == 1
        decoded[unit.info[1]] = chunks[0]
    refs = {r: parse_ascii(Path(p).with_suffix(".txt")) for (p, r) in
            (u.info for u in reader.units())}
    return reader, defs, schema, decoded, refs


def test_sniff_and_detect():
    folder = DATA / "p2p-4rank"
    meta = next(folder.glob("*.meta"))
    assert DUMPI.sniff(folder) and DUMPI.sniff(meta)
    assert DUMPI.sniff(next(folder.glob("*.bin")))
    assert not DUMPI.sniff(next(folder.glob("*.txt")))
    assert detect(meta) == "dumpi"


def test_units(trace):
    reader, *_ = trace
    units = reader.units()
    assert [u.key for u in units] == ["0000", "0001", "0002", "0003"]
    assert all(u.size == Path(u.info[0]).stat().st_size for u in units)


def test_schema_conformance(trace):
    _r, _d, schema, decoded, _refs = trace
    for chunk in decoded.values():
        assert list(chunk)[0] == "events"
        for name, table in chunk.items():
            assert [c.name for c in schema[name]] == table.names
            for c in schema[name]:
                assert table[c.name].dtype == c.numpy_dtype(), (name, c.name)


def test_header_footer_sizes(trace):
    _r, defs, _s, _dec, refs = trace
    src = defs.source["ranks"]
    foot = defs.tables["footer"]
    sizes = defs.tables["datatype_sizes"]
    names = dict(zip(defs.tables["regions"]["id"] - 1, defs.tables["regions"]["name"]))
    for rank, ref in refs.items():
        h = ref["header"]
        assert src[rank]["version"] == h["version"]
        assert time.asctime(time.gmtime(src[rank]["starttime"])) == h["starttime"]
        assert src[rank]["hostname"] == h["hostname"]
        assert src[rank]["username"] == h["username"]
        assert len(src[rank]["meshcrd"]) == int(h["meshdim"])
        mine = {names.get(f, "MPI_ALL_FUNCTIONS"): (c, i) for loc, f, c, i in zip(
            foot["location"], foot["function"], foot["calls"], foot["ignored"]) if loc == rank + 1}
        theirs = {k: v for k, v in ref["footer"].items() if v != (0, 0)}
        assert mine == theirs
        sel = sizes["location"] == rank + 1
        assert list(zip(sizes["datatype"][sel], sizes["size"][sel])) == \
            [(d, s) for d, _n, s in ref["sizes"]]


def test_calls_times_and_threads(trace):
    _r, _d, _s, decoded, refs = trace
    for rank, ref in refs.items():
        ev = decoded[rank]["events"]
        calls = ref["calls"]
        enter = ev["kind"] == Kind.ENTER
        leave = ev["kind"] == Kind.LEAVE
        assert enter.sum() == leave.sum() == len(calls)
        regions = {fid + 1: n for fid, n in enumerate(_function_names())}
        assert [regions[r] for r in ev["region"][enter]] == [c["name"] for c in calls]
        assert list(ev["time"][enter]) == [c["wall_in"] for c in calls]
        assert list(ev["time"][leave]) == [c["wall_out"] for c in calls]
        assert list(ev["cpu_time"][enter]) == [c["cpu_in"] for c in calls]
        assert list(ev["cpu_time"][leave]) == [c["cpu_out"] for c in calls]
        assert list(ev["thread"][enter]) == [c["thread"] for c in calls]
        assert list(ev["call"][enter]) == list(range(len(calls)))
        assert (ev["location"] == rank + 1).all()          # location = world rank + 1
        assert list(ev["seq"]) == list(range(len(ev)))


def _function_names():
    from partrace.formats.dumpi.functable import FUNCTIONS
    return [n for _f, n, _a in FUNCTIONS]


def _side(chunk, table, call, arg):
    from partrace.formats.dumpi.tables import SIDE_ARG_ID
    t = chunk[table]
    sel = (t["call"] == call) & (t["arg"] == SIDE_ARG_ID[arg])
    return t, sel


def test_every_argument(trace):
    """Each printed argument equals the decoded column, array, status or string."""
    _r, _d, schema, decoded, refs = trace
    checked = 0
    for rank, ref in refs.items():
        chunk = decoded[rank]
        for call, c in enumerate(ref["calls"]):
            t = chunk[f"calls/{c['name']}"]
            row = np.nonzero(t["call"] == call)[0]
            assert len(row) == 1
            row = row[0]
            cols = {col.name: col for col in schema[f"calls/{c['name']}"]}
            for ctype, name, text in c["args"]:
                checked += 1
                if ctype == "MPI_Status":
                    st, sel = _side(chunk, "statuses", call, name)
                    if text == "<IGNORED>":
                        assert not sel.any() and t[f"{name}_count"][row] <= 0
                        continue
                    got = [dict(bytes=st["bytes"][i], cancelled=st["cancelled"][i],
                                source=st["source"][i], tag=st["tag"][i], error=st["error"][i])
                           for i in np.nonzero(sel)[0]]
                    want = [dict(zip(("bytes", "cancelled", "source", "tag", "error"), ints(s)))
                            for s in re.findall(r"\{(.*?)\}", text)]
                    assert got == want, (rank, call, name)
                    assert t[f"{name}_count"][row] == len(want)
                elif ctype == "string":
                    st, sel = _side(chunk, "strings", call, name)
                    assert list(st["text"][sel]) == re.findall(r'"(.*?)"', text)
                elif f"{name}_count" in cols:          # int / request arrays
                    ar, sel = _side(chunk, "arrays", call, name)
                    if text == "<IGNORED>":
                        assert t[f"{name}_count"][row] == -1 and not sel.any()
                    else:
                        assert list(ar["value"][sel]) == ints(text), (rank, call, name)
                        assert t[f"{name}_count"][row] == len(ints(text))
                else:
                    value = ints(text.split(" (")[0])
                    assert [int(t[name][row])] == value, (rank, call, name, text)
                    label = re.search(r"\((MPI_\w+)\)$", text)
                    if label and cols[name].enum is not None:
                        assert cols[name].enum[label[1]] == value[0], (name, text)
    assert checked > 300


def test_message_and_collective_rows(trace):
    """SEND/RECV/COLLECTIVE rows repeat the arguments of their calls."""
    _r, _d, _s, decoded, refs = trace
    for rank, ref in refs.items():
        ev = decoded[rank]["events"]
        for kind, names, field in [(Kind.SEND, {"MPI_Send", "MPI_Ssend", "MPI_Isend"}, "dest"),
                                   (Kind.RECV, {"MPI_Recv"}, "source")]:
            rows = np.nonzero(ev["kind"] == kind)[0]
            want = []
            for i, c in enumerate(ref["calls"]):
                a = {n: v for _t, n, v in c["args"]}
                peer = ints(a.get(field, "-9"))[0] if c["name"] in names else None
                if kind == Kind.RECV and c["name"] in names and "{" in a["status"]:
                    peer = ints(a["status"].split("source=")[1])[0]
                if peer is not None and peer >= 0:
                    want.append((i, peer))
            got = [(ev["call"][r], ev["peer_rank"][r]) for r in rows
                   if ref["calls"][ev["call"][r]]["name"] in names]
            assert got == want
            # all on MPI_COMM_WORLD: the peer location is the world rank + 1
            assert [ev["peer"][r] for r in rows if ref["calls"][ev["call"][r]]["name"] in names] \
                == [p + 1 for _c, p in want]
        coll = ev["kind"] == Kind.COLLECTIVE
        n_coll = sum(c["name"] in {"MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce",
                                   "MPI_Gather", "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv",
                                   "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall",
                                   "MPI_Alltoallv", "MPI_Scan", "MPI_Reduce_scatter"}
                     for c in ref["calls"])
        assert coll.sum() == n_coll

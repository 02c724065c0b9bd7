"""Table schemas for DUMPI: events, one argument table per MPI function, side tables.

Why one table per function ("calls/MPI_Send" ...): every argument keeps its
own typed column named as dumpi2ascii names it, tables stay narrow, and a
user asks for one function's calls without filtering a long form.  Values of
variable length go to three long side tables keyed by (location, call, arg):
``arrays`` (int arrays: counts, displs, requests, indices, ranges ...),
``statuses`` and ``strings`` (argv, file names, info keys ...); the
function's table holds the element count (``<arg>_count``, -1 = not
recorded: root-only array on a non-root, or statuses disabled).
Single strings (file names, datarep ...) are inline text columns: rare.
"""
from __future__ import annotations

from ...model import STR, Column, column
from . import constants as C
from .functable import FUNCTIONS

SCALAR_DTYPES = {"i32": "int32", "u16": "uint16", "u8": "uint8", "i64": "int64"}
RAGGED = ("status", "a32", "a16", "a8", "aa32", "str2", "str3", "argv")

# every name of an argument stored in a side table, numbered for the `arg` column
SIDE_ARGS = sorted({n for _, _, a in FUNCTIONS if a
                    for n, k, _r, _c in a if k in RAGGED})
SIDE_ARG_ID = {n: i for i, n in enumerate(SIDE_ARGS)}
REGION_ENUM = {name: fid + 1 for fid, name, _a in FUNCTIONS}


def table_name(fname: str) -> str:
    return f"calls/{fname}"


THREAD = Column("thread", "uint16", "thread id")


def _key() -> list[Column]:
    return [column("time", description="entry wall time of the call"), column("location"),
            column("seq"), Column("call", "int64", "index of the call in its rank file", refers="events")]


def function_columns(args) -> list[Column]:
    cols = _key() + [THREAD]
    for name, kind, role, cond in args:
        note = f"recorded only when {cond[0]} == {cond[1]} (else 0)" if cond else ""
        if kind in SCALAR_DTYPES:
            cols.append(Column(name, SCALAR_DTYPES[kind], f"{role} {note}".strip(),
                               enum=C.ROLE_ENUM.get(role)))
        elif kind == "str":
            cols.append(Column(name, STR, f"string {note}".strip()))
        elif kind == "argv":
            cols.append(Column("argc", "int32", "number of argv strings (strings table)"))
        else:
            where = "statuses" if kind == "status" else (
                "strings" if kind.startswith("str") else "arrays")
            cols.append(Column(f"{name}_count", "int32",
                               f"number of {name} entries in table {where}; -1 = not recorded"))
    return cols


def events_columns(counters: bool = False) -> list[Column]:
    """The events table's columns; ``counters``: with ``counter`` and ``value`` (COUNTER rows
    of the PAPI counters), only in a trace with perf labels."""
    return [
        column("time"), column("location", description="MPI world rank + 1"), column("seq"),
        column("kind"), column("region", enum=REGION_ENUM),
        Column("thread", "uint16", "DUMPI thread id"),
        Column("call", "int64", "index of the call in its rank file"),
        Column("cpu_time", "int64", "CPU time at entry (ENTER) / exit (other rows); "
               "0 = not recorded", "ns"),
        column("peer", description="SEND: dest, RECV: source, as a location (world rank + 1); "
               "0 = none or communicator membership not known"),
        Column("peer_rank", "int64", "SEND: dest, RECV: source, rank in comm as recorded; "
               "-1 = none", enum=C.SOURCE),
        column("tag", enum=C.TAG),
        column("comm", description="communicator id (definitions communicators); 0 = none "
               "or handle not known"),
        Column("comm_handle", "int64", "communicator handle as recorded (per rank)",
               enum=C.COMM),
        column("size", description="bytes sent (SEND, COLLECTIVE) / received (RECV): "
               "count x datatype size, summed over count arrays; 0 when the size is not known"),
        column("received", description="COLLECTIVE: bytes received by this rank"),
        column("root", description="COLLECTIVE: root as a location; 0 = none / not known"),
        Column("root_rank", "int64", "COLLECTIVE: root rank in comm as recorded; -1 = none"),
        column("collop", description="COLLECTIVE: id in definitions collectives "
               "(= region id of the MPI function)"),
        column("duration", description="COLLECTIVE: exit - entry", unit="ns"),
        Column("request", "int64", "request handle of a posted SEND / a completed RECV "
               "(table requests); 0 = none", enum=C.REQUEST),
    ] + ([column("counter", description="COUNTER: PAPI counter id (definitions counters)"),
          column("value", description="COUNTER: the counter's value at the call's entry / "
                 "exit (int64 bits)")] if counters else [])


def requests_columns() -> list[Column]:
    return [
        column("time", description="exit wall time of the completing call"),
        column("location"), column("seq"),
        Column("call", "int64", "the completing call (Wait, Test, Waitall, ...)", refers="events"),
        column("region", description="MPI function of the completing call", enum=REGION_ENUM),
        Column("index", "int64", "position of the request in the call's requests array"),
        Column("request", "int64", "request handle", enum=C.REQUEST),
        Column("post_call", "int64", "call that posted it (Isend, Irecv, Start, ...); -1 = "
               "not found in the trace"),
        Column("post_region", "int64", "MPI function of the post; 0 = not found",
               enum=REGION_ENUM),
        Column("init_call", "int64", "persistent request: the *_init call; -1 = none"),
        Column("receive", "uint8", "1 = a receive (its RECV row is at the completing call)"),
    ]


def side_columns() -> dict[str, list[Column]]:
    head = _key() + [column("region", description="MPI function of the call", enum=REGION_ENUM),
                     Column("arg", "int16", "argument name", enum=SIDE_ARG_ID)]
    return {
        "arrays": head + [Column("i0", "int32", "element index (outer index for ranges)"),
                          Column("i1", "int32", "inner index (ranges), else 0"),
                          Column("value", "int64", "element value")],
        "statuses": head + [Column("index", "int32", "position in the status array"),
                            Column("bytes", "int32", "bytes received"),
                            Column("source", "int32", "source rank", enum=C.SOURCE),
                            Column("tag", "int32", "tag", enum=C.TAG),
                            Column("cancelled", "uint8", "cancelled flag"),
                            Column("error", "uint8", "MPI_ERROR field as recorded")],
        "strings": head + [Column("i0", "int32", "string index (command / argv index)"),
                           Column("i1", "int32", "argument index inside argvs[i0], else 0"),
                           Column("text", STR, "the string")],
        "perf": _key() + [column("counter", description="perf counter index (perf_labels)"),
                          Column("entry", "uint64", "counter value at entry"),
                          Column("exit", "uint64", "counter value at exit")],
    }



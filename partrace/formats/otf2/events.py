"""Event records, written by the library's own C event writers from one numba loop.

``load()`` (library.py) must run before the first call: it makes the library's
symbols global, which is how the compiled loop finds OTF2_EvtWriter_* (linked by
name, so the compiled loop is cached like any other kernel).  Pointers go as
uint64 (the same registers as ``void *`` on every 64-bit ABI).
"""
from __future__ import annotations

import numpy as np
from numba import njit, types

# what each row becomes
NONE, ENTER, LEAVE, SEND, RECV, COLL_BEGIN, COLL_END, COLLECTIVE, METRIC = range(9)

_u64, _u32, _u8, _rc = types.uint64, types.uint32, types.uint8, types.int32
# (writer, attribute list, time, ...): OTF2_ErrorCode, 0 = success
_enter = types.ExternalFunction("OTF2_EvtWriter_Enter", _rc(_u64, _u64, _u64, _u32))
_leave = types.ExternalFunction("OTF2_EvtWriter_Leave", _rc(_u64, _u64, _u64, _u32))
# receiver/sender (rank in comm), comm, tag, bytes
_send = types.ExternalFunction("OTF2_EvtWriter_MpiSend", _rc(_u64, _u64, _u64, _u32, _u32, _u32, _u64))
_recv = types.ExternalFunction("OTF2_EvtWriter_MpiRecv", _rc(_u64, _u64, _u64, _u32, _u32, _u32, _u64))
_coll_begin = types.ExternalFunction("OTF2_EvtWriter_MpiCollectiveBegin", _rc(_u64, _u64, _u64))
# collective op, comm, root (rank in comm), bytes sent, bytes received
_coll_end = types.ExternalFunction("OTF2_EvtWriter_MpiCollectiveEnd",
                                   _rc(_u64, _u64, _u64, _u8, _u32, _u32, _u64, _u64))
# metric, number of values, OTF2_Type *, OTF2_MetricValue *
_metric = types.ExternalFunction("OTF2_EvtWriter_Metric", _rc(_u64, _u64, _u64, _u32, _u8, _u64, _u64))


@njit(cache=True)
def write_rows(order, writers, loc, time, op, ref, rank, comm, tag, size, received, collop,
               values_at, row_bytes, nvalues, types_at, counts):
    """Rows in ``order`` (each location's rows in its order: writers are independent),
    row i to ``writers[loc[i]]`` as the record ``op[i]`` names; ``ref`` is the region, metric
    or (collectives, messages: ``comm``) communicator, ``rank`` the peer's or root's rank in
    it.  A metric row's values are the ``nvalues[ref]`` 8-byte values at ``values_at + i *
    row_bytes``, typed by the bytes at ``types_at + ref * 256``.  Counts the records of each
    location into ``counts``; returns (0, -1), or the library's error code and the row it
    refused."""
    none = np.uint64(0)
    for k in range(len(order)):
        i = order[k]
        o = op[i]
        if o == NONE:
            continue
        w = np.uint64(writers[loc[i]])
        t = np.uint64(time[i])
        n = 1
        if o == ENTER:
            rc = _enter(w, none, t, np.uint32(ref[i]))
        elif o == LEAVE:
            rc = _leave(w, none, t, np.uint32(ref[i]))
        elif o == SEND:
            rc = _send(w, none, t, np.uint32(rank[i]), np.uint32(comm[i]), np.uint32(tag[i]),
                       np.uint64(size[i]))
        elif o == RECV:
            rc = _recv(w, none, t, np.uint32(rank[i]), np.uint32(comm[i]), np.uint32(tag[i]),
                       np.uint64(size[i]))
        elif o == COLL_BEGIN:
            rc = _coll_begin(w, none, t)
        elif o == COLL_END or o == COLLECTIVE:
            rc = 0
            if o == COLLECTIVE:         # one record with no extent: a begin and an end at once
                rc = _coll_begin(w, none, t)
                n = 2
            if rc == 0:
                rc = _coll_end(w, none, t, np.uint8(collop[i]), np.uint32(comm[i]),
                               np.uint32(rank[i]), np.uint64(size[i]), np.uint64(received[i]))
        else:
            m = ref[i]
            rc = _metric(w, none, t, np.uint32(m), np.uint8(nvalues[m]),
                         np.uint64(types_at + m * 256),
                         np.uint64(values_at + i * row_bytes))
        if rc != 0:
            return rc, i
        counts[loc[i]] += n
    return 0, -1

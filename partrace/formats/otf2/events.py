"""Event records, written by the library's own C event writers from one numba loop,
one location after another (a writer opened for its location and closed after it).

``load()`` (library.py) must run before the first call: it makes the library's
symbols global, which is how the compiled loop finds OTF2_EvtWriter_* (linked by
name, so the compiled loop is cached like any other kernel).  Pointers go as
uint64 (the same registers as ``void *`` on every 64-bit ABI).
"""
from __future__ import annotations

import numpy as np

from ...kernels.cacheload import njit
from ...kernels.jit import import_numba
from ...model import Kind

types = import_numba().types      # numba imported as a kernel's make (the kernels phase)

# what each row becomes
NONE, ENTER, LEAVE, SEND, RECV, COLL_BEGIN, COLL_END, COLLECTIVE, METRIC = range(9)
KIND_ENTER, KIND_LEAVE = int(Kind.ENTER), int(Kind.LEAVE)

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
def close_innermost(loc, kind, region, known, op, ref, depth, stack, start):
    """A Leave names the region it leaves: each LEAVE row that names no defined region (OTF's
    function 0, "leave the innermost open region") gets the innermost open region of its
    location, by the rule partrace's profile counts with (analysis/regions.py: a LEAVE closes
    the innermost open region, whatever it names).  Rows from ``start``, each location's
    (``loc``: index into ``depth``) in order; ``region``: index of a defined region where
    ``known``; an ENTER of no defined region is open too (-1: its LEAVE stays unwritten).
    ``op`` and ``ref`` are set in place on the LEAVE rows resolved.  ``depth`` and ``stack``
    (per location: its open regions) carry the state to the next window.  Returns (rows done:
    less than all when a stack is full, the caller grows it and calls again from there;
    LEAVE rows of no region with none open, left unwritten)."""
    cap = stack.shape[1]
    lost = 0
    for i in range(start, len(loc)):
        k = kind[i]
        if k != KIND_ENTER and k != KIND_LEAVE:
            continue
        l = loc[i]
        d = depth[l]
        if k == KIND_ENTER:
            if d == cap:
                return i, lost
            stack[l, d] = region[i] if known[i] else -1
            depth[l] = d + 1
        elif d > 0:
            depth[l] = d - 1
            top = stack[l, d - 1]
            if not known[i] and top >= 0:
                op[i] = LEAVE
                ref[i] = top
        elif not known[i]:
            lost += 1
    return len(loc), lost


# (archive, location id): the location's event writer (NULL: none); (archive, writer): rc
_open = types.ExternalFunction("OTF2_Archive_GetEvtWriter", _u64(_u64, _u64))
_close = types.ExternalFunction("OTF2_Archive_CloseEvtWriter", _rc(_u64, _u64))
NO_WRITER = -1          # returned when the library gives no event writer for a location


@njit(cache=True)
def _advance(archive, ids, state, target):
    """Close the open location's writer (``state``: its index, its writer) and open the
    next locations' in turn until ``target``'s is open; a location passed over gets its
    (empty) event file.  ``target`` = len(ids): close the last one.  Returns 0 or the
    library's error code (NO_WRITER)."""
    while state[0] < target:
        if state[0] >= 0:
            rc = _close(archive, np.uint64(state[1]))
            if rc != 0:
                return rc
            state[1] = 0
        state[0] += 1
        if state[0] < len(ids):
            w = _open(archive, np.uint64(ids[state[0]]))
            if w == 0:
                return NO_WRITER
            state[1] = np.int64(w)
    return 0


@njit(cache=True)
def write_locations(archive, ids, state, end, order, loc, time, op, ref, rank, tag, size,
                    received, collop, values_at, voff, nvalues, types_at, counts):
    """Rows in ``order``, grouped by location index ``loc`` (ascending; each location's
    rows in its order), each written by its location's writer as the record ``op[i]``
    names: one writer is open at a time (the library holds an event chunk per open writer),
    closed once its location is done, so memory does not grow with the locations.
    ``state`` (index of the open location, its writer) carries an open location over to
    the next call; at the end every location before ``end`` is closed.  ``ref`` is the
    region, metric or (messages, collectives) communicator, ``rank`` the peer's or root's
    rank in it.  A metric row's values are ``nvalues[ref]`` 8-byte values at ``values_at +
    voff[i] * 8``, typed by the bytes at ``types_at + ref * 256``.  Counts each location's
    records into ``counts``; returns (0, -1), or the library's error code and the row it
    refused (-1: opening or closing a location's writer)."""
    none = np.uint64(0)
    for k in range(len(order)):
        i = order[k]
        li = loc[i]
        if li != state[0]:
            rc = _advance(archive, ids, state, li)
            if rc != 0:
                return rc, -1
        w = np.uint64(state[1])
        t = np.uint64(time[i])
        o = op[i]
        n = 1
        if o == ENTER:
            rc = _enter(w, none, t, np.uint32(ref[i]))
        elif o == LEAVE:
            rc = _leave(w, none, t, np.uint32(ref[i]))
        elif o == SEND:
            rc = _send(w, none, t, np.uint32(rank[i]), np.uint32(ref[i]), np.uint32(tag[i]),
                       np.uint64(size[i]))
        elif o == RECV:
            rc = _recv(w, none, t, np.uint32(rank[i]), np.uint32(ref[i]), np.uint32(tag[i]),
                       np.uint64(size[i]))
        elif o == COLL_BEGIN:
            rc = _coll_begin(w, none, t)
        elif o == COLL_END or o == COLLECTIVE:
            rc = 0
            if o == COLLECTIVE:         # one record with no extent: a begin and an end at once
                rc = _coll_begin(w, none, t)
                n = 2
            if rc == 0:
                rc = _coll_end(w, none, t, np.uint8(collop[i]), np.uint32(ref[i]),
                               np.uint32(rank[i]), np.uint64(size[i]), np.uint64(received[i]))
        else:
            m = ref[i]
            rc = _metric(w, none, t, np.uint32(m), np.uint8(nvalues[m]),
                         np.uint64(types_at + m * 256),
                         np.uint64(values_at + voff[i] * 8))
        if rc != 0:
            return rc, i
        counts[li] += n
    rc = _advance(archive, ids, state, end)
    if rc != 0:
        return rc, -1
    return 0, -1

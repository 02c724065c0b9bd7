"""What every event callback does (callbacks.py): append the record to one uint64 arena
reached through the reader's userData, so the library's C reader fills numpy buffers with
no Python per event.

Arena (uint64): a header (the slots below), then
- events: EVENT_WIDTH words each: time, record code, the 6 scalar arguments as passed
  (narrow arguments' upper bits are whatever the register held: masked later, vectorized);
- values: 4 words each (event index in the batch, position, OTF2_Type, 8 value bytes):
  a Metric's values, a ProgramBegin's argument strings;
- attributes: 4 words each (event index, attribute ref, OTF2_Type, 8 value bytes).
A callback asks the library to stop (OTF2_CALLBACK_INTERRUPT) once a buffer is nearly full;
the reader drains the arena and resumes.  Pointers go as uint64 (events.py explains).
"""
from __future__ import annotations

from ...kernels.cacheload import njit
from ...kernels.jit import import_numba

# numba, imported as a kernel's make (the account's ``kernels`` phase)
_numba = import_numba()
carray, types = _numba.carray, _numba.types

N_EV, CAP_EV, EV_AT, N_VAL, CAP_VAL, VAL_AT, N_ATTR, CAP_ATTR, ATTR_AT, TOTAL, ERROR, \
    DETAIL, SCRATCH = range(13)
HEADER = 16
EVENT_WIDTH = 8
ROW = 4
# room kept free in the value / attribute buffers before an interrupt: one more record fits
RESERVE = 1024
# ERROR slot values
TOO_MANY_VALUES, TOO_MANY_ATTRIBUTES, BAD_ATTRIBUTE = 1, 2, 3
SUCCESS, INTERRUPT = 0, 1

_u64, _u32 = types.uint64, types.uint32
SIGNATURE = types.int32(_u64, _u64, _u64, types.CPointer(_u64), _u64,
                        _u64, _u64, _u64, _u64, _u64, _u64)
_count = types.ExternalFunction("OTF2_AttributeList_GetNumberOfElements", _u32(_u64))
# (list, index, OTF2_AttributeRef *, OTF2_Type *, OTF2_AttributeValue *)
_get = types.ExternalFunction("OTF2_AttributeList_GetAttributeByIndex",
                              types.int32(_u64, _u32, _u64, _u64, _u64))
_memcpy = types.ExternalFunction("memcpy", _u64(_u64, _u64, _u64))




@njit(cache=True)
def record(user, code, time, attributes, a0, a1, a2, a3, a4, a5):
    head = carray(user, (HEADER,))
    arena = carray(user, (head[TOTAL],))
    n = head[N_EV]
    at = head[EV_AT] + n * EVENT_WIDTH
    arena[at] = time
    arena[at + 1] = code
    arena[at + 2] = a0
    arena[at + 3] = a1
    arena[at + 4] = a2
    arena[at + 5] = a3
    arena[at + 6] = a4
    arena[at + 7] = a5
    if attributes != 0:
        k = _count(attributes)
        m = head[N_ATTR]
        if m + k > head[CAP_ATTR]:
            head[ERROR] = TOO_MANY_ATTRIBUTES
            head[DETAIL] = k
            return INTERRUPT
        base = arena.ctypes.data + SCRATCH * 8
        for j in range(k):
            arena[SCRATCH] = 0
            arena[SCRATCH + 1] = 0
            arena[SCRATCH + 2] = 0
            rc = _get(attributes, j, base, base + 8, base + 16)
            if rc != 0:
                head[ERROR] = BAD_ATTRIBUTE
                head[DETAIL] = rc
                return INTERRUPT
            r = head[ATTR_AT] + (m + j) * ROW
            arena[r] = n
            arena[r + 1] = arena[SCRATCH] & 0xFFFFFFFF
            arena[r + 2] = arena[SCRATCH + 1] & 0xFF
            arena[r + 3] = arena[SCRATCH + 2]
        head[N_ATTR] = m + k
    head[N_EV] = n + 1
    if (n + 1 >= head[CAP_EV] or head[N_ATTR] + RESERVE > head[CAP_ATTR]
            or head[N_VAL] + RESERVE > head[CAP_VAL]):
        return INTERRUPT
    return SUCCESS


@njit(cache=True)
def record_array(user, code, time, attributes, a0, a1, a2, a3, a4, a5, count, type_ids, values):
    """A record with arrays (Metric: count uint8, OTF2_Type[count], 8-byte values[count];
    ProgramBegin: count uint32, string refs[count] as uint32, no types)."""
    head = carray(user, (HEADER,))
    arena = carray(user, (head[TOTAL],))
    n = head[N_EV]
    m = head[N_VAL]
    if type_ids != 0:
        count = count & 0xFF
        item = 8
    else:
        count = count & 0xFFFFFFFF
        item = 4
    if m + count > head[CAP_VAL]:
        head[ERROR] = TOO_MANY_VALUES
        head[DETAIL] = count
        return INTERRUPT
    scratch = arena.ctypes.data + SCRATCH * 8
    for j in range(count):
        r = head[VAL_AT] + (m + j) * ROW
        arena[r] = n
        arena[r + 1] = j
        arena[SCRATCH] = 0
        _memcpy(scratch, values + j * item, item)
        arena[r + 3] = arena[SCRATCH]
        if type_ids != 0:
            arena[SCRATCH] = 0
            _memcpy(scratch, type_ids + j, 1)
            arena[r + 2] = arena[SCRATCH]
        else:
            arena[r + 2] = 11          # OTF2_TYPE_STRING
    head[N_VAL] = m + count
    return record(user, code, time, attributes, a0, a1, a2, a3, a4, a5)

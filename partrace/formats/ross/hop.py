"""The one loop that cannot be vectorised: hopping over self-sized ROSS records.

A ROSS file has no markers; a record's length is known only from its own
metadata, so boundaries are found by reading each header in turn.  The hop
touches only the few header words of each record.
"""
from __future__ import annotations

import numpy as np

from ...kernels.jit import njit   # lazy: numba only for inputs that are not small

# Error codes returned by hop() (turned into TraceError by the caller).
OK, TRUNCATED, OVERRUN, BAD_TYPE, BAD_SAMPLE_SIZE, BAD_STATS_TYPE, BAD_FLAG, BAD_ID = range(8)

ENGINE_SIZE = np.array([104, 44, 48], np.int64)   # body bytes of PE, KP, LP samples
LP_V1_SIZE = 36          # LP sample body of ROSS before Dec 2023 (layouts.LP_BODY_V1): code 3


@njit(cache=True, inline="always")
def _i32(buf, p):
    v = np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16) \
        | (np.int64(buf[p + 3]) << 24)
    return v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v


@njit(cache=True, inline="always")
def _u32(buf, p):
    return np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16) \
        | (np.int64(buf[p + 3]) << 24)


@njit(cache=True)
def hop(buf, pos, end, family, starts, codes):
    """Records starting in [pos, end) of ``buf`` (whole bytes to len(buf)).

    family: 0 engine file (gvt/rt), 1 analysis-lps, 2 evtrace, 3 model file.
    Fills starts/codes; returns (count, next start, error code, error offset, bad value).
    """
    size = len(buf)
    n = 0
    while pos < end:
        left = size - pos
        if family == 2:                                   # evtrace: 24-byte header
            if left < 24:
                return n, pos, TRUNCATED, pos, 24
            length = 24 + _u32(buf, pos + 20)
            code = 5
        elif family == 1 and left >= 8 and _u32(buf, pos + 4) == 0:
            # VT model sample: 2nd word is the high half of a u64 lp_id (0), never a sample_size
            if left < 48:
                return n, pos, TRUNCATED, pos, 48
            flag = _i32(buf, pos + 44)
            if flag != 3:
                return n, pos, BAD_FLAG, pos + 44, flag
            for hi in (12, 20):       # kp_id, pe_id are u64 too: a high half is corruption
                if _u32(buf, pos + hi) != 0:
                    return n, pos, BAD_ID, pos + hi - 4, _u32(buf, pos + hi)
            ssz = _i32(buf, pos + 40)
            if ssz < 0:
                return n, pos, OVERRUN, pos + 40, ssz
            length = 48 + ssz
            code = 4
        else:                                             # 24-byte sample_metadata
            if left < 24:
                return n, pos, TRUNCATED, pos, 24
            stype = _i32(buf, pos)
            ssz = _i32(buf, pos + 4)
            if family == 3:
                if stype != 3:
                    return n, pos, BAD_TYPE, pos, stype
                if ssz != 24:
                    return n, pos, BAD_SAMPLE_SIZE, pos + 4, ssz
                if left < 48:
                    return n, pos, TRUNCATED, pos, 48
                st = _i32(buf, pos + 40)
                if st != 1 and st != 2:
                    return n, pos, BAD_STATS_TYPE, pos + 40, st
                length = 48 + _u32(buf, pos + 44)
                code = 5 + st
            else:
                if stype < 0 or stype > 2:
                    return n, pos, BAD_TYPE, pos, stype
                if ssz == ENGINE_SIZE[stype]:
                    code = stype
                elif stype == 2 and ssz == LP_V1_SIZE:
                    code = 3
                else:
                    return n, pos, BAD_SAMPLE_SIZE, pos + 4, ssz
                length = 24 + ssz
        if length > left:
            return n, pos, OVERRUN, pos, length
        starts[n] = pos
        codes[n] = code
        n += 1
        pos += length
    return n, pos, OK, pos, 0


MIN_RECORD = 24   # smallest possible record: sizes the output arrays of a hop


def hop_range(buf: np.ndarray, pos: int, end: int, family: int):
    """Python wrapper: (starts, codes, next_pos, err, err_pos, value)."""
    cap = max(0, (min(end, len(buf)) - pos)) // MIN_RECORD + 1
    starts = np.empty(cap, np.int64)
    codes = np.empty(cap, np.uint8)
    n, nxt, err, epos, val = hop(buf, np.int64(pos), np.int64(end), np.int64(family), starts, codes)
    # trimmed in place (realloc: no copy), so that a hop kept for later holds what it uses
    starts.resize(n, refcheck=False)
    codes.resize(n, refcheck=False)
    return starts, codes, int(nxt), int(err), int(epos), int(val)


ERROR_TEXT = {
    TRUNCATED: "truncated record: expected a {v}-byte record header, the file ends first",
    OVERRUN: "record size runs past the end of the file: record needs {v} bytes",
    BAD_TYPE: "unknown sample type {v} (expected 0 PE, 1 KP, 2 LP in engine files, 3 in model files)",
    BAD_SAMPLE_SIZE: "sample_size {v} does not match the sample type (expected PE 104, KP 44, "
                     "LP 48 or 36 (ROSS before Dec 2023), model 24)",
    BAD_STATS_TYPE: "unknown model stats_type {v} (expected 1 GVT or 2 real-time)",
    BAD_FLAG: "VT model sample flag {v} (expected 3)",
    BAD_ID: "VT model sample u64 id with high half {v} (expected 0: ROSS ids are 32-bit)",
}

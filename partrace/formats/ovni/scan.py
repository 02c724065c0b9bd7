"""Split an ovni stream (``.obs``) into events and gather their fields.

Stream: 8-byte header (``ovni`` + u32 version 1, in the writer's byte order),
then events back to back.  Event: 1 byte flags (high nibble, 0x10 = jumbo) |
payload-size code (low nibble: 0 = none, n = n + 1 bytes), 3 bytes MCV, u64
clock, payload; a jumbo event's 4-byte payload is a u32 length N followed by N
bytes of jumbo data.  Sizes vary, so finding boundaries is one compiled loop
(:func:`boundaries`); a second one (:func:`events`) fills every per-event
column of a chunk in one pass.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import jit as numba   # lazy njit: numba only for inputs that are not small
from ...errors import TraceError

HEADER = 8
EV_HEADER = 12
JUMBO = 0x10
ONE_PASS = 1 << 25      # most event offsets reserved before the count is known (256 MB)

# events/region's dtype (region ids of the MCV table are small): made in it, so
# conform has no range to check and nothing to narrow
REGION = np.int32

# scan status codes
OK, TRUNCATED, BAD_FLAGS, BAD_JUMBO, BAD_MCV = 0, 1, 2, 3, 4


@numba.njit(cache=True, nogil=True, inline="always")
def _uint(buf, o, nbytes, big):
    """Unsigned integer of ``nbytes`` bytes at ``o`` (unrolled by the compiler)."""
    v = np.uint64(0)
    for k in range(nbytes):
        v |= np.uint64(buf[o + k]) << np.uint64(8 * (nbytes - 1 - k) if big else 8 * k)
    return v


@numba.njit(cache=True, nogil=True)
def _walk(buf, start, big, out):
    """Event offsets into ``out`` (as many as fit); returns (count, end, status).
    ``end`` is the offset after the last whole event; on a bad event it is the
    offset of that event.
    """
    n = buf.shape[0]
    pos = start
    count = 0
    cap = out.shape[0]
    while pos < n:
        if pos + EV_HEADER > n:
            return count, pos, TRUNCATED
        b = buf[pos]
        flags = b & 0xF0
        code = b & 0x0F
        size = EV_HEADER + (code + 1 if code else 0)
        if flags == JUMBO:
            if code != 3:
                return count, pos, BAD_JUMBO
            if pos + 16 > n:
                return count, pos, TRUNCATED
            size = 16 + np.int64(_uint(buf, pos + 12, 4, big))
        elif flags != 0:
            return count, pos, BAD_FLAGS
        # model, category, value: printable characters (libovni takes them from C strings
        # such as "OHx"); zeroed or random bytes here are damage, not an event
        for k in range(1, 4):
            c = buf[pos + k]
            if c <= 32 or c >= 127:
                return count, pos, BAD_MCV
        if pos + size > n:
            return count, pos, TRUNCATED
        if count < cap:
            out[count] = pos
        count += 1
        pos += size
    return count, pos, OK


def boundaries(buf: np.ndarray, big: bool) -> tuple[np.ndarray, int, int]:
    """Offsets of all whole events after the header, the end offset and a status."""
    # one pass into room for the smallest events (pages never written cost nothing);
    # a second one only for streams too big to reserve that much
    offs = np.empty(min(max(len(buf) - HEADER, 0) // EV_HEADER + 1, ONE_PASS), np.int64)
    count, end, status = _walk(buf, HEADER, big, offs)
    if count > len(offs):
        offs = np.empty(count, np.int64)
        _walk(buf, HEADER, big, offs)
    return offs[:count], end, status


def open_stream(path: Path) -> tuple[np.ndarray, bool]:
    """The stream's bytes (memory-mapped) and whether it was written big endian."""
    from .layout import regular_file
    size = regular_file(path, "thread stream")
    if size < HEADER:
        raise TraceError.at_byte(path, size, f"stream ends inside the 8-byte header ({size} bytes)")
    try:
        buf = np.asarray(np.memmap(path, np.uint8, "r"))   # plain view of the mapping
    except OSError as e:
        raise TraceError(path, None, f"cannot read the thread stream: {e.strerror}") from None
    if bytes(buf[:4]) != b"ovni":
        raise TraceError.at_byte(path, 0, f"expected magic b'ovni', got {bytes(buf[:4])!r}")
    ver = bytes(buf[4:8])
    if ver == b"\x01\x00\x00\x00":
        return buf, False
    if ver == b"\x00\x00\x00\x01":
        return buf, True
    found = min(int.from_bytes(ver, "little"), int.from_bytes(ver, "big"))   # either order
    raise TraceError.at_byte(path, 4, f"expected stream version 1 (the only one libovni "
                             f"1.0 to 1.14 writes), got {found} (bytes {ver.hex()})")


def mcv_hash(codes: np.ndarray) -> np.ndarray:
    """Open-addressing table of (code, index) for :func:`_find` (faster than a search)."""
    size = 1 << max(4, int(2 * len(codes)).bit_length())
    table = np.full((size, 2), -1, np.int64)
    for i, c in enumerate(codes.tolist()):
        h = (c * 0x9E3779B1) & (size - 1)
        while table[h, 0] >= 0:
            h = (h + 1) & (size - 1)
        table[h] = c, i
    return table


@numba.njit(cache=True, nogil=True, inline="always")
def _find(table, code):
    """Index of ``code`` in the hashed codes, -1 if absent."""
    mask = table.shape[0] - 1
    h = (code * 0x9E3779B1) & mask
    while table[h, 0] >= 0:
        if table[h, 0] == code:
            return table[h, 1]
        h = (h + 1) & mask
    return -1


@numba.njit(cache=True, nogil=True)
def _fill(buf, offs, big, offset, table, known_kind, known_region, set_cpu, clear_cpu,
          carry, other_kind, flags, model, category, value, psize, payload, ticks, time,
          kind, region, cpu, jumbo):
    """One pass over the events at ``offs``: every per-event column, and the CPU carried
    forward from OHx/OAs (set, payload i32) and OHe (clears for the next event).
    Returns the CPU carry for the next chunk and the number of jumbo events, whose
    indices go to ``jumbo``."""
    cur = carry
    nj = 0
    clear_next = False
    for i in range(offs.shape[0]):
        o = offs[i]
        b = buf[o]
        code = b & 0x0F
        ps = code + 1 if code else 0
        flags[i] = b & 0xF0
        if b & JUMBO:
            jumbo[nj] = i
            nj += 1
        m, c, v = buf[o + 1], buf[o + 2], buf[o + 3]
        model[i], category[i], value[i] = m, c, v
        psize[i] = ps
        for k in range(ps):
            payload[i, k] = buf[o + 12 + k]
        t = _uint(buf, o + 4, 8, big)
        ticks[i] = t
        time[i] = np.int64(t) + offset
        mcv = np.int64(m) << 16 | np.int64(c) << 8 | np.int64(v)
        p = _find(table, mcv)
        if p >= 0:
            kind[i], region[i] = known_kind[p], known_region[p]
        else:
            kind[i], region[i] = other_kind, 0
        if clear_next:
            cur = -1
        if ps >= 4:
            for k in range(set_cpu.shape[0]):
                if set_cpu[k] == mcv:
                    u = np.int64(_uint(buf, o + 12, 4, big))
                    cur = np.int32(u - (np.int64(1) << 32) if u >= (np.int64(1) << 31) else u)
        cpu[i] = cur
        clear_next = False
        for k in range(clear_cpu.shape[0]):
            if clear_cpu[k] == mcv:
                clear_next = True
    return -1 if clear_next else cur, nj


def events(buf: np.ndarray, offs: np.ndarray, big: bool, offset: int, lookup, set_cpu,
           clear_cpu, carry: int, other_kind: int):
    """(per-event columns, indices of the jumbo events, CPU carry for the next chunk) of
    the events at ``offs``, in one compiled pass; ``lookup`` is (mcv_hash(codes), kinds,
    regions) of mcv.lookup()."""
    n = len(offs)
    u1 = [np.empty(n, np.uint8) for _ in range(5)]
    g = dict(zip(("flags", "model", "category", "value", "payload_size"), u1))
    g.update(payload=np.zeros((n, 16), np.uint8), ticks=np.empty(n, np.uint64),
             time=np.empty(n, np.int64), kind=np.empty(n, np.uint8),
             region=np.empty(n, REGION), cpu=np.empty(n, np.int32))
    jumbo = np.empty(n, np.int64)
    carry, nj = _fill(buf, offs, big, np.int64(offset), *lookup, set_cpu, clear_cpu,
                      np.int32(carry), np.uint8(other_kind), *u1, g["payload"], g["ticks"],
                      g["time"], g["kind"], g["region"], g["cpu"], jumbo)
    return g, jumbo[:nj], int(carry)


@numba.njit(cache=True, nogil=True)
def _fill_keys(buf, offs, big, offset, table, known_kind, known_region, other_kind, time,
               kind, region):
    """:func:`_fill` for the columns a profile or message fold reads: time, kind, region
    (the same values, a third of the work: no payload, flags or CPU carry)."""
    for i in range(offs.shape[0]):
        o = offs[i]
        time[i] = np.int64(_uint(buf, o + 4, 8, big)) + offset
        mcv = np.int64(buf[o + 1]) << 16 | np.int64(buf[o + 2]) << 8 | np.int64(buf[o + 3])
        p = _find(table, mcv)
        if p >= 0:
            kind[i], region[i] = known_kind[p], known_region[p]
        else:
            kind[i], region[i] = other_kind, 0


KEY_COLUMNS = ("time", "kind", "region")     # what :func:`event_keys` fills


def event_keys(buf: np.ndarray, offs: np.ndarray, big: bool, offset: int, lookup,
               other_kind: int) -> dict[str, np.ndarray]:
    """The KEY_COLUMNS of the events at ``offs``, as :func:`events` gives them."""
    n = len(offs)
    g = {"time": np.empty(n, np.int64), "kind": np.empty(n, np.uint8),
         "region": np.empty(n, REGION)}
    _fill_keys(buf, offs, big, np.int64(offset), *lookup, np.uint8(other_kind), g["time"],
               g["kind"], g["region"])
    return g


def jumbo_data(buf: np.ndarray, offs: np.ndarray, payload: np.ndarray,
               big: bool) -> tuple[np.ndarray, np.ndarray]:
    """Lengths and bytes objects of the jumbo events at ``offs``."""
    lens = np.ascontiguousarray(payload[:, :4]).view(">u4" if big else "<u4").ravel()
    data = np.empty(len(offs), object)
    for i, (o, n) in enumerate(zip(offs.tolist(), lens.tolist())):
        data[i] = bytes(buf[o + 16:o + 16 + n])
    return lens.astype(np.uint64), data

"""Split an ovni stream (``.obs``) into events and gather their fields.

Stream: 8-byte header (``ovni`` + u32 version 1, in the writer's byte order),
then events back to back.  Event: 1 byte flags (high nibble, 0x10 = jumbo) |
payload-size code (low nibble: 0 = none, n = n + 1 bytes), 3 bytes MCV, u64
clock, payload; a jumbo event's payload is a u32 length N followed by N bytes of
jumbo data.  Sizes are read as libovni's ``ovni_payload_size`` reads them: the
jumbo bit alone decides a jumbo event (its size code is not looked at), other
flag bits are ignored, and the MCV bytes are whatever they are (ovnidump prints
them).  Sizes vary, so checking the events is one compiled loop
(:func:`check`); a second one (:func:`events`) steps through a chunk of them by
their sizes and fills every per-event column in one pass.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...kernels import jit as numba   # lazy njit: numba only for inputs that are not small
from ...errors import TraceError
from ...model import byte_rows

HEADER = 8
EV_HEADER = 12
JUMBO = 0x10

# events/region's dtype (region ids of the MCV table are small): made in it, so
# conform has no range to check and nothing to narrow
REGION = np.int32

# scan status codes
OK, TRUNCATED = 0, 1


@numba.njit(cache=True, nogil=True, inline="always")
def _uint(buf, o, nbytes, big):
    """Unsigned integer of ``nbytes`` bytes at ``o`` (unrolled by the compiler)."""
    v = np.uint64(0)
    for k in range(nbytes):
        v |= np.uint64(buf[o + k]) << np.uint64(8 * (nbytes - 1 - k) if big else 8 * k)
    return v


@numba.njit(cache=True, nogil=True, inline="always")
def _size(buf, pos, big):
    """Bytes of the event at ``pos`` (its header, and with the jumbo bit its length,
    present), as libovni's ``ovni_ev_size``: the jumbo bit wins over the size code."""
    code = buf[pos] & 0x0F
    if buf[pos] & JUMBO:
        return 16 + np.int64(_uint(buf, pos + 12, 4, big))
    return EV_HEADER + (code + 1 if code else 0)


@numba.njit(cache=True, nogil=True)
def _walk(buf, start, big):
    """Steps through the events from ``start`` on by their sizes; returns (count, end,
    status, last): ``end`` is the offset after the last whole event (status OK) or of the
    event the stream ends inside (TRUNCATED, what libovni's stream reader refuses);
    ``last``: the offset of the last whole event (-1: none).  Writes nothing: the fill
    kernels walk the events again by their sizes."""
    n = buf.shape[0]
    pos = start
    count = 0
    last = -1
    while pos < n:
        if pos + EV_HEADER > n:
            return count, pos, TRUNCATED, last
        if buf[pos] & JUMBO and pos + 16 > n:
            return count, pos, TRUNCATED, last
        size = _size(buf, pos, big)
        if pos + size > n:
            return count, pos, TRUNCATED, last
        count += 1
        last = pos
        pos += size
    return count, pos, OK, last


def check(buf: np.ndarray, big: bool) -> tuple[int, int, int, int]:
    """(number of whole events after the header, their end offset, a status, the offset of
    the last whole event or -1).  No offsets are kept (an array of them would cost 8 bytes
    an event, written and read once): the events up to ``end`` are well formed, so a fill
    kernel steps through them by their sizes."""
    count, end, status, last = _walk(buf, HEADER, big)
    return int(count), int(end), int(status), int(last)


# libovni's OVNI_MAX_EV_BUF: the buffer every event, jumbo ones too, is written into
MAX_EVENT_BYTES = 2 << 20


def implausible_cut(buf: np.ndarray, end: int, last: int, big: bool) -> str | None:
    """Why the bytes from ``end`` to the end of the stream (shorter than the event they
    start claims) cannot be the start of an event a crashed writer left half-written, or
    None if they can: a first byte or model/category/value libovni never writes (its
    events have flags 0x00..0x0f or 0x13 and printable MCVs; the whole events before
    are read whatever their bytes, as libovni reads them), a clock before the last
    whole event's (clocks of a stream never decrease), a jumbo event longer than
    libovni's event buffer."""
    tail = len(buf) - end
    b = int(buf[end])
    flags, code = b & 0xF0, b & 0x0F
    if flags not in (0, JUMBO) or (flags == JUMBO and code != 3):
        return f"first byte {b:#04x} starts no event"
    mcv = bytes(buf[end + 1:end + min(4, tail)])
    if any(c <= 32 or c >= 127 for c in mcv):
        return f"model/category/value bytes {mcv.hex(' ')} that are not printable characters"
    order = "big" if big else "little"
    if tail >= EV_HEADER and last >= 0:
        clock = int.from_bytes(bytes(buf[end + 4:end + 12]), order)
        before = int.from_bytes(bytes(buf[last + 4:last + 12]), order)
        if clock < before:
            return f"clock {clock} before the last whole event's ({before})"
    if flags == JUMBO and tail >= 16:
        size = 16 + int.from_bytes(bytes(buf[end + 12:end + 16]), order)
        if size > MAX_EVENT_BYTES:
            return f"a jumbo event of {size} bytes (libovni writes none over {MAX_EVENT_BYTES})"
    return None


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


FEW = 1 << 12       # CPU changes and jumbo events a chunk has room for at first

# what an MCV does to the thread's CPU (mcv_lookup's cpu_action)
CPU_KEEP, CPU_SET, CPU_CLEAR = 0, 1, 2


def mcv_lookup(codes: np.ndarray, kinds: np.ndarray, regions: np.ndarray, other_kind: int,
               set_cpu: np.ndarray, clear_cpu: np.ndarray):
    """(index, kinds, regions, cpu_action) for :func:`_mcv_key`: ``index[key]`` is the row
    of an MCV in the other three, row 0 (``other_kind``, region 0, CPU_KEEP) for an MCV
    not known; the MCV codes ``set_cpu`` and ``clear_cpu`` (known ones) act on the CPU.
    A direct table, looked up with one load and no branch (a hash table's probing cost
    a fifth of the fill kernel); zeroed by calloc, so only the pages of known MCVs are
    ever written (4 MB reserved, a few KB touched)."""
    index = np.zeros(1 << 21, np.uint16)
    index[_key_of(codes)] = np.arange(1, len(codes) + 1)
    action = np.zeros(len(codes) + 1, np.uint8)
    action[index[_key_of(set_cpu)]] = CPU_SET
    action[index[_key_of(clear_cpu)]] = CPU_CLEAR
    action[0] = CPU_KEEP
    return (index, np.concatenate(([other_kind], kinds)).astype(np.uint8),
            np.concatenate(([0], regions)).astype(REGION), action)


def _key_of(codes: np.ndarray) -> np.ndarray:
    """:func:`_mcv_key` of MCV codes (model << 16 | category << 8 | value) of known
    MCVs (printable ASCII)."""
    codes = np.asarray(codes, np.int64)
    return (codes >> 16 & 0x7F) << 14 | (codes >> 8 & 0x7F) << 7 | (codes & 0x7F)


@numba.njit(cache=True, nogil=True, inline="always")
def _mcv_key(m, c, v):
    """Index of an MCV in :func:`mcv_lookup`'s table: 7 bits a character, as every known
    MCV is printable ASCII; an MCV with a byte of 128 or more is none of them and gets
    key 0 (NUL NUL NUL, not known either), with no branch."""
    ascii_only = 1 - (np.int64(m | c | v) >> 7)
    return (np.int64(m) << 14 | np.int64(c) << 7 | np.int64(v)) * ascii_only


@numba.njit(cache=True, nogil=True)
def _fill(buf, start, big, offset, index, known_kind, known_region, cpu_action, carry,
          flags, model, category, value, psize, payload, payload_words,
          time, kind, region, cpu_at, cpu_to, jumbo, jumbo_at):
    """One pass over the (checked) events from byte ``start``, as many as the columns
    hold: every per-event column but the CPU, which changes rarely (OHx/OAs set it from
    their payload i32, OHe clears it for the next event): its changes go to ``cpu_at``
    (event index) and ``cpu_to`` (the new value).  ``payload`` is not zeroed beforehand:
    each row is cleared here through ``payload_words`` (the same memory, two u64 a row),
    then its bytes copied.  Returns the offset after the last event, the CPU carry for
    the next chunk, the number of CPU changes and the number of jumbo events, whose
    indices go to ``jumbo`` and offsets to ``jumbo_at`` (changes and jumbo events beyond
    the room of those arrays are counted, not kept)."""
    cur = carry
    nj = 0
    nc = 0
    clear_next = False
    o = start
    for i in range(flags.shape[0]):
        b = buf[o]
        code = b & 0x0F
        # a jumbo event's payload column holds its u32 length, whatever its size code
        ps = 4 if b & JUMBO else (code + 1 if code else 0)
        flags[i] = b & 0xF0
        m, c, v = buf[o + 1], buf[o + 2], buf[o + 3]
        model[i], category[i], value[i] = m, c, v
        psize[i] = ps
        payload_words[i, 0] = 0
        payload_words[i, 1] = 0
        for k in range(ps):
            payload[i, k] = buf[o + 12 + k]
        # int64 arithmetic wraps, so the raw clock is time - offset (mod 2**64) whatever it is
        time[i] = np.int64(_uint(buf, o + 4, 8, big)) + offset
        p = index[_mcv_key(m, c, v)]
        kind[i], region[i] = known_kind[p], known_region[p]
        new = -1 if clear_next else cur
        action = cpu_action[p]
        if action == CPU_SET and ps >= 4:
            u = np.int64(_uint(buf, o + 12, 4, big))
            new = np.int32(u - (np.int64(1) << 32) if u >= (np.int64(1) << 31) else u)
        if new != cur:
            if nc < cpu_at.shape[0]:
                cpu_at[nc] = i
                cpu_to[nc] = new
            nc += 1
            cur = new
        clear_next = action == CPU_CLEAR
        if b & JUMBO:
            if nj < jumbo.shape[0]:
                jumbo[nj] = i
                jumbo_at[nj] = o
            nj += 1
            o += 16 + np.int64(_uint(buf, o + 12, 4, big))
        else:
            o += EV_HEADER + ps
    return o, -1 if clear_next else cur, nc, nj


def events(buf: np.ndarray, start: int, n: int, big: bool, offset: int, lookup, carry: int):
    """(per-event columns, indices and offsets of the jumbo events, offset after the
    last event, CPU carry for the next chunk) of the ``n`` checked events from byte
    ``start``, in one compiled pass; ``lookup`` is :func:`mcv_lookup`'s.  ``cpu`` is
    an int when every event has that CPU (see :func:`cpu_column`)."""
    u1 = [np.empty(n, np.uint8) for _ in range(5)]
    g = dict(zip(("flags", "model", "category", "value", "payload_size"), u1))
    payload = np.empty((n, 16), np.uint8)
    g.update(payload=payload, time=np.empty(n, np.int64),
             kind=np.empty(n, np.uint8), region=np.empty(n, REGION))
    # CPU changes and jumbo events are few: room for FEW of each (arrays of n would be
    # mostly unused, yet raise the process's peak), the pass run again if there are more
    room = min(n, FEW)
    while True:
        cpu_at, cpu_to = np.empty(room, np.int64), np.empty(room, np.int32)
        jumbo, jumbo_at = np.empty(room, np.int64), np.empty(room, np.int64)
        end, end_carry, nc, nj = _fill(
            buf, np.int64(start), big, np.int64(offset), *lookup, np.int32(carry), *u1,
            payload, payload.view(np.uint64), g["time"], g["kind"], g["region"],
            cpu_at, cpu_to, jumbo, jumbo_at)
        if max(nc, nj) <= room:
            break
        room = max(nc, nj)
    g["cpu"] = cpu_column(n, carry, cpu_at[:nc], cpu_to[:nc])
    return g, jumbo[:nj], jumbo_at[:nj], int(end), int(end_carry)


def cpu_column(n: int, carry: int, at: np.ndarray, to: np.ndarray) -> np.ndarray | int:
    """The CPU of ``n`` events that start at ``carry`` and change to ``to`` at ``at``:
    an int when every event has the same one (a thread set to its CPU by its first
    event and never moved), which the caller hands as one repeated value."""
    values = np.concatenate(([carry], to)).astype(np.int32)
    lengths = np.diff(np.concatenate(([0], at, [n])))
    held = np.unique(values[lengths > 0])
    return int(held[0]) if len(held) == 1 else np.repeat(values, lengths)


@numba.njit(cache=True, nogil=True)
def _fill_keys(buf, start, big, offset, index, known_kind, known_region, time, kind, region,
               model, category, value, jumbo):
    """:func:`_fill` for the columns a profile, a message fold or ``info`` reads: time,
    kind, region, model, category, value (the same values, a third of the work: no
    payload, flags or CPU carry), and the indices of the jumbo events (their keys: room
    for ``jumbo.shape[0]``, the rest counted).  Returns the offset after the last event
    and the number of jumbo events."""
    o = start
    nj = 0
    for i in range(time.shape[0]):
        m, c, v = buf[o + 1], buf[o + 2], buf[o + 3]
        model[i], category[i], value[i] = m, c, v
        time[i] = np.int64(_uint(buf, o + 4, 8, big)) + offset
        p = index[_mcv_key(m, c, v)]
        kind[i], region[i] = known_kind[p], known_region[p]
        if buf[o] & JUMBO:
            if nj < jumbo.shape[0]:
                jumbo[nj] = i
            nj += 1
        o += _size(buf, o, big)
    return o, nj


# what :func:`event_keys` fills of the events, and of the jumbo events (with their
# location, seq and event_seq, which the reader knows)
KEY_COLUMNS = ("time", "kind", "region", "model", "category", "value")
JUMBO_KEY_COLUMNS = ("time", "location", "seq", "event_seq", "model", "category", "value")


def event_keys(buf: np.ndarray, start: int, n: int, big: bool, offset: int,
               lookup) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """The KEY_COLUMNS of the ``n`` events from byte ``start``, as :func:`events` gives
    them, the indices of the jumbo events among them, and the offset after the last one."""
    g = {"time": np.empty(n, np.int64), "kind": np.empty(n, np.uint8),
         "region": np.empty(n, REGION)}
    g.update((k, np.empty(n, np.uint8)) for k in ("model", "category", "value"))
    room = min(n, FEW)
    while True:     # jumbo events are few: room for FEW, the pass run again if more
        jumbo = np.empty(room, np.int64)
        end, nj = _fill_keys(buf, np.int64(start), big, np.int64(offset), *lookup[:3],
                             g["time"], g["kind"], g["region"], g["model"], g["category"],
                             g["value"], jumbo)
        if nj <= room:
            return g, jumbo[:nj], int(end)
        room = nj


def jumbo_data(buf: np.ndarray, offs: np.ndarray, payload: np.ndarray,
               big: bool) -> tuple[np.ndarray, np.ndarray]:
    """Lengths and bytes objects of the jumbo events at ``offs`` (one object each)."""
    lens = np.ascontiguousarray(payload[:, :4]).view(">u4" if big else "<u4").ravel()
    starts = offs.astype(np.int64) + 16
    return lens.astype(np.uint64), byte_rows(buf, starts, starts + lens)

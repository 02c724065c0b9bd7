"""Split an ovni stream (``.obs``) into events and gather their fields.

Stream: 8-byte header (``ovni`` + u32 version 1, in the writer's byte order),
then events back to back.  Event: 1 byte flags (high nibble, 0x10 = jumbo) |
payload-size code (low nibble: 0 = none, n = n + 1 bytes), 3 bytes MCV, u64
clock, payload; a jumbo event's 4-byte payload is a u32 length N followed by N
bytes of jumbo data.  Sizes vary, so finding boundaries is one compiled loop
(:func:`boundaries`); everything after it is numpy gathers.
"""
from __future__ import annotations

from pathlib import Path

import numba
import numpy as np

from ...errors import TraceError

HEADER = 8
EV_HEADER = 12
JUMBO = 0x10

# scan status codes
OK, TRUNCATED, BAD_FLAGS, BAD_JUMBO = 0, 1, 2, 3


@numba.njit(cache=True, nogil=True)
def _walk(buf, start, big, out):
    """Event offsets into ``out`` (if it is long enough); returns (count, end, status).

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
            if big:
                jl = (np.int64(buf[pos + 12]) << 24 | np.int64(buf[pos + 13]) << 16
                      | np.int64(buf[pos + 14]) << 8 | np.int64(buf[pos + 15]))
            else:
                jl = (np.int64(buf[pos + 15]) << 24 | np.int64(buf[pos + 14]) << 16
                      | np.int64(buf[pos + 13]) << 8 | np.int64(buf[pos + 12]))
            size = 16 + jl
        elif flags != 0:
            return count, pos, BAD_FLAGS
        if pos + size > n:
            return count, pos, TRUNCATED
        if count < cap:
            out[count] = pos
        count += 1
        pos += size
    return count, pos, OK


def boundaries(buf: np.ndarray, big: bool) -> tuple[np.ndarray, int, int]:
    """Offsets of all whole events after the header, the end offset and a status."""
    count, end, status = _walk(buf, HEADER, big, np.empty(0, np.int64))
    offs = np.empty(count, np.int64)
    _walk(buf, HEADER, big, offs)
    return offs, end, status


def open_stream(path: Path) -> tuple[np.ndarray, bool]:
    """The stream's bytes (memory-mapped) and whether it was written big endian."""
    size = path.stat().st_size
    if size < HEADER:
        raise TraceError.at_byte(path, size, f"stream ends inside the 8-byte header ({size} bytes)")
    buf = np.asarray(np.memmap(path, np.uint8, "r"))   # plain view of the mapping
    if bytes(buf[:4]) != b"ovni":
        raise TraceError.at_byte(path, 0, f"expected magic b'ovni', got {bytes(buf[:4])!r}")
    ver = bytes(buf[4:8])
    if ver == b"\x01\x00\x00\x00":
        return buf, False
    if ver == b"\x00\x00\x00\x01":
        return buf, True
    raise TraceError.at_byte(path, 4, f"expected stream version 1, got bytes {ver.hex()}")


_ARANGE16 = np.arange(16)
ROW = 28          # the longest normal event: its bytes are gathered as one row


def rows(buf: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """The first 28 bytes at each offset as an (n, 28) array (zeros past the end)."""
    out = np.zeros((len(offs), ROW), np.uint8)
    last = len(buf) - ROW
    inner = offs <= last
    if last >= 0:
        # overlapping 28-byte windows, one per byte: a row gather is one short copy
        win = np.lib.stride_tricks.sliding_window_view(buf, ROW)
        out[inner] = win[offs[inner]]
    for i in np.flatnonzero(~inner):          # the few events within 28 bytes of the end
        o = int(offs[i])
        out[i, :len(buf) - o] = buf[o:]
    return out


def gather(buf: np.ndarray, offs: np.ndarray, big: bool) -> dict[str, np.ndarray]:
    """The fields of the events starting at ``offs`` (all vectorized)."""
    r = rows(buf, offs)
    first = r[:, 0]
    code = first & 0x0F
    psize = np.where(code > 0, code + 1, 0).astype(np.uint8)
    clock = np.ascontiguousarray(r[:, 4:12]).view(">u8" if big else "<u8").ravel().astype(np.uint64)
    payload = r[:, 12:] * (_ARANGE16[None, :] < psize[:, None])
    return {"flags": first & 0xF0, "model": r[:, 1].copy(), "category": r[:, 2].copy(),
            "value": r[:, 3].copy(), "ticks": clock, "payload_size": psize,
            "payload": payload.astype(np.uint8, copy=False)}


def jumbo_data(buf: np.ndarray, offs: np.ndarray, payload: np.ndarray,
               big: bool) -> tuple[np.ndarray, np.ndarray]:
    """Lengths and bytes objects of the jumbo events at ``offs``."""
    lens = np.ascontiguousarray(payload[:, :4]).view(">u4" if big else "<u4").ravel()
    data = np.empty(len(offs), object)
    for i, (o, n) in enumerate(zip(offs.tolist(), lens.tolist())):
        data[i] = bytes(buf[o + 16:o + 16 + n])
    return lens.astype(np.uint64), data


def i32(payload: np.ndarray, at: int, big: bool) -> np.ndarray:
    """The signed 32-bit field at byte ``at`` of each payload."""
    return np.ascontiguousarray(payload[:, at:at + 4]).view(">i4" if big else "<i4").ravel()

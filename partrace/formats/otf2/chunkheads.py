"""How many event records an OTF2 event file holds, by its own chunk headers.

The library writes an event file in chunks of the anchor's event chunk size, only the
last one short; each chunk begins with a header (OTF2_Buffer.c: the byte 3, the
endianness byte, then the numbers of the chunk's first and last event record, 8 bytes
each).  The library's writer fills the last-event number in when it flushes a chunk, so
the last chunk's header counts the file's records, whatever the producer wrote in the
location's definition (APEX writes one count for every location).

The library's reader does not hold that count against what it reads: a file cut inside
the last of several chunks is read on into the bytes its buffer held before, without
end.  The reader (reader.py) stops at the count, and a file that ends before it is cut.
"""
from __future__ import annotations

import os

from ...errors import TraceError

CHUNK_HEADER = 3                    # OTF2_BUFFER_CHUNK_HEADER
HEADER_BYTES = 18
LAST_EVENT_AT = 10
BYTE_ORDER = {0x42: "little", 0x23: "big"}      # OTF2_LITTLE_ENDIAN, OTF2_BIG_ENDIAN


def counted_events(path: str | os.PathLike, size: int, chunk_bytes: int) -> int | None:
    """The number of event records the last chunk header of ``path`` (``size`` bytes,
    chunks of ``chunk_bytes``) says the file holds; None where no chunk header is there
    to read (the library judges such a file)."""
    if size <= 0 or chunk_bytes <= 0:
        return None
    start = (size - 1) // chunk_bytes * chunk_bytes
    with open(path, "rb") as f:
        f.seek(start)
        head = f.read(HEADER_BYTES)
    if len(head) < HEADER_BYTES:
        raise TraceError.at_byte(path, size, f"the file ends inside the header of the chunk "
                                 f"at byte {start} (chunks of {chunk_bytes} bytes, headers of "
                                 f"{HEADER_BYTES}): the file is cut short")
    if head[0] != CHUNK_HEADER or head[1] not in BYTE_ORDER:
        return None
    return int.from_bytes(head[LAST_EVENT_AT:HEADER_BYTES], BYTE_ORDER[head[1]])


END_OF_BUFFER, END_OF_FILE = 1, 2


def ends_as_written(path: str | os.PathLike, size: int) -> bool:
    """Whether the file ends as the library's writer ends one: its END_OF_FILE byte, then
    the END_OF_BUFFER byte of the flush (a file cut short seldom ends so)."""
    if size < 2:
        return False
    with open(path, "rb") as f:
        f.seek(size - 2)
        tail = f.read(2)
    return tail == bytes([END_OF_FILE, END_OF_BUFFER])

"""Freed buffers kept warm: glibc's allocator told, once, to keep large blocks in its heap.

A chunk's decoded columns, a window's exchange buffers and its merged columns are large
numpy arrays that live a moment each.  By default glibc serves a block this large with its
own ``mmap`` (above a threshold that starts at 128 KiB and follows the largest block freed,
up to 32 MiB) and hands it back with ``munmap`` when it is freed, and gives the heap's top
back as soon as 128 KiB of it (then twice the threshold) is free: each chunk and each
window then faults its pages in afresh, and the kernel zeroes every one of them.  On the
traces the OTF, DUMPI and ovni libraries wrote, that system time was as large as the parse.

Here the threshold is fixed at glibc's own ceiling for it (32 MiB: a block below it comes
from the heap) and the heap keeps up to 64 MiB free at its top: the next chunk reuses the
pages the last one freed.  Blocks of 32 MiB and more are still mapped and unmapped alone,
so the heap holds at most what its largest live moment held plus that top: peak resident
memory stays where it was (merge to HDF5 of the real-library traces, one rank).

numpy keeps its own cache only for blocks under 1 KiB, so its columns are malloc's; it
asks for transparent huge pages on arrays of 4 MiB and more (``madvise``), which the
kernel grants on heap pages as on mapped ones.

Only glibc has these settings: elsewhere (musl, macOS) nothing is changed.  They stay
for the rest of the process (glibc cannot return to its moving threshold).
"""
from __future__ import annotations

import os

M_TRIM_THRESHOLD = -1      # glibc's malloc.h
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 32 << 20   # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 64 << 20

_done: bool | None = None   # None: not tried yet; else whether glibc took the settings


def glibc_version() -> str | None:
    """glibc's version string ("glibc 2.36"), or None with another C library."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        return None
    return found if found and found.startswith("glibc") else None


def keep_freed_pages() -> bool:
    """Set glibc's thresholds (once a process); whether they are in force."""
    global _done
    if _done is None:
        _done = False
        if glibc_version() is not None:
            import ctypes
            try:
                mallopt = ctypes.CDLL(None).mallopt
            except (OSError, AttributeError):
                return False
            mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
            _done = (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                     and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1)
    return _done

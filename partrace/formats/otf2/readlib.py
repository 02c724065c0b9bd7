"""The library's event reader, driven through ctypes (a few calls per batch), with the
C callbacks of callbacks.py filling one arena (kernel.py) per location."""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from . import kernel as K
from .library import error_name, last_error, load, quiet_errors

INTERRUPTED = 92            # OTF2_ERROR_INTERRUPTED_BY_CALLBACK


@functools.cache
def reading_library():
    """The ctypes handle with the reader's signatures declared (after library.load())."""
    _, lib = load()
    p, u64 = ctypes.c_void_p, ctypes.c_uint64
    lib.OTF2_Reader_Open.restype = p
    lib.OTF2_Reader_Open.argtypes = [ctypes.c_char_p]
    for name in ("OTF2_Reader_Close", "OTF2_Reader_SetSerialCollectiveCallbacks",
                 "OTF2_Reader_OpenEvtFiles", "OTF2_Reader_CloseEvtFiles",
                 "OTF2_Reader_OpenDefFiles", "OTF2_Reader_CloseDefFiles"):
        getattr(lib, name).argtypes = [p]
    lib.OTF2_Reader_SelectLocation.argtypes = [p, u64]
    for name in ("OTF2_Reader_GetEvtReader", "OTF2_Reader_GetDefReader"):
        getattr(lib, name).restype = p
        getattr(lib, name).argtypes = [p, u64]
    lib.OTF2_Reader_ReadAllLocalDefinitions.argtypes = [p, p, ctypes.POINTER(u64)]
    lib.OTF2_Reader_CloseDefReader.argtypes = [p, p]
    lib.OTF2_Reader_CloseEvtReader.argtypes = [p, p]
    lib.OTF2_EvtReaderCallbacks_New.restype = p
    lib.OTF2_EvtReaderCallbacks_Delete.argtypes = [p]
    lib.OTF2_Reader_RegisterEvtCallbacks.argtypes = [p, p, p, p]
    lib.OTF2_Reader_ReadLocalEvents.argtypes = [p, p, u64, ctypes.POINTER(u64)]
    lib.OTF2_Reader_GetChunkSize.argtypes = [p, ctypes.POINTER(u64), ctypes.POINTER(u64)]
    for name in ("OTF2_Reader_GetFileSubstrate", "OTF2_Reader_GetCompression"):
        getattr(lib, name).argtypes = [p, ctypes.POINTER(ctypes.c_uint8)]
    return lib


FILE_SUBSTRATE_POSIX = 1
COMPRESSION_NONE = 1


def event_chunk_bytes(anchor: str) -> int | None:
    """The archive's event chunk size, in bytes, where each location's events are one
    plain file (POSIX substrate, no compression); else None."""
    lib = reading_library()
    handle = lib.OTF2_Reader_Open(anchor.encode())
    if not handle:
        return None
    try:
        events, defs = ctypes.c_uint64(0), ctypes.c_uint64(0)
        substrate, compression = ctypes.c_uint8(0), ctypes.c_uint8(0)
        if (lib.OTF2_Reader_GetChunkSize(handle, ctypes.byref(events), ctypes.byref(defs))
                or lib.OTF2_Reader_GetFileSubstrate(handle, ctypes.byref(substrate))
                or lib.OTF2_Reader_GetCompression(handle, ctypes.byref(compression))):
            return None
        plain = substrate.value == FILE_SUBSTRATE_POSIX and compression.value == COMPRESSION_NONE
        return int(events.value) if plain else None
    finally:
        lib.OTF2_Reader_Close(handle)


@functools.cache
def callback_table() -> list[tuple[str, int]]:
    """(setter name, C address) of every event callback, the unknown-record one included."""
    from .callbacks import CALLBACKS, on_Unknown
    out = [("OTF2_EvtReaderCallbacks_SetUnknownCallback", on_Unknown.address)]
    out += [(f"OTF2_EvtReaderCallbacks_Set{n}Callback", f.address) for n, f in CALLBACKS.items()]
    return out


def new_arena(events: int) -> np.ndarray:
    """An arena for ``events`` records per batch (values and attributes: 4 each on average,
    and never less than the reserve one record may need)."""
    side = max(4 * events, 4 * K.RESERVE)
    head = np.zeros(K.HEADER, np.uint64)
    head[K.CAP_EV], head[K.CAP_VAL], head[K.CAP_ATTR] = events, side, side
    head[K.EV_AT] = K.HEADER
    head[K.VAL_AT] = K.HEADER + events * K.EVENT_WIDTH
    head[K.ATTR_AT] = head[K.VAL_AT] + side * K.ROW
    total = int(head[K.ATTR_AT]) + side * K.ROW
    head[K.TOTAL] = total
    arena = np.zeros(total, np.uint64)
    arena[:K.HEADER] = head
    return arena


class LocationEvents:
    """One location's event reader: ``batch()`` gives the arena filled with the next
    records (none left: 0 records), or raises OSError with the library's message."""

    def __init__(self, anchor: str, ref: int, events: int):
        self.lib = lib = reading_library()
        quiet_errors()
        last_error()
        self.error_name = error_name
        self.handle = lib.OTF2_Reader_Open(anchor.encode())
        if not self.handle:
            raise OSError("the OTF2 library cannot open the anchor file")
        self.evt = None
        self.callbacks = None
        self.done = False
        self._check(lib.OTF2_Reader_SetSerialCollectiveCallbacks(self.handle))
        self._check(lib.OTF2_Reader_SelectLocation(self.handle, ref))
        # local definitions hold mapping tables the event reader applies: read when present
        if lib.OTF2_Reader_OpenDefFiles(self.handle) == 0:
            d = lib.OTF2_Reader_GetDefReader(self.handle, ref)
            if d:
                n = ctypes.c_uint64(0)
                self._check(lib.OTF2_Reader_ReadAllLocalDefinitions(self.handle, d,
                                                                    ctypes.byref(n)))
                self._check(lib.OTF2_Reader_CloseDefReader(self.handle, d))
            self._check(lib.OTF2_Reader_CloseDefFiles(self.handle))
        self._check(lib.OTF2_Reader_OpenEvtFiles(self.handle))
        self.evt = lib.OTF2_Reader_GetEvtReader(self.handle, ref)
        if not self.evt:
            raise OSError("the OTF2 library gives no event reader for this location")
        self.callbacks = lib.OTF2_EvtReaderCallbacks_New()
        for setter, address in callback_table():
            fn = getattr(lib, setter)
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            self._check(fn(self.callbacks, address))
        self.arena = new_arena(events)
        self._check(lib.OTF2_Reader_RegisterEvtCallbacks(self.handle, self.evt, self.callbacks,
                                                         self.arena.ctypes.data))

    def _check(self, code: int) -> None:
        if code:
            raise OSError(self._message(code))

    def _message(self, code: int) -> str:
        detail = last_error()
        return f"{self.error_name(code)} ({detail})" if detail else self.error_name(code)

    def batch(self) -> np.ndarray:
        a = self.arena
        a[K.N_EV] = a[K.N_VAL] = a[K.N_ATTR] = 0
        if self.done:
            return a
        read = ctypes.c_uint64(0)
        rc = self.lib.OTF2_Reader_ReadLocalEvents(self.handle, self.evt, int(a[K.CAP_EV]),
                                                  ctypes.byref(read))
        if rc not in (0, INTERRUPTED):
            raise OSError(self._message(rc))
        # fewer records than asked for, uninterrupted: the last ones (reading on past the
        # end of the file is an error of the library's)
        self.done = rc == 0 and read.value < int(a[K.CAP_EV])
        return a

    def close(self) -> None:
        if self.handle:
            if self.evt:
                self.lib.OTF2_Reader_CloseEvtReader(self.handle, self.evt)
                self.lib.OTF2_Reader_CloseEvtFiles(self.handle)
            if self.callbacks:
                self.lib.OTF2_EvtReaderCallbacks_Delete(self.callbacks)
            self.lib.OTF2_Reader_Close(self.handle)
            self.handle = None

"""The bundled libotf2: found through the ``otf2`` package, opened once per process, its
error messages routed into a buffer (read back into the one error line a user sees).

Event archives are opened with plain ctypes (a handful of calls per run); the
event writers are then called from numba (events.py), which links them by
symbol name once ``load()`` has made the library's symbols global.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from ...errors import UsageError

FILEMODE_WRITE = 0
SUBSTRATE_POSIX = 1
COMPRESSION_NONE = 1
# OTF2's smallest event chunk: the library keeps one chunk per open location writer
EVENT_CHUNK = 256 * 1024
DEF_CHUNK = 4 << 20


@functools.cache
def load():
    """(the ``_otf2`` bindings, a ctypes handle on the library); one clear line if the
    ``otf2`` package is missing."""
    try:
        import _otf2
        from _otf2.Config import lib_path
    except ImportError:
        raise UsageError("OTF2 output needs the otf2 package (pip install 'partrace[otf2]', "
                         "or pip install otf2)") from None
    import llvmlite.binding as llvm
    path = lib_path()
    llvm.load_library_permanently(path)     # numba's compiled loops link OTF2_EvtWriter_* by name
    lib = ctypes.CDLL(path)
    p, u8, u64 = ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint64
    lib.OTF2_Archive_Open.restype = p
    lib.OTF2_Archive_Open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, u8, u64, u64, u8, u8]
    for name in ("OTF2_Archive_SetSerialCollectiveCallbacks", "OTF2_Archive_OpenEvtFiles",
                 "OTF2_Archive_CloseEvtFiles", "OTF2_Archive_OpenDefFiles",
                 "OTF2_Archive_CloseDefFiles", "OTF2_Archive_Close"):
        getattr(lib, name).argtypes = [p]
    lib.OTF2_Archive_SetFlushCallbacks.argtypes = [p, p, p]
    lib.OTF2_Archive_GetEvtWriter.restype = p
    lib.OTF2_Archive_GetEvtWriter.argtypes = [p, u64]
    lib.OTF2_Archive_CloseEvtWriter.argtypes = [p, p]
    lib.OTF2_Archive_GetDefWriter.restype = p
    lib.OTF2_Archive_GetDefWriter.argtypes = [p, u64]
    lib.OTF2_Archive_CloseDefWriter.argtypes = [p, p]
    # the anchor file's trace id is random unless set (see definitions.write_global)
    lib.otf2_archive_set_trace_id.argtypes = [p, u64]
    lib.OTF2_Error_GetName.restype = ctypes.c_char_p
    lib.OTF2_Error_GetName.argtypes = [ctypes.c_int]
    return _otf2, lib


def error_name(code: int) -> str:
    _, lib = load()
    name = lib.OTF2_Error_GetName(code)
    return name.decode() if name else f"error {code}"


# --- the library's error messages: into a buffer, read into the one error line ----------
MESSAGE_BYTES = 1024


_vsnprintf = None     # numba's vsnprintf, made with the callback (numba loads only then)


def _on_error(user, file, line, function, code, fmt, va):    # pragma: no cover - compiled
    if user != 0 and fmt != 0:
        _vsnprintf(user, 1024, fmt, va)
    return code


@functools.cache
def quiet_errors() -> np.ndarray:
    """Route the library's error messages into a buffer instead of stderr (a damaged archive
    is one TraceError line, the message in it): the buffer, read by ``last_error``."""
    global _vsnprintf
    from ...kernels.cacheload import cfunc
    from ...kernels.jit import import_numba
    types = import_numba().types        # as a kernel's make: the account's kernels phase
    _vsnprintf = types.ExternalFunction("vsnprintf", types.int32(types.uint64, types.uint64,
                                                                  types.uint64, types.uint64))
    buffer = np.zeros(MESSAGE_BYTES, np.uint8)
    # a module-level function, not a closure: numba's cache keys a closure's cells, so a
    # closure was compiled again (and cached anew) in every process
    on_error = cfunc(types.int32(types.uint64, types.uint64, types.uint64, types.uint64,
                                 types.int32, types.uint64, types.uint64), cache=True)(_on_error)

    _, lib = load()
    lib.OTF2_Error_RegisterCallback.restype = ctypes.c_void_p
    lib.OTF2_Error_RegisterCallback.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.OTF2_Error_RegisterCallback(on_error.address, buffer.ctypes.data)
    quiet_errors.keep = on_error
    return buffer


def last_error() -> str:
    """The library's last error message (then forgotten)."""
    buffer = quiet_errors()
    text = bytes(buffer[:np.argmin(buffer) if 0 in buffer else len(buffer)]).decode(
        "utf-8", "replace")
    buffer[:] = 0
    return text


class _FlushCallbacks(ctypes.Structure):
    _fields_ = [("pre_flush", ctypes.c_void_p), ("post_flush", ctypes.c_void_p)]


@functools.cache
def _pre_flush():
    """A C callback telling the library to write every full chunk to its file (no
    post-flush callback: the library would record a BufferFlush event for each)."""
    from ...kernels.cacheload import cfunc
    from ...kernels.jit import import_numba
    types = import_numba().types        # as a kernel's make: the account's kernels phase

    @cfunc(types.uint8(types.voidptr, types.uint8, types.uint64, types.voidptr, types.boolean),
           cache=True)
    def pre_flush(user, file_type, location, caller, final):
        return 1        # OTF2_FLUSH
    return pre_flush


class EventArchive:
    """An archive of event files (``folder/events/<location>.evt``) and empty local
    definition files (``<location>.def``: readers open one per location), one per rank:
    its anchor file is thrown away, the global definitions are written by rank 0 alone."""

    NAME = "events"

    def __init__(self, folder):
        _, self.lib = load()
        # the library's messages (four "[OTF2] src/...: error:" lines per rank on a full
        # disk) go to a buffer, not stderr: _check folds the last into the one error line
        quiet_errors()
        self.folder = folder
        self.handle = self.lib.OTF2_Archive_Open(str(folder).encode(), self.NAME.encode(),
                                                 FILEMODE_WRITE, EVENT_CHUNK, DEF_CHUNK,
                                                 SUBSTRATE_POSIX, COMPRESSION_NONE)
        if not self.handle:
            raise OSError(f"{folder}: the OTF2 library could not open an archive there")
        self.callbacks = _FlushCallbacks(_pre_flush().address, None)
        self._check(self.lib.OTF2_Archive_SetFlushCallbacks(self.handle,
                                                            ctypes.byref(self.callbacks), None))
        self._check(self.lib.OTF2_Archive_SetSerialCollectiveCallbacks(self.handle))
        self._check(self.lib.OTF2_Archive_OpenEvtFiles(self.handle))
        self._check(self.lib.OTF2_Archive_OpenDefFiles(self.handle))
        self.writers: list[int] = []
        self.locations: list[int] = []

    def _check(self, code: int) -> None:
        if code:
            said = last_error()
            raise OSError(f"{self.folder}: OTF2 library: {error_name(code)}"
                          + (f" ({said.strip()})" if said.strip() else ""))

    def writer(self, location: int) -> int:
        w = self.lib.OTF2_Archive_GetEvtWriter(self.handle, location)
        if not w:
            raise OSError(f"{self.folder}: OTF2 library: no event writer for location {location}")
        self.writers.append(w)
        self.locations.append(location)
        return w

    def close(self) -> None:
        """Flush every writer's last chunk into its file and close the archive."""
        if not self.handle:
            return
        handle, self.handle = self.handle, None
        for w in self.writers:
            self._check(self.lib.OTF2_Archive_CloseEvtWriter(handle, w))
        self.writers = []
        self._check(self.lib.OTF2_Archive_CloseEvtFiles(handle))
        for location in self.locations:
            d = self.lib.OTF2_Archive_GetDefWriter(handle, location)
            if not d:
                raise OSError(f"{self.folder}: OTF2 library: no definition writer for "
                              f"location {location}")
            self._check(self.lib.OTF2_Archive_CloseDefWriter(handle, d))
        self._check(self.lib.OTF2_Archive_CloseDefFiles(handle))
        self._check(self.lib.OTF2_Archive_Close(handle))

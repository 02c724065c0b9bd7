"""Errors that reach the user as one clear line."""
from __future__ import annotations

import errno
import os
import re


class PartraceError(Exception):
    """Any error partrace reports to the user (exit status 2, no traceback)."""


class TraceError(PartraceError):
    """Bad input: names the file, where in it, and what was expected.

    ``where`` is free text such as ``"line 17"`` or ``"byte 4096"``; use the
    helpers :meth:`at_line` and :meth:`at_byte` to build it.
    """

    def __init__(self, path: str | os.PathLike, where: str | None, message: str):
        self.path = os.fspath(path)
        self.where = where
        self.message = message
        loc = f"{self.path}:{where}" if where else self.path
        super().__init__(f"{loc}: {message}")

    @classmethod
    def at_line(cls, path, line: int, message: str) -> "TraceError":
        return cls(path, f"line {line}", message)

    @classmethod
    def at_byte(cls, path, offset: int, message: str) -> "TraceError":
        return cls(path, f"byte {offset}", message)


class LimitError(PartraceError):
    """A value the trace holds does not fit partrace's columns (e.g. an id above 2**31-1)."""


class UsageError(PartraceError):
    """Bad command-line use: wrong options, output exists, unknown format."""


# How paths of unpublished output are shown, and which output is being written: set by
# output/staging.py when it is imported (errors is a base room: it imports nothing of
# partrace; a staging path can only appear in a message once staging is in use).
_shown_paths = None
_output_being_written = None


def register_output_paths(shown, being_written) -> None:
    """``shown(text)``: text with staging paths as the output paths they become;
    ``being_written()``: the output this process is writing, or None."""
    global _shown_paths, _output_being_written
    _shown_paths, _output_being_written = shown, being_written


def one_line(exc: BaseException) -> str:
    """The one line the user sees for ``exc``: the file it concerns, then what went wrong.

    OSErrors name their file (h5py's name it inside a long parenthesis); paths
    inside a hidden staging folder are shown as the output path they become.
    """
    if isinstance(exc, PartraceError):
        text = str(exc)
    elif isinstance(exc, OSError):
        text = _os_error_text(exc)
    elif isinstance(exc, RuntimeError) and _h5_os_error(exc) is not None:
        text = _os_error_text(_h5_os_error(exc))
    elif isinstance(exc, MemoryError):
        text = f"out of memory (MemoryError{': ' + str(exc) if str(exc) else ''}); " \
               f"try a smaller --memory or more ranks"
    else:
        text = f"internal error: {type(exc).__name__}: {_first_line(str(exc))}"
    text = _first_line(text)
    return _shown_paths(text) if _shown_paths is not None else text


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0] if lines else str(text).strip()


_H5_FILE = re.compile(r"""(?:file)?name = '([^']*)'""")
_H5_WHY = re.compile(r"""error message = '([^']*)'""")


_H5_ERRNO = re.compile(r"errno = (\d+)")


def _h5_os_error(exc: RuntimeError) -> OSError | None:
    """The system error inside an HDF5 failure h5py raises as RuntimeError (a flush that
    fails on a full disk: "... file write failed: ..., filename = '...', errno = 28,
    error message = 'No space left on device' ..."), as the OSError it is; else None."""
    text = str(exc)
    code, name, why = _H5_ERRNO.search(text), _H5_FILE.search(text), _H5_WHY.search(text)
    if not (code and name):
        return None
    number = int(code.group(1))
    return OSError(number, why.group(1) if why else os.strerror(number), name.group(1))


def _os_error_text(exc: OSError) -> str:
    """'<file>: <what>' for an OSError from Python, numpy or h5py."""
    text = str(exc)
    if exc.filename is not None and exc.strerror:
        where = os.fspath(exc.filename)
        if exc.filename2 is not None:
            where = f"{where} -> {os.fspath(exc.filename2)}"
        return f"{where}: {_lower_first(exc.strerror)}"
    name, why = _H5_FILE.search(text), _H5_WHY.search(text)
    if name:        # h5py: "Unable to ... (... filename = '...', ... error message = '...')"
        what = _lower_first(why.group(1)) if why else _first_line(text)
        return f"{name.group(1)}: {what}"
    if exc.errno in _WRITE_ERRNOS:     # only a write fails so: the output being written
        out = _output_being_written() if _output_being_written is not None else None
        if out is not None:
            return f"{out}: {_lower_first(exc.strerror or text)} (writing the output)"
    if exc.strerror:
        return _lower_first(exc.strerror)
    return f"{type(exc).__name__}: {_first_line(text)}"


_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


class WriteFailed(PartraceError):
    """Writing a file partrace makes failed (disk full, quota, I/O error): names the file."""

    @classmethod
    def of(cls, path, exc: OSError, doing: str = "") -> "WriteFailed":
        why = exc.strerror or _first_line(str(exc)) or type(exc).__name__
        if exc.errno is None and "requested and" in str(exc):    # numpy's short write
            why = "short write (" + str(exc) + "); is the device full?"
        return cls(f"{os.fspath(path)}: {_lower_first(why)}{' ' + doing if doing else ''}")

"""Errors that reach the user as one clear line."""
from __future__ import annotations

import os


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


class UsageError(PartraceError):
    """Bad command-line use: wrong options, output exists, unknown format."""

"""Text for people: strings that carry bytes which are not UTF-8 shown readably.

Readers keep such bytes losslessly as lone surrogates (``errors="surrogateescape"``:
U+DC80..U+DCFF for the bytes 0x80..0xFF, as Python does for file names).  Printed
as they are, they crash a strict UTF-8 stream; written raw, they show as garbage
in a UTF-8 terminal.  Shown here as ``\\xNN``: ``café`` written in Latin-1 prints
as ``caf\\xe9``.
"""
from __future__ import annotations

import codecs
import sys

READABLE = "partrace-readable"


def _escape(err: UnicodeError):
    if not isinstance(err, UnicodeEncodeError):
        raise err
    out = []
    for ch in err.object[err.start:err.end]:
        c = ord(ch)
        out.append(f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else
                   ch.encode("unicode_escape").decode("ascii"))
    return "".join(out), err.end


def register() -> None:
    """Make the error handler known (idempotent) and use it on stdout and stderr."""
    try:
        codecs.lookup_error(READABLE)
    except LookupError:
        codecs.register_error(READABLE, _escape)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors=READABLE)
            except (ValueError, OSError):     # a closed or unusual stream: leave it
                pass


def readable(text: str) -> str:
    """``text`` with non-UTF-8 bytes as \\xNN (for JSON and file output): the rule the
    outputs whose strings must be UTF-8 write names by (model.utf8_name)."""
    from .model import utf8_name
    return utf8_name(text)

"""How a damaged or unreadable partrace HDF5 input is said: one TraceError naming the file
and the object (HDF5's own errors folded into it), and the check a text column's read makes
of its row ends.  Below every module of the package that reads a file."""
from __future__ import annotations

import contextlib
import json
import re

import numpy as np

from ...errors import TraceError


def where(name: str) -> str:
    return f"object {name}"


@contextlib.contextmanager
def hdf5_errors(path, name: str):
    """HDF5's own errors while reading object ``name`` as one TraceError naming both."""
    try:
        yield
    except TraceError:
        raise
    except json.JSONDecodeError as exc:
        raise TraceError(path, where(name), f"holds no valid JSON: {exc}") from None
    except (OSError, RuntimeError, KeyError, ValueError, TypeError, AttributeError) as exc:
        raise TraceError(path, where(name), f"HDF5 cannot read it: {_first_line(exc)}") from None


def cannot_open(path, exc: BaseException, prefix: str = "") -> TraceError:
    """The TraceError for a file HDF5 cannot open: where it is cut short, when it is."""
    m = re.search(r"truncated file: eof = (\d+).*stored_eof = (\d+)", str(exc))
    if m:
        return TraceError.at_byte(path, int(m[1]), f"{prefix}HDF5 file cut short: its "
                                                   f"superblock says {m[2]} bytes")
    return TraceError(path, where("/"), f"{prefix}cannot open as HDF5: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def check_ends(path, g, ends: np.ndarray, lo: int, data_size: int) -> None:
    """Rows' text ends (``lo`` = where the first row's text starts) in order and inside data."""
    bad = (np.diff(ends, prepend=lo) < 0) | (ends > data_size)
    if bad.any():
        raise TraceError(path, where(f"{g.name}/ends"), f"text ends out of order or past the "
                                                        f"{data_size} bytes of data at row "
                                                        f"{int(np.argmax(bad))} of the read")

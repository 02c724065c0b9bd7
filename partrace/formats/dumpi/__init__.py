"""DUMPI (sst-dumpi binary MPI traces): one ``.bin`` per rank plus a ``.meta`` file
(a folder of rank files without their metafile is read too).

Light on purpose: sniffing reads names and 8 bytes; the function table and
numba kernel load in :mod:`.decode` when a unit is decoded.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..base import Format, TraceReader, check_options

MAGIC = bytes.fromhex("ffaadd44554d5049")
_RANK = re.compile(r"-(\d+)\.bin$")         # <fileprefix>-<rank>.bin


def _regular(path: Path) -> bool:
    """Never open a FIFO to sniff it (the read would block); the reader reports it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _has_magic(path: Path) -> bool:
    if not _regular(path):
        return path.suffix == ".bin"        # let the reader name what is wrong with it
    try:
        with open(path, "rb") as f:
            return f.read(8) == MAGIC
    except OSError:
        return False


class DUMPI(Format):
    name = "dumpi"
    description = "sst-dumpi binary MPI call traces (.meta + one .bin per rank)"

    @classmethod
    def sniff(cls, path: Path) -> bool:
        path = Path(path)
        if path.is_dir():
            if any(path.glob("*.meta")):
                return True
            # a folder of rank files published without their metafile
            rank = next((p for p in sorted(path.glob("*.bin")) if _RANK.search(p.name)), None)
            return rank is not None and _has_magic(rank)
        if path.suffix == ".meta":
            if not _regular(path):
                return True                 # the reader reports it as not a regular file
            with open(path, "rb") as f:
                head = f.read(4096)
            # a damaged metafile is still DUMPI's (its reader then names the line): empty,
            # or any of the keys sst-dumpi writes
            return not head.strip() or any(k in head for k in (b"fileprefix=", b"numprocs=",
                                                               b"hostname=", b"startime="))
        return path.suffix == ".bin" and _has_magic(path)

    @classmethod
    def open(cls, path: str | os.PathLike, **options) -> TraceReader:
        check_options(cls.name, options)
        from .reader import DumpiReader
        return DumpiReader(path)

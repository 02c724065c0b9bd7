"""Opening a partrace HDF5 file for reading, refusing one that would read as zeros.

HDF5 reads a virtual dataset whose source file is missing as its fill value
(zeros) without a word.  A ``layout="parts"`` output copied without its
``OUT.parts/`` folder would then look like a trace of zeros; opening it here
fails instead, naming the first missing part.
"""
from __future__ import annotations

import os
from pathlib import Path

from ...errors import TraceError
from .faults import cannot_open, hdf5_errors


def open_checked(path):
    """``h5py.File(path, "r")``, after checking every virtual dataset's sources and the
    layout the file claims (validate.py)."""
    import h5py

    from .validate import check_file    # h5py and the text columns: when a file is opened
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise cannot_open(path, exc) from None
    try:
        with hdf5_errors(path, "/"):
            f.partrace_parts = check_virtual_sources(f, Path(path))
        check_file(f, path)
    except BaseException:
        f.close()
        raise
    return f


def _candidates(name: str, here: Path) -> list[Path]:
    """Where HDF5 looks for a virtual source file named ``name`` (H5Pset_virtual_prefix)."""
    p = Path(name)
    if p.is_absolute():
        return [p]
    out = []
    prefix = os.environ.get("HDF5_VDS_PREFIX")
    if prefix:
        out.append(Path(prefix.replace("${ORIGIN}", str(here))) / p)
    return out + [here / p, p]


def check_virtual_sources(f, path: Path) -> list[Path]:
    """The files virtual datasets read from; TraceError naming the first virtual
    source file or dataset that is missing."""
    import h5py

    virtual = []
    f.visititems(lambda name, obj: virtual.append(obj)
                 if isinstance(obj, h5py.Dataset) and obj.is_virtual else None)
    if not virtual:
        return []
    here = Path(path).resolve().parent
    opened: dict[str, object] = {}
    found_files: list[Path] = []
    try:
        for ds in virtual:
            for src in ds.virtual_sources():
                if src.file_name == ".":
                    continue
                if src.file_name not in opened:
                    found = next((c for c in _candidates(src.file_name, here) if c.is_file()), None)
                    if found is None:
                        raise TraceError(here / src.file_name, None,
                                         f"missing: {ds.name} of {path} reads its rows from this "
                                         f"file (layout 'parts': keep the .parts folder beside "
                                         f"the file)")
                    found_files.append(found)
                    try:
                        opened[src.file_name] = h5py.File(found, "r")
                    except OSError as exc:
                        raise cannot_open(found, exc, f"part of {path}: ") from None
                part = opened[src.file_name]
                if src.dset_name not in part:
                    raise TraceError(part.filename, None, f"part of {path}: has no dataset "
                                                          f"{src.dset_name} (for {ds.name})")
    finally:
        for part in opened.values():
            part.close()
    return found_files

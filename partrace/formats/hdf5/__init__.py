"""partrace's own HDF5 output as an input (``convert out.h5 -o back.otf``).

The file says everything: tables and columns (``columns`` attributes), their
types and meanings (dataset attributes), and the definitions of the original
trace, including its lossless ``source`` form.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...model import (BYTES, STR, Column, Definitions, Schema, Table, with_legacy_measures,
                      with_legacy_refers)
from ..base import Format, TraceReader, Unit, check_options
from .files import open_checked
from .faults import cannot_open

MAGIC = b"\x89HDF\r\n\x1a\n"
ROWS_PER_UNIT = 1 << 20


class HDF5Reader(TraceReader):
    format_name = "hdf5"

    def _open(self):
        import h5py
        if getattr(self, "_checked", False):
            try:
                return h5py.File(self.path, "r")
            except OSError as exc:
                raise cannot_open(self.path, exc) from None
        f = open_checked(self.path)     # once per reader: virtual sources and layout checked
        self._checked, self._parts = True, f.partrace_parts
        return f

    def source_files(self) -> list[Path]:
        """The file and, for a layout "parts" file, the parts it reads from."""
        if not getattr(self, "_checked", False):
            self._open().close()
        return [self.path, *self._parts]

    def units(self) -> list[Unit]:
        from .faults import hdf5_errors
        out = []
        with self._open() as f:
            for name in json.loads(f.attrs["tables"]):
                with hdf5_errors(self.path, f"/{name}"):
                    group = f[name]
                    rows = int(group.attrs["rows"])
                    row_bytes = sum(_row_bytes(group[c], rows)
                                    for c in json.loads(group.attrs["columns"]))
                for start in range(0, rows, ROWS_PER_UNIT):
                    stop = min(rows, start + ROWS_PER_UNIT)
                    out.append(Unit(f"{name}:{start:015d}", (stop - start) * row_bytes,
                                    (name, start, stop)))
        return sorted(out, key=lambda u: u.key)

    def read_definitions(self, survey=None) -> Definitions:
        from .layout import read_table
        from .faults import hdf5_errors
        with self._open() as f, hdf5_errors(self.path, "/definitions"):
            d = f["definitions"]
            tables = {n: read_table(f[n]) for n in ("locations", "regions")}
            for n in d:
                if n != "source":
                    tables[n] = read_table(d[n])
            source = d["source"][()]
            source = json.loads(source.decode() if isinstance(source, bytes) else source)
            return Definitions(format=str(f.attrs["source_format"]), tables=tables,
                               attrs=json.loads(d.attrs["attrs"]), source=source)

    def schema(self, defs: Definitions) -> Schema:
        from .faults import hdf5_errors
        out: Schema = {}
        with self._open() as f:
            for name in json.loads(f.attrs["tables"]):
                cols = []
                for c in json.loads(f[name].attrs["columns"]):
                    with hdf5_errors(self.path, f"/{name}/{c}"):
                        cols.append(_stored_column(f[name][c], c))
                out[name] = cols
        if not any(c.refers for cols in out.values() for c in cols):
            out = with_legacy_refers(out)      # a file written before Column.refers (or with none)
        if all(c.measure for cols in out.values() for c in cols):
            out = with_legacy_measures(out)    # before Column.measure (or nothing but measures)
        return out

    def decode(self, unit: Unit, defs: Definitions):
        from .layout import read_column
        from .faults import hdf5_errors
        name, start, stop = unit.info
        with self._open() as f:
            group, out = f[name], {}
            for c in json.loads(group.attrs["columns"]):
                with hdf5_errors(self.path, f"/{name}/{c}"):
                    out[c] = read_column(group[c], start, stop)
            self._location_check(defs)(name, out["location"], start)
            yield {name: Table(out)}

    def _location_check(self, defs: Definitions):
        """Rows naming a location the file does not define are refused as they are read:
        every writer needs its locations (a sink would otherwise refuse it, or not)."""
        from .validate import LocationCheck
        check = getattr(self, "_locations", None)
        if check is None:
            check = self._locations = LocationCheck(self.path, defs.tables["locations"]["id"])
        return check


def _stored_column(ds, name: str) -> Column:
    """The model's Column of one stored column (a dataset or a text data/ends pair)."""
    import h5py

    from . import text      # h5py: only once an HDF5 file is read
    from .layout import read_enum
    if text.is_pair(ds):
        dtype = STR if ds.attrs.get("dtype") == STR else BYTES
    elif h5py.check_string_dtype(ds.dtype) is not None:
        dtype = STR
    elif h5py.check_vlen_dtype(ds.dtype) is not None:
        dtype = BYTES
    elif ds.ndim > 1:   # fixed-width sub-array column
        dtype = np.dtype((ds.dtype.str, ds.shape[1:]))
    else:
        dtype = np.dtype(ds.dtype.str)
    return Column(name, dtype, ds.attrs.get("description", ""), ds.attrs.get("unit"),
                  read_enum(ds), ds.attrs.get("refers"), bool(ds.attrs.get("measure", True)))


def _row_bytes(obj, rows: int) -> int:
    """Bytes per row of one column (a text pair: its end offset and average text)."""
    from . import text
    if text.is_pair(obj):
        return 8 + obj[text.DATA].shape[0] // max(1, rows)
    return obj.dtype.itemsize * int(np.prod(obj.shape[1:], dtype=np.int64))


class HDF5(Format):
    name = "hdf5"
    description = "partrace's own HDF5 output"

    @classmethod
    def sniff(cls, path: Path) -> bool:
        if not path.is_file():
            return False
        with open(path, "rb") as fh:
            if fh.read(8) != MAGIC:
                return False
        from .layout import is_partrace_file
        # an HDF5 file that HDF5 cannot open (cut short, its superblock damaged) is taken as
        # one: opening it says why, instead of "not a trace of any known format"
        return is_partrace_file(path) is not False

    @classmethod
    def open(cls, path, **options) -> HDF5Reader:
        check_options(cls.name, options)
        return HDF5Reader(path)

"""Damaged copies of partrace's own HDF5 output, read back as a trace (``info``, ``convert``).

The fixture is made by ``partrace merge`` of the ring8 OTF trace, once per test session,
in a temporary folder (an output file kept in the repository would go stale with each
layout change).  Damages are the two kinds an HDF5 input meets: edits made with h5py
that leave a valid HDF5 file claiming a layout it does not hold (a table's ``rows``
changed, a column deleted or stored with another dtype, text data cut short, a JSON
attribute broken, a location id the locations table lacks), and bytes of the file
flipped, zeroed or cut (HDF5's checksums and the deflate filter's adler32 see most of
them).  Every damage is ``rows="same"``: the file says how many rows it holds.
"""
from __future__ import annotations

import atexit
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FOLDER = "hdf5-ring8"
NAME = "ring8.h5"
_SOURCE = Path(__file__).resolve().parents[1] / "data" / "otf" / "ring8" / "trace" / "ring8.otf"
_made: dict[int, Path] = {}


def fixture_parent() -> Path:
    """The folder holding FOLDER/NAME, made by this process on first use (removed at exit)."""
    pid = os.getpid()
    if pid not in _made:
        parent = Path(tempfile.mkdtemp(prefix="partrace-fuzz-h5-"))
        atexit.register(lambda: os.getpid() == pid and shutil.rmtree(parent, True))
        (parent / FOLDER).mkdir()
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": str(root)}
        env.pop("PARTRACE_MPI", None)
        subprocess.run([sys.executable, "-m", "partrace", "merge", str(_SOURCE), "-o",
                        str(parent / FOLDER / NAME), "--progress", "none"], check=True,
                       env=env, cwd=root, capture_output=True)
        _made[pid] = parent
    return _made[pid]


# --- edits with h5py: the file stays valid HDF5, its layout claims are broken --------------

def _set_attr(f, obj, attr, value):
    f[obj].attrs[attr] = value


def _replace(f, path, values):
    attrs = dict(f[path].attrs)
    del f[path]
    f.create_dataset(path, data=values)
    for k, v in attrs.items():
        f[path].attrs[k] = v


def _retype(f, path, dtype):
    _replace(f, path, f[path][:].astype(dtype))


def _shorten(f, path, n):
    _replace(f, path, f[path][:-n])


def _set_value(f, path, row, value):
    values = f[path][:]
    values[row % len(values)] = value
    f[path][:] = values


def _delete(f, path):
    del f[path]


EDITS = {
    "h5-rows-huge": lambda f, p, a: _set_attr(f, p, "rows", 10**12),
    "h5-rows-small": lambda f, p, a: _set_attr(f, p, "rows", 3),
    "h5-rows-negative": lambda f, p, a: _set_attr(f, p, "rows", -1),
    "h5-rows-text": lambda f, p, a: _set_attr(f, p, "rows", "many"),
    "h5-columns-bad-json": lambda f, p, a: _set_attr(f, p, "columns", '["time", "loc'),
    "h5-columns-extra": lambda f, p, a: _set_attr(f, p, "columns", '["time", "location", '
                                                                   '"seq", "nothing"]'),
    "h5-defs-attrs-bad-json": lambda f, p, a: _set_attr(f, "definitions", "attrs", '{"x'),
    "h5-tables-bad-json": lambda f, p, a: _set_attr(f, "/", "tables", "[events"),
    "h5-column-deleted": lambda f, p, a: _delete(f, p),
    "h5-column-as-S8": lambda f, p, a: _retype(f, p, "S8"),
    "h5-column-as-float": lambda f, p, a: _retype(f, p, "f8"),
    "h5-column-short": lambda f, p, a: _shorten(f, p, 1),
    "h5-text-data-short": lambda f, p, a: _shorten(f, p, 3),
    "h5-text-ends-deleted": lambda f, p, a: _delete(f, p),
    "h5-text-ends-unordered": lambda f, p, a: _set_value(f, p, a, 1 << 40),
    "h5-location-unknown": lambda f, p, a: _set_value(f, p, a, 999),
    "h5-enum-ref-broken": lambda f, p, a: _delete(f, "types"),
}


def apply_edit(path: Path, label: str, obj: str, a: int) -> None:
    import h5py
    with h5py.File(path, "r+") as f:
        EDITS[label](f, obj, a)


def damages(fx, rng: random.Random, Damage) -> list:
    """The seeded damages of the HDF5 fixture (``Damage`` is damage.Damage)."""
    import h5py
    path = fixture_parent() / FOLDER / NAME
    raw = path.read_bytes()
    with h5py.File(path, "r") as f:
        tables = [t for t in ("events", "keyvalues", "markers", "text") if f[t].attrs["rows"]]
        columns = {t: list(f[t]) for t in tables}
        texts = [f"{t}/{c}" for t in tables for c in columns[t]
                 if isinstance(f[t][c], h5py.Group)]
        rows = {t: int(f[t].attrs["rows"]) for t in tables}

    def edit(label, obj="", a=0):
        return Damage(label, NAME, "h5edit", a, 0, obj.encode())

    out = []
    for label in ("h5-rows-huge", "h5-rows-small", "h5-rows-negative", "h5-rows-text",
                  "h5-columns-bad-json", "h5-columns-extra"):
        out.append(edit(label, rng.choice(["events", *tables])))
    out.append(edit("h5-defs-attrs-bad-json"))
    out.append(edit("h5-tables-bad-json"))
    for label in ("h5-column-deleted", "h5-column-as-S8", "h5-column-as-float",
                  "h5-column-short"):
        out.append(edit(label, "events/time"))
        out.append(edit(label, "events/location"))
        t = rng.choice(tables)
        plain = [c for c in columns[t] if f"{t}/{c}" not in texts]
        out.append(edit(label, f"{t}/{rng.choice(plain)}"))
    for t in texts:
        out.append(edit("h5-text-data-short", f"{t}/data"))
        out.append(edit("h5-text-ends-deleted", f"{t}/ends"))
        out.append(edit("h5-text-ends-unordered", f"{t}/ends",
                        rng.randrange(rows[t.split("/")[0]])))
    for t in tables:
        out.append(edit("h5-location-unknown", f"{t}/location", rng.randrange(rows[t])))
    out.append(edit("h5-enum-ref-broken"))
    for _ in range(24):
        out.append(Damage("flip", NAME, "flip", rng.randrange(len(raw)), rng.randrange(8)))
    for _ in range(6):
        at = rng.randrange(len(raw) // 4096 + 1) * 4096
        out.append(Damage("zero-4k", NAME, "splice", at, 4096, bytes(min(4096, len(raw) - at))))
    out.append(Damage("truncate", NAME, "truncate", rng.randrange(len(raw))))
    out.append(Damage("append-garbage", NAME, "append", data=rng.randbytes(64)))
    return out

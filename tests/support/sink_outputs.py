"""What the tests of the part-file outputs (Perfetto, Chrome JSON) share: the HDF5 merge
they are checked against, the output written by the CLI at 1 and 3 ranks, and the sink fed
a decoded trace in windows."""
from __future__ import annotations

import json

import h5py
import numpy as np

from partrace.formats.hdf5.layout import read_table
from tests.conftest import run_cli


class Merged(dict):
    """The HDF5 merge's tables, and where the merge is."""
    path = None


def read_merge(path, definitions: tuple[str, ...] = ()) -> Merged:
    """The merge's tables, locations and regions, and those ``definitions`` tables it has."""
    with h5py.File(path, "r") as f:
        tables = Merged({n: read_table(f[n]) for n in json.loads(f.attrs["tables"])
                         + ["locations", "regions"]})
        for name in definitions:
            if name in f["definitions"]:
                tables[name] = read_table(f["definitions"][name])
    tables.path = path
    return tables


def merged_outputs(trace, tmp, suffix: str, on_3_ranks: bool, definitions=()):
    """(the HDF5 merge of ``trace``, [its output at 1 rank, and at 3 where asked])."""
    h5 = tmp / "m.h5"
    r = run_cli(["merge", str(trace), "-o", str(h5), "-q"])
    assert r.returncode == 0, r.stderr
    outs = []
    for n in (None, 3) if on_3_ranks else (None,):
        out = tmp / f"m{n}{suffix}"
        r = run_cli(["merge", str(trace), "-o", str(out), "-q"], nranks=n, timeout=600)
        assert r.returncode == 0, r.stderr
        outs.append(out)
    return read_merge(h5, definitions), outs


def decoded(path):
    """(definitions, schema, tables) of the trace at ``path``, merged in memory."""
    from partrace.engine.mpi import serial
    from partrace.engine.pipeline import run
    from partrace.output.memory import MemorySink
    sink = MemorySink()
    run(serial(), path, sink)
    return sink.defs, sink.schema, sink.tables


def write_windows(sink_class, defs, schema, tables, out, windows: int) -> bytes:
    """Write through ``sink_class``, each table cut into `windows` windows of its key order."""
    from partrace.engine.mpi import serial
    comm, sink = serial(), sink_class(out)
    out.parent.mkdir()
    sink.prepare(comm, defs, schema)
    cuts = {name: (np.arange(windows + 1) * len(t)) // windows for name, t in tables.items()}
    for w in range(windows):
        sink.write(comm, {name: t.rows(int(c[w]), int(c[w + 1])) for (name, t), c in
                          zip(tables.items(), cuts.values())})
    sink.commit(comm)
    return out.read_bytes()

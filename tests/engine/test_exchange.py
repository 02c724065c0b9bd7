"""Windows exchanged between ranks in the runs' narrow forms: every column of every
window, on 2 and 3 ranks, equals the one-rank merge of the same real fixture (time windows;
rows sent to the rank their location names, as spans or row by row)."""
import pickle
import subprocess
import sys

import numpy as np
import pytest

from partrace.engine.exchange import layout_of, leaves, pack, rebuilt
from partrace.engine.mpi import serial
from partrace.engine.pipeline import decode_share, open_on_all_ranks, read_plan, RunStats
from partrace.engine.progress import Progress
from partrace.engine.runs import RunStore
from tests.conftest import DATA, ROOT, mpiexec
from tests.support.collect_windows import collect

FIXTURES = [
    DATA / "ovni" / "v3-mpisim-small" / "ovni",
    DATA / "dumpi" / "p2p-4rank" / "p2p4-2026.11.22.05.47.08.meta",
    DATA / "ross" / "pi-np2-opt-evtrace-full-model-gvt" / "stats",
    DATA / "otf" / "ring8" / "trace" / "ring8.otf",
]
IN_MEMORY = 4 << 30     # every run stays in memory, one window
TINY = 64 << 10         # every run spilled, several windows


def _store(trace, memory, spill_dir) -> RunStore:
    """The sorted runs one rank holds after decoding the whole trace."""
    comm = serial()
    reader = open_on_all_ranks(comm, trace, None)
    _, mine, defs = read_plan(comm, reader)
    schema = reader.schema(defs)
    store = RunStore(schema, memory, spill_dir, keep_fraction=0.4)
    decode_share(comm, reader, mine, defs, schema, Progress(comm, enabled=False), RunStats(),
                 store)
    return store


def _same(a: np.ndarray, b: np.ndarray, what) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape, what
    if a.dtype == object:
        assert list(a) == list(b), what
    else:
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), what


def _same_scalar(again, form, what) -> None:
    """A Constant's value and an Offsets' base come back of the same type and dtype."""
    fields = {"Constant": "value", "Offsets": "base"}
    field = fields.get(type(form).__name__)
    if field is not None:
        a, b = getattr(again, field), getattr(form, field)
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape, what
        assert np.array_equal(a, b), what


@pytest.mark.parametrize("memory", [IN_MEMORY, TINY], ids=["in-memory", "spilled"])
@pytest.mark.parametrize("trace", FIXTURES, ids=["ovni", "dumpi", "ross", "otf"])
def test_forms_rebuilt_from_their_bytes_equal_the_runs(trace, memory, tmp_path):
    store = _store(trace, memory, tmp_path)
    kinds = set()
    try:
        for name, runs in store.runs.items():
            for col in store.schema[name]:
                if col.is_object:
                    continue
                # a few spans of every run, sent to two ranks, rebuilt as the receiver does
                spans = [(run, a, min(run.n, a + 7)) for run in runs for a in (0, run.n // 2)]
                forms = [run.piece(col.name, a, b) for run, a, b in spans]
                # as the receiver gets them: through pickle, as the ranks' alltoall sends them
                layouts = [pickle.loads(pickle.dumps(layout_of(f))) for f in forms]
                buf, counts = pack([forms[::2], forms[1::2]])
                assert counts.sum() == len(buf) and len(buf) % 8 == 0
                at = 0
                for form, layout in zip(forms[::2] + forms[1::2], layouts[::2] + layouts[1::2]):
                    again, at = rebuilt(layout, len(form), buf, at)
                    kinds.add(type(form).__name__)
                    assert type(again) is type(form)
                    _same_scalar(again, form, (name, col.name))
                    _same(again[0:len(again)], form[0:len(form)], (name, col.name))
                    assert all(leaf.ctypes.data % 8 == 0 for leaf in leaves(again))
                assert at == len(buf)
    finally:
        store.close()
    assert {"Offsets", "Constant", "ndarray"} <= kinds, kinds


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    """trace -> (its windows' rows, stats) of the one-rank merge in memory, made once for the
    tests that compare each parallel merge with it."""
    done = {}

    def get(trace):
        if trace not in done:
            done[trace] = collect(serial(), trace, IN_MEMORY, tmp_path_factory.mktemp("one"))
        return done[trace]
    return get


def _windows_on(nranks: int, trace, memory: int, folder, mode: str = "time") -> list[dict]:
    """Every window's rows of every rank, in the global order (window by window, rank by rank)."""
    folder.mkdir()
    cmd = [mpiexec(), "-n", str(nranks), sys.executable, "-m", "tests.support.collect_windows",
           str(trace), str(folder), str(memory), mode]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    ranks = [np.load(folder / f"rank{r}.npz", allow_pickle=True) for r in range(nranks)]
    assert len({int(z["windows"]) for z in ranks}) == 1
    if memory == TINY:
        assert sum(int(z["spilled"]) for z in ranks) > 0
    out = []
    for w in range(int(ranks[0]["windows"])):
        for z in ranks:
            rows = {}
            for key in z.files:
                if key.startswith(f"{w}/"):
                    name, col = key[len(f"{w}/"):].rsplit("/", 1)
                    rows.setdefault(name, {})[col] = z[key]
            out.append(rows)
    return out


def _concatenated(windows: list[dict]) -> dict:
    tables = {}
    for rows in windows:
        for name, cols in rows.items():
            for col, values in cols.items():
                tables.setdefault(name, {}).setdefault(col, []).append(values)
    return {name: {col: np.concatenate(parts) for col, parts in cols.items()}
            for name, cols in tables.items()}


@pytest.mark.mpi
@pytest.mark.parametrize("nranks,memory", [(2, IN_MEMORY), (2, TINY), (3, TINY)],
                         ids=["2-in-memory", "2-spilled", "3-spilled"])
@pytest.mark.parametrize("trace", FIXTURES, ids=["ovni", "dumpi", "ross", "otf"])
def test_every_column_of_a_parallel_merge_equals_the_one_rank_merge(trace, nranks, memory,
                                                                   tmp_path, one_rank):
    one, stats = one_rank(trace)
    assert stats.windows == 1
    want = _concatenated(one)
    got = _concatenated(_windows_on(nranks, trace, memory, tmp_path / "ranks"))
    assert list(got) == list(want)
    assert sum(len(cols["time"]) for cols in want.values()) > 0
    for name, cols in want.items():
        assert list(got[name]) == list(cols), name
        for col, values in cols.items():
            _same(got[name][col], values, (name, col))


@pytest.mark.mpi
@pytest.mark.parametrize("nranks,memory", [(2, IN_MEMORY), (3, TINY)],
                         ids=["2-in-memory", "3-spilled"])
@pytest.mark.parametrize("trace", FIXTURES, ids=["ovni", "dumpi", "ross", "otf"])
def test_rows_sent_to_their_location_rank_equal_the_one_rank_merge(trace, nranks, memory,
                                                                   tmp_path, one_rank):
    """Destination mode: rank r's windows, end to end, are the one-rank merge's rows of the
    locations location % nranks == r, every column, in key order."""
    one, _ = one_rank(trace)
    want = _concatenated(one)
    windows = _windows_on(nranks, trace, memory, tmp_path / "ranks", "destination")
    for r in range(nranks):
        got = _concatenated(windows[r::nranks])
        for name, cols in want.items():
            mine = np.flatnonzero(np.asarray(cols["location"], np.int64) % nranks == r)
            for col, values in cols.items():
                _same(got[name][col] if name in got else values[:0], values[mine],
                      (r, name, col))

"""The figures of scripts/bench_scaling.py: efficiencies from per-rank accounts, and a model
of large rank counts fitted to them.

A run's account (``--stats FILE.json``, docs/accounts.md) gives every rank's CPU busy time,
bytes and messages per phase.  On an oversubscribed node the wall time means nothing but the
busy time still counts each rank's own work, so

    E(P) = busy(1) / (P x max over ranks of busy(P))

is the efficiency the run would have on P idle cores with a free network.  The model adds
what that leaves out, from stated rates: the network (bytes and messages of the busiest
rank), the file system's metadata server (every rank's imports and opened files), and the
serial HDF5 join: rank 0 places every other rank's chunks in the one file (a call per
chunk, its CPU per dataset and per chunk from the account; a longer table's chunks hold
more rows, as the HDF5 sink's rule says), a window's during the next one, for which it
takes fewer rows, the last window's at commit (:func:`placing_cost`), and each rank
fills in what it kept in its part
(its share of those bytes read and written at one client's rates; the owned chunks it
wrote into the file after each window are not copied again).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from partrace.engine.rank0_share import GIVE
from partrace.formats.hdf5.layout import grown_chunk_rows

PHASES = ["start-up", "kernels", "plan", "decode", "cuts", "exchange", "merge", "write",
          "commit"]
# the phases whose work is the input's rows, which a larger input grows (the model's
# ``grow``); start-up, the kernels (loaded or compiled once a process, whichever phase
# needs them), the plan (the files' listing), the cuts (samples per piece) and the commit
# (the HDF5 join is rows of its own) do not grow with the input's bytes
ROW_PHASES = {"decode", "exchange", "merge", "write"}
# the phases a window repeats: their messages are O(P) a window (a collective per table),
# whatever its rows, and the windows' count goes as the input over P x a window's bytes
WINDOW_PHASES = {"exchange", "merge", "write"}


def phase_field(stats: dict, phase: str, field: str) -> np.ndarray:
    """One field of one phase on every rank (0 where a rank has no such phase)."""
    return np.array([r["phases"].get(phase, {}).get(field, 0) for r in stats["ranks"]], float)


def rank_field(stats: dict, field: str) -> np.ndarray:
    return np.array([r[field] for r in stats["ranks"]], float)


def busy(stats: dict, phase: str | None) -> np.ndarray:
    """Every rank's busy seconds in ``phase`` (None: the whole run)."""
    return rank_field(stats, "busy_s") if phase is None else phase_field(stats, phase, "busy_s")


def row_work(stats: dict, phase: str) -> np.ndarray:
    """Every rank's busy seconds in ``phase`` less the HDF5 join's placing that rank 0
    does after each window (in ``write``): the model has that as a step of its own."""
    b = busy(stats, phase)
    if phase == "write" and len(b):
        b[0] -= stats["ranks"][0].get("output", {}).get("window_place_seconds", 0.0)
    return b


def filled_share(stats: dict) -> float:
    """Of the chunks' bytes the ranks r > 0 put in the one HDF5 file, the share filled in
    from their parts at commit (the rest they wrote straight in after each window):
    what the join's copying step carries.  1 for an account that does not say."""
    outs = [r.get("output", {}) for r in stats["ranks"][1:]]
    filled = sum(o.get("filled_bytes", 0) for o in outs)
    direct = sum(o.get("direct_bytes", 0) for o in outs)
    if not any("direct_bytes" in o for o in outs) or not filled + direct:
        return 1.0
    return filled / (filled + direct)


def efficiency(one: dict, many: dict, phase: str | None) -> float:
    p = len(many["ranks"])
    top = busy(many, phase).max()
    return float(busy(one, phase).sum() / (p * top)) if top > 0 else float("nan")


def excess(stats: dict, phase: str | None) -> float:
    """The busiest rank's busy time over the mean, minus 1."""
    b = busy(stats, phase)
    return float(b.max() / b.mean() - 1) if b.mean() > 0 else 0.0


def busiest(stats: dict) -> tuple[int, float, float]:
    """(the busiest rank over the whole run, its busy time over the mean minus 1, rank 0's
    over the mean minus 1): whether the busiest is rank 0, whose chores are everyone's."""
    b = busy(stats, None)
    if not len(b) or b.mean() <= 0:
        return 0, 0.0, 0.0
    # the accounts list the ranks in order
    return int(b.argmax()), excess(stats, None), float(b[0] / b.mean() - 1)


def traffic(stats: dict, phase: str | None) -> tuple[float, float]:
    """Bytes and messages (sent plus received) of the rank that moves the most."""
    def field(name):
        return rank_field(stats, name) if phase is None else phase_field(stats, phase, name)
    nbytes = field("sent_bytes") + field("recv_bytes")
    msgs = field("sent_messages") + field("recv_messages")
    return float(nbytes.max()), float(msgs.max())


def fit(ps, values) -> np.ndarray:
    """Non-negative a, b, c of  a/P + b + c P  through the measured points (least squares,
    relative: small P and large P weigh alike).  The growth term c needs at least four rank
    counts: fitted to fewer, it would turn noise into a cost growing with P."""
    ps = np.asarray(ps, float)
    points = len(set(ps.tolist()))
    free = [0, 1, 2] if points >= 4 else [0, 1] if points >= 2 else [1]
    return _non_negative(np.stack([1 / ps, np.ones_like(ps), ps], axis=1), values, free)


def _non_negative(basis: np.ndarray, values, free: list[int]) -> np.ndarray:
    """The coefficients of ``basis``' columns ``free`` (the others 0) through ``values``,
    by least squares relative to each value, the most negative term dropped until all are
    >= 0 (a tiny NNLS: a few terms)."""
    values = np.asarray(values, float)
    scale = np.maximum(values, 1e-9)
    a, y = basis / scale[:, None], values / scale
    free = list(free)
    while True:
        coef = np.zeros(basis.shape[1])
        coef[free] = np.linalg.lstsq(a[:, free], y, rcond=None)[0]
        if (coef >= 0).all() or len(free) == 1:
            return np.maximum(coef, 0)
        free.remove(min(free, key=lambda i: coef[i]))


def at(coef, p: float) -> float:
    return float(coef[0] / p + coef[1] + coef[2] * p)


def windows(stats: dict) -> int:
    """The run's window count (every rank walks the same windows)."""
    return max((len(r.get("windows", ())) for r in stats["ranks"]), default=0)


def windows_at_one(runs: dict[int, dict]) -> float:
    """The input's decoded bytes over one window's, from the measured window counts:
    W(P) = ceil(x / P) puts x in ((W - 1) P, W P] at every P; the middle of what all
    the runs leave open."""
    lo, hi = 0.0, float("inf")
    for p, stats in runs.items():
        w = windows(stats)
        if w:
            lo, hi = max(lo, (w - 1) * p), min(hi, w * p)
    return 1.0 if hi == float("inf") else (lo + hi) / 2


def fit_per_window(ps, values, counts) -> tuple[float, float]:
    """Non-negative b, c of  W(P) (b + c (P - 1))  through the measured points: what each
    window sends (``counts``: W at each P), a collective per table reaching P - 1 peers.
    (Not fit's a/P + b + c P: P - 1 peers would need a negative b.)"""
    ps = np.asarray(ps, float)
    per = np.asarray(values, float) / np.maximum(np.asarray(counts, float), 1)
    b, c = _non_negative(np.stack([np.ones_like(ps), ps - 1], axis=1), per, [0, 1])
    return float(b), float(c)


def listed(listing: tuple[float, float] | None, p: int) -> float:
    """Seconds the busiest of P ranks lists, of a listing in parts that reads the files'
    bytes in P stretches (ROSS's hop, each rank from a guessed record start): a P-th of
    the listing of all files on one rank (``listing[0]``; ``listing[1]``, the busiest of 8
    parts measured, shows that it divides)."""
    return 0.0 if listing is None else listing[0] / max(p, 1)


@dataclass
class Rates:
    """The site's figures the model needs (bench_scaling.py's options)."""

    net_bytes_s: float          # one rank's share of the network, each direction
    net_latency_s: float        # one message's cost
    fs_read_s: float            # what one client (a rank's node) reads from the file system
    fs_write_s: float           # ... and writes to it
    fs_opens_s: float           # metadata operations per second, the whole file system
    modules: int                # files each rank opens to import partrace's modules


JOIN_PLACE = "HDF5 join: rank 0 places the chunks"


def placing_cost(seconds: float, p: int, windows: int, window_work: float) -> float:
    """What rank 0's placing of ``seconds`` adds to the busiest rank at ``p`` ranks and
    ``windows`` windows, each rank's window phases taking ``window_work`` seconds.  A
    window's chunks are placed during the next one, in the step where the other ranks
    write theirs, for which rank 0 gives up rows (engine/rank0_share.py): in the second
    window (the first window's chunks) as many as its guess gives, ``GIVE`` of a piece to
    each other rank, so the busiest adds what the placing exceeds that by, or another
    rank its extra rows; from the third window on as the windows before measured, spread
    over the ranks, a P-th each, as long as rank 0 has rows to give up (past that rank 0,
    with no rows, is the slowest, by what its placing exceeds another rank's rows).  The
    last window's, at commit, add in full, and with one window all of it does."""
    if windows <= 1:
        return seconds
    per = seconds / windows
    guessed = min(1.0, GIVE * (p - 1)) * window_work
    second = max(per - guessed, guessed / max(p - 1, 1))
    spread = seconds - 2 * per
    return per + second + max(spread / p, spread - window_work)


JOIN_FILL = "HDF5 join: each rank fills its own"


def join_cost(stats: dict, grow: float = 1.0,
              others: list[dict] = ()) -> tuple[float, float, float]:
    """A serial HDF5 join's placing on rank 0, from its account's ``output``: (CPU seconds
    of the datasets, the first chunk of each placed with the dataset's look-up; CPU seconds
    per further chunk; chunks per byte placed in an output ``grow`` times as long).  Zeros
    where it placed none.  ``others``: accounts of runs at other rank counts; the CPU per
    chunk is the median over all of them (a run places a few thousand chunks in tens of
    milliseconds: one such figure is noisy).

    The chunks of a table's numbers grow with its rows as the sink's rule says
    (``grown_chunk_rows``, where the run's chunk rows were the rule's: not where
    PARTRACE_H5_CHUNK_ROWS chose them), so a longer output has fewer chunks a byte; the
    other chunks (text columns' bytes) keep theirs."""
    said = stats["ranks"][0].get("output", {})
    chunks = said.get("placed_chunks", 0)
    if not chunks:
        return 0.0, 0.0, 0.0
    first = said.get("first_place_seconds", 0.0)
    known = [c for c in map(_per_chunk, [stats, *others]) if c is not None]
    per_chunk = float(np.median(known)) if known else 0.0
    grown = float(chunks)
    for rows, step, placed in said.get("tables", {}).values():
        if rows and step == grown_chunk_rows(rows):
            grown -= placed * (1 - step / grown_chunk_rows(int(rows * grow)))
    return first, per_chunk, grown / max(said.get("placed_bytes", 0), 1)


def _per_chunk(stats: dict) -> float | None:
    """Rank 0's CPU seconds per placed chunk after each dataset's first (None: it placed
    no further chunk)."""
    said = stats["ranks"][0].get("output", {})
    chunks, datasets = said.get("placed_chunks", 0), said.get("placed_datasets", 0)
    if chunks <= datasets:
        return None
    rest = max(said.get("place_seconds", 0.0) - said.get("first_place_seconds", 0.0), 0.0)
    return rest / (chunks - datasets)


def model(runs: dict[int, dict], output_bytes: int, join: tuple[float, float, float] | None,
          rates: Rates,
          targets: list[int], grow: float = 1.0,
          listing: tuple[float, float] | None = None,
          filled: float = 1.0) -> list[tuple[str, list[float]]]:
    """Modelled seconds per phase at each P in ``targets``: the busiest rank's busy time
    fitted over the measured P, plus its network time, plus the serial file-system steps.
    ``join``: the HDF5 single layout's join, rank 0's cost of placing the chunks
    (:func:`join_cost`; the datasets do not grow with the input, the chunks do); None:
    no join.  ``filled``: the share of the other ranks' chunk bytes copied in from their
    parts at commit (:func:`filled_share`); the rest they wrote into the file once.

    ``grow``: the modelled input over the measured one.  In the phases that work on rows
    (ROW_PHASES) the work that divides over the ranks (the a/P terms of busy time and
    bytes) grows with the input; their fixed and growing terms, and the other phases, do
    not.  Messages: a phase a window repeats (WINDOW_PHASES) sends O(P) of them a window,
    fitted per window as b + c (P - 1), times the modelled run's windows, ceil(x grow / P) (x:
    the measured input's decoded bytes over a window's, windows_at_one); the others' do not
    grow.  The output grows with it.

    ``listing``: (all files on one rank, the busiest of 8 parts) seconds of a listing in parts
    that reads the files' bytes (ROSS: a record's length is only in its own header, so the
    files are hopped, each rank a stretch), measured on the measured input.  The plan then
    grows by what the busiest rank lists, times grow - 1: a P-th of all of it."""
    ps = sorted(runs)
    per_window = windows_at_one(runs) * grow
    rows = []
    for phase in PHASES:
        g = grow if phase in ROW_PHASES else 1.0
        work = np.array([g, 1.0, 1.0])
        cpu = fit(ps, [row_work(runs[p], phase).max() for p in ps]) * work
        if len(ps) > 1:     # P = 1 moves nothing: fit the traffic over the parallel runs
            par = [p for p in ps if p > 1]
            nbytes = fit(par, [traffic(runs[p], phase)[0] for p in par]) * work
            sent = [traffic(runs[p], phase)[1] for p in par]
            if phase in WINDOW_PHASES:
                b, c = fit_per_window(par, sent, [windows(runs[p]) for p in par])
                msgs = [max(1, math.ceil(per_window / p)) * (b + c * (p - 1))
                        for p in targets]
            else:
                msgs = [at(fit(par, sent), p) for p in targets]
        else:
            nbytes, msgs = np.zeros(3), [0.0] * len(targets)
        rows.append((phase, [at(cpu, p) + (at(nbytes, p) / 2 / rates.net_bytes_s
                                           + m * rates.net_latency_s)
                             + (listed(listing, p) * (grow - 1) if phase == "plan" else 0.0)
                             for p, m in zip(targets, msgs)]))
    # every rank opens its modules, the files it opens itself at start-up and in the plan,
    # and numba's cache files of the kernels it loads; the metadata server serves them all
    opened = max(sum(phase_field(runs[ps[-1]], phase, "files_opened").max()
                     for phase in ("start-up", "kernels", "plan")), 0)
    rows.append(("metadata (all ranks' opens)",
                 [p * (rates.modules + opened) / rates.fs_opens_s for p in targets]))
    if join is not None:
        out = output_bytes * grow
        datasets_s, per_chunk, chunks_per_byte = join
        window_work = [sum(values[i] for phase, values in rows if phase in WINDOW_PHASES)
                       for i in range(len(targets))]
        rows.append((JOIN_PLACE, [
            placing_cost(datasets_s + out * chunks_per_byte * (p - 1) / p * per_chunk, p,
                         max(1, math.ceil(per_window / p)), work) if p > 1 else 0.0
            for p, work in zip(targets, window_work)]))
        rows.append((JOIN_FILL, [filled * out / p * (1 / rates.fs_read_s + 1 / rates.fs_write_s)
                                 if p > 1 else 0.0 for p in targets]))
    rows.append(("total", [sum(r[1][i] for r in rows) for i in range(len(targets))]))
    return rows

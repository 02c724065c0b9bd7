"""``partrace warm``: compile every numba kernel once, before a job needs it.

The first run after an install (or after a kernel's source changed) compiles
the kernels it uses; numba keeps them in its cache (``__pycache__`` beside
each module, or ``$XDG_CACHE_HOME/partrace/numba`` when the package folder is
read-only: see ``partrace/__init__.py``) and later runs only load them.
``warm`` runs every command (info, clocks, merge to every output, profile, comm,
dump, timeline) on small sample traces of each format (every input, partrace's HDF5
and OTF2 included), in one process, so every kernel those paths use is
compiled, and says where the cache is.

A parallel run of 8 ranks or more whose cache is cold for its input's format
lets rank 0 do this while the other ranks wait (:func:`before_parallel_run`):
one compilation instead of one per rank, all writing the same cache files.  A
stamp in the cache folder (a hash of the kernels' sources and the numba,
Python and CPU versions) says which formats were warmed; beside it, a hash of every
module's size and time, so that a run that finds no module changed need not read them
all to find those with kernels.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path

# hashlib, platform and tempfile are imported where used: every command imports this
# module (its SAMPLES name the choices of --format), few ever warm

PACKAGE = Path(__file__).resolve().parent

# format -> small sample traces under partrace/samples/, package data of the wheel (in a
# source checkout, links into tests/data, where the tests read the same traces)
SAMPLES = {
    "otf": ["otf/ring8/ring8.otf", "otf/real-zlib/ring8_z.otf", "otf/real-long/ring8_long.otf"],
    "dumpi": ["dumpi/p2p-4rank", "dumpi/coll-4rank"],
    "ovni": ["ovni/v1-zoo-small", "ovni/v3-mpisim-small"],
    "ross": ["ross/pi-np1-seq-allmodes", "ross/phold-np2-opt-gvt-pekplp"],
    "otf2": ["otf2/mpi3/traces.otf2", "otf2/threads2/traces.otf2"],
}
HDF5_FROM = "otf"       # partrace HDF5 input: made from the OTF samples by the merge
STAMP = "partrace-warm.json"
TREE = "modules"    # the stamp's [_tree_key, cache_key] when it was written


def sample_folder() -> Path | None:
    """partrace/samples, if this install has it."""
    data = PACKAGE / "samples"
    return data if data.is_dir() else None


def samples(fmt: str) -> list[Path]:
    """The sample traces of ``fmt`` that exist here."""
    data = sample_folder()
    if data is None:
        return []
    return [data / rel for rel in SAMPLES.get(HDF5_FROM if fmt == "hdf5" else fmt, [])
            if (data / rel).exists()]


def cache_folder() -> str:
    """Where numba keeps partrace's compiled kernels, in words a user can follow."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return os.environ["NUMBA_CACHE_DIR"]
    return f"{PACKAGE}/**/__pycache__ (beside each module)"


def _stamp_path() -> Path:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"]) / STAMP
    return PACKAGE / "__pycache__" / STAMP


KERNEL = re.compile(r"^@(numba\.)?(njit|cfunc)\b", re.M)


def _kernel_sources() -> list[Path]:
    """The modules that define compiled kernels (numba keys its cache on their sources)."""
    return [p for p in (PACKAGE / rel for rel in _modules())
            if KERNEL.search(p.read_text(errors="replace"))]


def cache_key() -> str:
    """Changes whenever numba would not reuse its cache: a kernel source, numba, Python, CPU."""
    return _stat_hash(_kernel_sources())


def _tree_key() -> str:
    """Changes whenever :func:`cache_key` may: any module of the package, numba, Python, CPU.
    A stat of each module, where cache_key reads them all to find those with kernels: rank 0
    asks before every parallel run of 8 ranks or more, while the other ranks wait."""
    return _stat_hash(_modules())


def _modules() -> list[str]:
    """Every module of the package, as paths relative to it in ``sorted(rglob("*.py"))``'s
    order; walked as strings (rank 0's pathlib walk was most of the check's time)."""
    found = []
    for folder, dirs, files in os.walk(PACKAGE):
        # bytecode and numba's index files (hundreds): never a module
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(folder, PACKAGE)
        found += [name if rel == "." else os.path.join(rel, name)
                  for name in files if name.endswith(".py")]
    return sorted(found, key=lambda rel: rel.split(os.sep))


def _stat_hash(sources: list[Path] | list[str]) -> str:
    """A hash of numba's key and each source's place in the package, time and size
    (``sources``: absolute Paths, or paths relative to the package)."""
    import hashlib
    import platform

    import numba
    from llvmlite import binding
    cpu = os.environ.get("NUMBA_CPU_NAME") or binding.get_host_cpu_name()   # numba's own key
    h = hashlib.sha1()
    h.update(f"{numba.__version__} {sys.version} {platform.machine()} {cpu} {PACKAGE}".encode())
    for p in sources:
        rel = p if isinstance(p, str) else os.fspath(p.relative_to(PACKAGE))
        st = os.stat(os.path.join(PACKAGE, rel))
        h.update(f"{rel} {st.st_mtime_ns} {st.st_size}".encode())
    return h.hexdigest()


def _read_stamp() -> dict:
    try:
        return json.loads(_stamp_path().read_text())
    except (OSError, ValueError):
        return {}


def is_warm(fmt: str) -> bool:
    stamp = _read_stamp()
    key = stamp.get(fmt)
    if key is None:
        return False
    tree = _tree_key()
    if stamp.get(TREE) == [tree, key]:    # no module changed since the stamp
        return True
    if key != cache_key():
        return False
    # modules changed, no kernel source did: the stamp notes this tree, so that the next
    # run need not read every module again to find that out
    _save_stamp({**stamp, TREE: [tree, key]})
    return True


def _write_stamp(formats) -> None:
    key = cache_key()
    stamp = {k: v for k, v in _read_stamp().items() if v == key and k != TREE}
    stamp.update(dict.fromkeys(formats, key))
    stamp[TREE] = [_tree_key(), key]
    _save_stamp(stamp)


def _save_stamp(stamp: dict) -> None:
    path = _stamp_path()
    try:    # written whole, then renamed: a rank reading it never sees half of it
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(stamp, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass    # no stamp: the next parallel run warms again, nothing worse


def _merge(comm, trace: Path, fmt: str, target: Path) -> None:
    from .engine.pipeline import run
    from .output import make_sink
    run(comm, trace, make_sink(target, source=str(trace), overwrite=True), format=fmt)


def _commands(comm, trace: Path, fmt: str, out: Path, tag: str) -> list[tuple[str, object]]:
    """(name, thunk) of every command warm runs on one trace: each output of the registry
    (so a new output is warmed with no change here), and every command that decodes."""
    from .analysis import communication, profile
    from .info import gather_info
    from .output import OUTPUTS

    def merge(suffix: str):
        return lambda: _merge(comm, trace, fmt, out / f"{tag}{suffix}")

    def timeline():
        try:
            from .analysis.timeline import timeline_data
        except ImportError:     # an optional part missing: nothing of it to compile
            return
        from .errors import UsageError
        try:
            timeline_data(comm, trace, format=fmt)
        except UsageError:      # a trace with no events (ROSS GVT samples): nothing to draw
            pass

    def clocks():
        import numpy as np

        from .analysis.clc import last_step, steps
        from .analysis.clocks import check
        check(trace, comm=comm, format=fmt)
        # the logical clock's kernels, on two messages (they run on merge --sync clc alone)
        found = steps(comm, np.array([[1, 2, 100, 50, 0, 0], [2, 1, 60, 105, 1, 1]], np.int64))
        last_step(*found[:3], *(np.ones(1, np.int64),) * 3)

    def dump():
        from .analysis.dump import DumpSink
        from .engine.pipeline import run
        with open(os.devnull, "wb") as null:
            run(comm, trace, DumpSink(null), format=fmt)

    merges = [(f"merge -> {o.suffixes[0][1:]}", merge(o.suffixes[0])) for o in OUTPUTS.values()]
    return [("info", lambda: gather_info(comm, trace, fmt)), ("clocks", clocks), *merges,
            ("profile", lambda: profile(trace, comm=comm, format=fmt)),
            ("comm", lambda: communication(trace, comm=comm, format=fmt, with_names=True)),
            ("dump", dump), ("timeline", timeline)]


def _word_kernels() -> None:
    """The engine's kernels that move rows as words (engine/gather.py), for every word width,
    layout and span-index type: which of them a run meets depends on how its rows fall
    into spans and ranks (a column constant in every span of one window, 3 ranks rather
    than 2), not on the format, so no sample run is sure to meet them all."""
    from numba import types as T

    from .engine import gather
    words = [T.uint8, T.uint16, T.uint32, T.uint64]
    # gather.run_of's index types, but int64 (beyond 65,536 spans in one window): a run
    # that meets it is long enough for a compile not to matter
    spans = [T.uint8, T.uint16]
    rows = T.Array(T.int64, 1, "C")
    for w in words:
        flat = T.Array(w, 1, "C")
        for out in (flat, T.Array(w, 1, "A")):  # "A": one word column of a sub-array
            _compile(gather._take, (out, rows, flat))
            for s in spans:
                source = T.Array(s, 1, "C")
                _compile(gather._lookup, (out, source, flat))
                _compile(gather._gather, (out, source, rows, flat))
        # a column held as a base plus narrow offsets (engine/narrow.py), taken or
        # gathered by span as words: one variant per narrower offset width too
        for off in (T.uint8, T.uint16, T.uint32):
            if off.bitwidth >= w.bitwidth:
                continue
            offsets = T.Array(off, 1, "C")
            for s in spans:
                source = T.Array(s, 1, "C")
                _compile(gather._take_offsets, (flat, source, rows, flat, offsets))
                _compile(gather._gather_offsets, (flat, source, rows, flat, offsets))
    # the narrowing passes over an integer column of each type
    from .engine import narrow
    steps = T.Array(T.uint8, 1, "C")
    for kind in (T.int16, T.int32, T.int64, T.uint16, T.uint32, T.uint64, T.int8, T.uint8):
        col = T.Array(kind, 1, "C")
        _compile(narrow._counts_up, (col,))
        _compile(narrow._steps_of, (col, steps))


def _compile(kernel, signature) -> None:
    """One signature of a kernel, a stop signal held meanwhile (as for any call into numba)."""
    from .engine import stop
    with stop.held():
        kernel.compiled().compile(signature)


def _dispatchers() -> list:
    """Every numba kernel of partrace loaded so far: those of partrace.kernels.jit this process
    compiled or loaded, and those modules make with numba itself (the OTF2 writer)."""
    from numba.core.dispatcher import Dispatcher

    from .kernels import jit
    found = {id(k.dispatcher): k.dispatcher for k in jit.kernels() if k.dispatcher is not None}
    for name, mod in list(sys.modules.items()):
        if name.startswith("partrace") and mod is not None:
            for obj in vars(mod).values():
                if isinstance(obj, Dispatcher):
                    found[id(obj)] = obj
    return list(found.values())


def warm(formats=None, traces=(), log=None, comm=None) -> dict:
    """Run every command on the samples of ``formats`` (default all) and on ``traces``,
    in this process (``comm``: on all its ranks together); {"compiled", "loaded",
    "seconds", "traces", "cache"} (compiled and loaded: kernel signatures).  Kernels
    compile in the mode of the job this runs in: ``partrace warm``'s job compiles whatever
    the samples' size (engine/job.py)."""
    return _warm(formats, traces, log or (lambda line: None), comm)


@contextlib.contextmanager
def _shared_folder(comm):
    """A temporary folder made by rank 0, known to every rank, removed once all are done."""
    import tempfile
    folder = None
    if comm.rank == 0:
        folder = tempfile.mkdtemp(prefix="partrace-warm-")
    folder = Path(comm.bcast(folder))
    try:
        yield folder
    finally:
        comm.barrier()
        if comm.rank == 0:
            import shutil
            shutil.rmtree(folder, ignore_errors=True)


# Ranks of the rehearsal that compiles what only a parallel run uses (rows exchanged
# between ranks and taken in their order: engine/gather's _take kernels, the writers'
# kernels on exchanged columns): two are enough to take every such path.
PARALLEL_RANKS = 2


def _launcher() -> str | None:
    """mpiexec beside this Python (the venv's MPICH), else on the PATH."""
    import shutil
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def _rehearse_in_parallel(args, log) -> str:
    """Run the commands again on PARALLEL_RANKS ranks (``partrace warm --parallel-only``
    under mpiexec); one line saying how it went."""
    import subprocess
    launcher = _launcher()
    if launcher is None:
        return ("parallel paths not warmed: no mpiexec here; run `mpiexec -n 2 partrace "
                "warm` once where a job can start")
    cmd = [launcher, "-n", str(PARALLEL_RANKS), sys.executable, "-m", "partrace", "warm",
           "--parallel-only", *map(str, args.traces)]
    for fmt in args.formats or []:
        cmd += ["--format", fmt]
    if args.quiet:
        cmd.append("-q")
    env = {**os.environ, "PARTRACE_WARM": "0"}
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None if log else subprocess.PIPE,
                       text=True, env=env)
    if r.returncode != 0:
        why = (r.stderr or "").strip().splitlines()
        return (f"parallel paths not warmed: mpiexec -n {PARALLEL_RANKS} failed "
                f"({why[-1] if why else f'exit {r.returncode}'}); run `mpiexec -n 2 partrace "
                f"warm` once where a job can start")
    return r.stdout.strip()


def _warm(formats, traces, log, comm=None) -> dict:
    """The commands on the samples and ``traces`` with ``comm`` (default: this process
    alone), every rank of it together; outputs go to a folder rank 0 makes and removes."""
    from .engine.mpi import serial
    from .formats import detect
    formats = list(SAMPLES) + ["hdf5"] if formats is None else list(formats)
    t0 = time.perf_counter()
    comm = comm or serial()
    work = [(fmt, p) for fmt in formats if fmt != "hdf5" for p in samples(fmt)]
    work += [(detect(p), Path(p)) for p in traces]
    done = []
    with _shared_folder(comm) as out, open(os.devnull, "w") as null, \
            contextlib.redirect_stdout(null):
        if "hdf5" in formats:   # partrace HDF5 as input: from the first OTF sample
            made = [p for f, p in work if f == HDF5_FROM][:1] or samples(HDF5_FROM)[:1]
            for i, p in enumerate(made):
                _merge(comm, p, HDF5_FROM, out / f"h5src{i}.h5")
                work.append(("hdf5", out / f"h5src{i}.h5"))
        ranks = f" ({comm.size} ranks)" if comm.parallel else ""
        for i, (fmt, trace) in enumerate(work):
            for name, go in _commands(comm, trace, fmt, out, f"t{i}"):
                s = time.perf_counter()
                go()
                log(f"  {fmt:<6} {name + ranks:<27} {time.perf_counter() - s:6.2f} s  {trace}")
            done.append(str(trace))
    if comm.rank == 0:
        s = time.perf_counter()
        _word_kernels()
        log(f"  {'engine':<6} {'gather, every width':<27} {time.perf_counter() - s:6.2f} s")
    # numba counts per kernel and signature what it loaded and what it compiled (a
    # kernel compiled for a caller is counted too; one loaded whole needs no callee)
    kernels = _dispatchers()
    compiled = sum(sum(d._cache_misses.values()) for d in kernels)
    loaded = sum(sum(d._cache_hits.values()) for d in kernels)
    if work:
        _write_stamp(sorted({fmt for fmt, _ in work}))
    return {"compiled": compiled, "loaded": loaded,
            "seconds": time.perf_counter() - t0, "traces": done, "cache": cache_folder()}


# ranks from which a cold cache is warmed on rank 0 first (PARTRACE_WARM=auto, the default)
WARM_FROM_RANKS = 8


def before_parallel_run(comm, trace, fmt: str | None) -> None:
    """Many ranks, cold cache for this input's format: rank 0 compiles while the others
    wait (then all load), instead of every rank compiling the same kernels at once.

    PARTRACE_WARM=auto (default) does it from WARM_FROM_RANKS ranks: below that, ranks
    compiling side by side take no longer than one (numba replaces its cache files
    whole, and each index is saved under a lock, kernels/cachelock.py, so they do not
    corrupt each other), and warming every command on the
    samples would take longer than the few kernels one run needs.  PARTRACE_WARM=1:
    at any rank count; 0: never.  Nothing happens when there is no sample of the
    format (an installed wheel, a plugin format): the ranks compile what they use.
    An input error is the run's to report: warming is skipped."""
    from .kernels import jit
    mode = os.environ.get("PARTRACE_WARM", "auto").lower()
    if mode in ("0", "no", "false", "") or (mode == "auto" and comm.size < WARM_FROM_RANKS):
        return
    if jit.is_small():      # its kernels run as Python (kernels/jit.py): none to compile
        return
    # Rank 0's check needs numba (its version is in the cache key).  Every rank imports it
    # now, side by side, as its kernels need it anyway: else rank 0 alone would import it
    # (a third of a second) while the others wait, and import it themselves afterwards.
    jit.import_numba()
    with comm.guard():
        if comm.rank == 0:
            with jit.making():  # compiles: its runs' phases are no part of this run's account
                _warm_for_run(trace, fmt)
    comm.check()


def _warm_for_run(trace, fmt: str | None) -> None:
    from .errors import PartraceError
    try:
        from .formats import detect
        fmt = fmt or detect(trace)
        if not samples(fmt) or is_warm(fmt):
            return
    except PartraceError:   # the run itself says what is wrong with the input
        return
    print(f"partrace: compiling the {fmt} kernels once on rank 0 (numba cache: "
          f"{cache_folder()}); the other ranks wait", file=sys.stderr, flush=True)
    report = warm([fmt])
    print(f"partrace: kernels ready in {report['seconds']:.1f} s", file=sys.stderr, flush=True)


def main(args, comm=None, rehearse: bool = True) -> int:
    """``partrace warm [TRACE ...] [--format F ...]``: the commands in this process, then
    on PARALLEL_RANKS ranks under mpiexec (``comm``: a parallel run of warm itself, whose
    rank 0 did the first part: all its ranks do the second)."""
    formats = args.formats or (None if not args.traces else [])
    if not args.traces and sample_folder() is None:
        from .errors import UsageError
        raise UsageError("no sample traces here (partrace/samples of the install): "
                         "name traces to warm on, `partrace warm TRACE ...`")
    log = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    if comm is not None:
        r = warm(formats, args.traces, log if comm.rank == 0 else None, comm)
        if comm.rank == 0:
            print(f"partrace warm: parallel paths ready in {r['seconds']:.1f} s on "
                  f"{comm.size} ranks: {r['compiled']} compiled, {r['loaded']} loaded")
        return 0
    r = warm(formats, args.traces, log)
    print(f"partrace warm: kernels ready in {r['seconds']:.1f} s on {len(r['traces'])} "
          f"traces: {r['compiled']} compiled, {r['loaded']} loaded from the cache")
    if rehearse and not getattr(args, "parallel_only", False):
        print(_rehearse_in_parallel(args, log))
    print(f"cache: {r['cache']}")
    return 0

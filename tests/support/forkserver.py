"""The tests' one-process ``partrace ARGS`` runs, forked from a Python that has imported the
libraries every run imports.

A fresh ``python -m partrace`` spends about 0.15 s importing numpy and h5py, and 0.3 s more
importing numba where its kernels are compiled, and the suite starts many of them (run_cli
is called from over 200 places, many parametrized). Here each test process (pytest-xdist
worker) starts one server, which imports those libraries and nothing of partrace (its
modules read the environment when imported: kernels/jit.py, the numba cache folder), then
forks a child per run. The child takes the run's environment, folder, arguments and standard
streams (stdin /dev/null, stdout and stderr files) and runs the ``partrace`` module as
``__main__`` as ``python -m`` does; its exit status, a traceback and exit 1 included, is the
interpreter's own.

A run is forked only where a fresh process would import those libraries the same way: its
environment may differ from the server's only in variables that no library reads at import
(not ``PYTHON*``, locale, BLAS, HDF5, numba, glibc or loader variables); else, and under
mpiexec, the run starts a fresh process as before. What forked children share that fresh
processes do not: the server's hash seed (``PYTHONHASHSEED``), so two forked runs iterate a
set of strings alike. Outputs compared across rank counts still come from fresh processes
(mpiexec) on one side. ``PARTRACE_TEST_FORK=0`` turns the server off.

Run as a script (``python forkserver.py``) it is the server: JSON lines in on stdin (a run),
out on stdout (the child's pid, then its status).
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading

# environment variables read when Python starts or when numpy, h5py or numba are imported: a
# run whose value differs from the server's starts a fresh process
_AT_IMPORT = ("PYTHON", "LC_", "LANG", "LANGUAGE", "NPY_", "NUMPY_", "OPENBLAS", "GOTO", "OMP_",
              "MKL_", "BLIS_", "HDF5_", "NUMBA_", "LD_", "GLIBC_", "MALLOC_", "SSL_")
SWITCH = "PARTRACE_TEST_FORK"


# what partrace's entry (cli.py) sets where numpy is not yet imported: in a fresh run, always
_ONE_BLAS_THREAD = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _serve() -> None:
    for var in _ONE_BLAS_THREAD:    # numpy's BLAS reads them once, at load
        os.environ.setdefault(var, "1")
    import h5py  # noqa: F401  (imported once: what each fresh run would import)
    import numba  # noqa: F401
    import numpy  # noqa: F401
    for line in sys.stdin:
        run = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(run)
            return      # to the interpreter's own exit: atexit, flushing, exit status
        sys.stdout.write(json.dumps({"pid": pid}) + "\n")
        sys.stdout.flush()
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")
        sys.stdout.flush()


def _child(run: dict) -> None:
    """Become ``python -m partrace ARGS`` in the run's folder and environment."""
    import runpy
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(run["stdout"], os.O_WRONLY | os.O_TRUNC)
        err = os.open(run["stderr"], os.O_WRONLY | os.O_TRUNC)
        for fd, target in ((null, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(run["cwd"])
        os.environ.clear()
        os.environ.update(run["env"])
        for var in _ONE_BLAS_THREAD:    # as partrace's entry would (numpy is loaded here)
            os.environ.setdefault(var, "1")
        tempfile.tempdir = None         # TMPDIR is the run's
        sys.path[0] = os.getcwd()       # as `python -m` puts it
        sys.argv = ["-m", *run["args"]]
    except BaseException:
        os._exit(121)
    runpy.run_module("partrace", run_name="__main__", alter_sys=True)


class _Server:
    def __init__(self, env: dict, cwd: str):
        self.env = dict(env)
        self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, cwd=cwd)
        self.pending = b""      # read from the server, not yet a whole line
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fits(self, env: dict) -> bool:
        """Whether a run in ``env`` sees the libraries as a fresh process would."""
        return not any(k.startswith(_AT_IMPORT) for k in set(env) | set(self.env)
                       if env.get(k) != self.env.get(k))

    def _reply(self, timeout: float) -> dict | None:
        """The server's next line, None if none came within ``timeout`` seconds (read from
        the descriptor: a buffered reader could hold the line select waits for)."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            more = os.read(fd, 4096)
            if not more:
                raise EOFError("the fork server ended")
            self.pending += more
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def run(self, cmd: list[str], args: list[str], env: dict, cwd: str,
            timeout: float) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="fork-run-") as tmp:
            paths = {name: os.path.join(tmp, name) for name in ("stdout", "stderr")}
            for p in paths.values():
                open(p, "w").close()
            request = {"args": args, "env": env, "cwd": cwd, **paths}
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            pid = self._reply(30)["pid"]
            reply = self._reply(timeout)
            if reply is None:
                os.kill(pid, signal.SIGKILL)
                self._reply(30)
            out, err = (open(paths[n]).read() for n in ("stdout", "stderr"))
            if reply is None:
                raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err)
            return subprocess.CompletedProcess(cmd, reply["status"], out, err)


_server: _Server | None = None


def run(cmd: list[str], args: list[str], env: dict, cwd: str, timeout: float,
        base_env: dict) -> subprocess.CompletedProcess | None:
    """``cmd`` (``python -m partrace ARGS``) forked from the server, which runs in
    ``base_env`` (the runs' environment before a test's own variables); None where it must
    start a fresh process (another environment at import, the server busy on another thread,
    or off)."""
    global _server
    if os.environ.get(SWITCH, "1") == "0" or not hasattr(os, "fork"):
        return None
    if _server is None or not _server.alive():
        _server = _Server(base_env, cwd)
    server = _server
    if not server.fits(env) or not server.lock.acquire(blocking=False):
        return None
    try:
        return server.run(cmd, args, env, cwd, timeout)
    finally:
        server.lock.release()


if __name__ == "__main__":
    _serve()

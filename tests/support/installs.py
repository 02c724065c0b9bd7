"""Running partrace from an install elsewhere than the checkout (a copy of the package, a
wheel installed into a folder), made read-only as a cluster's site-packages is."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def kernel_files(folder: Path) -> list[Path]:
    """numba's cache index files under ``folder``."""
    return sorted(folder.rglob("*.nbi"))


def cache_state(folder: Path) -> dict:
    """Each cache file numba wrote under ``folder`` (index .nbi, code .nbc), with its size
    and mtime: equal before and after a command that compiled nothing."""
    return {p.relative_to(folder): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*.nb[ic]")}


def readonly_prefix(site: Path, probe=None) -> list[str] | None:
    """The command prefix under which ``site`` cannot be written.

    Not root: none (``chmod -R a-w`` is enough).  As root, file modes do not stop writes:
    the command then sees ``site`` through a read-only bind mount in a mount namespace of
    its own.  With ``probe`` (a command): None where that is not allowed."""
    if os.geteuid() != 0:
        return []
    prefix = ["unshare", "-m", "sh", "-c", f'mount --bind "{site}" "{site}" && '
              f'mount -o remount,bind,ro "{site}" && exec "$@"', "sh"]
    if probe is not None:
        try:
            ok = subprocess.run(prefix + probe, capture_output=True, timeout=30).returncode == 0
        except OSError:
            ok = False
        return prefix if ok else None
    return prefix


def run_installed(args, site: Path, work: Path, timeout: float = 600, launcher=(),
                  **env) -> subprocess.CompletedProcess:
    """``python ARGS`` with ``site`` first on the path, read-only, in ``work`` (the user's
    home and cache home); ``launcher``: what starts it (``mpiexec -n 2``)."""
    full = {k: v for k, v in os.environ.items()
            if k not in ("NUMBA_CACHE_DIR", "PARTRACE_FORMATS", "PARTRACE_MPI")}
    full.update(PYTHONPATH=str(site), XDG_CACHE_HOME=str(work / "cache"), HOME=str(work))
    full.update(env)
    return subprocess.run([*readonly_prefix(site), *launcher, sys.executable, *args],
                          capture_output=True,
                          text=True, cwd=work, env=full, timeout=timeout)

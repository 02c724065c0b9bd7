"""numba's cache index saved under a lock, so that processes compiling side by side
cannot swap their kernels' code.

numba keeps a kernel's cached overloads as an index file (each overload's key and the
number of its data file) beside one data file each.  To save an overload it reads the
index, takes the first number no overload has, writes the data and the index back.
Two processes adding different overloads of one kernel at once (the ranks of a run on a
cold cache: a column's narrow width can differ between ranks) can both take number 1:
the index then names for one overload the other's code, and every later run that loads
it fails ("can't unbox array") until the cache is cleared.  Here that read-modify-write
holds an exclusive lock on a file beside the index (``flock``), so each process sees the
others' numbers.  Where the file system has no such locks, numba's own way.

Only numba's own index class is changed, and only where it has the method this wraps.
"""
from __future__ import annotations

import contextlib
import os

_locked = None


def _locked_class(caching):
    class LockedIndexFile(caching.IndexDataCacheFile):
        def save(self, key, data):
            with _holding(self._index_path + ".lock"):
                super().save(key, data)

    return LockedIndexFile


@contextlib.contextmanager
def _holding(path: str):
    """An exclusive lock on ``path`` (made if need be) while inside; none if it cannot be
    had (no such file, a file system without locks)."""
    import fcntl
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)    # the lock goes with it


def lock_saves(cache) -> None:
    """Make numba's ``cache`` (a dispatcher's ``_cache``) save under the index lock."""
    global _locked
    from numba.core import caching
    index = getattr(cache, "_cache_file", None)
    if type(index) is not caching.IndexDataCacheFile or not hasattr(index, "_index_path"):
        return
    if _locked is None:
        _locked = _locked_class(caching)
    index.__class__ = _locked

"""Moving a file or folder to a name that must still be free: never replacing what another
process put there meanwhile.

``os.replace`` replaces silently, so an output that appeared after a run's start-up check
(a second run to the same name, started later but finished first) would be overwritten.
Linux's ``renameat2(RENAME_NOREPLACE)`` moves atomically and fails if the name is taken;
where the file system does not offer it (EINVAL), a hard link claims a file's name and a
``mkdir`` a folder's (renaming a folder onto an empty folder of our own replaces it).
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_renameat2 = None       # libc's, once looked up; False where there is none


def _libc_renameat2():
    global _renameat2
    if _renameat2 is None:
        try:
            import ctypes
            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
            _renameat2 = (fn, ctypes.get_errno)
        except (OSError, AttributeError):
            _renameat2 = False
    return _renameat2


def move_no_replace(src: Path, dst: Path) -> None:
    """Move ``src`` to ``dst``; FileExistsError (and ``src`` kept) if ``dst`` exists."""
    call = _libc_renameat2()
    if call:
        fn, get_errno = call
        if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
            return
        err = get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(err, os.strerror(err), os.fspath(dst))
    if os.path.isdir(src) and not os.path.islink(src):
        os.mkdir(dst)           # FileExistsError if taken; else the name is ours
        try:
            os.rename(src, dst)
        except BaseException:
            os.rmdir(dst)
            raise
        return
    os.link(src, dst, follow_symlinks=False)     # FileExistsError if taken
    os.unlink(src)

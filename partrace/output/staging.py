"""Atomic output: write under a hidden staging folder, move into place at the end.

A failed or killed run leaves at most the hidden ``.NAME.partrace-<id>``
folder, never anything under the output's own name; existing files are never
touched unless the user asked to overwrite them.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import UsageError

_live: set[Path] = set()    # staging folders this process made and has not yet published


def discard_live() -> None:
    """Remove this process's unpublished staging folders (interrupted or crashed run)."""
    for folder in list(_live):
        shutil.rmtree(folder, ignore_errors=True)
        _live.discard(folder)


class Staging:
    def __init__(self, final: Path, run_id: str):
        self.final = Path(final)
        self.dir = self.final.parent / f".{self.final.name}.partrace-{run_id}"

    def check_free(self, names: list[Path], overwrite: bool) -> None:
        """Refuse (or, with overwrite, plan to replace) existing outputs."""
        if not self.final.parent.is_dir():
            raise UsageError(f"{self.final.parent}: output folder does not exist")
        taken = [p for p in names if p.exists() or p.is_symlink()]
        if taken and not overwrite:
            raise UsageError(f"{taken[0]}: output exists (use --overwrite to replace it)")

    def create(self) -> None:
        self.dir.mkdir()
        _live.add(self.dir)

    def path(self, name: str) -> Path:
        return self.dir / name

    def publish(self, names: list[str]) -> None:
        """Move staged files/folders into the output's folder, replacing old ones."""
        for name in names:
            src, dst = self.dir / name, self.final.parent / name
            if dst.is_dir() and not dst.is_symlink():
                shutil.rmtree(dst)
            elif dst.exists() or dst.is_symlink():
                dst.unlink()
            os.replace(src, dst)
        self.discard()

    def discard(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        _live.discard(self.dir)

"""Atomic output: write under a hidden staging folder, move into place at the end.

A failed or killed run leaves at most the hidden ``.NAME.partrace-<id>``
folder, never anything under the output's own name; existing files are never
touched unless the user asked to overwrite them, and even then an input of the
run, or a folder that is not a partrace output, is never replaced.  Without
overwrite, an output that appeared while the run wrote (a second run to the same
name that finished first) is not replaced either: publishing moves each name only
if it is still free (noreplace.py), and takes back what it moved if one is not.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ..engine import inputs, stop
from ..engine.leftovers import remove_dead
from ..errors import UsageError, register_output_paths

_live: set[Path] = set()    # staging folders this process made and has not yet published
_known: set[Path] = set()   # staging folders of this process's runs, whichever rank made them
_ours: set[str] = set()     # names of every staging folder of this process's runs, ever

# a path inside a staging folder, as error messages print it: ".NAME.partrace-ID/" or its end
_STAGED = re.compile(r"""(?:^|(?<=[/'"\s(=]))\.([^/'"\s]+)\.partrace-([\w-]+?)"""
                     r"""(?:/([^'"\s,;:)]+)|(?=['"\s,;:)]|$))""")
# the shard files the HDF5 sink writes in NAME.parts
_SHARD = re.compile(r"rank-[0-9]+\.h5$")
# the per-location files of an OTF2 archive's folder (NAME/ beside NAME.otf2)
_OTF2_LOCAL = re.compile(r"[0-9]+\.(evt|def)$")


def discard_live() -> None:
    """Remove this process's unpublished staging folders (interrupted or crashed run)."""
    for folder in list(_live):
        shutil.rmtree(folder, ignore_errors=True)
        _live.discard(folder)


def discard_known() -> None:
    """Remove the unpublished staging folder of this run, whichever rank made it."""
    discard_live()
    for folder in list(_known):
        shutil.rmtree(folder, ignore_errors=True)
        _known.discard(folder)


stop.on_stop(discard_live)
stop.on_stop(discard_known, hard_only=True)


def public_paths(text: str) -> str:
    """``text`` with this process's staging paths shown as the output paths they become.

    A file of the output set (NAME..., or NAME's stem and a dot: OTF) keeps its
    name; the staging folder itself and the files that never leave it (the
    HDF5 sink's per-rank parts, the OTF marker body) stand for the output.
    """
    def shown(m: re.Match) -> str:
        final, run, inner = m.group(1), m.group(2), m.group(3)
        if f".{final}.partrace-{run}" not in _ours:     # another run's (a killed one's)
            return m.group(0)
        stem = final.rsplit(".", 1)[0]
        if inner and (inner.startswith(final) or inner.startswith(stem + ".")):
            return inner
        return final
    return _STAGED.sub(shown, text)


def output_being_written() -> Path | None:
    """The output this process is writing (its unpublished staging folder's), if one."""
    if len(_known) != 1:
        return None
    folder = next(iter(_known))
    m = _STAGED.fullmatch(folder.name)
    return folder.parent / m.group(1) if m else None


def is_partrace_parts(path: Path) -> bool:
    """A folder partrace writes beside its output, that an overwrite may replace: HDF5
    shards (NAME.parts/rank-NNNNN.h5), or an OTF2 archive's per-location files
    (NAME/<location>.evt|.def beside NAME.otf2)."""
    if path.is_symlink() or not path.is_dir():
        return False
    if path.name.endswith(".parts"):
        pattern = _SHARD
    elif path.with_name(path.name + ".otf2").is_file():
        pattern = _OTF2_LOCAL
    else:
        return False
    return all(pattern.match(p.name) and p.is_file() and not p.is_symlink()
               for p in path.iterdir())


class Staging:
    def __init__(self, final: Path, run_id: str):
        self.final = Path(final)
        self.dir = self.final.parent / f".{self.final.name}.partrace-{run_id}"
        self.overwrite = False      # as check_free was told (on the rank that publishes)
        _known.add(self.dir)
        _ours.add(self.dir.name)

    def check_free(self, names: list[Path], overwrite: bool) -> None:
        """Refuse (or, with overwrite, plan to replace) existing outputs.

        Never replaced, whatever ``overwrite`` says: an input of the run (or a
        folder holding one), and a folder that is not a partrace output.
        """
        self.overwrite = overwrite
        if not self.final.parent.is_dir():
            raise UsageError(f"{self.final.parent}: output folder does not exist")
        # what a killed run to this output left (leftovers.py): removed, with a warning
        remove_dead(self.final.parent, f".{self.final.name}.partrace-")
        for p in [self.final, *names]:
            hit = inputs.conflict(p)
            if hit is not None:
                what = "is" if os.fspath(hit) in inputs._forms(p) else "holds"
                raise UsageError(f"{p}: the output {what} an input of this run ({hit}); "
                                 f"choose another output name")
        taken = [p for p in names if p.exists() or p.is_symlink()]
        if taken and not overwrite:
            raise UsageError(f"{taken[0]}: output exists (use --overwrite to replace it)")
        for p in taken:
            if p.is_dir() and not p.is_symlink() and not is_partrace_parts(p):
                raise UsageError(f"{p}: is a folder that is not a partrace output; "
                                 f"not replacing it (remove it yourself or choose another name)")

    def create(self) -> None:
        self.dir.mkdir()
        _live.add(self.dir)

    def path(self, name: str) -> Path:
        return self.dir / name

    def publish(self, names: list[str]) -> None:
        """Move staged files/folders into the output's folder, replacing old ones."""
        with stop.shielded():   # a signal now would leave half an output
            self._move(names)
            stop.published()
        self.discard()

    def _move(self, names: list[str]) -> None:
        if not self.overwrite:
            self._move_to_free(names)
            return
        for name in names:
            src, dst = self.dir / name, self.final.parent / name
            if inputs.conflict(dst) is not None:     # check_free said so; never reached
                raise UsageError(f"{dst}: an input of this run; not replacing it")
            if dst.is_dir() and not dst.is_symlink():
                if not is_partrace_parts(dst):
                    raise UsageError(f"{dst}: is a folder that is not a partrace output; "
                                     f"not replacing it")
                shutil.rmtree(dst)
            elif dst.exists() or dst.is_symlink():
                dst.unlink()
            os.replace(src, dst)

    def _move_to_free(self, names: list[str]) -> None:
        """Move every name, each only if still free; if one is taken, move back those moved
        (they are this run's) and refuse.  Every run moves its names in the same order, so
        of two runs to one output the one that takes the first name publishes whole: the
        output's own name goes first (the one name every run of it has)."""
        from .noreplace import move_no_replace
        moved = []
        for name in sorted(names, key=lambda n: n != self.final.name):
            src, dst = self.dir / name, self.final.parent / name
            try:
                move_no_replace(src, dst)
            except FileExistsError:
                for back in reversed(moved):
                    os.rename(self.final.parent / back, self.dir / back)
                raise UsageError(f"{dst}: output appeared while this run was writing it "
                                 f"(another run to the same output?); not replacing it "
                                 f"(use --overwrite to replace it)") from None
            moved.append(name)

    def discard(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        _live.discard(self.dir)
        _known.discard(self.dir)


register_output_paths(public_paths, output_being_written)

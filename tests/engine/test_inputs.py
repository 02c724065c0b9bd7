"""The inputs a run protects: each path as written and with its links resolved, each
folder resolved once for the files in it, the same forms as resolving every file."""
from __future__ import annotations

from pathlib import Path

from partrace.engine import inputs


def test_forms_resolved_by_folder_equal_each_file_resolved(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    (real / "f").write_text("x")
    (real / "link").symlink_to(real / "f")
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    monkeypatch.chdir(tmp_path)
    folders: dict = {}
    for p in (real / "f", tmp_path / "alias" / "f", tmp_path / "alias" / "link", real / "link",
              tmp_path / "loop", Path("alias/f"), Path("/")):
        assert inputs._forms(p, folders) == inputs._forms(p), p
    assert folders[str(tmp_path / "alias")] == str(real)


def test_forms_from_a_listed_folder_equal_each_file_resolved(tmp_path):
    """A folder holding many of the run's files is listed once for its links: the forms
    are those of asking each file, a link among them included."""
    real = tmp_path / "real"
    real.mkdir()
    names = [f"r{k}.bin" for k in range(2 * inputs.LIST_FROM)]
    for name in names:
        (real / name).write_text("x")
    (tmp_path / "elsewhere").write_text("y")
    (real / "linked.bin").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    files = [tmp_path / "alias" / n for n in names + ["linked.bin"]]
    inputs.protect(tmp_path / "alias", files)
    try:
        expected = set()
        for p in [tmp_path / "alias", *files]:
            expected |= inputs._forms(p)
        assert inputs._inputs == expected
        assert str(tmp_path / "elsewhere") in inputs._inputs      # through the link
        assert inputs.conflict(tmp_path / "elsewhere") == tmp_path / "elsewhere"
        assert inputs.conflict(real) is not None
    finally:
        inputs.protect(tmp_path / "nothing")


def test_a_file_through_a_linked_folder_and_its_folders_are_protected(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    for name in ("a.evt", "b.evt"):
        (real / name).write_text("x")
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    inputs.protect(tmp_path / "alias", [tmp_path / "alias" / "a.evt", tmp_path / "alias" / "b.evt"])
    try:
        assert inputs.conflict(real / "b.evt") == real / "b.evt"
        assert inputs.conflict(tmp_path / "alias" / "a.evt") is not None
        assert inputs.conflict(tmp_path) is not None        # holds them
        assert inputs.conflict(tmp_path / "out.h5") is None
    finally:
        inputs.protect(tmp_path / "nothing")

"""Names that are not UTF-8 (Latin-1 / KOI8-R in old OTF traces): kept as their bytes, shown
as \\xNN by every text command, even on a strict UTF-8 stream."""
from __future__ import annotations

import shutil

import pytest

from tests.conftest import DATA, run_cli


@pytest.fixture
def latin1_trace(tmp_path):
    d = tmp_path / "t"
    shutil.copytree(DATA / "otf" / "ring8" / "trace", d)
    p = d / "ring8.0.def"
    b = p.read_bytes()
    assert b'"main"' in b and b'"kernel_a"' in b
    b = b.replace(b'"main"', '"m\xe9in"'.encode("latin-1"), 1)
    b = b.replace(b'"kernel_a"', '"\xd0\xd2\xcf\xc2\xc1"'.encode("latin-1"), 1)    # KOI8-R bytes
    p.write_bytes(b)
    return d / "ring8.otf"


@pytest.mark.parametrize("cmd", [["info"], ["profile", "--top", "0"], ["profile", "--csv"],
                                 ["dump", "--kind", "enter"]])
def test_text_commands_show_the_bytes_readably(cmd, latin1_trace):
    r = run_cli([cmd[0], str(latin1_trace), *cmd[1:]], env={"PYTHONIOENCODING": "utf-8"})
    assert r.returncode == 0, r.stderr
    assert "m\\xe9in" in r.stdout and "\\xd0\\xd2\\xcf\\xc2\\xc1" in r.stdout


def test_hdf5_keeps_the_bytes(latin1_trace, tmp_path):
    import partrace
    out = tmp_path / "x.h5"
    r = run_cli(["merge", str(latin1_trace), "-o", str(out), "-q"])
    assert r.returncode == 0, r.stderr
    names = list(partrace.open(out).definitions.tables["regions"]["name"])
    raw = [n.encode("utf-8", "surrogateescape") for n in names]
    assert "m\xe9in".encode("latin-1") in raw and "\xd0\xd2\xcf\xc2\xc1".encode("latin-1") in raw
    assert names == list(partrace.open(latin1_trace).definitions.tables["regions"]["name"])

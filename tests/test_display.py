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


def test_utf8_name_is_what_text_commands_show():
    """The outputs whose strings must be UTF-8 write a name as partrace prints it: a byte
    that is not UTF-8 as \\xNN (distinct names stay distinct), valid text unchanged."""
    from partrace.display import register, READABLE
    from partrace.model import utf8_name, utf8_names
    register()
    koi = b"\xd0\xd2\xcf\xc2\xc1".decode("utf-8", "surrogateescape")
    latin = b"m\xe9in".decode("utf-8", "surrogateescape")
    names = [koi, latin, "naïve \U0001f600", "m\xe9in", "\ud800 lone"]
    got, changed = utf8_names(names)
    assert got == [utf8_name(n) for n in names]
    assert got == ["\\xd0\\xd2\\xcf\\xc2\\xc1", "m\\xe9in", "naïve \U0001f600", "m\xe9in",
                   "\\ud800 lone"]
    assert changed == 3 and len(set(got)) == len(names)
    assert got == [n.encode("utf-8", READABLE).decode("utf-8") for n in names]
    for g in got:
        g.encode("utf-8")       # strict

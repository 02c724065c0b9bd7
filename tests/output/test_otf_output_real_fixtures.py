"""Long-format and zlib OTF written by the real OTF 1.12.4 tools (otfmerge --long, otfmerge -z),
decoded by our reader and compared with otfprint record by record (see tests/data/otf/README.md)."""

from tests.formats.test_otf_helpers import DATA
from tests.formats.test_otf_reader import _check_against_otfprint


def test_real_long_format_matches_otfprint():
    _, tabs, seen = _check_against_otfprint(DATA / "real-long/trace", DATA / "real-long/reference/ring8_long.otfprint.txt")
    assert {"Enter", "SendMessage", "Collective", "RMAPut", "Marker", "EventComment"} <= seen
    assert len(tabs["keyvalues"]) > 0


def test_real_zlib_matches_otfprint_of_decompressed_copy():
    _, tabs, seen = _check_against_otfprint(DATA / "real-zlib/trace", DATA / "real-zlib/reference/ring8_z.otfprint.txt")
    assert {"Enter", "ReceiveMessage", "BeginCollective", "FileOperation", "Marker"} <= seen
    assert all(p.name.endswith(".z") or p.suffix == ".otf" for p in (DATA / "real-zlib/trace").iterdir())

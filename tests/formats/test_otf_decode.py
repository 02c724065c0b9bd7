"""The one-pass OTF stream decoder (kernel.decode_lines): the errors it finds and goes on past
keep the order the separate checks had, and the tables that start with no room (snapshots in
an events file, key-value and comment lines) grow to whatever a chunk holds."""
from __future__ import annotations

import numpy as np
import pytest

from partrace.errors import TraceError
from partrace.formats.otf import OTF
from tests.formats.test_otf_helpers import decode_all
from tests.formats.test_otf_reader import _copy, _edit


def _decode(path, chunk=None):
    r = OTF.open(path)
    d = r.read_definitions()
    for u in r.units():
        for _ in r.decode(u, d, **({"chunk": chunk} if chunk and u.key != "marker" else {})):
            pass


def test_a_syntax_error_further_in_the_chunk_wins_over_a_key_value_type_otf_lacks(tmp_path):
    """The references were checked once a chunk had parsed: a syntax error anywhere in the
    chunk came first; in a later chunk, after the reference's chunk was refused.  (A key-value
    type is the one reference decode_lines still checks: a token no record defines is data.)"""
    d = _copy(tmp_path)
    f = d / "ring8.1.events"
    ref_line = _edit(f, b"\nK4Y5V0\n", b"\nK4YcV0\n") + 1
    f.write_bytes(f.read_bytes() + b"QZ\n")
    last = f.read_bytes().count(b"\n")
    assert last > ref_line + 100
    with pytest.raises(TraceError) as e:
        _decode(d)
    assert (e.value.path, e.value.where) == (str(f), f"line {last}")
    assert "expected a known record keyword" in e.value.message
    with pytest.raises(TraceError) as e:
        _decode(d, chunk=1000)
    assert (e.value.path, e.value.where) == (str(f), f"line {ref_line}")
    assert "expected an OTF value type 0..b for type of KeyValue, got c" in e.value.message


def test_an_undefined_function_is_kept_before_a_syntax_error_further_on(tmp_path):
    """A function no DF record defines is data: the syntax error further on is the one error,
    whatever the chunk size."""
    d = _copy(tmp_path)
    f = d / "ring8.1.events"
    _edit(f, b"\nE6\n", b"\nE7777\n")
    f.write_bytes(f.read_bytes() + b"QZ\n")
    last = f.read_bytes().count(b"\n")
    for chunk in (None, 1000):
        with pytest.raises(TraceError) as e:
            _decode(d, chunk)
        assert (e.value.path, e.value.where) == (str(f), f"line {last}")


@pytest.mark.parametrize("chunk", [None, 700])
def test_inline_snapshots_and_their_keyvalues(tmp_path, chunk):
    """An EnterSnapshot line, owning a key-value line, after every Enter of every events file:
    the snapshots table gets them all (its buffer starts empty and grows), with their
    process, fields and seq, the key-values point at them, and the events are unchanged."""
    _, _, clean = decode_all(_copy(tmp_path / "clean"))
    d = _copy(tmp_path / "snap")
    added = {}
    for f in d.glob("*.events"):
        out, proc = [], None
        for line in f.read_bytes().split(b"\n"):
            out.append(line)
            proc = int(line[1:], 16) if line.startswith(b"*") else proc
            if line.startswith(b"E"):
                otime = 7 * len(out)
                out += [b"K1Y6V2a", b"TE3O%x" % otime]
                added.setdefault(proc, []).append(otime)
        f.write_bytes(b"\n".join(out))
    _, _, t = decode_all(d, chunk)
    snap, kv, ev = t["snapshots"], t["keyvalues"], t["events"]
    assert len(snap) == sum(map(len, added.values())) > 1000
    assert set(snap["region"].tolist()) == {3} and set(snap["kind"].tolist()) == {int(snap["kind"][0])}
    for p, otimes in added.items():
        mine = snap["location"] == p
        assert snap["otime"][mine].tolist() == otimes
        assert snap["seq"][mine].tolist() == list(range(len(otimes)))
    owned = kv["ref_table"] == 1
    assert int(owned.sum()) == len(snap) and set(kv["key"][owned].tolist()) == {1}
    assert sorted(zip(*(kv[c][owned].tolist() for c in ("location", "ref_seq", "time")))) == sorted(
        zip(*(snap[c].tolist() for c in ("location", "seq", "time"))))
    for c in ev.names:
        if c != "src_order":
            assert np.array_equal(ev[c], clean["events"][c]), c


@pytest.mark.parametrize("chunk", [None, 5000])
def test_tables_sized_from_samples_grow_when_the_samples_miss_the_records(tmp_path, monkeypatch,
                                                                          jit_mode, chunk):
    """A chunk's tables get the room its sampled lines promise (stream._records_about): events
    files whose samples (start, middle, end) hold empty lines only, and their records between,
    decode as the files without those lines, the tables growing when they fill (read whole;
    in chunks, the samples of most chunks hit records)."""
    from partrace.formats.otf import stream
    _, _, clean = decode_all(_copy(tmp_path / "clean"), chunk)
    monkeypatch.setattr(stream, "SAMPLE_BYTES", 512)
    d = _copy(tmp_path / "padded")
    for f in d.glob("*.events"):
        text = f.read_bytes()
        mid = text.index(b"\n", len(text) // 2) + 1
        pad = b"\n" * 2048
        f.write_bytes(pad + text[:mid] + pad + text[mid:] + pad)
    grown = []
    grow = stream.Layout.grow
    monkeypatch.setattr(stream.Layout, "grow",
                        lambda self, which, *a: grown.append(which) or grow(self, which, *a))
    _, _, padded = decode_all(d, chunk)
    assert chunk or grown.count(0) >= 8       # the events table of every file, at least once
    for t, tab in clean.items():
        assert len(tab) == len(padded[t]) and (t != "events" or len(tab) > 1000), t
        for c in tab.names:
            assert np.array_equal(tab[c], padded[t][c]), (t, c)


def _respelled(line: bytes, k: int) -> bytes:
    """A record line written another way OTF reads the same (spaces, long or deprecated
    tags): what kernel.decode_lines' short-form path hands to its general loop."""
    import re
    if k % 4 == 0:
        return line + b" "                                         # trailing space
    if k % 4 == 1:
        return re.sub(rb"^([A-Z#]+)", rb"\1 ", line, count=1)      # space after the keyword
    if k % 4 == 2 and re.match(rb"^[EL][0-9a-f]+X[0-9a-f]+$", line):
        return line.replace(b"X", b"S")                            # SCL's deprecated alias
    if k % 4 == 2 and line.startswith(b"CNT"):
        return line.replace(b"V", b"VALUE")                        # long tag
    return re.sub(rb"([0-9a-f])([A-Z])", rb"\1 \2", line, count=1)  # space before a tag


@pytest.mark.parametrize("chunk", [None, 900])
def test_lines_off_the_short_form_decode_as_their_short_form(tmp_path, jit_mode, chunk):
    """Record lines respelled (spaces, long and deprecated tags; the same line count) decode
    to the same rows, column for column (src_order too), as the writer's short form."""
    _, _, clean = decode_all(_copy(tmp_path / "clean"), chunk)
    d = _copy(tmp_path / "respelled")
    changed = 0
    for f in d.glob("*.events"):
        lines = f.read_bytes().split(b"\n")
        for k, line in enumerate(lines):
            if line[:1].isupper() and not line.startswith(b"K"):     # records, not key-values
                new = _respelled(line, k)
                changed += new != line
                lines[k] = new
        f.write_bytes(b"\n".join(lines))
    assert changed > 1000
    _, _, respelled = decode_all(d, chunk)
    for t, tab in clean.items():
        assert len(tab) == len(respelled[t]) and (t != "events" or len(tab) > 1000), t
        for c in tab.names:
            assert np.array_equal(tab[c], respelled[t][c]), (t, c)


@pytest.mark.parametrize("chunk", [None, 1000])
def test_a_key_value_type_otf_lacks_after_an_undefined_function_is_still_refused(tmp_path, chunk):
    """decode_lines remembers the first reference it finds undefined and checks no other in
    the chunk: a key-value type OTF lacks after an undefined function (kept) is still found."""
    d = _copy(tmp_path)
    f = d / "ring8.1.events"
    fn_line = _edit(f, b"\nE6\n", b"\nE7777\n") + 1
    kv_line = _edit(f, b"\nK4Y5V0\n", b"\nK4YcV0\n") + 1
    assert fn_line < kv_line < fn_line + 20
    with pytest.raises(TraceError) as e:
        _decode(d, chunk)
    assert (e.value.path, e.value.where) == (str(f), f"line {kv_line}")
    assert "expected an OTF value type 0..b for type of KeyValue, got c" in e.value.message

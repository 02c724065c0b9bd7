"""ovni streams that end inside an event: a crashed writer's half-written last event (kept
up to the last whole event, with a warning), or damage (an error): ovni's emulator refuses
both ("ends with incomplete event"), so partrace's leniency stops where a crash cannot
explain the tail."""
from __future__ import annotations

import struct

import pytest

from partrace.errors import TraceError
from tests.fuzz.damage import ovni_events

from .test_ovni import V1, V3, _copy, _decode_unit, _stream


def _cut_at_jumbo(trace, tid):
    path = _stream(trace, tid)
    raw = bytearray(path.read_bytes())
    starts = ovni_events(bytes(raw))
    jumbo = [s for s in starts if raw[s] & 0x10]
    return path, raw, starts, jumbo


def test_a_jumbo_length_flipped_past_the_event_buffer_is_damage(tmp_path):
    """A flipped high bit of a jumbo event's length mid-stream claims more bytes than the
    stream holds: not a crash (libovni writes no event over its 2 MiB buffer)."""
    trace = _copy(V1, tmp_path)
    tid = 31001
    path, raw, starts, jumbo = _cut_at_jumbo(trace, tid)
    at = jumbo[len(jumbo) // 2]
    raw[at + 15] ^= 0x40                                # bit 30 of the length
    path.write_bytes(bytes(raw))
    before = starts.index(at)
    with pytest.raises(TraceError) as e:
        _decode_unit(trace, tid)
    assert e.value.path == str(path) and e.value.where == f"byte {at}"
    assert "libovni writes none over" in e.value.message
    assert f"after {before} whole events" in e.value.message


def test_a_tail_whose_clock_goes_back_is_damage(tmp_path):
    """The last event made to claim a payload the stream lacks (its size code flipped from 0
    to 1) with a clock before the previous event's: a writer's half-written event carries
    a clock at least the last one's.  With its clock intact the same tail is a crash's."""
    tid = 31001
    for name, back, damaged in (("back", 1, True), ("intact", 0, False)):
        trace = _copy(V1, tmp_path / name)
        path = _stream(trace, tid)
        raw = bytearray(path.read_bytes())
        starts = ovni_events(bytes(raw))
        last, before = starts[-1], starts[-2]
        assert raw[last] & 0x0F == 0 and len(raw) - last == 12
        raw[last] |= 0x01                               # claims 2 payload bytes
        clock = struct.unpack_from("<Q", raw, before + 4)[0]
        if back:
            struct.pack_into("<Q", raw, last + 4, clock - back)
        path.write_bytes(bytes(raw))
        if damaged:
            with pytest.raises(TraceError) as e:
                _decode_unit(trace, tid)
            assert e.value.where == f"byte {last}"
            assert f"clock {clock - 1} before the last whole event's ({clock})" in e.value.message
        else:
            with pytest.warns(UserWarning, match=f"byte {last}: stream ends inside an event"):
                _decode_unit(trace, tid)


def test_a_finished_stream_cut_inside_an_event_is_damage(tmp_path):
    """v3 writes ``"finished": 1`` into stream.json when the thread closes its stream: a
    stream so marked was not left half-written by a crash."""
    trace = _copy(V3, tmp_path)
    tid = 27414
    path = _stream(trace, tid)
    assert '"finished": 1' in (path.parent / "stream.json").read_text()
    raw = path.read_bytes()
    starts = ovni_events(raw)
    path.write_bytes(raw[:starts[-1] + 5])
    with pytest.raises(TraceError) as e:
        _decode_unit(trace, tid)
    assert e.value.where == f"byte {starts[-1]}" and "finished" in e.value.message

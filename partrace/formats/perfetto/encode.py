"""Encoding TracePackets into bytes: numba kernels for rows, plain Python for definitions.

Field numbers (protos/perfetto/trace/trace_packet.proto, track_event/*.proto):
  TracePacket: timestamp 8, trusted_packet_sequence_id 10, track_event 11,
               interned_data 12, sequence_flags 13, track_descriptor 60
  TrackEvent:  debug_annotations 4, type 9, name_iid 10, track_uuid 11, counter_value 30,
               double_counter_value 44, flow_ids 47 (fixed64), terminating_flow_ids 48 (fixed64)
  TrackDescriptor: uuid 1, name 2, parent_uuid 5, counter 8;  CounterDescriptor: unit_name 6
  InternedData: event_names 2;  EventName: iid 1, name 2
  DebugAnnotation: uint_value 3, int_value 4, name 10
Fields are written in field-number order, as protobuf's own serializers do.
"""
from __future__ import annotations

import numpy as np

from ...kernels.cacheload import njit

SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4          # TrackEvent.Type
VALUE_NONE, VALUE_INT, VALUE_DOUBLE = 0, 1, 2                   # a row's counter value
STATE_CLEARED, NEEDS_STATE = 1, 2                               # TracePacket.SequenceFlags

# tags (field number << 3 | wire type), as varint bytes
_PACKET = 0x0A              # Trace.packet, length-delimited
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True)
def _vlen(v):
    n = 1
    while v >= 0x80:
        v >>= np.uint64(7)
        n += 1
    return n


@njit(cache=True)
def _put(out, pos, v):
    while v >= 0x80:
        out[pos] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
        v >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(v)
    return pos + 1


@njit(cache=True)
def _fixed64(out, pos, v):
    for i in range(8):
        out[pos + i] = np.uint8((v >> np.uint64(8 * i)) & np.uint64(0xFF))
    return pos + 8


# a message's debug annotations, bits of ``args``: peer, tag (int_value), size (uint_value)
_PEER, _TAG, _SIZE = 1, 2, 4


@njit(cache=True)
def _arg_len(v, name_len):
    body = 1 + _vlen(v) + 2 + name_len
    return 1 + _vlen(np.uint64(body)) + body


@njit(cache=True)
def _put_arg(out, pos, v, signed, name):
    """A TrackEvent.debug_annotations entry {int_value or uint_value: v, name}."""
    body = 1 + _vlen(v) + 2 + len(name)
    out[pos] = 0x22                                      # debug_annotations (4)
    pos = _put(out, pos + 1, np.uint64(body))
    out[pos] = 0x20 if signed else 0x18                  # int_value (4) / uint_value (3)
    pos = _put(out, pos + 1, v)
    out[pos] = 0x52                                      # name (10)
    out[pos + 1] = len(name)
    for j in range(len(name)):
        out[pos + 2 + j] = name[j]
    return pos + 2 + len(name)


_NAME_PEER = np.frombuffer(b"peer", np.uint8)
_NAME_TAG = np.frombuffer(b"tag", np.uint8)
_NAME_SIZE = np.frombuffer(b"size", np.uint8)


@njit(cache=True)
def encode_events(time, etype, uuid, iid, flow_out, flow_in, intern, flags, seqid,
                  names, name_off, args, peer, tag, nbytes, vkind, vbits, out, ends):
    """One packet per row: a TrackEvent of ``etype`` on track ``uuid`` named by ``iid``
    (0: no name), with a flow leaving (``flow_out``) or arriving (``flow_in``, 0: none),
    and debug annotations peer, tag, size (``nbytes``) where bits 1, 2, 4 of ``args`` say so;
    a counter value ``vbits`` where ``vkind`` is VALUE_INT (an int64's two's complement) or
    VALUE_DOUBLE (a double's bits);
    where ``intern`` is set the packet also carries InternedData.event_names {iid,
    names[name_off[iid]:name_off[iid+1]]}.  Writes into ``out`` (large enough), the end
    offset of each row's packet into ``ends``; returns the bytes used."""
    pos = 0
    for i in range(len(time)):
        t = np.uint64(time[i])
        u = np.uint64(uuid[i])
        n = np.uint64(iid[i])
        a = args[i]
        te = 1 + _vlen(np.uint64(etype[i])) + 1 + _vlen(u)
        if a & _PEER:
            te += _arg_len(np.uint64(peer[i]), 4)
        if a & _TAG:
            te += _arg_len(np.uint64(tag[i]), 3)
        if a & _SIZE:
            te += _arg_len(np.uint64(nbytes[i]), 4)
        if n != 0:
            te += 1 + _vlen(n)
        v = np.uint64(vbits[i])
        if vkind[i] == VALUE_INT:
            te += 2 + _vlen(v)
        elif vkind[i] == VALUE_DOUBLE:
            te += 2 + 8
        if flow_out[i] != 0:
            te += 2 + 8
        if flow_in[i] != 0:
            te += 2 + 8
        s = np.uint64(seqid[i])
        size = 1 + _vlen(t) + 1 + _vlen(s) + 1 + _vlen(np.uint64(te)) + te \
            + 1 + _vlen(np.uint64(flags[i]))
        nl = 0
        en = 0
        idata = 0
        if intern[i]:
            nl = name_off[n + 1] - name_off[n]
            en = 1 + _vlen(n) + 1 + _vlen(np.uint64(nl)) + nl
            idata = 1 + _vlen(np.uint64(en)) + en
            size += 1 + _vlen(np.uint64(idata)) + idata
        out[pos] = _PACKET
        pos = _put(out, pos + 1, np.uint64(size))
        out[pos] = 0x40                                  # timestamp
        pos = _put(out, pos + 1, t)
        out[pos] = 0x50                                  # trusted_packet_sequence_id
        pos = _put(out, pos + 1, s)
        out[pos] = 0x5A                                  # track_event
        pos = _put(out, pos + 1, np.uint64(te))
        if a & _PEER:
            pos = _put_arg(out, pos, np.uint64(peer[i]), True, _NAME_PEER)
        if a & _TAG:
            pos = _put_arg(out, pos, np.uint64(tag[i]), True, _NAME_TAG)
        if a & _SIZE:
            pos = _put_arg(out, pos, np.uint64(nbytes[i]), False, _NAME_SIZE)
        out[pos] = 0x48                                  # type
        pos = _put(out, pos + 1, np.uint64(etype[i]))
        if n != 0:
            out[pos] = 0x50                              # name_iid
            pos = _put(out, pos + 1, n)
        out[pos] = 0x58                                  # track_uuid
        pos = _put(out, pos + 1, u)
        if vkind[i] == VALUE_INT:
            out[pos] = 0xF0                              # counter_value (30, varint)
            out[pos + 1] = 0x01
            pos = _put(out, pos + 2, v)
        elif vkind[i] == VALUE_DOUBLE:
            out[pos] = 0xE1                              # double_counter_value (44, fixed64)
            out[pos + 1] = 0x02
            pos = _fixed64(out, pos + 2, v)
        if flow_out[i] != 0:
            out[pos] = 0xF9                              # flow_ids (47, fixed64)
            out[pos + 1] = 0x02
            pos = _fixed64(out, pos + 2, np.uint64(flow_out[i]))
        if flow_in[i] != 0:
            out[pos] = 0x81                              # terminating_flow_ids (48, fixed64)
            out[pos + 1] = 0x03
            pos = _fixed64(out, pos + 2, np.uint64(flow_in[i]))
        if intern[i]:
            out[pos] = 0x62                              # interned_data
            pos = _put(out, pos + 1, np.uint64(idata))
            out[pos] = 0x12                              # event_names
            pos = _put(out, pos + 1, np.uint64(en))
            out[pos] = 0x08                              # iid
            pos = _put(out, pos + 1, n)
            out[pos] = 0x12                              # name
            pos = _put(out, pos + 1, np.uint64(nl))
            a = name_off[n]
            for j in range(nl):
                out[pos + j] = names[a + j]
            pos += nl
        out[pos] = 0x68                                  # sequence_flags
        pos = _put(out, pos + 1, np.uint64(flags[i]))
        ends[i] = pos
    return pos


@njit(cache=True)
def encode_counters(time, uuid, bits, is_double, seqid, out, ends):
    """One packet per row: a COUNTER TrackEvent on track ``uuid`` whose value is ``bits``
    (an int64's two's complement, or a double's bits when ``is_double``)."""
    pos = 0
    for i in range(len(time)):
        t = np.uint64(time[i])
        u = np.uint64(uuid[i])
        v = np.uint64(bits[i])
        vl = 2 + 8 if is_double else 2 + _vlen(v)
        te = 1 + 1 + 1 + _vlen(u) + vl
        s = np.uint64(seqid[i])
        size = 1 + _vlen(t) + 1 + _vlen(s) + 1 + _vlen(np.uint64(te)) + te
        out[pos] = _PACKET
        pos = _put(out, pos + 1, np.uint64(size))
        out[pos] = 0x40
        pos = _put(out, pos + 1, t)
        out[pos] = 0x50
        pos = _put(out, pos + 1, s)
        out[pos] = 0x5A
        pos = _put(out, pos + 1, np.uint64(te))
        out[pos] = 0x48                                  # type COUNTER
        out[pos + 1] = COUNTER
        out[pos + 2] = 0x58                              # track_uuid
        pos = _put(out, pos + 3, u)
        if is_double:
            out[pos] = 0xE1                              # double_counter_value (44, fixed64)
            out[pos + 1] = 0x02
            pos = _fixed64(out, pos + 2, v)
        else:
            out[pos] = 0xF0                              # counter_value (30, varint)
            out[pos + 1] = 0x01
            pos = _put(out, pos + 2, v)
        ends[i] = pos
    return pos


@njit(cache=True)
def encode_tracks(uuid, parent, name, is_counter, unit, names, name_off, out):
    """One packet per track: a TrackDescriptor {uuid, name = names[name_off[name[i]]:...],
    parent_uuid (0: none), a CounterDescriptor where ``is_counter``, with unit_name
    names[...unit[i]...] where ``unit[i]`` >= 0}.  (A ROSS run has a track per LP and per
    LP and sampled column: too many for Python.)"""
    pos = 0
    for i in range(len(uuid)):
        u = np.uint64(uuid[i])
        p = np.uint64(parent[i])
        a = name_off[name[i]]
        nl = name_off[name[i] + 1] - a
        body = 1 + _vlen(u) + 1 + _vlen(np.uint64(nl)) + nl
        if p != 0:
            body += 1 + _vlen(p)
        ul = 0
        cd = 0
        if is_counter[i] and unit[i] >= 0:
            ul = name_off[unit[i] + 1] - name_off[unit[i]]
            cd = 1 + _vlen(np.uint64(ul)) + ul
        if is_counter[i]:
            body += 1 + _vlen(np.uint64(cd)) + cd
        size = 2 + _vlen(np.uint64(body)) + body
        out[pos] = _PACKET
        pos = _put(out, pos + 1, np.uint64(size))
        out[pos] = 0xE2                                  # track_descriptor (60)
        out[pos + 1] = 0x03
        pos = _put(out, pos + 2, np.uint64(body))
        out[pos] = 0x08                                  # uuid
        pos = _put(out, pos + 1, u)
        out[pos] = 0x12                                  # name
        pos = _put(out, pos + 1, np.uint64(nl))
        for j in range(nl):
            out[pos + j] = names[a + j]
        pos += nl
        if p != 0:
            out[pos] = 0x28                              # parent_uuid
            pos = _put(out, pos + 1, p)
        if is_counter[i]:
            out[pos] = 0x42                              # counter: CounterDescriptor
            pos = _put(out, pos + 1, np.uint64(cd))
            if unit[i] >= 0:
                out[pos] = 0x32                          # unit_name (6)
                pos = _put(out, pos + 1, np.uint64(ul))
                b = name_off[unit[i]]
                for j in range(ul):
                    out[pos + j] = names[b + j]
                pos += ul
    return pos


def string_table(strings) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of the strings laid end to end, and the offsets (len + 1) of each."""
    encoded = [s.encode("utf-8", "replace") for s in strings]
    off = np.zeros(len(encoded) + 1, np.int64)
    off[1:] = np.cumsum([len(b) for b in encoded])
    return np.frombuffer(b"".join(encoded) or b"\0", np.uint8), off


# -- ids -----------------------------------------------------------------------------------
def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a well-spread 64-bit hash of uint64 values."""
    x = np.asarray(x).astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def hash_of(*columns) -> np.ndarray:
    """A 64-bit hash of rows of int64 columns (the same on every rank)."""
    h = np.full(len(columns[0]), 0x9E3779B97F4A7C15, dtype=np.uint64)
    for c in columns:
        h = mix(h ^ np.asarray(c).astype(np.int64).view(np.uint64))
    return h

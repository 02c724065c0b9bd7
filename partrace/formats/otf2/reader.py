"""Reading an OTF2 archive: one unit per location (sized by its .evt file), definitions from
the global definitions (globaldefs.py), events decoded by the library's own event reader
through C callbacks (callbacks.py, kernel.py) into numpy buffers, then mapped onto the
common columns with numpy.

Tables:
- ``events``: every event record, in the location's order: ``record`` is its OTF2 type
  (records.RECORDS, code = index + 1), ``args`` its scalar arguments as the library gives
  them (masked to their width; signed ones sign-extended), so nothing is lost; the common
  columns say what partrace knows of it (ENTER/LEAVE, SEND/RECV with peer as a location,
  COLLECTIVE_BEGIN/END, COUNTER for Metric; Kind.EVENT for the rest);
- ``values``: a Metric's values (with their OTF2_Type) and a ProgramBegin's argument
  strings, by the event's ``event_seq``;
- ``attributes``: the attribute list of each event (attribute ref, OTF2_Type, value bits).
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import TraceError
from ...model import UID, Column, Definitions, Kind, Schema, Table, column, conform, unsigned_ids
from ..base import TraceReader, Unit, regular_file, repeated
from . import records as R
from .chunkheads import counted_events, ends_as_written

KEY = ["time", "location", "seq"]
LOCATION = column("location", dtype=UID)    # a batch is one location's: one value, a view
# bytes of an OTF2_Type's value (the union's other bytes are whatever the library left)
TYPE_BYTES = np.asarray([0, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8] + [4] * 15, np.int64)
TYPE_BYTES[13] = 8          # OTF2_TYPE_LOCATION
SIGNED_TYPES = (5, 6, 7)    # INT8, INT16, INT32 (INT64 needs nothing)
UNDEFINED_U32 = 0xFFFFFFFF
CODE = {name: i + 1 for i, (name, _) in enumerate(R.RECORDS)}


def _masks():
    """Per record code: each argument's mask, and whether it is signed (sign-extended)."""
    n = len(R.RECORDS) + 1
    mask = np.zeros((n, R.MAX_ARGS), np.uint64)
    signed = np.zeros((n, R.MAX_ARGS), bool)
    for code, (_, spec) in enumerate(R.RECORDS, 1):
        for j, (_, size, sign) in enumerate(spec):
            mask[code, j] = np.uint64((1 << (8 * size)) - 1)
            signed[code, j] = sign
    return mask, signed


MASK, SIGNED = _masks()


def anchor_of(path: Path) -> Path:
    """The anchor file: ``path`` itself, or the one NAME.otf2 in the folder ``path``."""
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.suffix == ".otf2" and p.is_file())
        if len(found) != 1:
            raise TraceError(path, None, f"expected one OTF2 anchor file (NAME.otf2) in the "
                             f"folder, found {len(found)}")
        return found[0]
    return path


# Event file bytes of a work unit: small consecutive locations share one up to this.  Small
# enough that a trace of a few hundred MB still gives each of 32 ranks several units (units
# of 4 MiB left some ranks a third unit where the others had two: scripts/bench_scaling.py's
# OTF2 case), and big enough that tiny locations do not each cost a unit.
UNIT_BYTES = 1 << 20


class OTF2Reader(TraceReader):
    format_name = "otf2"
    locations_in_one_unit = True
    batch_events = 1 << 16

    def __init__(self, path, unit_bytes: int = UNIT_BYTES):
        super().__init__(path)
        if not isinstance(unit_bytes, int) or unit_bytes < 1:
            from ...errors import UsageError
            raise UsageError(f"otf2 reader option unit_bytes={unit_bytes!r}: expected a "
                             "positive number of bytes")
        self.unit_bytes = unit_bytes
        self.anchor = anchor_of(self.path)
        regular_file(self.anchor, "OTF2 anchor file")
        self.folder = self.anchor.with_suffix("")
        self._defs = None

    def _error(self, what: Path, exc) -> TraceError:
        return TraceError(what, None, f"the OTF2 library cannot read it: {exc}")

    def read_definitions(self, survey=None) -> Definitions:
        from .globaldefs import read_global
        from .library import last_error, quiet_errors
        if self._defs is None:
            quiet_errors()
            last_error()
            regular_file(self.anchor.with_suffix(".def"), "OTF2 global definitions file (NAME.def)")
            self._defs = read_global(str(self.anchor), lambda e: self._error(
                self.anchor.with_suffix(".def"), e))
        return self._defs

    def units(self) -> list[Unit]:
        defs = self.read_definitions()
        out = []
        locs = defs.tables["otf2_locations"]
        # local definitions (mapping tables, clock offsets) are optional in OTF2, but where
        # the archive has them, a location's missing one would leave its refs unmapped
        local_defs = self.folder.is_dir() and any(p.suffix == ".def" for p in self.folder.iterdir())
        from .readlib import event_chunk_bytes
        chunk_bytes = event_chunk_bytes(str(self.anchor))
        differ = []         # (ref, the definition's count, the file's)
        for lid, ref, defined in sorted(zip(locs["id"].tolist(), locs["ref"].tolist(),
                                            locs["events"].tolist())):
            evt = self.folder / f"{ref}.evt"
            size = regular_file(evt, f"event file of location {ref} (named by the anchor file)")
            if local_defs:
                regular_file(self.folder / f"{ref}.def", f"local definitions of location {ref} "
                             "(the archive's other locations have theirs)")
            counted = counted_events(evt, size, chunk_bytes) if chunk_bytes else None
            # a cut file is an error when it is read: no warning about it here first
            if counted is not None and counted != defined and ends_as_written(evt, size):
                differ.append((ref, defined, counted))
            out.append((ref, size, (ref, lid, counted)))
        if differ:
            # the library reads by the files, not by these counts (APEX writes one count
            # for every location): they stay in otf2_locations/events as written
            ref, defined, counted = differ[0]
            warnings.warn(f"{self.anchor.with_suffix('.def')}: {len(differ)} of {len(out)} "
                          f"location definitions give an event count other than their event "
                          f"file's (location {ref}: {defined}, {ref}.evt: {counted}); the "
                          "files' records are read", stacklevel=2)
        return _grouped(out, self.unit_bytes)

    def source_files(self) -> list[Path]:
        files = [self.anchor, self.anchor.with_suffix(".def")]
        return files + (sorted(p for p in self.folder.iterdir() if p.is_file())
                        if self.folder.is_dir() else [])

    def schema(self, defs: Definitions) -> Schema:
        key = [column(c) for c in KEY]
        ev = key + [column("kind"), column("region"), column("ticks"), column("peer"),
                    column("comm"), column("tag"), column("size"), column("received"),
                    column("root"), column("collop"), column("counter"), column("value"),
                    column("match_id"),
                    Column("record", "uint8", "OTF2 event record type (formats/otf2/records.py: "
                           "code = index + 1)"),
                    Column("args", ("u8", R.MAX_ARGS), "the record's scalar arguments in the "
                           "library's order (signed ones as two's complement)")]
        seq = Column("event_seq", "int64", "seq of the event the row belongs to", refers="events")
        return unsigned_ids({
                "events": ev,
                "values": key + [seq, column("counter", description="a Metric record's metric "
                                             "(counters/id; 0: another record's array)"),
                                 Column("index", "uint32", "position in the record's array"),
                                 Column("type", "uint8", "OTF2_Type of the value"),
                                 Column("value", "uint64", "the value's bits (a double's, an "
                                        "integer's as two's complement, a string ref)")],
                "attributes": key + [seq, Column("attribute", "uint32", "attribute ref "
                                                 "(otf2_attributes/id)"),
                                     Column("type", "uint8", "OTF2_Type of the value"),
                                     Column("value", "uint64", "the value's bits")]})

    def decode(self, unit: Unit, defs: Definitions) -> Iterator[dict[str, Table]]:
        schema = self.schema(defs)
        mapper = _Mapper(defs)
        for location in unit.info:
            yield from self._decode_location(location, schema, mapper)

    def _decode_location(self, location, schema, mapper) -> Iterator[dict[str, Table]]:
        from . import kernel as K
        from .readlib import LocationEvents
        ref, lid, counted = location      # counted: by the file's chunk headers, or None
        evt = self.folder / f"{ref}.evt"
        regular_file(evt, f"event file of location {ref} (named by the anchor file)")
        try:
            reader = LocationEvents(str(self.anchor), ref, self.batch_events)
        except OSError as exc:
            raise self._error(evt, exc) from None
        seq = vseq = aseq = 0
        held = None         # a chunk ending in a collective's begin, until its end is read
        try:
            while True:
                try:
                    a = reader.batch()
                except OSError as exc:
                    at = seq + int(reader.arena[K.N_EV])
                    said = "" if counted is None else f"; its chunk headers count {counted} " \
                        "event records"
                    raise TraceError(evt, f"event {at}", f"the OTF2 library cannot read event "
                                     f"record {at}: {exc}{said}") from None
                n = int(a[K.N_EV])
                if a[K.ERROR]:
                    raise TraceError(evt, f"event {seq + n}", _arena_error(a))
                if counted is not None and seq + n > counted:
                    # past the count, the library reads what its buffer held before
                    raise TraceError(evt, f"event {counted}", f"the OTF2 library reads on past "
                                     f"the {counted} event records the file's chunk headers "
                                     "count: the file is cut short inside its last chunk")
                if not n:
                    if counted is not None and seq != counted:
                        raise TraceError(evt, f"event {seq}", f"the file ends after {seq} event "
                                         f"records; its chunk headers count {counted}: the file "
                                         "is cut short")
                    if held is not None:
                        yield held[0]
                    return
                ev = a[K.HEADER:K.HEADER + n * K.EVENT_WIDTH].reshape(n, K.EVENT_WIDTH)
                code = ev[:, 1].astype(np.int64)
                unknown = np.flatnonzero(code == 0)
                if len(unknown):
                    raise TraceError(evt, f"event {seq + int(unknown[0])}", "an event record "
                                     "of a type the bundled OTF2 library does not know (a newer "
                                     "OTF2 version's): expected one of the library's records")
                table = mapper.events(ev, code, lid, seq)
                chunk = {"events": conform(Table(table), schema["events"])}
                for name, count, at, start in (("values", K.N_VAL, K.VAL_AT, vseq),
                                               ("attributes", K.N_ATTR, K.ATTR_AT, aseq)):
                    m = int(a[count])
                    if not m:
                        continue
                    rows = a[int(a[at]):int(a[at]) + m * K.ROW].reshape(m, K.ROW)
                    idx = rows[:, 0].astype(np.int64)
                    typ = rows[:, 2].astype(np.int64)
                    side = {"time": table["time"][idx], "location": repeated(lid, m, LOCATION),
                            "seq": start + np.arange(m, dtype=np.int64), "event_seq": seq + idx,
                            "type": typ, "value": _mask_value(rows[:, 3], typ)}
                    side["attribute" if name == "attributes" else "index"] = rows[:, 1]
                    chunk[name] = conform(Table(side), schema[name])
                    if name == "values":
                        # a Metric's values name its metric (each is a counter member's
                        # value); its first value is also the event's counter value
                        metric = code[idx] == CODE["Metric"]
                        chunk[name]["counter"][metric] = chunk["events"]["counter"][idx[metric]]
                        first = (rows[:, 1] == 0) & metric
                        chunk["events"]["value"][idx[first]] = side["value"][first]
                        vseq += m
                    else:
                        aseq += m
                seq += n
                begin = _fill_begins(chunk["events"], held)
                if held is not None:
                    yield held[0]
                held = None
                if begin is None:
                    yield chunk
                else:
                    held = (chunk, begin)
        finally:
            reader.close()


COLLECTIVE_FIELDS = ("collop", "comm", "root", "size", "received")


def _fill_begins(events: Table, held) -> int | None:
    """A collective's begin row gets the operation, communicator, root and sizes of its end
    (OTF2's MpiCollectiveBegin has no fields; partrace's analyses name a collective by its
    begin row, as OTF's begin records carry them).  Collectives of one location do not nest,
    so a begin's end is the next end.  ``held``: (an earlier chunk, its trailing begin row),
    completed from this chunk's first end.  Returns this chunk's trailing begin still
    waiting for its end (in a later chunk), or None."""
    kind = events["kind"]
    ends = np.flatnonzero(kind == Kind.COLLECTIVE_END)
    if held is not None and len(ends):
        for c in COLLECTIVE_FIELDS:
            held[0]["events"][c][held[1]] = events[c][ends[0]]
    begins = np.flatnonzero(kind == Kind.COLLECTIVE_BEGIN)
    if not len(begins):
        return None
    j = np.searchsorted(ends, begins)
    ok = j < len(ends)
    for c in COLLECTIVE_FIELDS:
        events[c][begins[ok]] = events[c][ends[j[ok]]]
    return None if ok[-1] else int(begins[-1])


def _grouped(locations: list, limit: int) -> list[Unit]:
    """Units of consecutive locations (ref order) of at most ``limit`` bytes of event files
    each: a big location alone, small ones together (the same units on any rank count; a
    reader opened per location costs about a millisecond, the engine's bookkeeping per unit
    more)."""
    units, group, size = [], [], 0
    for ref, nbytes, info in locations:
        if group and size + nbytes > limit:
            units.append(Unit(f"{group[0][0]:012d}", size, tuple(group)))
            group, size = [], 0
        group.append(info)
        size += nbytes
    if group:
        units.append(Unit(f"{group[0][0]:012d}", size, tuple(group)))
    return units


def _arena_error(a) -> str:
    from . import kernel as K
    e, d = int(a[K.ERROR]), int(a[K.DETAIL])
    if e == K.TOO_MANY_ATTRIBUTES:
        return f"an event with {d} attributes, more than partrace's buffer holds"
    if e == K.TOO_MANY_VALUES:
        return f"an event with {d} values, more than partrace's buffer holds"
    return f"the OTF2 library cannot read an event's attribute list (error {d})"


def _mask_value(bits: np.ndarray, typ: np.ndarray) -> np.ndarray:
    """The value's own bytes of each 8-byte union (signed ones sign-extended)."""
    size = TYPE_BYTES[np.minimum(typ, len(TYPE_BYTES) - 1)]
    mask = np.where(size >= 8, np.uint64(0xFFFFFFFFFFFFFFFF),
                    (np.uint64(1) << (8 * size).astype(np.uint64)) - np.uint64(1))
    v = bits & mask
    sign = np.isin(typ, SIGNED_TYPES)
    if sign.any():
        width = (8 * size[sign]).astype(np.uint64)
        top = (v[sign] >> (width - np.uint64(1))) & np.uint64(1)
        v[sign] = np.where(top == 1, v[sign] | ~mask[sign], v[sign])
    return v


class _Mapper:
    """Events of one batch onto the common columns (vectorized per record type)."""

    def __init__(self, defs: Definitions):
        self.resolution = int(defs.attrs["ticks_per_second"])
        shift = defs.attrs["ref_shift"]
        self.rshift, self.mshift = shift["region"], shift["metric"]
        m = defs.tables["communicator_members"]
        comm = np.asarray(m["comm"], np.int64)
        loc = np.asarray(m["location"], np.int64)
        # rank r of communicator c (partrace id) -> location: members in rank order
        self.members = {int(c): loc[comm == c] for c in np.unique(comm)}
        self.self_comms = np.asarray(defs.attrs.get("self_comms", []), np.int64)

    def _location(self, comm: np.ndarray, rank: np.ndarray, lid: int) -> np.ndarray:
        out = np.zeros(len(rank), np.int64)
        rank = rank.astype(np.int64)
        for c in np.unique(comm):           # few communicators
            members = self.members.get(int(c))
            if members is None:
                continue
            rows = np.flatnonzero(comm == c)
            ok = rank[rows] < len(members)
            out[rows[ok]] = members[rank[rows[ok]]]
        if len(self.self_comms):
            out[np.isin(comm, self.self_comms) & (rank == 0)] = lid
        return out

    def nanoseconds(self, ticks: np.ndarray) -> np.ndarray:
        """Ticks as ns (exact integer arithmetic; the same values at 1 GHz)."""
        t = ticks.astype(np.int64)
        res = self.resolution
        if res == 1_000_000_000:
            return t
        return (t // res) * 1_000_000_000 + (t % res) * 1_000_000_000 // res

    def events(self, ev: np.ndarray, code: np.ndarray, lid: int, seq: int) -> dict:
        """The batch's rows: columns allocated in their schema dtypes, and only the record
        types present in the batch looked at (one pass each)."""
        n = len(ev)
        present = np.flatnonzero(np.bincount(code, minlength=len(MASK)))
        rows = {int(c): np.flatnonzero(code == c) for c in present}
        # (the only signed arguments are 64-bit: their bits are already two's complement)
        args = ev[:, 2:] & MASK[code]
        a = args.view(np.int64)         # refs and sizes; sizes beyond 2**63 keep their bits
        ticks = ev[:, 0].copy()        # the arena is refilled by the next batch
        ids = lambda: np.zeros(n, np.uint32)  # noqa: E731   (OTF2 refs are 32-bit)
        kind = np.full(n, int(Kind.EVENT), np.uint8)
        region, peer, comm, root, collop, counter = ids(), ids(), ids(), ids(), ids(), ids()
        tag = np.zeros(n, np.int64)
        size, received, match = np.zeros(n, np.uint64), np.zeros(n, np.uint64), \
            np.zeros(n, np.uint64)
        empty = np.zeros(0, np.int64)
        for name, k in (("Enter", Kind.ENTER), ("Leave", Kind.LEAVE)):
            r = rows.get(CODE[name], empty)
            kind[r] = k
            region[r] = a[r, 0] + self.rshift
        for name, k in (("MpiSend", Kind.SEND), ("MpiIsend", Kind.SEND), ("MpiRecv", Kind.RECV),
                        ("MpiIrecv", Kind.RECV)):
            r = rows.get(CODE[name])
            if r is None:
                continue
            kind[r] = k
            comm[r] = a[r, 1] + 1
            peer[r] = self._location(comm[r], a[r, 0], lid)
            tag[r] = a[r, 2]
            size[r] = args[r, 3]
            if name.startswith("MpiI"):
                match[r] = args[r, 4]
        kind[rows.get(CODE["MpiCollectiveBegin"], empty)] = Kind.COLLECTIVE_BEGIN
        r = rows.get(CODE["MpiCollectiveEnd"])
        if r is not None:
            kind[r] = Kind.COLLECTIVE_END
            collop[r] = a[r, 0] + 1
            comm[r] = a[r, 1] + 1
            has_root = a[r, 2] != UNDEFINED_U32
            root[r] = np.where(has_root, self._location(comm[r], np.where(has_root, a[r, 2], 0),
                                                    lid), 0)
            size[r] = args[r, 3]
            received[r] = args[r, 4]
        r = rows.get(CODE["Metric"])
        if r is not None:
            kind[r] = Kind.COUNTER
            counter[r] = a[r, 0] + self.mshift
            args[r, 2:] = 0         # the arrays' addresses: their contents are in `values`
        args[rows.get(CODE["ProgramBegin"], empty), 2] = 0
        return {"time": self.nanoseconds(ticks), "location": repeated(lid, n, LOCATION),
                "seq": seq + np.arange(n, dtype=np.int64), "kind": kind, "region": region,
                "ticks": ticks, "peer": peer, "comm": comm, "tag": tag, "size": size,
                "received": received, "root": root, "collop": collop, "counter": counter,
                "value": np.zeros(n, np.uint64), "match_id": match,
                "record": code.astype(np.uint8), "args": args}

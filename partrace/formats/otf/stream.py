"""Decoding one stream file (.events/.snaps/.stats): chunks of text -> tables.

kernel.decode_lines writes each record straight into the columns of its table
(events, snapshots or statistics), laid out here: the 8-byte columns are the rows
of one (columns x capacity) uint64 matrix per table, the 32-bit ids and the
location the rows of one uint32 matrix (OTF tokens are unsigned 32-bit numbers), and a
table's columns are views of those rows.  Only the columns the reader's selection asks for
get a row; every record is parsed and checked all the same, so errors do not depend on the
selection.
"""
from __future__ import annotations

from math import gcd
from pathlib import Path
from typing import Iterator

import numpy as np

from ...errors import TraceError
from ...model import Table, byte_rows, cast, conform
from . import grammar as G
from . import kernel as K
from .checks import TARGETS
from .files import read_blocks
from .tables import KIND_OF, SCHEMA, TYPES, kv_table, ticks_to_ns

ROW_TABLES = ("events", "snapshots", "statistics")      # kernel table codes 0, 1, 2
MAIN_TABLE = {"events": 0, "snaps": 1, "stats": 2}       # most rows of each file kind
_KEY_WIDE = {"time": K.K_TIME, "seq": K.K_SEQ, "ticks": K.K_TICKS, "src_order": K.K_ORDER}
_TAB_OF = np.array([ROW_TABLES.index(r.table) if r.table in ROW_TABLES else -1
                    for r in G.STREAM_RECORDS], np.int64)
_IS_TEXT = np.array([bool(r.fields) and r.fields[0].ftype == G.STRING for r in G.STREAM_RECORDS], np.bool_)
_UNBOUNDED = 1 << 62      # capacity of a table nobody asked for (its rows are counted, not kept)
_ID_ERROR = "an id above 2**32-1 (OTF tokens are unsigned 32-bit numbers)"
LOCATION = next(c for c in SCHEMA["events"] if c.name == "location")
SAMPLE_BYTES = 1 << 16    # a chunk's records are counted in 3 samples this long (_records_about)


class Layout:
    """Where decode_lines writes each column of each row table, for one selection."""

    _made: dict = {}

    @classmethod
    def of(cls, want: dict[str, list[str] | None], tps: int) -> "Layout":
        """The layout for `want` ({table: its columns asked for, None: not asked for}), made
        once per process (every unit asks for it)."""
        key = (tps, tuple((t, None if w is None else tuple(w)) for t, w in sorted(want.items())))
        if key not in cls._made:
            cls._made[key] = cls(want, tps)
        return cls._made[key]

    def __init__(self, want: dict[str, list[str] | None], tps: int):
        self.tps = tps
        g = gcd(10**9, tps)
        a, b = 10**9 // g, tps // g
        fast = a * b < 2**64            # else ticks_to_ns's exact Python path, after the kernel
        self.time_a, self.time_b = np.uint64(a if fast else 0), np.uint64(b if fast else 0)
        self.want = want
        self.keyrow = np.full((len(ROW_TABLES), 6), -1, np.int64)
        self.colmap = np.full((len(G.STREAM_RECORDS), K.NV), -1, np.int64)
        self.sources: list[list[tuple[str, str, int]] | None] = []     # (column, matrix, row)
        self.n_wide, self.n_narrow = [], []
        for T, t in enumerate(ROW_TABLES):
            want = self.want[t]
            if want is not None and not want:
                want = ["location"]          # asked for with no column it has: its rows still
            names = want or []
            wide, narrow, src = [], [], []
            for name in names + (["ticks"] if "time" in names and not fast and "ticks" not in names else []):
                if name == "kind":
                    self.keyrow[T, K.K_KIND] = 0
                    src.append((name, "kind", 0))
                elif name == "location":
                    self.keyrow[T, K.K_LOC] = len(narrow)
                    src.append((name, "narrow", len(narrow)))
                    narrow.append(name)
                elif TYPES[t][name] == np.uint32:
                    src.append((name, "narrow", len(narrow)))
                    narrow.append(name)
                else:
                    if name in _KEY_WIDE and (name != "time" or fast):
                        self.keyrow[T, _KEY_WIDE[name]] = len(wide)
                    src.append((name, "wide", len(wide)))
                    wide.append(name)
            if not fast and "time" in names:
                src = [(n, "slow_time" if n == "time" else m, r) for n, m, r in src]
            # every 32-bit field is range-checked: rows past the matrix's are checked, not kept
            unkept = len(narrow)
            for r, rec in enumerate(G.STREAM_RECORDS):
                if rec.table != t:
                    continue
                for j, f in enumerate(rec.fields):
                    if f.ftype == G.STRING:
                        continue
                    if f.col in wide:
                        self.colmap[r, j] = wide.index(f.col)
                    elif f.col in narrow:
                        self.colmap[r, j] = -narrow.index(f.col) - 2
                    elif TYPES[t][f.col] == np.uint32:
                        self.colmap[r, j] = -unkept - 2
            self.sources.append(src if want is not None else None)
            self.n_wide.append(len(wide))
            self.n_narrow.append(len(narrow))

    def buffers(self, kind: str, records: int):
        """Empty columns for a chunk of about `records` records: its file kind's main table
        holds them; the others and the side matrix grow when they fill."""
        caps = np.zeros(len(ROW_TABLES), np.int64)
        caps[MAIN_TABLE[kind]] = records + 1
        for T, src in enumerate(self.sources):
            if src is None:
                caps[T] = _UNBOUNDED
        bufs = [self._table(T, 0 if caps[T] == _UNBOUNDED else caps[T]) for T in range(len(ROW_TABLES))]
        return caps, bufs, np.zeros((0, K.NSD), np.uint64)

    def _table(self, T: int, cap: int):
        return (np.zeros((self.n_wide[T], cap), np.uint64), np.zeros((self.n_narrow[T], cap), np.uint32),
                np.zeros(cap if self.keyrow[T, K.K_KIND] >= 0 else 0, np.uint8))

    def grow(self, which: int, caps, bufs, side, rows: int, room: int):
        """Room for `room` rows in table `which` (3: the side matrix); its `rows` are kept.
        (room: its rows and the chunk's record lines left, so a buffer grows once a chunk,
        whatever the number of key-value lines; again only if lines start with spaces.)"""
        if which == 3:
            bigger = np.zeros((room, K.NSD), np.uint64)
            bigger[:rows] = side[:rows]
            return bufs, bigger
        new = self._table(which, room)
        for old, b in zip(bufs[which], new):
            b[..., :rows] = old[..., :rows]
        caps[which] = room
        return bufs[:which] + [new] + bufs[which + 1:], side

    def kernel_args(self, caps, side):
        return (_TAB_OF, KIND_OF, _IS_TEXT, self.colmap, self.keyrow, caps, len(side), self.time_a, self.time_b)


def decode_stream(path: Path, kind: str, layout: Layout, counts: np.ndarray, seqs, chunk: int,
                  refs) -> Iterator[dict[str, Table]]:
    """The tables of one stream file, a chunk of about `chunk` bytes at a time.  `counts`:
    the unit's seq counters (row table, index of the process in refs.processes)."""
    grammar = K.tables(kind).arrays
    checks = refs.kernel_args()
    st = np.zeros(K.NST, np.int64)
    tp = np.zeros(K.NTP, np.uint64)
    st[K.S_KV_SIDE] = -1
    carry = b""
    at = 0                  # offset in the (uncompressed) text of data[0]
    blocks = read_blocks(path, chunk)
    done = False
    while not done:
        nxt = next(blocks, None)
        done = nxt is None
        data = carry + (nxt or b"")
        if not data:
            break
        if not done and len(data) < chunk and b"\n" not in nxt:
            carry = data
            continue
        if done and not data.endswith(b"\n"):
            data = carry = _without_cut_line(path, data, at)
            if not data:
                break
        limit = len(data) if done else data.rfind(b"\n") + 1
        buf = np.frombuffer(data, np.uint8)
        caps, bufs, side = layout.buffers(kind, _records_about(buf, limit))
        for s in (K.S_POS, K.S_N, K.S_NSIDE, K.S_M, K.S_M + 1, K.S_M + 2):
            st[s] = 0
        start = (st.copy(), tp.copy(), counts.copy())     # for _first_line: this chunk again
        while True:
            out = (tuple(b[0] for b in bufs), tuple(b[1] for b in bufs), tuple(b[2] for b in bufs), counts, side)
            status, err, eline, erec, efield, epos = K.decode_lines(
                buf, limit, done, grammar, checks, layout.kernel_args(caps, side), out, st, tp)
            if status != K.FULL:
                break
            which = int(st[K.S_FULL])
            rows = int(st[K.S_NSIDE]) if which == 3 else int(st[K.S_M + which])
            pos = int(st[K.S_POS])
            bufs, side = layout.grow(which, caps, bufs, side, rows,
                                     rows + count_records(buf[pos:limit]) + 1)
        if status == K.BAD:
            _syntax_error(path, data, err, eline, erec, efield, epos)
        # a token no record defines (the kernel's first reference but a key-value type) is
        # data; a key-value type OTF lacks further in the chunk (the kernel checked no more)
        # is still an error
        undefined = st[K.S_REF_LINE] != 0 and st[K.S_REF_WHAT] != K.BAD_KV_TYPE
        if undefined:
            _first_bad_kv_type(st, tp, side)
        _deferred_errors(path, st, tp, refs, done)
        carry = data[int(st[K.S_POS]):]
        at += int(st[K.S_POS])
        n = int(st[K.S_N])
        if n:
            tables = _chunk_tables(layout, bufs, side[:int(st[K.S_NSIDE])], st, data, seqs)
            if undefined:
                _note_undefined(path, kind, tables, refs, lambda col: _first_line(
                    buf, limit, done, kind, layout.tps, start, refs.kernel_args(col)))
            yield tables
            tables = None
            st[K.S_BASE] += n
    if carry.strip():
        raise TraceError(path, "end of file", "expected a complete record line")
    if st[K.S_DROPPED]:
        import warnings
        warnings.warn(f"{path}: line {int(st[K.S_DROP_LINE])}: {int(st[K.S_DROPPED])} records "
                      f"of processes {refs.master_name} does not list (first: "
                      f"{int(tp[K.T_DROP_P]):x}) are skipped, as the OTF library skips them")


def _without_cut_line(path, data: bytes, at: int) -> bytes:
    """``data`` (the end of a stream) without its last line, which has no newline: OTF's
    reader takes only lines that end with one (OTF_RBuffer_guaranteeRecord: no newline, no
    record) and drops such a tail in silence; a writer cut short leaves one.  Dropped here
    too, and said (a tail of blanks is not a record and goes unsaid)."""
    import warnings
    cut = data.rfind(b"\n") + 1
    tail = data[cut:]
    if tail.strip():
        where = f"byte {at + cut}" if path.suffix != ".z" else f"byte {at + cut} of its text"
        warnings.warn(f"{path}: {where}: last line has no newline (the file was cut short?); "
                      f"its {len(tail)} bytes are not a record, as OTF's reader takes them: "
                      f"dropped", stacklevel=3)
    return data[:cut]


def _records_about(buf: np.ndarray, limit: int) -> int:
    """About how many record lines buf[:limit] holds, for the room its tables get: counted in
    three samples (start, middle, end; the first byte of each counted as a line's), scaled
    to the chunk, a little over; exact when the chunk is at most 4 samples long.  A chunk
    that holds more fills its table and grows it then (Layout.grow, by an exact count of
    the rest); counting every byte of every chunk up front cost a tenth of the decode's CPU.
    numpy, not a kernel: one numba kernel less to load per run (a few ms).  The same calls
    whatever the size (tests count Python calls)."""
    text = buf[:limit]
    small = limit <= 4 * SAMPLE_BYTES
    size = limit if small else SAMPLE_BYTES
    mid, end = (limit, limit) if small else ((limit - size) // 2, limit - size)
    n = sum(count_records(text[at:at + size]) for at in (0, mid, end))
    return n if small else n * limit // (3 * SAMPLE_BYTES) * 33 // 32 + 64


def count_records(text: np.ndarray) -> int:
    """Lines of `text` that start with A-Z or '#' (its first byte starts one): the record
    lines, but for those that start with spaces (a table that is short of room grows)."""
    heads = text[1:][text[:-1] == 10]
    return int(np.count_nonzero(_IS_HEAD[text[:1]])) + int(np.count_nonzero(_IS_HEAD[heads]))


_IS_HEAD = np.zeros(256, np.bool_)
_IS_HEAD[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ#", np.uint8)] = True


def _syntax_error(path, data: bytes, err, eline, erec, efield, epos):
    what = K.ERRORS[err]
    if erec >= 0 and efield >= 0:
        f = G.STREAM_RECORDS[erec].fields[efield]
        what += f" {f.short!r} ({f.col})" if err == K.E_TAG else f" for {f.col}"
        what += f" of {G.STREAM_RECORDS[erec].name}"
    elif erec >= 0:
        what += f" after {G.STREAM_RECORDS[erec].name}"
    ls = data.rfind(b"\n", 0, epos) + 1
    le = data.find(b"\n", epos)
    text = data[ls:le if le >= 0 else len(data)][:80].decode("latin-1")
    raise TraceError.at_line(path, eline, f"{what}, got {text!r} (column {epos - ls + 1})")


def _deferred_errors(path, st, tp, refs, final: bool):
    """What the kernel found and went on past, in the order the checks ran when they
    followed the parse: references, the location's width, ids per table, then key-value
    lines that end the file."""
    if st[K.S_REF_LINE]:        # a key-value type OTF lacks (decode_stream: not a token)
        refs.raise_bad_kv_type(path, int(st[K.S_REF_LINE]), int(tp[K.T_REF_V]))
    if tp[K.T_MAXP] > K.ID_MAX:
        cast(tp[K.T_MAXP:K.T_MAXP + 1], LOCATION)      # raises, naming the value
    for T in range(len(ROW_TABLES)):
        if st[K.S_BIG + T]:
            raise TraceError.at_line(path, int(st[K.S_BIG + T]), _ID_ERROR)
    if final and st[K.S_KV_SIDE] >= 0:
        raise TraceError.at_line(path, int(st[K.S_KV_LAST]), "expected a record after the key-value lines")


def _note_undefined(path, kind: str, tables: dict[str, Table], refs, first_line) -> None:
    """The tokens of the chunk's reference columns that no record defines, kept for the run
    (refs.found); the first of a kind this rank had not met is placed by first_line(col)."""
    from .undefined import FILE_ORDER, warning
    for tab in tables.values():
        for col in tab.names:
            if col not in TARGETS:
                continue
            bad = refs.undefined_in(col, tab[col])
            if len(bad):
                def place(col=col):
                    line, rec, token = first_line(col)
                    return ((refs.unit_key, FILE_ORDER[kind], line),
                            warning(path, line, G.STREAM_RECORDS[rec].name, col, token))
                refs.found.add(col, bad, place)


def _first_bad_kv_type(st, tp, side) -> None:
    """The chunk's first key-value line of a type OTF lacks (its line and type where
    decode_lines keeps its first reference; none: 0), from the side rows: each key-value
    line of a record kept is one, with its line and type."""
    rows = side[:int(st[K.S_NSIDE])]
    bad = np.flatnonzero((rows[:, K.SD_REC] == G.KV_CODE) & (rows[:, K.SD_TYPE] > G.MAX_KV_TYPE))
    st[K.S_REF_LINE] = int(rows[bad[0], K.SD_LINE]) if len(bad) else 0
    if len(bad):
        tp[K.T_REF_V] = rows[bad[0], K.SD_TYPE]


def _first_line(buf, limit: int, final: bool, kind: str, tps: int, start, checks) -> tuple:
    """(line, record code, token or key-value type) of the chunk's first record that
    `checks` (References.kernel_args) refuses: the chunk decoded again from its `start`
    state, keeping no row.  Only for a chunk naming an undefined token: the columns say
    which tokens, not where; the first one hid what follows from the kernel's checks."""
    st, tp, counts = (a.copy() for a in start)
    lay = Layout.of(dict.fromkeys(SCHEMA), tps)         # no table asked for: nothing kept
    caps, bufs, _ = lay.buffers(kind, 0)
    lines = int(np.count_nonzero(buf[int(st[K.S_POS]):limit] == 10))
    side = np.zeros((lines + 1, K.NSD), np.uint64)     # a row per line: never full
    out = (tuple(b[0] for b in bufs), tuple(b[1] for b in bufs), tuple(b[2] for b in bufs),
           counts, side)
    K.decode_lines(buf, limit, final, K.tables(kind).arrays, checks, lay.kernel_args(caps, side),
                   out, st, tp)
    return int(st[K.S_REF_LINE]), int(st[K.S_REF_REC]), int(tp[K.T_REF_V])


def _chunk_tables(layout: Layout, bufs, side, st, data: bytes, seqs) -> dict[str, Table]:
    out: dict[str, Table] = {}
    for T, t in enumerate(ROW_TABLES):
        src = layout.sources[T]
        if src is None:
            continue
        m = int(st[K.S_M + T])
        wide, narrow, kinds = bufs[T]
        cols = {}
        for name, where, row in src:
            if where == "wide":
                cols[name] = wide[row, :m].view(TYPES[t][name])
            elif where == "narrow":
                cols[name] = narrow[row, :m]
            elif where == "kind":
                cols[name] = kinds[:m]
        for name, where, row in src:
            if where == "slow_time":
                cols[name] = ticks_to_ns(cols["ticks"], layout.tps)
        want = layout.want[t] or ["location"]
        out[t] = Table({c.name: cols[c.name] for c in SCHEMA[t] if c.name in want})
    rec = side[:, K.SD_REC].astype(np.int64)
    if layout.want["text"] is not None:
        out["text"] = _text_table(side[_IS_TEXT[rec]], data, layout.tps, seqs["text"])
    if layout.want["keyvalues"] is not None:
        kv = side[rec == G.KV_CODE]
        owner = np.arange(len(kv))
        time = ticks_to_ns(kv[:, K.SD_TICKS], layout.tps)
        loc = cast(kv[:, K.SD_LOC], LOCATION)
        kvt = kv_table(owner, kv[:, K.SD_KEY], kv[:, K.SD_TYPE], data, kv[:, K.SD_SOFF].astype(np.int64),
                        kv[:, K.SD_SLEN].astype(np.int64), kv[:, K.SD_LEN], time, loc,
                        kv[:, K.SD_SEQ].astype(np.int64), 0, seqs["keyvalues"])
        kvt.columns["ref_table"] = kv[:, K.SD_TAB].astype(np.uint8)
        out["keyvalues"] = kvt
    return out


def _text_table(rows: np.ndarray, data: bytes, tps: int, seqc) -> Table:
    """Comments: the one string field of their record, str (bytes that are not UTF-8 kept as
    lone surrogates: s.encode("utf-8", "surrogateescape") gives them back)."""
    loc = cast(rows[:, K.SD_LOC], LOCATION)
    starts = rows[:, K.SD_SOFF].astype(np.int64)
    ends = starts + rows[:, K.SD_SLEN].astype(np.int64)
    texts = byte_rows(data, starts, ends, decode=True)
    return conform(Table({"time": ticks_to_ns(rows[:, K.SD_TICKS], tps), "location": loc,
                          "seq": seqc.assign(loc), "ref_table": rows[:, K.SD_TAB].astype(np.uint8),
                          "ref_seq": rows[:, K.SD_SEQ].astype(np.int64), "text": texts}), SCHEMA["text"])

"""References from records to definitions, checked as the OTF library checks them.

The OTF library checks none of them: it drops (silently) the records of a process
the master file does not list and hands any other token on as is (otfprint prints it,
otfmerge copies it).  partrace drops the same records (kernel.decode_lines, with one
warning per file), reads a process the master file lists without a DP record as a
location named after its token (defs.read_definitions), and keeps every other token as
data: a record naming a function, counter, collective operation, process group, source
code location, file, file or function group, key or marker that no record defines is
read, its token kept in its column, and the output's definitions get a stand-in row
named after it ("function 0x2a": undefined.py), so that every id a row uses has a name.
A peer, root or origin process no DP record defines is kept as its token with no
location (sinks already take a peer that is no location: a DUMPI peer of another
communicator).  Each kind is said once per run, at the first record naming one.
Token 0 is OTF's "none" in every reference (no source location, no communicator, "all"
in a summary, the remote process of a VampirTrace CUDA RMAEnd): kept as 0, no definition.

What stays an error, as it has no OTF meaning: a key-value line of a type that is no
OTF type (decode_lines finds the first), and a marker spot of a process the trace does
not have.  decode_lines checks every reference of the stream records as it parses (a
table load or binary search each) and remembers the first it finds undefined; a chunk
with none costs nothing more.  In a chunk with some, the tokens are found with numpy on
the decoded columns (undefined_in), its key-value lines' types in its side rows, and
the line of the first token of a kind this rank had not met by decoding the chunk again,
keeping no row (stream._first_line).
"""
from __future__ import annotations

import numpy as np

from ...errors import TraceError
from . import grammar as G
from .kernel import NV

# column -> (definitions table, defining record keyword, what it is)
TARGETS = {
    "region": ("regions", "DF", "function"),
    "counter": ("counters", "DCNT", "counter"),
    "collop": ("collectives", "DCO", "collective operation"),
    "comm": ("communicators", "DPG", "process group"),
    "scl": ("scl", "DS", "source code location"),
    "file": ("files", "DFL", "file"),
    "function_group": ("function_groups", "DFG", "function group"),
    "file_group": ("file_groups", "DFLG", "file group"),
    "peer": ("locations", "DP", "process"),
    "root": ("locations", "DP", "process"),
    "origin": ("locations", "DP", "process"),
    "key": ("keys", "DK", "key"),
    "marker": ("marker_defs", "MD", "marker"),      # marker spots (no stream record)
}
DENSE_IDS = 1 << 16          # ids below this are checked in a table


class References:
    """The defined ids of one trace, and which field of which record refers to which table."""

    def __init__(self, defs, master_name: str):
        self.master_name = master_name
        self.ids = {t: np.unique(np.asarray(defs.tables[t]["id"]).astype(np.uint64))
                    for t, _, _ in set(TARGETS.values())}
        listed = np.unique(np.array(defs.attrs.get("process_order", []), np.uint64))
        self.listed = listed
        self.processes = np.intersect1d(self.ids["locations"], listed)
        # per field position j: target column index of (record code, j), or -1
        self.cols = sorted(TARGETS)
        self.refmap = np.full((NV, len(G.STREAM_RECORDS)), -1, np.int8)
        for r, rec in enumerate(G.STREAM_RECORDS):
            for j, f in enumerate(rec.fields):
                if f.col in TARGETS:
                    self.refmap[j, r] = self.cols.index(f.col)
        # the defined ids of each target column c: flat[offsets[c]:offsets[c + 1]], sorted
        sets = [self.ids[TARGETS[c][0]] for c in self.cols]
        self.flat = np.concatenate(sets).astype(np.uint64)
        self.offsets = np.cumsum([0] + [len(x) for x in sets]).astype(np.int64)

        # the same as tables (one load per reference, not a binary search) for the ids below
        # DENSE_IDS: defined[c, id], and the index of each process in self.processes or -1
        top = max([int(x[-1]) + 1 for x in sets if len(x)] + [0])
        self.defined = np.zeros((len(self.cols), min(top, DENSE_IDS)), np.bool_)
        for c, x in enumerate(sets):
            x = x[x < DENSE_IDS].astype(np.int64)
            self.defined[c, x] = True
        top = int(self.processes[-1]) + 1 if len(self.processes) else 0
        self.process_index = np.full(min(top, DENSE_IDS), -1, np.int64)
        small = self.processes[self.processes < DENSE_IDS].astype(np.int64)
        self.process_index[small] = np.flatnonzero(self.processes < DENSE_IDS)

        # the ids that need no definition per target column, for undefined_in: 0 and the
        # defined ones, sorted, and as a table below DENSE_IDS
        self.known = [np.union1d(x, [0]).astype(np.uint64) for x in sets]
        self.known_dense = self.defined.copy()
        if self.known_dense.shape[1]:
            self.known_dense[:, 0] = True
        self.found = None       # the reader's Undefined (undefined.py): what its decode met
        self.unit_key = ""      # the unit decoded: the first place of each kind met

    def kernel_args(self, column: str | None = "*") -> tuple:
        """What kernel.decode_lines checks stream records with: the process, the key-value
        type and the references of `column`: "*" every one, None none, or one column's."""
        if column == "*":
            refmap = self.refmap
        else:
            keep = -1 if column is None else self.cols.index(column)
            refmap = np.where(self.refmap == keep, self.refmap, np.int8(-1)).astype(np.int8)
        return (self.processes, self.process_index, refmap, self.flat, self.offsets,
                self.defined, np.uint64(G.MAX_KV_TYPE))

    def undefined_in(self, col: str, values: np.ndarray) -> np.ndarray:
        """The distinct non-zero tokens of a decoded column that no record defines."""
        v = np.asarray(values)
        if not len(v) or col not in TARGETS:
            return np.zeros(0, np.uint64)
        c = self.cols.index(col)
        hi = int(v.max())
        if hi == 0:
            return np.zeros(0, np.uint64)
        dense = self.known_dense[c]
        if hi < len(dense):
            bad = ~dense[v]
        else:
            v = v[v != 0].astype(np.uint64)
            bad = ~np.isin(v, self.known[c])
        return np.unique(v[bad]).astype(np.uint64) if bad.any() else np.zeros(0, np.uint64)

    def raise_bad_kv_type(self, path, line: int, value: int) -> None:
        """TraceError at `line`, decode_lines' first key-value line of a type OTF lacks."""
        raise TraceError.at_line(path, line, f"expected an OTF value type 0..{G.MAX_KV_TYPE:x} "
                                 f"for type of KeyValue, got {value:x}")

    def check_marker_spots(self, path, loc, lines, kv_owner, kv_type) -> None:
        """Marker spots: their process must be defined (DP + master file), the types of
        their key-value lines OTF types.  A marker (MD) or key (DK) no record defines is
        kept, as a stream record's references are (reader._note_undefined)."""
        bad_loc = ~np.isin(loc.view(np.uint64), self.processes)
        bad_kv = np.zeros(len(loc), bool)
        kv_bad = np.asarray(kv_type, np.uint64) > G.MAX_KV_TYPE
        bad_kv[np.asarray(kv_owner, np.int64)[kv_bad]] = True
        bad = np.flatnonzero(bad_loc | bad_kv)
        if not len(bad):
            return
        i = int(bad[0])
        if bad_loc[i]:
            msg = self._process_message(int(loc.view(np.uint64)[i]), "MarkerSpot")
        else:
            k = np.flatnonzero((np.asarray(kv_owner, np.int64) == i) & kv_bad)[0]
            msg = (f"expected an OTF value type 0..{G.MAX_KV_TYPE:x} in the key-value lines before "
                   f"this MarkerSpot, got {int(kv_type[k]):x}")
        raise TraceError.at_line(path, int(lines[i]), msg)

    def _process_message(self, p: int, rec_name: str) -> str:
        why = ("no DP record defines it" if p not in self.ids["locations"]
               else f"{self.master_name} does not list it")
        return (f"expected a process defined by a DP record and listed in {self.master_name}, "
                f"got {rec_name} of process {p:x} ({why})")

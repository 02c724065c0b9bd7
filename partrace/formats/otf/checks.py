"""References from records to definitions: every token a record names must be defined.

The OTF library checks none of them: it drops (silently) the records of a process
the master file does not list and hands any other token on as is.  partrace drops
the same records (kernel.decode_lines, with one warning per file) and reads a
process the master file lists without a DP record as a location named after its
token (defs.read_definitions); a non-zero token of any other kind that no record
defines is refused, so no row points at a region, counter, ... that the output's
definition tables do not have.  Token 0 is OTF's "none" in every reference (no
source location, no communicator, "all" in a summary, the remote process of a
VampirTrace CUDA RMAEnd): it is kept as 0 and needs no definition.  The stream
records are checked as they are decoded (kernel.decode_lines: a binary search per
reference), marker spots with numpy; only the first bad row is turned into a message.
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

    def kernel_args(self) -> tuple:
        """What kernel.decode_lines checks stream records with."""
        return (self.processes, self.process_index, self.refmap, self.flat, self.offsets,
                self.defined, np.uint64(G.MAX_KV_TYPE))

    def raise_undefined(self, path, line: int, rec: int, what: int, proc: int, value: int) -> None:
        """TraceError at `line` for decode_lines' first record naming something undefined:
        `what` is its process (BAD_PROCESS), a key-value's type (BAD_KV_TYPE, `value`) or
        the field position of the reference (`value` its token)."""
        from .kernel import BAD_KV_TYPE, BAD_PROCESS
        r = G.STREAM_RECORDS[rec]
        if what == BAD_PROCESS:
            msg = self._process_message(proc, r.name)
        elif what == BAD_KV_TYPE:
            msg = f"expected an OTF value type 0..{G.MAX_KV_TYPE:x} for type of KeyValue, got {value:x}"
        else:
            msg = self._token_message(self.cols[self.refmap[what, rec]], value, r.name)
        raise TraceError.at_line(path, line, msg)

    def check_marker_spots(self, path, marker, loc, lines, marker_ids, kv_owner, kv_key, kv_type) -> None:
        """Marker spots: their marker must be defined (MD), their process too (DP + master
        file), and the keys of their key-value lines (DK) with an OTF value type."""
        bad_loc = ~np.isin(loc.view(np.uint64), self.processes)
        bad_marker = ~np.isin(marker.view(np.uint64), np.asarray(marker_ids).astype(np.uint64))
        bad_kv = np.zeros(len(loc), bool)
        kv_key = np.asarray(kv_key, np.uint64)
        kv_bad = ~np.isin(kv_key, self.ids["keys"]) | (np.asarray(kv_type, np.uint64) > G.MAX_KV_TYPE)
        bad_kv[np.asarray(kv_owner, np.int64)[kv_bad]] = True
        bad = np.flatnonzero(bad_loc | bad_marker | bad_kv)
        if not len(bad):
            return
        i = int(bad[0])
        if bad_loc[i]:
            msg = self._process_message(int(loc.view(np.uint64)[i]), "MarkerSpot")
        elif bad_marker[i]:
            msg = f"expected a marker defined by an MD record, got MarkerSpot of marker {int(marker.view(np.uint64)[i]):x}"
        else:
            k = np.flatnonzero((np.asarray(kv_owner, np.int64) == i) & kv_bad)[0]
            msg = (self._token_message("key", int(kv_key[k]), "a key-value line before this MarkerSpot")
                   if not np.isin(kv_key[k], self.ids["keys"]) else
                   f"expected an OTF value type 0..{G.MAX_KV_TYPE:x} in the key-value lines before this "
                   f"MarkerSpot, got {int(kv_type[k]):x}")
        raise TraceError.at_line(path, int(lines[i]), msg)

    def _process_message(self, p: int, rec_name: str) -> str:
        why = ("no DP record defines it" if p not in self.ids["locations"]
               else f"{self.master_name} does not list it")
        return (f"expected a process defined by a DP record and listed in {self.master_name}, "
                f"got {rec_name} of process {p:x} ({why})")

    @staticmethod
    def _token_message(col: str, v: int, rec_name: str) -> str:
        _, kw, what = TARGETS[col]
        return f"expected a {what} defined by a {kw} record, got {rec_name} naming {col} {v:x}"

"""Request tracking: pair each nonblocking post with the call that completes it.

DUMPI records a request as a per-process handle (libdumpi hashes the MPI
handle; 1 = MPI_REQUEST_NULL), which MPI reuses once a request is freed, and
MPICH even gives several finished sends the same handle.  So a completion
element (Wait/Test request, Waitall/Testall requests[i], Waitany/Testany
requests[index], Waitsome/Testsome requests[indices[j]]) is paired with the
latest *post* of its handle before the completing call that no earlier
completion claimed.  Posts are Isend/Ibsend/Issend/Irsend/Irecv, and Start /
Startall of a persistent request, whose arguments come from the latest
*_init of that handle.  Tests with flag 0, Waitany/Waitsome with index /
outcount MPI_UNDEFINED and null handles complete nothing.

All of it is numpy over the chunk's flat arrays (sort by (handle, call),
search).  Posts not yet completed (the latest CARRY per handle) and the latest
init per handle are carried to the next chunk.
"""
from __future__ import annotations

import numpy as np

from .functable import FUNCTIONS

SEND_POSTS = (8, 9, 10, 11)
RECV_POST = 12
SEND_INITS = (26, 27, 28, 29)
RECV_INIT = 30
START, STARTALL = 31, 32
REQUEST_NULL = 1
FIELDS = ("req", "call", "recv", "peer", "tag", "comm", "count", "datatype", "fid", "init")


def slot(fid: int, name: str) -> int:
    return [a[0] for a in FUNCTIONS[fid][2]].index(name)


def _empty() -> dict[str, np.ndarray]:
    return {k: np.zeros(0, np.int64) for k in FIELDS}


def _cat(parts: list[dict]) -> dict[str, np.ndarray]:
    """The records of all parts, in part order (one part with records: its own arrays,
    not copies: nobody writes into them)."""
    full = [p for p in parts if len(p["req"])]
    if len(full) == 1:
        return {k: full[0][k].astype(np.int64, copy=False) for k in FIELDS}
    return {k: np.concatenate([p[k] for p in parts]).astype(np.int64, copy=False)
            for k in FIELDS}


def _in_call_order(call: np.ndarray, elem: np.ndarray) -> np.ndarray | None:
    """The order sorting completions by (call, element) (stable), or None when they are in
    it already.  Both are non-negative and below 2**32 (chunk-local calls, array indices),
    so one int64 key sorts them: a stable sort of it is np.lexsort((elem, call))."""
    key = (call << 32) | elem
    if len(key) < 2 or bool(np.all(key[1:] >= key[:-1])):
        return None
    return np.argsort(key, kind="stable")


CARRY = 64      # unclaimed posts carried per handle (shared finished-send handles)


def _latest(rec: dict[str, np.ndarray], keep: np.ndarray, k: int = 1) -> dict[str, np.ndarray]:
    """Of the kept records, the last ``k`` (by call) per handle, sorted by (handle, call)."""
    idx = np.nonzero(keep)[0]
    idx = idx[np.lexsort((rec["call"][idx], rec["req"][idx]))]
    req = rec["req"][idx]
    group_end = np.searchsorted(req, req, "right")
    idx = idx[group_end - np.arange(len(idx)) <= k]
    return {key: v[idx] for key, v in rec.items()}


def _before(keys_req, keys_call, req, call) -> np.ndarray:
    """Index of the last (req, call') with call' < call among sorted keys; -1 = none."""
    from .kernels import before
    return before(*(np.ascontiguousarray(x, np.int64) for x in (keys_req, keys_call, req, call)))


def _claim(m: np.ndarray, preq: np.ndarray, creq: np.ndarray) -> np.ndarray:
    """Each post completes once: the first completion (in call, element order) takes the
    latest post of its handle; a later one of the same handle takes the next older
    unclaimed post (MPICH gives finished sends one shared handle), else none (-1)."""
    from .kernels import claim
    return claim(*(np.ascontiguousarray(x, np.int64) for x in (m, preq, creq)))


class RequestTracker:
    """State of one rank's requests across the chunks of its file."""

    def __init__(self):
        self.pending = _empty()      # posts not yet completed (latest per handle)
        self.inits = _empty()        # persistent templates (latest per handle)

    # -- gathering -----------------------------------------------------------------
    @staticmethod
    def _records(w, base, fids, recv_fid) -> dict[str, np.ndarray]:
        """The calls of ``fids`` (posts or inits; ``recv_fid`` the receive among them), in
        the order of ``fids``, then of calls.  Their arguments share slots (count, datatype,
        dest/source, tag, comm, request): one gather per field for all of them."""
        calls = [w.calls_of(f) for f in fids]
        c = np.concatenate(calls)
        fid = np.repeat(np.asarray(fids, np.int64), [len(x) for x in calls])
        out = {"call": c + base, "recv": (fid == recv_fid).astype(np.int64), "fid": fid,
               "init": np.full(len(c), -1, np.int64)}
        for k, name in (("req", "request"), ("peer", "dest"), ("tag", "tag"), ("comm", "comm"),
                        ("count", "count"), ("datatype", "datatype")):
            at = [slot(f, "source" if f == recv_fid and k == "peer" else name) for f in fids]
            out[k] = (w.vals[at[0]][c] if len(set(at)) == 1 else
                      np.concatenate([w.vals[a][x] for a, x in zip(at, calls)]))
        return out

    def _starts(self, w, base, inits) -> dict[str, np.ndarray]:
        c1 = w.calls_of(START)
        ec, es = w.e[0], w.e[1]
        sel = np.nonzero((w.efunc == STARTALL) & (es == slot(STARTALL, "requests")))[0]
        call = np.concatenate([c1, ec[sel]])
        req = np.concatenate([w.vals[0][c1], w.e[4][sel]])
        fid = np.concatenate([np.full(len(c1), START), np.full(len(sel), STARTALL)])
        order = np.lexsort((inits["call"], inits["req"]))
        ini = {k: v[order] for k, v in inits.items()}
        t = _before(ini["req"], ini["call"], req, call + base)
        ok = t >= 0                                # Start of a handle with no init: no post
        t = t[ok]
        out = {k: ini[k][t] for k in ("req", "recv", "peer", "tag", "comm", "count", "datatype")}
        out.update(call=call[ok] + base, fid=fid[ok], init=ini["call"][t])
        return out

    @staticmethod
    def completions(w, status_first) -> dict[str, np.ndarray]:
        """Every completed element: local call, element index, handle, status row (-1)."""
        ec, es, e0, ev = w.e[0], w.e[1], w.e[2], w.e[4]
        func, vals = w.func, w.vals
        parts = []

        def add(call, elem, req, srow):
            parts.append((call, elem, req, srow))

        def status(call, j, fid, name):
            n = vals[slot(fid, name)][call]
            return np.where(n > j, status_first[call] + j, -1)

        for fid, flag in ((13, None), (14, "flag")):
            c = w.calls_of(fid)
            if flag:
                c = c[vals[slot(fid, flag)][c] != 0]
            add(c, np.zeros(len(c), np.int64), vals[0][c], status(c, 0, fid, "status"))
        for fid in (16, 17, 18, 19, 20, 21):
            rs = slot(fid, "requests")
            sel = np.nonzero((w.efunc == fid) & (es == rs))[0]
            if not len(sel):
                continue
            call, elem, req = ec[sel], e0[sel], ev[sel]
            if fid in (16, 17):                    # requests[index]
                done = elem == vals[slot(fid, "index")][call]
                if fid == 17:
                    done &= vals[slot(fid, "flag")][call] != 0
                s = status(call, 0, fid, "status")
            elif fid in (18, 19):                  # all of them
                done = np.ones(len(sel), bool) if fid == 18 else vals[slot(fid, "flag")][call] != 0
                s = status(call, elem, fid, "statuses")
            else:                                  # requests[indices[j]]
                first = np.full(len(func), -1, np.int64)
                first[call[::-1]] = sel[::-1]
                isel = np.nonzero((w.efunc == fid) & (es == slot(fid, "indices")))[0]
                ic, j, ix = ec[isel], e0[isel], ev[isel]
                n = vals[slot(fid, "count")][ic]
                ok = (first[ic] >= 0) & (ix >= 0) & (ix < n)
                ic, j, ix = ic[ok], j[ok], ix[ok]
                add(ic, ix, ev[first[ic] + ix], status(ic, j, fid, "statuses"))
                continue
            if not done.all():
                call, elem, req, s = call[done], elem[done], req[done], s[done]
            add(call, elem, req, s)
        parts = [p for p in parts if len(p[0])] or parts[:1]
        call, elem, req, srow = (np.concatenate([p[i] for p in parts]).astype(np.int64)
                                 if len(parts) > 1 else parts[0][i].astype(np.int64)
                                 for i in range(4))
        cols = dict(call=call, elem=elem, req=req, status=srow)
        real = req > REQUEST_NULL
        if not real.all():
            cols = {k: v[real] for k, v in cols.items()}
        order = _in_call_order(cols["call"], cols["elem"])
        return cols if order is None else {k: v[order] for k, v in cols.items()}

    # -- one chunk -------------------------------------------------------------------
    def chunk(self, w, base: int, status_first: np.ndarray):
        """(completed elements, their posts field by field (call -1 = no post), the
        chunk's Start activations) for this chunk's calls."""
        all_inits = _cat([self.inits, self._records(w, base, SEND_INITS + (RECV_INIT,),
                                                    RECV_INIT)])
        starts = self._starts(w, base, all_inits)
        posts = _cat([self.pending, self._records(w, base, SEND_POSTS + (RECV_POST,),
                                                  RECV_POST), starts])
        done = self.completions(w, status_first)
        # searched in (handle, call) order; the fields stay in place (read through `at`)
        order = np.lexsort((posts["call"], posts["req"]))
        sreq = posts["req"][order]
        m = _before(sreq, posts["call"][order], done["req"], done["call"] + base)
        m = _claim(m, sreq, done["req"])
        claimed = m >= 0
        every_claimed = bool(claimed.all())
        at = order[np.maximum(m, 0)] if len(order) else np.zeros(len(m), np.int64)
        used = np.zeros(len(order), bool)
        used[at[claimed]] = True
        self.pending = _latest(posts, ~used, CARRY)
        self.inits = _latest(all_inits, np.ones(len(all_inits["req"]), bool))

        def field(k):      # a completion's post, field by field, made when first read
            none = -1 if k in ("call", "init") else 0
            if not len(posts["req"]):
                return np.full(len(m), none)
            if every_claimed:
                return posts[k][at]
            return np.where(claimed, posts[k][at], none)
        return done, _Fields(field), starts


class _Fields(dict):
    """A dict whose values are made on first access (the fields of the posts a chunk's
    completions took: events and the requests table each read a few of them)."""

    def __init__(self, make):
        super().__init__()
        self._make = make

    def __missing__(self, key):
        if key not in FIELDS:
            raise KeyError(key)
        value = self[key] = self._make(key)
        return value

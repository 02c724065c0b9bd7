"""Compiled loops of request tracking (numba): each replaces a chain of numpy passes."""
from __future__ import annotations

import numpy as np

from ...kernels.jit import njit   # lazy: numba only for inputs that are not small


@njit(cache=True)
def before(kreq, kcall, req, call):
    """Index of the last key (kreq, kcall) < (req, call) with kreq == req among keys
    sorted by (kreq, kcall); -1 = none.

    Keys are searched per run of one handle (few handles, many posts each), and the
    queries of a handle come in rising call order (completions in call order), so each
    run keeps a cursor that moves forward a few keys per query; a query behind its
    run's cursor, or far ahead of it, is searched by bisection within the run."""
    n = kreq.shape[0]
    ng = 0
    for j in range(n):
        if j == 0 or kreq[j] != kreq[j - 1]:
            ng += 1
    gfirst = np.empty(ng + 1, np.int64)          # run g: keys gfirst[g] .. gfirst[g + 1] - 1
    g = 0
    for j in range(n):
        if j == 0 or kreq[j] != kreq[j - 1]:
            gfirst[g] = j
            g += 1
    gfirst[ng] = n
    cursor = gfirst[:ng].copy()    # per run: first key whose call >= the run's last query
    last = np.zeros(ng, np.int64)
    seen = np.zeros(ng, np.bool_)
    out = np.empty(req.shape[0], np.int64)
    for i in range(req.shape[0]):
        r, c = req[i], call[i]
        lo, hi = 0, ng                           # the run of handle r
        while lo < hi:
            mid = (lo + hi) >> 1
            if kreq[gfirst[mid]] < r:
                lo = mid + 1
            else:
                hi = mid
        if lo == ng or kreq[gfirst[lo]] != r:
            out[i] = -1
            continue
        g = lo
        s, e = gfirst[g], gfirst[g + 1]
        p = cursor[g]
        if seen[g] and c < last[g]:
            p = s                                # behind the cursor: bisect the whole run
            steps = 0
        else:
            steps = 8                            # ahead: a few steps, then bisect the rest
        while steps > 0 and p < e and kcall[p] < c:
            p += 1
            steps -= 1
        if p < e and kcall[p] < c:
            lo, hi = p, e
            while lo < hi:
                mid = (lo + hi) >> 1
                if kcall[mid] < c:
                    lo = mid + 1
                else:
                    hi = mid
            p = lo
        cursor[g] = p
        last[g] = c
        seen[g] = True
        out[i] = p - 1 if p > s else -1
    return out


@njit(cache=True)
def claim(m, preq, creq):
    """See requests._claim: in rounds, the first completion (in order) aiming at an
    unclaimed post takes it; every other one aims at the next older post of its
    handle, or gives up (-1)."""
    m = m.copy()
    used = np.zeros(preq.shape[0], np.bool_)
    aimed = np.full(preq.shape[0], -1, np.int64)      # last round a post was aimed at
    todo = np.nonzero(m >= 0)[0]
    rnd = 0
    while todo.shape[0]:
        nxt = np.empty(todo.shape[0], np.int64)
        k = 0
        for i in todo:
            t = m[i]
            if aimed[t] != rnd:
                aimed[t] = rnd
                if not used[t]:
                    used[t] = True
                    continue
            t -= 1
            if t >= 0 and preq[t] == creq[i]:
                m[i] = t
                nxt[k] = i
                k += 1
            else:
                m[i] = -1
        todo = nxt[:k]
        rnd += 1
    return m


@njit(cache=True)
def extras_in_row_order(ecall, eorder, cnt):
    """The extra event rows of a chunk (indices into ecall) in the order they are placed:
    by call, and within a call its entry rows (order 1) then its exit rows (order 2), each
    in the given order (what a stable sort by (call, order) gives, in linear passes)."""
    n = cnt.shape[0]
    at = np.empty(n, np.int64)          # next slot of each call's extras
    k = 0
    for c in range(n):
        at[c] = k
        k += cnt[c]
    out = np.empty(ecall.shape[0], np.int64)
    for o in range(1, 3):
        for i in range(ecall.shape[0]):
            if eorder[i] == o:
                c = ecall[i]
                out[at[c]] = i
                at[c] += 1
    return out


@njit(cache=True)
def gather_rows(cnt, eperm, enter, leave, extra, out):
    """One event column, written in row order: per call c, enter[c], its cnt[c] extra
    rows (extra[eperm[j]], j continuing), leave[c].  ``enter``/``leave`` of one element:
    the same value on every such row."""
    one_in = enter.shape[0] == 1
    one_out = leave.shape[0] == 1
    r = 0
    j = 0
    for c in range(cnt.shape[0]):
        out[r] = enter[0] if one_in else enter[c]
        r += 1
        for _ in range(cnt[c]):
            out[r] = extra[eperm[j]]
            r += 1
            j += 1
        out[r] = leave[0] if one_out else leave[c]
        r += 1

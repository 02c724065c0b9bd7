"""The sums table's packed keys (two 32-bit words in one int64) against a dict: the order
of the pairs kept at the edges of the 32-bit range, and a key that does not pack turning the
table wide, from ``add`` and from inside the comm fold's compiled kernel (mid-chunk)."""
from __future__ import annotations

import pickle
from collections import Counter

import numpy as np

from partrace.analysis import messages as C
from partrace.analysis.sparse import KeyedSums
from partrace.model import Kind, Table

LO, HI = -2**31, 2**31 - 1      # int32 edges: (LO, anything) does not pack (LO, LO is the free mark)


def reference(keys, values) -> Counter:
    want = Counter()
    for k, v in zip(map(tuple, keys.tolist()), values.tolist()):
        for j, x in enumerate(v):
            want[k, j] += x
    return want


def check(sums: KeyedSums, want: Counter, nvalues: int) -> None:
    keys, vals = sums.items()
    assert list(map(tuple, keys.tolist())) == sorted({k for k, _ in want})
    assert vals.tolist() == [[want[tuple(k), j] for j in range(nvalues)] for k in keys.tolist()]


def test_packed_keys_keep_the_order_of_the_pairs_at_the_int32_edges(jit_mode):
    edge = np.array([LO + 1, -1, 0, 1, HI])
    k0, k1 = np.meshgrid(edge, np.array([LO, LO + 1, -1, 0, 1, HI]), indexing="ij")
    keys = np.stack([k0.ravel(), k1.ravel()], axis=1)
    keys = np.concatenate([keys, keys[::-1]])            # each key twice: sums add up
    vals = np.arange(2 * len(keys)).reshape(-1, 2) - 7
    sums = KeyedSums(2, 2, capacity=16)                  # grows (rehash) on the way
    sums.add(keys, vals)
    assert not sums.wide and len(sums) == len(keys) // 2
    check(sums, reference(keys, vals), 2)


def test_a_key_that_does_not_pack_turns_the_table_wide(jit_mode):
    rng = np.random.default_rng(5)
    small = np.stack([rng.integers(-50, 50, 3000), rng.integers(-9, 2000, 3000)], axis=1)
    wide = np.array([[2**31, 0], [LO, 5], [3, 2**31], [-2**40, LO - 1], [7, -2**62]])
    a, b = KeyedSums(2, 3, capacity=16), KeyedSums(2, 3)
    va = rng.integers(-2**40, 2**40, (len(small), 3))
    a.add(small, va)
    assert not a.wide
    vb = rng.integers(-2**40, 2**40, (len(small) + len(wide), 3))
    b.add(np.concatenate([small[:1000], wide, small[1000:]]), vb)
    assert b.wide
    want = reference(small, va)     # update, not +: a Counter sum drops totals <= 0
    want.update(reference(np.concatenate([small[:1000], wide, small[1000:]]), vb))
    a.merge(pickle.loads(pickle.dumps(b)))       # packed + wide: the packed one widens
    assert a.wide
    check(a, want, 3)


def test_the_comm_fold_widens_inside_its_kernel(jit_mode):
    """A collective keyed by -collop = 2^31 (collop the int32 minimum) does not pack: the
    fold's kernel stops at that row, the table widens, and the fold goes on from there."""
    n = 4000
    rng = np.random.default_rng(9)
    kind = np.where(rng.random(n) < 0.5, int(Kind.SEND), int(Kind.COLLECTIVE)).astype(np.uint8)
    loc = rng.integers(1, 40, n).astype(np.int32)
    peer = rng.integers(0, 40, n).astype(np.int32)
    region = np.where(rng.random(n) < 0.5, rng.integers(1, 9, n), 0).astype(np.int32)
    collop = rng.integers(1, 5, n).astype(np.int32)
    collop[n // 2:][region[n // 2:] == 0] = LO          # from the middle on, keys that do not pack
    size = rng.integers(0, 2**20, n).astype(np.uint64)
    received = rng.integers(0, 2**20, n).astype(np.uint64)
    ev = Table({"kind": kind, "location": loc, "peer": peer, "size": size, "region": region,
                "collop": collop, "received": received})
    acc = C.start(None)
    for a in range(0, n, 1500):        # chunks, as the engine gives them
        acc = C.step(acc, {"events": ev.take(np.arange(a, min(n, a + 1500)))})
    assert acc.coll.wide and not acc.pairs.wide
    pairs, coll = Counter(), Counter()
    for k, l, p, r, c, s, rv in zip(kind.tolist(), loc.tolist(), peer.tolist(), region.tolist(),
                                    collop.tolist(), size.tolist(), received.tolist()):
        if k == int(Kind.SEND) and p:
            pairs[(l, p), 0] += 1
            pairs[(l, p), 1] += s
        elif k == int(Kind.COLLECTIVE):
            key = (l, r if r else -c)
            coll[key, 0] += 1
            coll[key, 1] += s
            coll[key, 2] += rv
    check(acc.pairs, pairs, 2)
    check(acc.coll, coll, 3)

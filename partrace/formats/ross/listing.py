"""Listing a ROSS run's regions on every rank at once: speculative hops, checked in file order.

A record's length is only in its own header, so where records start is known for sure
only by hopping from byte 0 (hop.py).  To list a run on P ranks without one rank hopping
a whole file, each rank takes the regions the engine will most likely deal it
(:func:`pieces_of`, a piece per file it touches) and hops each piece from a *plausible*
record start: the
first byte from which ``SYNC_RECORDS`` records hop without error (a piece that
begins a file starts at byte 0, which is sure).  The pieces meet on every rank and are
checked in file order (:func:`verified_files`): the true chain of records enters a piece
at its first record start at or after the piece's first byte, which the piece before
gives (its exit).  If that start is among the first ``HEAD`` records the piece's own
chain found, the two chains are one from there on, and the piece's regions stand, cut
to begin there.  Else the true chain is hopped from its entry, on every rank alike, until
it meets one of those records (most often within a few records: the regions after the
one where they meet stand), or over the whole piece.  A wrong guess costs at most a
piece's hop, never a wrong unit.

An error met on a piece's chain counts only once the chain is verified; files are
checked in order and a file up to its first error, so the error raised is the first one
in file order: the one a serial hop meets, at any rank count.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...dealing import contiguous_owners
from ...errors import TraceError
from . import layouts as L
from .files import kind_of
from .hop import ERROR_TEXT, OK, hop_range

HEAD = 64              # records of a piece's chain sent along to check its entry
SYNC_RECORDS = 16      # records that must hop without error from a plausible start
SYNC_SPAN = 2048       # bytes hopped at a time to count them
SYNC_REACH = 16 << 10  # bytes past a piece's first byte searched for a plausible start
LP_CODES = (L.LP, L.LP_V1)

# Unit keys start with how far into its file the region lies (SPREAD: the file's end), so
# that the files' regions interleave: a rank's contiguous share of the units (the engine
# gives an ordered reader those) is then the same stretch of every file, not whole files,
# and files that ROSS writes in time order (samples by GVT round, model records) give each
# rank the stretch of time it writes: decode work and the exchange are balanced.  A file's
# regions stay in file order (its seq runs on across them).
SPREAD = 10 ** 9


def unit_key(k: int, count: int, name: str) -> str:
    """The key of region ``k`` of ``count`` of the file named ``name``."""
    return f"{k * SPREAD // count:09d}:{name}:{k:09d}"


@dataclass
class Chain:
    """What one hop over a piece's regions found (small: it travels to every rank)."""
    regions: list = field(default_factory=list)     # (k, first start, next region's start)
    head: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # first starts
    head_codes: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint8))
    lp_after: dict = field(default_factory=dict)    # LP code -> its first start after the head
    stop: int = -1          # where the hop stopped: the exit, or the failing record's start
    error: tuple | None = None     # (byte, message) of the error met at ``stop``

    def starts_at(self, t: int) -> int | None:
        """Index in the head of start ``t`` (the chain runs through it from there), len(head)
        when the chain stopped at ``t`` itself (nothing of it lies beyond), else None."""
        if t == self.stop:
            return len(self.head)
        i = int(np.searchsorted(self.head, t))
        return i if i < len(self.head) and self.head[i] == t else None

    def first_lp(self, i: int) -> dict:
        """LP code -> first start of that layout on the chain from head index ``i`` on."""
        out = {}
        if i >= len(self.head):
            return out
        for code in LP_CODES:
            hits = np.flatnonzero(self.head_codes[i:] == code)
            if len(hits):
                out[code] = int(self.head[i + hits[0]])
            elif code in self.lp_after:
                out[code] = self.lp_after[code]
        return out


@dataclass
class Piece:
    """Regions [first, stop) of one file, as one rank listed them."""
    path: str
    kind: str
    size: int               # the file's bytes when the piece was planned
    first: int
    stop: int
    begin: int              # where its chain began (0: the file's start, sure; -1: no start)
    chain: Chain | None = None
    unreadable: tuple | None = None     # (byte, message): the file could not be opened


def pieces_of(files: list[Path], region_size: int, rank: int, size: int) -> list[Piece]:
    """Rank ``rank``'s regions to list, a piece per file it touches, in file order: the
    regions in their units' key order (:func:`unit_key`), each weighed by its bytes,
    dealt to the ranks as the engine deals an ordered reader's units (dealing.py).  A
    rank then lists about the regions it decodes, the same stretch of every file, and
    keeps their hops for itself: only the few its units' true sizes move across a rank's
    edge are handed over (reader.py ``hand_over``)."""
    sizes = np.array([size_or_0(p) for p in files], np.int64)
    counts = -(-sizes // region_size)
    total = int(counts.sum())
    if not total:
        return []
    which = np.repeat(np.arange(len(files)), counts)       # each region's file
    k = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    # the key's order: how far into its file, then the file's name, then k
    names = [Path(p).name for p in files]
    by_name = np.empty(len(files), np.int64)
    by_name[sorted(range(len(files)), key=lambda f: names[f] + ":")] = np.arange(len(files))
    order = np.lexsort((k, by_name[which], k * SPREAD // counts[which]))
    weight = np.minimum(region_size, sizes[which] - k * region_size)
    owner = np.empty(total, np.int64)
    owner[order] = contiguous_owners(weight[order], size)
    out = []
    for f in np.unique(which[owner == rank]).tolist():
        mine = k[(which == f) & (owner == rank)]
        out.append(Piece(str(files[f]), kind_of(files[f]), int(sizes[f]), int(mine[0]),
                         int(mine[-1]) + 1, -1))
    return out


def list_piece(piece: Piece, region_size: int, keep=None) -> Piece:
    """Hop ``piece`` from a plausible record start (byte 0 for a file's first region).
    ``keep(start, end, starts, codes)`` is shown each region's hop (the reader keeps some)."""
    from .scan import open_bytes
    path = Path(piece.path)
    try:
        buf = open_bytes(path)
    except TraceError as exc:
        piece.unreadable = (exc.where, exc.message)
        return piece
    a = piece.first * region_size
    family = L.FAMILY[piece.kind]
    piece.begin = 0 if a == 0 else plausible_start(buf, a, piece.stop * region_size, family)
    piece.chain = (walk(path, buf, family, piece.begin, piece.stop, region_size, keep)[0]
                   if piece.begin >= 0 else Chain())
    return piece


def plausible_start(buf: np.ndarray, a: int, b: int, family: int) -> int:
    """A byte in [a, b) from which SYNC_RECORDS records hop without error (or the records
    to the file's end), -1 if none: the first within SYNC_SPAN of ``a`` whose records are
    that many within SYNC_SPAN bytes, else the first within SYNC_REACH whose records are.

    A misaligned byte fails at its first "record" almost always.  But an event header
    has nothing to check beside its size, and garbage read as a size still fits in a big
    file: a chain of such jumps of megabytes can pass; records as small as real ones
    most often are (a guess off the true chain costs a hop of its piece)."""
    end = min(b, len(buf))
    for c in range(a, min(end, a + SYNC_SPAN)):
        starts, _, nxt, err, _, _ = hop_range(buf, c, min(c + SYNC_SPAN, len(buf)), family)
        if err == OK and (len(starts) >= SYNC_RECORDS or nxt == len(buf)):
            return c
    for c in range(a, min(end, a + SYNC_REACH)):
        pos, n = c, 0
        while n < SYNC_RECORDS and pos < len(buf):
            starts, _, pos, err, _, _ = hop_range(buf, pos, min(pos + SYNC_SPAN, len(buf)),
                                                  family)
            if err != OK:
                break
            n += len(starts)
        else:
            return c
    return -1


def walk(path: Path, buf: np.ndarray, family: int, pos: int, stop: int, region_size: int,
         keep=None, join: np.ndarray | None = None) -> tuple[Chain, int | None]:
    """Hop from record start ``pos`` through the regions before region ``stop``: the
    regions in which records start, each from its first record start to the next region's;
    an error is kept, not raised (whether it counts is for the caller to say).

    ``join``: the head of another chain; the walk ends after the first region in which it
    meets one of those starts (from there on the two are one chain).  Returns the chain and
    the index in ``join`` of the start it met (None: it met none)."""
    from .scan import release
    out, met = Chain(), None
    end = min(stop * region_size, len(buf))
    head_s, head_c, room = [], [], HEAD
    while pos < end:
        k = pos // region_size
        starts, codes, nxt, err, epos, val = hop_range(buf, pos, min((k + 1) * region_size,
                                                                     len(buf)), family)
        if room:
            head_s.append(starts[:room])
            head_c.append(codes[:room])
        if family <= 1 and len(out.lp_after) < len(LP_CODES) and len(starts) > room:
            for code in LP_CODES:
                hits = np.flatnonzero(codes[room:] == code)
                if code not in out.lp_after and len(hits):
                    out.lp_after[code] = int(starts[room + hits[0]])
        room = max(0, room - len(starts))
        if err != OK:
            out.stop, out.error = nxt, (epos, ERROR_TEXT[err].format(v=val))
            break
        out.regions.append((k, pos, nxt))
        if keep is not None:
            keep(pos, nxt, starts, codes)
        pos = nxt
        release(buf, pos)
        if join is not None and len(join) and starts[0] <= join[-1]:
            met = _first_common(join, np.append(starts, nxt))
            if met is not None:
                break
    out.stop = out.stop if out.error else pos
    if head_s:
        out.head, out.head_codes = np.concatenate(head_s), np.concatenate(head_c)
    return out, met


def _first_common(head: np.ndarray, starts: np.ndarray) -> int | None:
    """Index in ``head`` of the first of ``starts`` (sorted) that is in it, else None."""
    starts = starts[starts <= head[-1]]
    at = np.searchsorted(head, starts)
    hit = np.flatnonzero(head[np.minimum(at, len(head) - 1)] == starts)
    return int(at[hit[0]]) if len(hit) else None


@dataclass
class Verified:
    """A piece's part of the true chain."""
    regions: list
    lp: dict            # LP code -> its first start in the part
    stop: int           # the true chain's next start after the piece, or its error's record
    error: tuple | None
    stale_before: int   # the lister's kept hops of regions beginning before this are not true


def verified_files(parts: list[list[Piece]], region_size: int):
    """(path, kind, size, regions, stale) of each file in order, from every rank's pieces
    (in rank order), each checked against the true chain's entry.  ``stale``: (rank, piece
    index, byte) of each piece whose lister kept hops of regions that begin before that
    byte and are not on the true chain.  The first error on the true chain, in file order,
    is raised (a TraceError), as a serial hop raises it."""
    by_file: dict[str, list] = {}
    for rank, part in enumerate(parts):
        for j, piece in enumerate(part):
            by_file.setdefault(piece.path, []).append((rank, j, piece))
    for path, pieces in by_file.items():
        yield (path, pieces[0][2].kind, pieces[0][2].size,
               *_verify_file(pieces, region_size))


def _verify_file(pieces: list, region_size: int):
    """One file's regions and stale hops; raises its first error."""
    t, regions, stale, lp = 0, [], [], {}
    for rank, j, piece in pieces:
        path = Path(piece.path)
        if piece.unreadable:
            raise TraceError(path, *piece.unreadable)
        b = min(piece.stop * region_size, piece.size)
        if t >= b:          # a record that begins before the piece covers all of it
            stale.append((rank, j, b))
            continue
        part = _true_part(piece, t, region_size)
        if piece.chain.regions and piece.chain.regions[0][1] < part.stale_before:
            stale.append((rank, j, part.stale_before))
        regions += part.regions
        for code, at in part.lp.items():
            lp.setdefault(code, at)
        if part.error is not None:
            _check_lp_layout(path, lp, region_size, part.stop // region_size)
            raise TraceError.at_byte(path, *part.error)
        t = part.stop
    _check_lp_layout(path, lp, region_size, None)
    return regions, stale


def _true_part(piece: Piece, t: int, region_size: int) -> Verified:
    """The true chain over ``piece`` from its entry ``t``: the piece's own chain where it
    runs through ``t``; else a hop from ``t`` until it meets the piece's chain (the regions
    after the one where they meet are the piece's), or over the whole piece if it never does."""
    spec = piece.chain
    i = spec.starts_at(t)
    if i is not None:
        return Verified(_cut(spec.regions, t), spec.first_lp(i), spec.stop, spec.error, t)
    from .scan import open_bytes
    path = Path(piece.path)
    buf, family = open_bytes(path), L.FAMILY[piece.kind]
    quick = _meet_in_first_region(buf, family, spec, t, region_size)
    if quick is not None:
        return quick
    true, met = walk(path, buf, family, t, piece.stop, region_size, join=spec.head)
    if met is None:
        return Verified(true.regions, true.first_lp(0), true.stop, true.error,
                        min(piece.stop * region_size, piece.size))
    k = true.regions[-1][0]
    lp = true.first_lp(0)
    for code, at in spec.first_lp(met).items():
        lp.setdefault(code, at)
    return Verified(true.regions + [r for r in spec.regions if r[0] > k], lp, spec.stop,
                    spec.error, (k + 1) * region_size)


def _meet_in_first_region(buf: np.ndarray, family: int, spec: Chain, t: int,
                          region_size: int) -> Verified | None:
    """The usual case of a guess off the true chain (an event header has only its size
    to check: a guess a few bytes off hops a record or two of garbage, then falls onto
    the true chain): a hop from ``t`` over the head's stretch alone meets the piece's chain
    before the end of its first region, which ``t`` lies in too.  Then that region runs
    from ``t`` to where the piece's chain said, and the rest stands.  None otherwise."""
    if not len(spec.head) or not spec.regions:
        return None
    k, _, end = spec.regions[0]
    if t // region_size != k:
        return None
    starts, codes, nxt, err, _, _ = hop_range(buf, t, int(spec.head[-1]) + 1, family)
    met = _first_common(spec.head, np.append(starts, nxt)) if err == OK else None
    if met is None or spec.head[met] >= end:
        return None
    before = starts < spec.head[met]
    lp = Chain(head=starts[before], head_codes=codes[before]).first_lp(0)
    for code, at in spec.first_lp(met).items():
        lp.setdefault(code, at)
    return Verified([(k, t, end)] + spec.regions[1:], lp, spec.stop, spec.error,
                    (k + 1) * region_size)


def _cut(regions: list, t: int) -> list:
    """The regions of a chain that runs through ``t``, from ``t`` on: a region's first start
    is its first record start at or after ``t`` (the one region ``t`` falls in moves its
    start there; the regions before it go)."""
    out = []
    for k, start, end in regions:
        if end <= t:
            continue
        out.append((k, max(start, t), end))
    return out


def _check_lp_layout(path: Path, lp: dict, region_size: int, failed_region: int | None):
    """One LP layout per file (one ROSS build writes one): a TraceError at the first LP
    sample of the other layout, unless a hop error comes first (a serial hop checks a
    region's layouts only once its records hopped: an error in the same region wins)."""
    if len(lp) < 2:
        return
    seen = min(lp, key=lp.get)
    other = max(lp.values())
    if failed_region is not None and other // region_size >= failed_region:
        return
    size = 48 if seen == L.LP else 36
    raise TraceError.at_byte(path, other + 4, f"LP sample_size {84 - size} but this file's "
                             f"earlier LP samples have {size} (expected one layout per file)")


def region_bounds(path: Path, region_size: int, keep=None) -> list[tuple[int, int, int]]:
    """(index, first record start, next region's first start) of each fixed-size
    byte region in which records start: one serial hop from byte 0 (headers only),
    the first error met raised.  ``keep(start, end, starts, codes)``, if given, is shown
    each region's hop."""
    pieces = [list_piece(piece, region_size, keep)
              for piece in pieces_of([path], region_size, 0, 1)]
    return [r for *_, regions, _ in verified_files([pieces], region_size) for r in regions]


def size_or_0(path: Path) -> int:
    """For planning only: a file that cannot be stat'ed fails where its piece opens it."""
    try:
        return path.stat().st_size
    except OSError:
        return 0

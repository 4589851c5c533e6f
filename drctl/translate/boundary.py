"""Where a group goes on a copy that lost the record it read last (docs/design.md §3, §6 "Truth
in the hard cases"): the first surviving copy of a record it has not read.

A compacted copy keeps some records of a partition, in order: compaction on either cluster only
removes records, and a replicator copies a partition in order. So between two proven copies —
L, the copy of a source record the group read, and U, the copy of one it has not — every target
record is the copy of a source record between their originals. Those source records split at
the group's position into `read` and `unread`; the target records between L and U split the
same way, the copies of read records first. A target record whose fingerprint occurs on
neither side is a *stray*: its original is gone from the source too, so it may be either.

`split_copies` bounds how many of the target records between are copies of read records:
- at most `possible`, the longest prefix whose records (strays aside) occur in order among the
  read ones;
- at least `certain`, the shortest prefix after which the rest (strays aside) occur in order
  among the unread ones.
Equal, the position is exact: right after the `certain`-th (or right after L). Otherwise it
goes before the undecided records, which the group may then read again (never skip one).

L and U are found by content with the exact locator (translate/locate.py): L walking back from
the group's last read record, U walking forward from its position; with no read record left on
the target, L is the partition's start, and with no unread one, U is the target's end. L
counts only when no record identical to it lies from the position up to U (its copy might be
that record's; see `_choose`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from drctl.kafka.records import Record
from drctl.kafka.topics import TP
from drctl.translate.locate import MatchQuery, Side, match_records
from drctl.translate.reader import RangeRequest


@dataclass(frozen=True)
class Split:
    """Of the target records between L and U: how many are surely, and how many at most,
    copies of records the group read."""

    certain: int
    possible: int


def split_copies(read: Sequence[bytes], unread: Sequence[bytes],
                 target: Sequence[bytes]) -> Split | None:
    """Bound the read prefix of `target` (fingerprints, in offset order) given the source's
    `read` and `unread` records between L and U (see the module docstring). None when no split
    fits: the target holds what the source cannot explain in order (re-copies)."""
    known = set(read) | set(unread)
    possible = _fits_forward([fp for fp in target], read, known)
    certain = len(target) - _fits_backward(list(target), unread, known)
    if certain > possible:
        return None
    return Split(certain, possible)


def _positions(pool: Sequence[bytes]) -> dict[bytes, list[int]]:
    at: dict[bytes, list[int]] = defaultdict(list)
    for i, fp in enumerate(pool):
        at[fp].append(i)
    return at


def _fits_forward(items: Sequence[bytes], pool: Sequence[bytes], known: set[bytes]) -> int:
    """How many leading `items` occur in `pool` in order (each at a later place than the one
    before, earliest first: the greedy choice that fits the most); strays fit anywhere."""
    at = _positions(pool)
    nxt = 0
    for n, fp in enumerate(items):
        if fp not in known:
            continue
        places = at.get(fp, [])
        i = bisect_left(places, nxt)
        if i == len(places):
            return n
        nxt = places[i] + 1
    return len(items)


def _fits_backward(items: Sequence[bytes], pool: Sequence[bytes], known: set[bytes]) -> int:
    """How many trailing `items` occur in `pool` in order (latest first)."""
    at = _positions(pool)
    before = len(pool)  # the next match must lie before this place
    for n, fp in enumerate(reversed(items)):
        if fp not in known:
            continue
        places = at.get(fp, [])
        i = bisect_left(places, before) - 1
        if i < 0:
            return n
        before = places[i]
    return len(items)


@dataclass(frozen=True)
class Copy:
    """A source record and its copy on the target (offsets on each)."""

    source: int
    target: int


@dataclass(frozen=True)
class Boundary:
    """Where a group whose last read record is gone from the target goes, and why."""

    offset: int | None  # None: not placed (`reason` says why)
    between: int = 0  # target records it may read again (0: exact)
    read: Copy | None = None  # L: the last record it read that the target holds (None: none)
    unread: Copy | None = None  # U: the first it has not read that the target holds (None: none)
    reason: str = ""


@dataclass(frozen=True)
class Position:
    """A group's position on the source partition `tp_a`, its copy partition `tp_b`, and the
    last visible record before it."""

    tp_a: TP
    tp_b: TP
    offset: int
    last: Record


# Records looked at per step of the walks, in rounds of growing size (up to max_scan).
WALK_ROUNDS = (16, 256, 4096, 65536)
# Anchors tried per side when the nearest ones have identical twins.
MAX_CANDIDATES = 8


def find_boundaries(a: Side, b: Side, positions: Sequence[Position], *, max_scan: int,
                    skip: Callable[[Record], bool] | None = None) -> list[Boundary]:
    """Each position's place on B (module docstring). `skip`: records that replicate nothing
    (drctl's own copies), never anchors and never counted."""
    lower = _walk(a, b, positions, max_scan, skip, backward=True)
    upper = _walk(a, b, positions, max_scan, skip, backward=False)
    out: dict[int, Boundary] = {}
    todo: list[tuple[int, list[Copy], list[Copy]]] = []
    for i, (lows, highs) in enumerate(zip(lower, upper, strict=True)):
        if isinstance(lows, str) or isinstance(highs, str):
            out[i] = Boundary(None, reason=lows if isinstance(lows, str) else str(highs))
        else:
            todo.append((i, lows, highs))
    settled = _settle(a, b, [(positions[i], lows, highs) for i, lows, highs in todo], skip)
    out.update(zip([i for i, _, _ in todo], settled, strict=True))
    return [out[i] for i in range(len(positions))]


def _walk(a: Side, b: Side, positions: Sequence[Position], max_scan: int,
          skip: Callable[[Record], bool] | None, *, backward: bool) -> list[list[Copy] | str]:
    """Per position, the copies found on B of the source records nearest to it on one side —
    the read records before it (latest first) or the unread ones from it (earliest first) — or
    the partition's edge when none has a copy there (a sentinel Copy), or why it is unknown."""
    out: list[list[Copy] | str] = [[] for _ in positions]
    # Next offset to look from: backward, the end (exclusive) of the next window.
    cursor = {i: (p.last.offset + 1 if backward else p.offset) for i, p in enumerate(positions)}
    looked = 0
    for size in WALK_ROUNDS:
        if not cursor or looked >= max_scan:
            break
        reqs, order = [], []
        for i, at in cursor.items():
            low, end = a.marks[positions[i].tp_a]
            span = (max(low, at - size), at) if backward else (at, min(end, at + size))
            reqs.append(RangeRequest(positions[i].tp_a, *span))
            order.append(i)
        # Many look-ups on one partition: read it whole once on each side.
        a.load_busy_partitions(Counter({r.tp: size for r in reqs}))
        b.load_busy_partitions(Counter({positions[i].tp_b: size for i in order}))
        queries, owners = [], []
        for i, recs in zip(order, a.reader.read(reqs), strict=True):
            for rec in recs:
                if skip is None or not skip(rec):
                    queries.append(MatchQuery(rec, positions[i].tp_b))
                    owners.append(i)
        found: dict[int, list[Copy]] = defaultdict(list)
        for i, query, res in zip(owners, queries,
                                 match_records(a, b, queries, max_scan=max_scan), strict=True):
            if res.offset is not None:
                found[i].append(Copy(query.record.offset, res.offset))
        for i, req in zip(order, reqs, strict=True):
            low, end = a.marks[positions[i].tp_a]
            b_low, b_end = b.marks[positions[i].tp_b]
            if found.get(i):
                out[i] = sorted(found[i], key=lambda c: c.source,
                                reverse=backward)[:MAX_CANDIDATES]
                del cursor[i]
            elif backward and req.start <= low:
                out[i] = [Copy(low - 1, b_low - 1)]  # no record it read is on the target
                del cursor[i]
            elif not backward and req.end >= end:
                out[i] = [Copy(end, b_end)]  # no record it has not read is on the target
                del cursor[i]
            else:
                cursor[i] = req.start if backward else req.end
        looked += size
    for i in cursor:
        side = "before" if backward else "from"
        out[i] = (f"no record {side} its position within {looked} records is on the target "
                  "as it is on the source")
    return out


def _settle(a: Side, b: Side, todo: Sequence[tuple[Position, list[Copy], list[Copy]]],
            skip: Callable[[Record], bool] | None) -> list[Boundary]:
    """Read the records between the anchors once per position and split them."""
    # From L's record (validity is checked on it) through U's; the sentinels lie just outside
    # the partition.
    src_reqs = [RangeRequest(pos.tp_a, max(a.marks[pos.tp_a][0], min(c.source for c in lows)),
                             min(a.marks[pos.tp_a][1], max(c.source for c in highs) + 1))
                for pos, lows, highs in todo]
    dst_reqs = [RangeRequest(pos.tp_b, min(c.target for c in lows) + 1,
                             max(c.target for c in highs)) for pos, lows, highs in todo]
    out = []
    for (pos, lows, highs), src, dst in zip(todo, a.reader.read(src_reqs),
                                            b.reader.read(dst_reqs), strict=True):
        # A copy and its record compare without timestamps where either side rewrites them.
        with_ts = not (pos.tp_a[0] in a.log_append or pos.tp_b[0] in b.log_append)
        kept = [r for r in src if skip is None or not skip(r)]
        out.append(_choose(pos, lows, highs, kept, dst, partial(_fingerprint, a, with_ts),
                           partial(_fingerprint, b, with_ts),
                           loose=pos.tp_b[0] in b.log_append))
    return out


def _fingerprint(side: Side, with_ts: bool, rec: Record) -> bytes:
    return side.fingerprint(rec, with_ts)


def _choose(pos: Position, lows: list[Copy], highs: list[Copy], src: list[Record],
            dst: list[Record], fp_a: Callable[[Record], bytes],
            fp_b: Callable[[Record], bytes], *, loose: bool = False) -> Boundary:
    """The nearest valid pair of anchors and the split between them.

    The locator finds the k-th identical copy on B from the timestamp anchor, and B holds a
    subsequence of A's records: the copy it finds is the one of the record looked for or of a
    later identical one. So U (unread) is always a copy of an unread record; L is only when
    no record identical to it lies from the position up to U. `loose`: B stamps records on
    append and its anchor was moved earlier, so U is checked the same way against the read
    records."""
    by_offset = {r.offset: r for r in src}
    for low in lows:
        for high in highs:
            if not low.target < high.target:
                continue
            read = [r for r in src if low.source < r.offset < pos.offset]
            unread = [r for r in src if pos.offset <= r.offset < high.source]
            low_rec, high_rec = by_offset.get(low.source), by_offset.get(high.source)
            if low_rec is not None and fp_a(low_rec) in {fp_a(r) for r in unread} | (
                    {fp_a(high_rec)} if high_rec is not None else set()):
                continue
            if loose and high_rec is not None and fp_a(high_rec) in {
                    fp_a(r) for r in read} | ({fp_a(low_rec)} if low_rec is not None else set()):
                continue
            between = [r for r in dst if low.target < r.offset < high.target]
            split = split_copies([fp_a(r) for r in read], [fp_a(r) for r in unread],
                                 [fp_b(r) for r in between])
            l_copy = None if low_rec is None else low
            u_copy = None if high_rec is None else high
            if split is None:
                return Boundary(None, read=l_copy, unread=u_copy, reason=(
                    f"the {len(between)} target record(s) between offsets {low.target} and "
                    f"{high.target} do not line up with the source's (re-copies, or records "
                    "compacted on the source)"))
            offset = between[split.certain - 1].offset + 1 if split.certain else low.target + 1
            return Boundary(offset, split.possible - split.certain, l_copy, u_copy)
    return Boundary(None, reason="no copy found on either side of its position can anchor it "
                                 "(each has an identical twin across the position, or the "
                                 "copies lie out of order)")

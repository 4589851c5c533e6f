"""Placing a group between the copies a compacted target kept (drctl/translate/boundary.py):
the split of the records between two anchors, and which anchors count."""

from __future__ import annotations

import time

from drctl.kafka.records import Record
from drctl.translate.boundary import Boundary, Copy, Position, Split, _choose, split_copies

NOW = int(time.time() * 1000)


def test_the_copies_of_read_records_come_first_and_the_split_is_exact() -> None:
    # Source between the anchors: a b | c d (the group read a and b). The target kept b and c.
    assert split_copies([b"a", b"b"], [b"c", b"d"], [b"b", b"c"]) == Split(1, 1)
    # Nothing it read survives: the first target record is the first unread copy.
    assert split_copies([b"a", b"b"], [b"c", b"d"], [b"d"]) == Split(0, 0)
    # Only read records survive between the anchors.
    assert split_copies([b"a", b"b"], [b"c"], [b"a", b"b"]) == Split(2, 2)


def test_an_identical_record_on_both_sides_of_the_position_is_undecided() -> None:
    """x read, an identical x unread, one copy left: it is either one's. Placed before it,
    one record possibly re-delivered — never after it (a skip if it is the unread one's)."""
    assert split_copies([b"x"], [b"x"], [b"x"]) == Split(0, 1)
    # Two read copies of a, one unread: of two surviving copies, the first is surely read.
    assert split_copies([b"a", b"a"], [b"a"], [b"a", b"a"]) == Split(1, 2)


def test_a_stray_may_be_either_and_a_disorder_fits_no_split() -> None:
    # z's original is gone from the source (compacted there too): read or unread.
    assert split_copies([b"a"], [b"c"], [b"a", b"z", b"c"]) == Split(1, 2)
    # The target holds an unread copy before a read one: no split explains it.
    assert split_copies([b"a"], [b"b"], [b"b", b"a"]) is None


def _rec(offset: int, key: str, value: str = "v", topic: str = "t") -> Record:
    return Record(topic, 0, offset, key.encode(), value.encode(), NOW + offset, 1, ())


def _fp(rec: Record) -> bytes:
    return (rec.key or b"") + b"=" + (rec.value or b"")


def test_an_anchor_with_an_identical_twin_across_the_position_is_not_used() -> None:
    """Source: 0 a, 1 d, 2 d (identical), 3 e; the group read 0-1 (position 2). The target
    kept a (0), d (2) and e (3): d's copy is the first d's or the second's — the nearer lower
    anchor (1, 2) is not used; placed after a, d possibly re-delivered, nothing skipped."""
    src = [_rec(0, "a"), _rec(1, "d"), _rec(2, "d"), _rec(3, "e")]
    dst = [_rec(0, "a", topic="u"), _rec(2, "d", topic="u"), _rec(3, "e", topic="u")]
    pos = Position(("t", 0), ("u", 0), 2, src[1])
    found = _choose(pos, [Copy(1, 2), Copy(0, 0)], [Copy(3, 3)], src, dst, _fp, _fp)
    assert found == Boundary(1, 1, Copy(0, 0), Copy(3, 3))
    # Without the twin (the second record is another key), the nearer anchor proves it.
    src[2] = _rec(2, "f")
    dst[1] = _rec(1, "d", topic="u")
    found = _choose(pos, [Copy(1, 1), Copy(0, 0)], [Copy(2, 2)], src, dst, _fp, _fp)
    assert found == Boundary(2, 0, Copy(1, 1), Copy(2, 2))


def test_no_read_record_left_places_at_the_start_and_none_unread_at_the_end() -> None:
    """Sentinel anchors: nothing the group read survives (L is the partition's start), or
    nothing it has not read does (U is the target's end)."""
    src = [_rec(o, f"k{o}") for o in range(6)]
    pos = Position(("t", 0), ("u", 0), 3, src[2])
    # The target kept only k4 and k5 (offsets 4, 5): placed at its start (offset 0).
    dst = [_rec(4, "k4", topic="u"), _rec(5, "k5", topic="u")]
    found = _choose(pos, [Copy(-1, -1)], [Copy(4, 4)], src, dst, _fp, _fp)
    assert found == Boundary(0, 0, None, Copy(4, 4))
    # The target kept only k0 and k1 and ends at 6: placed after k1's copy.
    dst = [_rec(0, "k0", topic="u"), _rec(1, "k1", topic="u")]
    found = _choose(pos, [Copy(0, 0)], [Copy(6, 6)], src, dst, _fp, _fp)
    assert found == Boundary(2, 0, Copy(0, 0), None)


def test_twins_both_kept_are_exact_and_a_loose_anchor_on_the_unread_side_is_checked() -> None:
    """The copy kept both twins (0 a, 1 d, 2 d, 3 e; the group read 0-1): L on a, U on the
    second d's copy (the locator's 2nd identical copy can only be the second d's or a later
    one's), the first d's copy between them is surely read: exact, right after it. On a target
    that stamps on append the locator anchors earlier, and U's twin across the position makes
    it unusable: the next U (e) anchors, and of the two d copies between, in order, the first
    is the read d's — the same exact position."""
    src = [_rec(0, "a"), _rec(1, "d"), _rec(2, "d"), _rec(3, "e")]
    dst = [_rec(r.offset, (r.key or b"").decode(), topic="u") for r in src]
    pos = Position(("t", 0), ("u", 0), 2, src[1])
    assert _choose(pos, [Copy(0, 0)], [Copy(2, 2)], src, dst, _fp, _fp) == \
        Boundary(2, 0, Copy(0, 0), Copy(2, 2))
    found = _choose(pos, [Copy(0, 0)], [Copy(2, 2), Copy(3, 3)], src, dst, _fp, _fp,
                    loose=True)
    assert found == Boundary(2, 0, Copy(0, 0), Copy(3, 3))

"""How far back a returning replicator re-copied (drctl/ops/one_way/late_copies.py `RecopyWalk`):
found by content, window by window below the compared range, whatever the records' timestamps."""

from __future__ import annotations

from collections import Counter

from drctl.ops.one_way.late_copies import RecopyWalk


def _walk_over(source: list[bytes], start: int, after_f: list[bytes], step: int) -> RecopyWalk:
    """Run a walk against `source` (fingerprints by offset) the way find_late_copies does."""
    walk = RecopyWalk(start, 0, Counter(after_f) - Counter(source[start:]), step)
    while (window := walk.window()) is not None:
        walk.feed(window[0], source[window[0]:window[1]])
    return walk


def test_the_walk_reaches_back_to_where_the_worker_started_copying_again() -> None:
    source = [b"r%d" % i for i in range(100)]
    # The worker re-copied from offset 23 (its last flushed offset) to the end; two
    # post-failover writes sit among the copies. The compared tail starts at 90.
    after_f = source[23:] + [b"post-1", b"post-2"]
    walk = _walk_over(source, 90, after_f, step=10)
    # Windows [80, 90), [60, 80) and [20, 60) held re-copies; [0, 20) was the first without.
    assert walk.start == 20 and walk.done
    assert +walk.unexplained == Counter([b"post-1", b"post-2"])


def test_nothing_older_re_copied_reads_one_window_and_stops() -> None:
    source = [b"r%d" % i for i in range(100)]
    walk = RecopyWalk(90, 0, Counter([b"post"]), 10)
    assert walk.window() == (80, 90)
    assert walk.feed(80, source[80:90]) is False
    assert walk.start == 90 and walk.window() is None
    # Everything after F matched already: no window is read at all.
    assert RecopyWalk(90, 0, Counter(), 10).window() is None


def test_identical_records_are_a_multiset_and_the_partition_start_ends_the_walk() -> None:
    # Every record is the same heartbeat: the copies after F need as many below the range.
    source = [b"hb"] * 50
    walk = _walk_over(source, 40, [b"hb"] * 25, step=4)
    assert walk.start <= 25 and not +walk.unexplained
    # Re-copied from the very first offset: the walk stops at the partition's start.
    walk = _walk_over(source, 40, [b"hb"] * 50, step=4)
    assert walk.start == 0 and not +walk.unexplained

"""The return to protection's pure parts: where forward copying starts (the walk over the
source's records after failback's comparison), with the retention and compaction rules of
drctl/ops/cut_over.py."""

from __future__ import annotations

from drctl.fingerprint import record_fingerprint
from drctl.kafka.records import Record
from drctl.ops.cut_over import ExpectedCopy, Walked, walk_copies

TP = ("orders", 0)


def _rec(offset: int, value: bytes | None, key: bytes = b"k", ts: int = 1000) -> Record:
    return Record("orders", 0, offset, key, value, ts, 1, ())


def _expected(*values: bytes | None, key: bytes = b"k", keyed: bool = False
              ) -> dict[tuple[str, int], list[ExpectedCopy]]:
    return {TP: [ExpectedCopy(record_fingerprint(_rec(0, v, key)), key if keyed else None,
                              keyed and v is None) for v in values]}


def _cut(walked: Walked) -> tuple[int | None, list[int], int]:
    return walked.last_copy, walked.strays, walked.missing


def test_the_cut_over_follows_the_last_copy_of_a_post_failover_write() -> None:
    # Source from failback's comparison end: the reverse copies of p1, p2, then new writes.
    records = [_rec(100, b"p1"), _rec(101, b"p2"), _rec(102, b"n1"), _rec(103, b"n2")]
    walked = walk_copies(records, _expected(b"p1", b"p2"))[TP]
    assert _cut(walked) == (101, [], 0)
    assert walked.others == [102, 103]  # after the cut-over: forward replication copies them


def test_a_native_write_among_the_reverse_copies_is_a_stray() -> None:
    # A producer moved back before the reverse flow had carried p2.
    records = [_rec(100, b"p1"), _rec(101, b"n1"), _rec(102, b"p2"), _rec(103, b"n2")]
    assert _cut(walk_copies(records, _expected(b"p1", b"p2"))[TP]) == (102, [101], 0)


def test_identical_records_count_as_a_multiset() -> None:
    # Two identical post-failover writes, and a third identical record written natively.
    records = [_rec(10, b"same"), _rec(11, b"same"), _rec(12, b"same")]
    walked = walk_copies(records, _expected(b"same", b"same"))[TP]
    assert (_cut(walked), walked.others) == ((11, [], 0), [12])


def test_a_copy_the_source_lacks_is_counted_missing() -> None:
    assert _cut(walk_copies([_rec(5, b"p1")], _expected(b"p1", b"p2"))[TP]) == (5, [], 1)


def test_a_partition_without_post_failover_writes_has_no_last_copy() -> None:
    walked = walk_copies([_rec(7, b"n1")], {}, [TP])[TP]
    assert (_cut(walked), walked.others) == ((None, [], 0), [7])


def test_on_a_compacted_topic_a_stray_a_later_value_of_its_key_supersedes_is_not_copied() -> None:
    # The target compacted k=v1 away after the reverse flow copied it; its copy on the source
    # no longer pairs with anything. Appending it to the target after v2 would make v1 the
    # current value again.
    records = [_rec(100, b"v1"), _rec(101, b"v2")]
    expected = _expected(b"v2", keyed=True)
    walked = walk_copies(records, expected, compacted={"orders"})[TP]
    assert (walked.strays, walked.superseded, walked.last_copy) == ([], [100], 101)
    # Not compacted: every record counts, the unpaired one is a stray.
    assert walk_copies(records, _expected(b"v2"))[TP].strays == [100]


def test_a_copy_compaction_removed_from_the_source_is_not_missing() -> None:
    # Post-failover writes k=v1 then k=v2; the source compacted its copy of v1 away.
    walked = walk_copies([_rec(101, b"v2")], _expected(b"v1", b"v2", keyed=True),
                         compacted={"orders"})[TP]
    assert (walked.missing, walked.compacted_away) == (0, 1)
    # The same on a topic that does not compact: missing.
    assert walk_copies([_rec(101, b"v2")], _expected(b"v1", b"v2"))[TP].missing == 1


def test_a_lone_copy_compaction_cannot_explain_is_missing_even_on_a_compacted_topic() -> None:
    walked = walk_copies([_rec(101, b"x", key=b"other")], _expected(b"v1", keyed=True),
                         compacted={"orders"})[TP]
    assert (walked.missing, walked.compacted_away) == (1, 0)


def test_copies_of_writes_the_targets_retention_removed_are_not_strays() -> None:
    # The target's retention took its first two post-failover writes (after the reverse flow
    # copied them): their copies open the source's range and pair with nothing.
    records = [_rec(100, b"p1"), _rec(101, b"p2"), _rec(102, b"p3"), _rec(103, b"n1")]
    walked = walk_copies(records, _expected(b"p3"), removed_on_target={TP: 2})[TP]
    assert (walked.strays, walked.removed_on_target, walked.last_copy) == ([], 2, 102)
    # Without the removal those two are strays (the target lacks them).
    assert walk_copies(records, _expected(b"p3"))[TP].strays == [100, 101]


def test_copies_the_sources_retention_removed_are_not_missing() -> None:
    walked = walk_copies([_rec(102, b"p3")], _expected(b"p1", b"p2", b"p3"),
                         removed_on_source={TP: 2})[TP]
    assert (walked.missing, walked.removed_on_source, walked.last_copy) == (0, 2, 102)
    # Retention explains no more than it took.
    walked = walk_copies([_rec(102, b"p3")], _expected(b"p1", b"p2", b"p3"),
                         removed_on_source={TP: 1})[TP]
    assert (walked.missing, walked.removed_on_source) == (1, 1)

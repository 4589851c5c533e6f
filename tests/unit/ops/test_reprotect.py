"""The return to protection's pure parts: where forward copying starts (the walk over the
source's records after failback's comparison) and the refusal without a failback."""

from __future__ import annotations

from collections import Counter

from drctl.fingerprint import record_fingerprint
from drctl.kafka.records import Record
from drctl.ops.reprotect import walk_copies

TP = ("orders", 0)


def _rec(offset: int, value: bytes, ts: int = 1000) -> Record:
    return Record("orders", 0, offset, b"k", value, ts, 1, ())


def _expected(*values: bytes) -> dict[tuple[str, int], Counter[bytes]]:
    return {TP: Counter(record_fingerprint(_rec(0, v)) for v in values)}


def test_the_cut_over_follows_the_last_copy_of_a_post_failover_write() -> None:
    # Source from failback's comparison end: the reverse copies of p1, p2, then new writes.
    records = [_rec(100, b"p1"), _rec(101, b"p2"), _rec(102, b"n1"), _rec(103, b"n2")]
    last, others, left = walk_copies(records, _expected(b"p1", b"p2"))[TP]
    assert (last, left) == (101, 0)
    assert others == [102, 103]  # after the cut-over: forward replication copies them


def test_a_native_write_among_the_reverse_copies_is_a_stray() -> None:
    # A producer moved back before the reverse flow had carried p3.
    records = [_rec(100, b"p1"), _rec(101, b"n1"), _rec(102, b"p2"), _rec(103, b"n2")]
    last, others, left = walk_copies(records, _expected(b"p1", b"p2"))[TP]
    assert last == 102
    strays = [o for o in others if o < last + 1]
    assert strays == [101]


def test_identical_records_count_as_a_multiset() -> None:
    # Two identical post-failover writes, and a third identical record written natively.
    records = [_rec(10, b"same"), _rec(11, b"same"), _rec(12, b"same")]
    last, others, left = walk_copies(records, _expected(b"same", b"same"))[TP]
    assert (last, others, left) == (11, [12], 0)


def test_a_copy_the_source_lacks_is_counted_missing() -> None:
    last, others, left = walk_copies([_rec(5, b"p1")], _expected(b"p1", b"p2"))[TP]
    assert (last, others, left) == (5, [], 1)


def test_a_partition_without_post_failover_writes_has_no_last_copy() -> None:
    result = walk_copies([_rec(7, b"n1")], {}, [TP])
    assert result[TP] == (None, [7], 0)

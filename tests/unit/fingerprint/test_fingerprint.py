"""The record fingerprint (drctl/fingerprint/__init__.py): what it tells apart, what it
leaves out, and how its digest is computed."""

from __future__ import annotations

from drctl.fingerprint import DIGEST_BYTES, fingerprint, items


def test_fingerprint_separates_null_empty_and_shifted_fields() -> None:
    variants = {
        "null key": fingerprint(0, None, b"x"),
        "null value": fingerprint(0, b"x", None),
        "empty key": fingerprint(0, b"", b"x"),
        "empty value": fingerprint(0, b"x", b""),
        "both null": fingerprint(0, None, None),
        "both empty": fingerprint(0, b"", b""),
        "shifted": fingerprint(0, b"xx", b""),
        "shifted back": fingerprint(0, b"", b"xx"),
        "other partition": fingerprint(1, None, b"x"),
        "header": fingerprint(0, None, b"x", [("h", b"")]),
        "null header": fingerprint(0, None, b"x", [("h", None)]),
        "timestamp": fingerprint(0, None, b"x", None, 5),
    }
    assert len(set(variants.values())) == len(variants)
    assert all(len(d) == DIGEST_BYTES == 16 for d in variants.values())


def test_replication_headers_are_left_out() -> None:
    base = fingerprint(3, b"k", b"v", [("app", b"1")], 1000)
    assert fingerprint(3, b"k", b"v", [("app", b"1"), ("__replicator_id", b"\x00\x01")],
                       1000) == base
    assert fingerprint(3, b"k", b"v", [("drctl-reconciled", b"fo-1:t:3:9"), ("app", b"1")],
                       1000) == base
    assert fingerprint(3, b"k", b"v", [("app", b"2")], 1000) != base


def test_items_flag_nulls_and_count_headers() -> None:
    assert items(0, None, b"", None, None) == [0, True, False, b"", 0, False]
    assert items(7, b"k", None, [("h", None), ("__replicator_id", b"x")], 9) == \
        [7, False, b"k", True, 1, b"h", True, True, 9]


def test_digest_is_two_seeded_xxh64_chains() -> None:
    """Written out by hand with the xxhash package: what Spark's xxhash64 computes."""
    import struct

    import xxhash

    def h(data: bytes, seed: int) -> int:
        return xxhash.xxh64_intdigest(data, seed)

    def i32(n: int) -> bytes:
        return struct.pack("<i", n)

    expected = b""
    for start in (1, 2):
        acc = h(i32(start), 42)
        for data in (i32(3), i32(0), b"k", i32(1), i32(0), i32(1), struct.pack("<q", 5)):
            acc = h(data, acc)
        expected += acc.to_bytes(8, "big")
    assert fingerprint(3, b"k", None, [], 5) == expected


def test_same_record_is_fingerprint_equality_without_the_digest() -> None:
    """Translation compares candidate copies with `same_record` (issue 43: a digest costs
    some twenty comparisons); it must say exactly what equal fingerprints say."""
    import itertools

    from drctl.fingerprint import record_fingerprint, same_record
    from drctl.kafka.records import Record

    base = Record("t", 0, 5, b"k", b"v", 1000, 1, (("h", b"1"),))
    variants = [
        base,
        Record("mirror", 0, 9, b"k", b"v", 1000, 1, (("h", b"1"),)),  # a copy elsewhere
        Record("t", 1, 5, b"k", b"v", 1000, 1, (("h", b"1"),)),  # another partition
        Record("t", 0, 5, None, b"v", 1000, 1, (("h", b"1"),)),
        Record("t", 0, 5, b"", b"v", 1000, 1, (("h", b"1"),)),  # empty is not null
        Record("t", 0, 5, b"k", b"v", 1001, 1, (("h", b"1"),)),
        Record("t", 0, 5, b"k", b"v", 1001, 2, (("h", b"1"),)),  # LogAppendTime
        Record("t", 0, 5, b"k", b"v", 1000, 1, (("h", None),)),
        Record("t", 0, 5, b"k", b"v", 1000, 1, ()),
        Record("t", 0, 5, b"k", b"v", 1000, 1, (("h", b"1"), ("__replicator_id", b"x"))),
    ]
    for x, y in itertools.product(variants, repeat=2):
        for with_ts in (None, True, False):
            expected = (record_fingerprint(x, with_ts) == record_fingerprint(y, with_ts)
                        if with_ts is not None
                        else record_fingerprint(x) == record_fingerprint(y))
            assert same_record(x, y, with_ts) == expected, (x, y, with_ts)

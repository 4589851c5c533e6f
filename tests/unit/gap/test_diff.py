"""The gap analysis' DataFrame logic on frames with exactly the Kafka source's schema."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from drctl.gap import diff
from tests.spark_support import KAFKA_SCHEMA, spark_session

pytestmark = pytest.mark.spark

TS = 1_700_000_000_000
Headers = list[tuple[str, bytes | None]] | None
# (partition, offset, key, value, timestamp_ms, headers)
Rec = tuple[int, int, bytes | None, bytes | None, int, Headers]


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    return spark_session()


def frame(spark: SparkSession, topic: str, records: Sequence[Rec]) -> DataFrame:
    rows = [(key, value, topic, p, off, datetime.fromtimestamp(ts / 1000, UTC), 0, headers)
            for p, off, key, value, ts, headers in records]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def missing(spark: SparkSession, source: Sequence[Rec], target: Sequence[Rec], *,
            compared: bool = True) -> list[tuple[int, int]]:
    src = diff.narrow(frame(spark, "orders", source), {"orders": 0}, sign=1,
                      compared={"orders"} if compared else set())
    tgt = diff.narrow(frame(spark, "primary.orders", target), {"primary.orders": 0}, sign=-1,
                      compared={"primary.orders"} if compared else set())
    groups = diff.unmatched_groups(src, tgt)
    rows = diff.missing_offsets(groups, src).collect()
    assert all(r["tix"] == 0 for r in rows)
    return sorted((r["partition"], r["offset"]) for r in rows)


def renumber(records: Sequence[Rec], start: int = 100) -> list[Rec]:
    """The same records at other offsets, as a replicator writes them."""
    return [(p, start + i, k, v, ts, h) for i, (p, _, k, v, ts, h) in enumerate(records)]


def test_null_key_null_value_and_empty_bytes_never_match_each_other(spark: SparkSession
                                                                   ) -> None:
    source: list[Rec] = [(0, 0, None, b"x", TS, None), (0, 1, b"x", None, TS, None),
                         (0, 2, b"", b"x", TS, None), (0, 3, b"x", b"", TS, None),
                         (0, 4, None, None, TS, None), (0, 5, b"", b"", TS, None)]
    target = renumber([source[0], source[5]])
    assert missing(spark, source, target) == [(0, 1), (0, 2), (0, 3), (0, 4)]


def test_identical_copies_match_copy_by_copy(spark: SparkSession) -> None:
    copy: Rec = (1, 0, b"k", b"same", TS, [("h", b"1")])
    source = [(1, off, copy[2], copy[3], copy[4], copy[5]) for off in (5, 6, 9)]
    other: Rec = (1, 7, b"k", b"other", TS, None)
    # One copy replicated: the 2nd and 3rd source copies are the gap.
    assert missing(spark, [*source, other], renumber([source[0], other])) == [(1, 6), (1, 9)]
    assert missing(spark, [*source, other], renumber([source[0], source[1]])) == [(1, 7),
                                                                                  (1, 9)]
    assert missing(spark, source, renumber(source)) == []
    # An at-least-once replicator wrote a copy twice: still nothing missing.
    assert missing(spark, source, renumber([*source, source[2]])) == []


def test_tombstones(spark: SparkSession) -> None:
    source: list[Rec] = [(0, 0, b"k", b"v", TS, None), (0, 1, b"k", None, TS + 1, None)]
    assert missing(spark, source, renumber(source[:1])) == [(0, 1)]
    assert missing(spark, source, renumber(source)) == []


def test_replication_headers_on_the_target_only_still_match(spark: SparkSession) -> None:
    source: list[Rec] = [(2, 0, b"k", b"v", TS, [("a", b"1")]), (2, 1, b"k", b"w", TS, None)]
    target: list[Rec] = [(2, 10, b"k", b"v", TS, [("a", b"1"), ("__replicator_id", b"r1")]),
                         (2, 11, b"k", b"w", TS, [("__replicator_id", b"r1")])]
    assert missing(spark, source, target) == []
    # A header that is not a replication header does make a difference.
    changed: list[Rec] = [(2, 10, b"k", b"v", TS, [("a", b"2")]), target[1]]
    assert missing(spark, source, changed) == [(2, 0)]


def test_identical_timestamps_and_timestamp_comparison(spark: SparkSession) -> None:
    burst: list[Rec] = [(0, i, b"k%d" % i, b"v%d" % i, TS, None) for i in range(6)]
    assert missing(spark, burst, renumber(burst[:2] + burst[3:])) == [(0, 2)]
    moved = [(p, o, k, v, ts + 1, h) for p, o, k, v, ts, h in renumber(burst)]
    assert missing(spark, burst, moved) == [(0, i) for i in range(6)]
    # LogAppendTime on either side: timestamps are not compared.
    assert missing(spark, burst, moved, compared=False) == []


def test_target_only_records_are_not_a_gap(spark: SparkSession) -> None:
    source: list[Rec] = [(0, 0, b"k", b"v", TS, None)]
    target = renumber([*source, (0, 0, b"new", b"written on the target", TS + 5, None),
                       (0, 0, None, b"x", TS + 6, None)])
    assert missing(spark, source, target) == []


def test_same_record_in_another_partition_is_not_a_match(spark: SparkSession) -> None:
    source: list[Rec] = [(0, 0, b"k", b"v", TS, None)]
    assert missing(spark, source, [(1, 0, b"k", b"v", TS, None)]) == [(0, 0)]


def test_topics_are_kept_apart(spark: SparkSession) -> None:
    rec: Rec = (0, 0, b"k", b"v", TS, None)
    src = diff.narrow(frame(spark, "a", [rec]).unionByName(frame(spark, "b", [rec])),
                      {"a": 0, "b": 1}, sign=1, compared={"a", "b"})
    tgt = diff.narrow(frame(spark, "b", renumber([rec])), {"b": 1}, sign=-1, compared={"b"})
    rows = diff.missing_offsets(diff.unmatched_groups(src, tgt), None).collect()
    assert [(r["tix"], r["partition"], r["offset"]) for r in rows] == [(0, 0, 0)]


def test_gap_records_fetch_payloads_of_missing_offsets_only(spark: SparkSession) -> None:
    source: list[Rec] = [(0, i, b"k%d" % i, b"v%d" % i, TS + i, [("h", None)])
                         for i in range(5)]
    raw = frame(spark, "orders", source)
    missing_df = spark.createDataFrame([(0, 0, 1), (0, 0, 3)], "tix int, partition int, "
                                                               "offset bigint")
    got = sorted(diff.gap_records(raw, {"orders": 0}, missing_df).collect(),
                 key=lambda r: r["offset"])
    assert [(r["offset"], bytes(r["key"]), bytes(r["value"]), r["topic"]) for r in got] == [
        (1, b"k1", b"v1", "orders"), (3, b"k3", b"v3", "orders")]
    assert [(h["key"], h["value"]) for h in got[0]["headers"]] == [("h", None)]


def test_check_order_classification(spark: SparkSession) -> None:
    gap = diff.gap_records(frame(spark, "orders", [
        (0, 10, b"conflict", b"old", TS, None),
        (0, 11, b"safe", b"v", TS, None),
        (0, 12, None, b"unkeyed in a written partition", TS, None),
        (1, 20, None, b"unkeyed in a quiet partition", TS, None),
        (1, 21, b"moved", b"v", TS, None),  # written after failover in another partition
    ]), {"orders": 0}, spark.createDataFrame(
        [(0, 0, o) for o in (10, 11, 12)] + [(0, 1, 20), (0, 1, 21)],
        "tix int, partition int, offset bigint"))
    writes = diff.post_failover_writes(frame(spark, "orders", [
        (0, 50, b"conflict", b"new", TS + 100, None),
        (0, 51, b"conflict", b"newer", TS + 101, None),
        (0, 52, None, b"unkeyed post-failover write", TS + 102, None),
        (2, 60, b"moved", b"v2", TS + 103, None),
        (2, 61, b"elsewhere", b"v", TS + 104, None),
        # drctl's own copy of the safe record, from an earlier, interrupted failback: a
        # source record, not a write — it must not turn its key into a conflict.
        (0, 53, b"safe", b"v", TS, [("drctl-reconciled", b"fo-1:orders:0:11")]),
    ]), {"orders": 0})
    assert writes.count() == 5
    rows = {r["offset"]: r for r in diff.classify(gap, writes).collect()}
    assert {o: r["classification"] for o, r in rows.items()} == {
        10: diff.CONFLICT, 11: diff.SAFE, 12: diff.UNKEYED, 20: diff.UNKEYED,
        21: diff.CONFLICT}
    assert [(w["partition"], w["offset"], w["timestamp_ms"]) for w in rows[10]["conflicts"]] \
        == [(0, 50, TS + 100), (0, 51, TS + 101)]
    assert [(w["partition"], w["offset"]) for w in rows[21]["conflicts"]] == [(2, 60)]
    assert rows[11]["conflicts"] is None and rows[12]["conflicts"] is None
    # Flag for unkeyed records: post-failover writes to the same partition.
    assert rows[12]["partition_writes"] == 3
    assert rows[20]["partition_writes"] == 0


def test_identity_divergence_at_equal_offsets(spark: SparkSession) -> None:
    same: list[Rec] = [(0, i, b"k", b"v%d" % i, TS + i, None) for i in range(5)]
    target = [*same[:2], (0, 2, b"k", b"changed", TS + 2, None), same[3]]
    src = diff.identity_narrow(frame(spark, "t", same), {"t": 0}, compared={"t"})
    tgt = diff.identity_narrow(frame(spark, "t", target), {"t": 0}, compared={"t"})
    rows = sorted(diff.offset_divergence(src, tgt).collect(), key=lambda r: r["offset"])
    assert [(r["offset"], r["source_fp"] is None, r["target_fp"] is None) for r in rows] == [
        (2, False, False), (4, False, True)]


def superseded_split(spark: SparkSession, source: Sequence[Rec], target: Sequence[Rec], *,
                     compacted: bool = True) -> tuple[list[tuple[int, int]],
                                                      list[tuple[int, int]]]:
    """(real gap, superseded) of a compacted topic `orders`, as the job computes them."""
    src_raw = frame(spark, "orders", source)
    src = diff.narrow(src_raw, {"orders": 0}, sign=1, compared={"orders"})
    tgt = diff.narrow(frame(spark, "primary.orders", target), {"primary.orders": 0}, sign=-1,
                      compared={"primary.orders"})
    missing_df = diff.missing_offsets(diff.unmatched_groups(src, tgt), src)
    gone = diff.superseded(missing_df, diff.source_keys(src_raw, {"orders": 0}),
                           {0} if compacted else set())
    # One query for both sides (each is a plan over the same inputs; two collects would run
    # the whole comparison twice).
    gap = missing_df.join(gone, ["tix", "partition", "offset"], "left_anti")
    both = gap.withColumn("gone", F.lit(False)).unionByName(
        gone.select("tix", "partition", "offset").withColumn("gone", F.lit(True)))
    rows = both.select("partition", "offset", "gone").collect()
    return (sorted((r["partition"], r["offset"]) for r in rows if not r["gone"]),
            sorted((r["partition"], r["offset"]) for r in rows if r["gone"]))


# 3 versions of key a, 2 of b, in partition 0; one version of c in partition 1.
VERSIONS: list[Rec] = [(0, 0, b"a", b"a1", TS, None), (0, 1, b"b", b"b1", TS + 1, None),
                       (0, 2, b"a", b"a2", TS + 2, None), (0, 3, b"b", b"b2", TS + 3, None),
                       (0, 4, b"a", b"a3", TS + 4, None), (1, 0, b"c", b"c1", TS + 5, None)]


def test_a_version_the_target_compacted_away_is_superseded(spark: SparkSession) -> None:
    # The target kept only the latest version of each key.
    target = renumber([VERSIONS[3], VERSIONS[4], VERSIONS[5]])
    assert superseded_split(spark, VERSIONS, target) == ([], [(0, 0), (0, 1), (0, 2)])
    # Compaction left a2 too: only a1 and b1 were dropped.
    target = renumber([VERSIONS[2], VERSIONS[3], VERSIONS[4], VERSIONS[5]])
    assert superseded_split(spark, VERSIONS, target) == ([], [(0, 0), (0, 1)])


def test_a_key_whose_later_version_is_missing_too_is_a_gap(spark: SparkSession) -> None:
    # Only c1 reached the target: no later version of a or b was copied.
    target = renumber([VERSIONS[5]])
    assert superseded_split(spark, VERSIONS, target) == (
        [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)], [])
    # a3 copied, b2 not: every version of a is superseded, b1 and b2 are the gap.
    target = renumber([VERSIONS[4], VERSIONS[5]])
    assert superseded_split(spark, VERSIONS, target) == ([(0, 1), (0, 3)],
                                                         [(0, 0), (0, 2)])


def test_a_later_version_in_another_partition_does_not_supersede(spark: SparkSession) -> None:
    source: list[Rec] = [(0, 0, b"k", b"v1", TS, None), (1, 0, b"k", b"v2", TS + 1, None)]
    assert superseded_split(spark, source, renumber(source[1:])) == ([(0, 0)], [])


def test_tombstones_copied_past_are_superseded_the_last_is_a_gap(spark: SparkSession
                                                                 ) -> None:
    source: list[Rec] = [(0, 0, b"a", b"a1", TS, None), (0, 1, b"a", None, TS + 1, None),
                         (0, 2, b"z", b"z1", TS + 2, None), (0, 3, b"z", None, TS + 3, None)]
    # The target compacted a1 away under a's tombstone and expired the tombstone after
    # copying z1; z's tombstone never arrived.
    assert superseded_split(spark, source, renumber([source[2]])) == ([(0, 3)],
                                                                      [(0, 0), (0, 1)])


def test_null_keys_are_a_gap_unless_a_tombstone_was_copied_past(spark: SparkSession) -> None:
    source: list[Rec] = [(0, 0, None, b"x", TS, None), (0, 1, None, None, TS + 1, None),
                         (0, 2, b"k", b"v", TS + 2, None)]
    assert superseded_split(spark, source, renumber([source[2]])) == ([(0, 0)], [(0, 1)])


def test_identical_copies_count_one_by_one(spark: SparkSession) -> None:
    # Two identical copies of a1, one copied: the second is missing, and the later a2 that
    # was copied supersedes it.
    source: list[Rec] = [(0, 0, b"a", b"a1", TS, None), (0, 1, b"a", b"a1", TS, None),
                         (0, 2, b"a", b"a2", TS + 1, None)]
    assert superseded_split(spark, source, renumber([source[0], source[2]])) == ([], [(0, 1)])


def test_topics_not_compacted_keep_their_whole_gap(spark: SparkSession) -> None:
    target = renumber([VERSIONS[3], VERSIONS[4], VERSIONS[5]])
    assert superseded_split(spark, VERSIONS, target, compacted=False) == (
        [(0, 0), (0, 1), (0, 2)], [])

"""Pure DataFrame functions of the gap analysis (docs/design.md §5): no I/O, testable on frames
built by hand with the Kafka source's schema.

Topics are carried as a small integer `tix` (the topic's index in the plan), so the rows that
cross a shuffle stay narrow: (tix, partition, fingerprint, sign, offset) — never payloads.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from drctl.fingerprint import RECONCILED_HEADER
from drctl.fingerprint.spark import fingerprint

SAFE = "safe"
CONFLICT = "conflict"
UNKEYED = "unkeyed"
KEYS = ["tix", "partition"]


def topic_index(topics: Mapping[str, int]) -> Column:
    """`tix` from the Kafka source's `topic` column."""
    expr = F.lit(None).cast("int")
    for name, index in topics.items():
        expr = F.when(F.col("topic") == name, F.lit(index)).otherwise(expr)
    return expr


def record_fingerprint(compared: Collection[str]) -> Column:
    """The fingerprint of a Kafka source row; timestamps count for the `compared` topics
    (those whose source and target topics both use CreateTime)."""
    ts = F.lit(None).cast("bigint")
    if compared:
        ts = F.when(F.col("topic").isin(*sorted(compared)), F.unix_millis("timestamp"))
    return fingerprint(F.col("partition"), F.col("key"), F.col("value"), F.col("headers"), ts)


def narrow(records: DataFrame, topics: Mapping[str, int], *, sign: int,
           compared: Collection[str]) -> DataFrame:
    """(tix, partition, fp, sign, offset); the target side (sign -1) carries no offset.

    `topics` maps the names in `records` (mirror names on the target side) to the plan's
    topic index, so both sides of one topic share a `tix`."""
    offset = F.col("offset") if sign > 0 else F.lit(None).cast("bigint")
    return records.select(topic_index(topics).alias("tix"), F.col("partition"),
                          record_fingerprint(compared).alias("fp"),
                          F.lit(sign).cast("tinyint").alias("sign"), offset.alias("offset"))


def unmatched_groups(source: DataFrame, target: DataFrame) -> DataFrame:
    """The multiset difference source − target per (tix, partition, fp), in one shuffle.

    net = source copies − target copies; only groups with net > 0 are kept. `n_src` and
    `last_src` resolve the usual single-copy case without a second pass; `first_src` bounds
    where the copies of the other groups live.
    """
    both = source.unionByName(target)
    is_src = F.col("sign") > 0
    return (both.groupBy("tix", "partition", "fp")
            .agg(F.sum("sign").alias("net"),
                 F.sum(F.when(is_src, 1).otherwise(0)).alias("n_src"),
                 F.min(F.when(is_src, F.col("offset"))).alias("first_src"),
                 F.max(F.when(is_src, F.col("offset"))).alias("last_src"))
            .where(F.col("net") > 0))


def missing_offsets(groups: DataFrame, source: DataFrame | None) -> DataFrame:
    """Source offsets of the unreplicated records: (tix, partition, offset).

    Copies match in order: the k-th copy on the source is the k-th on the target, so when
    `net` of `n_src` identical copies are missing it is the last `net` of them. Those groups
    (rare: identical records) need the source's offsets again: `source` is its narrow rows,
    ideally limited to the offsets where such groups live; None when there are none.
    """
    single = (groups.where(F.col("n_src") == 1)
              .select("tix", "partition", F.col("last_src").alias("offset")))
    if source is None:
        return single
    multi = groups.where(F.col("n_src") > 1).select("tix", "partition", "fp", "net")
    latest_first = Window.partitionBy("tix", "partition", "fp").orderBy(F.col("offset").desc())
    copies = (source.join(multi, ["tix", "partition", "fp"])
              .withColumn("copy", F.row_number().over(latest_first))
              .where(F.col("copy") <= F.col("net"))
              .select("tix", "partition", "offset"))
    return single.unionByName(copies)


def source_keys(records: DataFrame, topics: Mapping[str, int]) -> DataFrame:
    """(tix, partition, offset, key, tombstone) of source records: what `superseded` needs."""
    return records.select(topic_index(topics).alias("tix"), "partition", "offset", "key",
                          F.col("value").isNull().alias("tombstone"))


def superseded(missing: DataFrame, keys: DataFrame, compacted: Collection[int]) -> DataFrame:
    """(tix, partition, offset) of the missing records of compacted topics that were copied.

    Compaction runs on each cluster on its own schedule, so the target may have dropped a
    record it copied. A missing record is superseded when (b) it is a tombstone and a later
    source record of its partition is not missing: an in-order replicator copied past it, and
    the target may have expired it; or (a) its key is not null and a later source record of
    that key (same tix, partition) was copied — not missing, or a tombstone copied past by
    (b): the target kept that later version, or compacted the key away with its tombstone.
    `missing` is (tix, partition, offset); `keys` is `source_keys` of the compared source range
    (at least from each partition's first missing offset on); `compacted` are the topics'
    `tix`. Every other missing record stays a gap.
    """
    gap_marks = missing.select(*KEYS, "offset", F.lit(True).alias("missing"))
    keys = keys.where(F.col("tix").isin(*sorted(compacted)) if compacted else F.lit(False))
    marked = keys.join(gap_marks, [*KEYS, "offset"], "left")
    copied = marked.where(F.col("missing").isNull())
    last_of_partition = copied.groupBy(*KEYS).agg(F.max("offset").alias("copied_to"))
    gap = (marked.where(F.col("missing"))
           .join(last_of_partition, KEYS, "left")
           .withColumn("copied_past", F.col("tombstone") & (
               F.col("offset") < F.coalesce(F.col("copied_to"), F.lit(-1)))))
    versions = copied.select(*KEYS, "key", "offset").unionByName(
        gap.where(F.col("copied_past")).select(*KEYS, "key", "offset"))
    # Null keys never equal anything in an equi-join: rule (a) leaves them to rule (b).
    last_of_key = (versions.join(gap.select(*KEYS, "key").distinct(), [*KEYS, "key"],
                                 "left_semi")
                   .groupBy(*KEYS, "key").agg(F.max("offset").alias("key_copied_to")))
    return (gap.join(last_of_key, [*KEYS, "key"], "left")
            .where(F.col("copied_past")
                   | (F.col("offset") < F.coalesce(F.col("key_copied_to"), F.lit(-1))))
            .select(*KEYS, "offset"))


def gap_records(source_records: DataFrame, topics: Mapping[str, int],
                missing: DataFrame) -> DataFrame:
    """The payloads of the missing offsets, from a source read that covers them."""
    payloads = source_records.select(topic_index(topics).alias("tix"), "topic", "partition",
                                     "offset", "key", "value", "headers", "timestamp",
                                     "timestampType")
    return payloads.join(missing, ["tix", "partition", "offset"], "left_semi")


def post_failover_writes(records: DataFrame, topics: Mapping[str, int]) -> DataFrame:
    """(tix, partition, offset, key, timestamp_ms) of the failover topics past their start —
    without drctl's own reconciled copies: they are source records (an earlier, interrupted
    failback copied them), not writes, and must never make their key a conflict."""
    reconciled = F.coalesce(F.exists("headers", lambda h: h["key"] == RECONCILED_HEADER),
                            F.lit(False))
    return records.where(~reconciled).select(
        topic_index(topics).alias("tix"), "partition", "offset", "key",
        F.unix_millis("timestamp").alias("timestamp_ms"))


def classify(gap: DataFrame, writes: DataFrame) -> DataFrame:
    """Adds `classification`, `conflicts` (the key's post-failover writes) and
    `partition_writes` (post-failover writes to the record's partition) to gap records.

    A null key never equals anything in an equi-join, so unkeyed records find no conflicts.
    """
    by_key = (writes.where(F.col("key").isNotNull())
              .groupBy("tix", "key")
              .agg(F.sort_array(F.collect_list(F.struct("partition", "offset",
                                                        "timestamp_ms"))).alias("conflicts")))
    per_partition = writes.groupBy(*KEYS).agg(F.count(F.lit(1)).alias("partition_writes"))
    joined = (gap.join(by_key, ["tix", "key"], "left")
              .join(per_partition, KEYS, "left")
              .withColumn("partition_writes", F.coalesce("partition_writes", F.lit(0))))
    classification = (F.when(F.col("key").isNull(), F.lit(UNKEYED))
                      .when(F.col("conflicts").isNotNull(), F.lit(CONFLICT))
                      .otherwise(F.lit(SAFE)))
    return joined.withColumn("classification", classification)


def offset_divergence(source: DataFrame, target: DataFrame) -> DataFrame:
    """Identity mirrors: offsets in the overlap window where the two sides differ.

    Both inputs are (tix, partition, offset, fp); an offset present on one side only (say,
    an aborted transaction on one cluster and a record on the other) diverges too.
    """
    s = source.select(*KEYS, "offset", F.col("fp").alias("source_fp"))
    t = target.select(*KEYS, "offset", F.col("fp").alias("target_fp"))
    return (s.join(t, [*KEYS, "offset"], "full_outer")
            .where(~F.col("source_fp").eqNullSafe(F.col("target_fp"))))


def identity_narrow(records: DataFrame, topics: Mapping[str, int], *,
                    compared: Collection[str]) -> DataFrame:
    return records.select(topic_index(topics).alias("tix"), "partition", "offset",
                          record_fingerprint(compared).alias("fp"))

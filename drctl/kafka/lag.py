"""Replication lag of a MirrorMaker 2 flow, from Connect's stored source offsets."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import TopicPartition

from drctl.kafka.clients import ClusterClients
from drctl.kafka.connect_rest import ConnectClient
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import read_ranges
from drctl.kafka.topics import is_internal_topic, list_topic_partitions


def mm2_replication_lag(source: ClusterClients, connect: ConnectClient, connector: str,
                        replicated: Callable[[str], bool] = lambda _: True
                        ) -> list[dict[str, Any]]:
    """Per source topic: offsets behind = source end - (last replicated upstream offset + 1),
    and the timestamp of the oldest record the target lacks (None when it lacks none); under
    `by_partition` the same for each partition that is behind.

    Connect stores the last replicated offset every `offset.flush.interval.ms`, and
    transaction markers occupy offsets, so a small non-zero value can mean "caught up"
    on a transactional topic.
    """
    stored: dict[tuple[str, int], int] = {}
    for entry in connect.offsets(connector).get("offsets", []):
        part, off = entry.get("partition", {}), entry.get("offset") or {}
        if "topic" in part and "offset" in off:
            stored[(part["topic"], int(part["partition"]))] = int(off["offset"])
    consumer = source.consumer()
    try:
        # Topics the connector never copies are never "behind".
        partitions = [tp for tp in list_topic_partitions(consumer)
                      if not is_internal_topic(tp.topic) and replicated(tp.topic)]
    finally:
        consumer.close()
    # The high watermark (not the last stable offset): lag counts every offset written.
    marks = watermarks(source.admin(), [(tp.topic, tp.partition) for tp in partitions],
                       read_committed=False)
    per_topic: dict[str, dict[str, Any]] = defaultdict(lambda: {"partitions": 0, "behind": 0,
                                                                "end": 0,
                                                                "oldest_unreplicated_ms": None,
                                                                "by_partition": []})
    first_missing: dict[tuple[str, int], tuple[int, int]] = {}
    for tp in partitions:
        low, high = marks[(tp.topic, tp.partition)]
        last = stored.get((tp.topic, tp.partition))
        replicated_to = max(low if last is None else last + 1, low)
        row = per_topic[tp.topic]
        row["partitions"] += 1
        row["end"] += high
        row["behind"] += max(0, high - replicated_to)
        if high > replicated_to:
            first_missing[(tp.topic, tp.partition)] = (replicated_to, high)
            row["by_partition"].append({"partition": tp.partition,
                                        "behind": high - replicated_to,
                                        "oldest_unreplicated_ms": None})
    oldest = oldest_records(source, first_missing)
    for topic, row in per_topic.items():
        for part in row["by_partition"]:
            part["oldest_unreplicated_ms"] = oldest.get((topic, part["partition"]))
    for (topic, _), ts in oldest.items():
        row = per_topic[topic]
        if row["oldest_unreplicated_ms"] is None or ts < row["oldest_unreplicated_ms"]:
            row["oldest_unreplicated_ms"] = ts
    return [{"topic": t, **v} for t, v in sorted(per_topic.items())]


# How far past the first unreplicated offset to look for a visible record (transaction
# markers and aborted records take offsets too).
_PEEK = 64


def oldest_records(source: ClusterClients, ranges: Mapping[tuple[str, int], tuple[int, int]]
                   ) -> dict[tuple[str, int], int]:
    """Per partition, the timestamp of the first record of its range (the oldest record the
    target lacks): how far back in time replication lags."""
    if not ranges:
        return {}
    # Uncommitted too: a range that is all one open transaction has no committed record to
    # show, and its records are what the target lacks until it commits (or aborts).
    consumer = source.consumer(**{"enable.partition.eof": "true",
                                  "isolation.level": "read_uncommitted"})
    out: dict[tuple[str, int], int] = {}
    try:
        for rec in read_ranges(consumer, {tp: (start, min(end, start + _PEEK))
                                          for tp, (start, end) in ranges.items()},
                               timeout_s=30):
            out.setdefault((rec.topic, rec.partition), rec.timestamp_ms)
    finally:
        consumer.close()
    return out


__all__ = ["mm2_replication_lag", "TopicPartition"]

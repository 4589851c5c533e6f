"""Replication lag as MirrorMaker 2 itself tells it (Connect's stored source offsets: the lab's
view), and the first records of the ranges a target lacks (for the RPO: ops/steps/target_lag.py
measures what the target lacks against the target itself)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from drctl.kafka.clients import ClusterClients
from drctl.kafka.connect_rest import ConnectClient
from drctl.kafka.offsets import list_offsets, watermarks
from drctl.kafka.records import Record, read_ranges
from drctl.kafka.topics import TP, is_internal_topic, topic_partitions


def mm2_replication_lag(source: ClusterClients, connect: ConnectClient, connector: str,
                        replicated: Callable[[str], bool] = lambda _: True,
                        separator: str = "."
                        ) -> list[dict[str, Any]]:
    """Per source topic: offsets behind = source end - (last replicated upstream offset + 1),
    and the timestamp of the oldest record the target lacks (None when it lacks none); under
    `by_partition` the same for each partition that is behind.

    Connect stores the last replicated offset every `offset.flush.interval.ms`, and
    transaction markers occupy offsets, so a small non-zero value can mean "caught up"
    on a transactional topic. `separator`: the flow's (MirrorMaker 2's internal topics on
    the source are named with it, and are never behind).
    """
    stored: dict[tuple[str, int], int] = {}
    for entry in connect.offsets(connector).get("offsets", []):
        part, off = entry.get("partition", {}), entry.get("offset") or {}
        if "topic" in part and "offset" in off:
            stored[(part["topic"], int(part["partition"]))] = int(off["offset"])
    # Topics the connector never copies are never "behind".
    partitions = [TopicPartition(t, p) for t, parts in sorted(topic_partitions(source).items())
                  if not is_internal_topic(t, separator) and replicated(t) for p in parts]
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


# How far past the first offset of a range to look for a visible record at first (transaction
# markers and aborted records take offsets too); the window grows for those not found.
_PEEK = 64
_PEEK_ROUNDS = 3


def split_at_stable(source: ClusterClients, ranges: Mapping[TP, tuple[int, int]]
                    ) -> tuple[dict[TP, tuple[int, int]], dict[TP, tuple[int, int]]]:
    """Each range cut at its partition's last stable offset (LSO): the part below it, which
    read_committed readers see (aborted records and markers are not records), and the part
    at or after it, held back by an open transaction — its records, committed or not, are
    invisible to read_committed readers (MirrorMaker 2) until it ends, so the target lacks
    them all. One ListOffsets for every partition."""
    todo = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
    if not todo:
        return {}, {}
    stable = list_offsets(source.admin(), {tp: OffsetSpec.latest() for tp in todo},
                          read_committed=True)
    below = {tp: (start, min(end, stable[tp])) for tp, (start, end) in todo.items()
             if min(end, stable[tp]) > start}
    held = {tp: (max(start, stable[tp]), end) for tp, (start, end) in todo.items()
            if end > max(start, stable[tp])}
    return below, held


def oldest_records(source: ClusterClients, ranges: Mapping[TP, tuple[int, int]]
                   ) -> dict[TP, int]:
    """Per partition, the timestamp of the first record of its range the target lacks: how
    far back in time replication lags (see `first_records`)."""
    return {tp: rec.timestamp_ms for tp, rec in first_records(source, ranges).items()}


def first_records(source: ClusterClients, ranges: Mapping[TP, tuple[int, int]]
                  ) -> dict[TP, Record]:
    """Per partition, the first record of its range a reader of the source would get: the
    first visible record below the last stable offset, else the first record held back
    behind an open transaction (committed or not: none of it is copied yet). A range of only
    markers and aborted records has none."""
    below, held = split_at_stable(source, ranges)
    out: dict[TP, Record] = {}
    window = _PEEK
    todo = dict(below)
    consumer = source.consumer(**{"enable.partition.eof": "true"})
    try:
        for _ in range(_PEEK_ROUNDS):
            if not todo:
                break
            for rec in read_ranges(consumer, {tp: (start, min(end, start + window))
                                              for tp, (start, end) in todo.items()},
                                   timeout_s=30):
                out.setdefault((rec.topic, rec.partition), rec)
            todo = {tp: (start + window, end) for tp, (start, end) in todo.items()
                    if tp not in out and start + window < end}
            window *= 64
        if todo:
            # Still nothing visible: read the rest whole (an aborted transaction that long).
            for rec in read_ranges(consumer, todo, timeout_s=120):
                out.setdefault((rec.topic, rec.partition), rec)
    finally:
        consumer.close()
    late = {tp: (start, min(end, start + _PEEK)) for tp, (start, end) in held.items()
            if tp not in out}
    if late:
        # The transaction's own records are only visible uncommitted.
        consumer = source.consumer(**{"enable.partition.eof": "true",
                                      "isolation.level": "read_uncommitted"})
        try:
            for rec in read_ranges(consumer, late, timeout_s=30):
                out.setdefault((rec.topic, rec.partition), rec)
        finally:
            consumer.close()
    return out


__all__ = ["mm2_replication_lag", "TopicPartition"]

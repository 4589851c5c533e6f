"""A whole topic, read once in raw batches up to the end offsets pinned when the read starts.

The dump command and the MM2 checkpoint and offset-sync readers read internal topics this
way: raw messages in large batches (decoding is the caller's), a stall timeout rather than a
deadline (a topic of millions of records takes as long as it takes), bounded prefetch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from drctl.errors import DrctlError, Unreachable
from drctl.kafka.clients import ClusterClients, cluster_metadata, unreachable
from drctl.kafka.offsets import watermarks
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call

SCAN_BATCH = 10_000


class TopicNotFound(DrctlError):
    """The internal topic to read does not exist on the cluster."""


class TopicReadError(Unreachable):
    """Reading the topic failed part-way (a broker went away, a read stalled)."""


def topic_ranges(clients: ClusterClients, topic: str, *, policy: RetryPolicy,
                 missing_hint: str) -> dict[int, tuple[int, int]]:
    """(low watermark, end offset) per partition; `missing_hint` is the hint when the topic
    does not exist."""
    def fetch() -> dict[int, tuple[int, int]] | None:
        md = cluster_metadata(clients).topics.get(topic)
        if md is None or (md.error is not None
                          and md.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return None
        if md.error is not None:
            raise KafkaException(md.error)
        marks = watermarks(clients.admin(), [(topic, p) for p in md.partitions])
        return {p: bounds for (_, p), bounds in marks.items()}

    try:
        ranges = retry_call(fetch, policy, retry_on=(KafkaException,))
    except RetriesExhausted as exc:
        raise unreachable(clients, exc) from exc
    if ranges is None:
        raise TopicNotFound(f"topic {topic} does not exist on '{clients.name}'.", missing_hint)
    return ranges


def read_batches(clients: ClusterClients, topic: str, ranges: dict[int, tuple[int, int]], *,
                 batch: int = SCAN_BATCH, stall_timeout_s: float = 60.0,
                 on_progress: Callable[[int], None] | None = None) -> Iterator[list[Any]]:
    """Batches of raw messages (decoded by the caller) inside `ranges` (see `topic_ranges`)."""
    # librdkafka prefetches up to queued.min.messages (100,000 by default) per partition,
    # a few hundred bytes each beyond the payload: bounded here so memory stays flat
    # however long the topic is.
    consumer = clients.consumer(**{
        "enable.partition.eof": "true", "auto.offset.reset": "earliest",
        "fetch.max.bytes": "8388608", "max.partition.fetch.bytes": "1048576",
        "queued.min.messages": "10000", "queued.max.messages.kbytes": "16384",
        "fetch.wait.max.ms": "100"})
    try:
        yield from _read(consumer, topic, ranges, batch=batch,
                         stall_timeout_s=stall_timeout_s, on_progress=on_progress)
    except KafkaException as exc:
        raise TopicReadError(f"reading {topic} on '{clients.name}' failed: "
                             f"{exc.args[0] if exc.args else exc}.",
                             "Check that the cluster is up, then run again.") from exc
    finally:
        consumer.close()


def replaces(prev_partition: int, prev_timestamp_ms: int, partition: int,
             timestamp_ms: int) -> bool:
    """Whether a record read later replaces the earlier one with the same key."""
    # Within a partition the later offset wins (compaction's rule); a key met in two
    # partitions (the partition count changed) goes by the record time.
    return prev_partition == partition or timestamp_ms >= prev_timestamp_ms


def _read(consumer: Consumer, topic: str, ranges: dict[int, tuple[int, int]], *, batch: int,
          stall_timeout_s: float,
          on_progress: Callable[[int], None] | None) -> Iterator[list[Any]]:
    """Batches of raw messages with low <= offset < end per partition. A partition is done
    when a record at or past end - 1 arrives or its end-of-partition event reports a position
    at or past end (transaction markers occupy offsets no record shows)."""
    pending = {p: end for p, (low, end) in ranges.items() if end > low}
    if not pending:
        return
    consumer.assign([TopicPartition(topic, p, ranges[p][0]) for p in pending])
    last_progress = time.monotonic()
    eof = KafkaError._PARTITION_EOF
    while pending:
        messages: list[Any] = consumer.consume(num_messages=batch, timeout=0.5)
        if not messages:
            if time.monotonic() - last_progress > stall_timeout_s:
                raise TopicReadError(f"reading {topic} stalled for {stall_timeout_s:.0f} s with "
                                     f"{len(pending)} partition(s) unfinished.",
                                     "Check the cluster's health, then run again.")
            continue
        last_progress = time.monotonic()
        done: list[int] = []
        records: list[Any] = []
        for msg in messages:
            err = msg.error()
            partition = msg.partition()
            end = pending.get(partition)
            if err is not None:
                if err.code() != eof:
                    raise KafkaException(err)
                if end is not None and msg.offset() >= end:
                    done.append(partition)
                continue
            if end is None:
                continue
            offset = msg.offset()
            if offset < end:
                records.append(msg)
            if offset >= end - 1:
                done.append(partition)
        yield records
        if on_progress is not None:
            on_progress(len(messages))
        if done:
            for p in done:
                pending.pop(p, None)
            if pending:
                consumer.incremental_unassign([TopicPartition(topic, p) for p in set(done)])

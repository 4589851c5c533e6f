"""Bounded, batched reads of offset ranges: the way every drctl command reads records."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.offsets import watermarks

BATCH = 5000


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    timestamp_type: int  # 1 CreateTime, 2 LogAppendTime, 0 none
    headers: tuple[tuple[str, bytes | None], ...]

    @classmethod
    def from_message(cls, msg: object) -> Record:
        ts_type, ts = msg.timestamp()  # type: ignore[attr-defined]
        return cls(msg.topic(), msg.partition(), msg.offset(),  # type: ignore[attr-defined]
                   msg.key(), msg.value(), ts, ts_type,  # type: ignore[attr-defined]
                   tuple(msg.headers() or ()))  # type: ignore[attr-defined]


# Errors a retry will not cure; anything else is reported by librdkafka while it retries.
_FATAL_READ_ERRORS = {
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC, KafkaError.SASL_AUTHENTICATION_FAILED,
}


class ReadTimeout(Exception):
    """A range could not be read to its end in time (the partition's leader is gone?)."""

    transient = True


def read_ranges(consumer: Consumer, ranges: Mapping[tuple[str, int], tuple[int, int]], *,
                timeout_s: float = 60.0, batch: int = BATCH,
                below_log_start: dict[tuple[str, int], int] | None = None) -> Iterator[Record]:
    """Yield the visible records with start <= offset < end for each (topic, partition).

    Transaction markers and aborted records occupy offsets a read_committed consumer never
    sees, so a range is done when a record at or past `end - 1` arrives or the partition's
    end-of-file event reports a position at or past `end` — not when offset `end - 1` shows
    up. The consumer must have `enable.partition.eof=true`.

    A range that starts below its partition's log start (retention or DeleteRecords went
    past it) is read from the log start; `below_log_start` gets, per such partition, how many
    of the range's offsets were gone. (drctl's consumers reset with `error`: a client that
    silently jumped to the end would read nothing and call the range done.)
    """
    pending = {tp: (start, end) for tp, (start, end) in ranges.items() if end > start}
    if not pending:
        return
    consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in pending.items()])
    deadline = time.monotonic() + timeout_s
    try:
        while pending:
            if time.monotonic() > deadline:
                raise ReadTimeout(f"reading {len(pending)} partition range(s) timed out after "
                                  f"{timeout_s:.0f} s: {sorted(pending)[:5]}")
            # consume() waits for a full batch or the timeout: keep the timeout short.
            messages = consumer.consume(num_messages=batch, timeout=0.05)
            finished: set[tuple[str, int]] = set()
            for msg in messages:
                key = (str(msg.topic()), int(msg.partition() or 0))
                offset = int(msg.offset() or 0)
                bounds = pending.get(key)
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._AUTO_OFFSET_RESET and bounds is not None:
                        # Out of range: below the log start (or past the end).
                        low, high = consumer.get_watermark_offsets(
                            TopicPartition(*key), timeout=10, cached=False)
                        start = max(bounds[0], low)
                        if below_log_start is not None and low > bounds[0]:
                            below_log_start[key] = min(low, bounds[1]) - bounds[0]
                        pending[key] = (start, bounds[1])
                        consumer.incremental_unassign([TopicPartition(*key)])
                        if start >= min(bounds[1], high):
                            finished.add(key)
                        else:
                            consumer.incremental_assign([TopicPartition(*key, start)])
                        continue
                    if err.code() != KafkaError._PARTITION_EOF:
                        if err.fatal() or err.code() in _FATAL_READ_ERRORS:
                            raise KafkaException(err)
                        continue  # e.g. a leader moving after a restart: the client retries
                    # At the end (or the last stable offset) of the partition: nothing more
                    # is visible below `end`, whatever markers sit before it.
                    if bounds is not None and offset >= bounds[1]:
                        finished.add(key)
                    continue
                if bounds is None:
                    continue
                if offset < bounds[1]:
                    yield Record.from_message(msg)
                if offset >= bounds[1] - 1:
                    finished.add(key)
            if finished:
                assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
                for key in finished:
                    pending.pop(key, None)
                if pending and finished & assigned:
                    consumer.incremental_unassign([TopicPartition(t, p)
                                                   for t, p in finished & assigned])
    finally:
        consumer.unassign()


def stream_ranges(clients: ClusterClients, ranges: Mapping[tuple[str, int], tuple[int, int]],
                  *, timeout_s: float = 60.0,
                  below_log_start: dict[tuple[str, int], int] | None = None) -> Iterator[Record]:
    """`read_ranges` with a consumer of its own: each partition's records in offset order,
    streamed (nothing but the record at hand in memory); empty ranges are skipped."""
    todo = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
    if not todo:
        return
    consumer = clients.consumer(**{"enable.partition.eof": "true"})
    try:
        yield from read_ranges(consumer, todo, timeout_s=timeout_s,
                               below_log_start=below_log_start)
    finally:
        consumer.close()


def count_records(clients: ClusterClients, ranges: Mapping[tuple[str, int], tuple[int, int]],
                  *, isolation: str = "read_committed", timeout_s: float = 120.0
                  ) -> dict[tuple[str, int], int]:
    """How many records each range holds for a reader of `isolation` (read_uncommitted
    counts an open transaction's records, and aborted ones)."""
    todo = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
    out = dict.fromkeys(todo, 0)
    if not todo:
        return out
    consumer = clients.consumer(**{"enable.partition.eof": "true", "isolation.level": isolation})
    try:
        for rec in read_ranges(consumer, todo, timeout_s=timeout_s):
            out[(rec.topic, rec.partition)] += 1
    finally:
        consumer.close()
    return out


def header_values(clients: ClusterClients, ranges: Mapping[tuple[str, int], tuple[int, int]],
                  header: str, *, timeout_s: float = 120.0) -> set[bytes]:
    """The values of `header` on the records in `ranges`: how a re-run finds the tagged
    records an earlier run wrote."""
    consumer = clients.consumer(**{"enable.partition.eof": "true"})
    try:
        return {value for rec in read_ranges(consumer, ranges, timeout_s=timeout_s)
                for key, value in rec.headers if key == header and value}
    finally:
        consumer.close()


def read_all(clients: ClusterClients, topic: str, *, timeout_s: float = 60.0,
             isolation: str = "read_committed") -> list[Record]:
    """Every record of a (small) topic from its low to its current high watermark."""
    md = cluster_metadata(clients).topics.get(topic)
    if md is None:
        return []
    if md.error is not None:  # a topic whose leaders are not there yet: never "empty"
        raise KafkaException(md.error)
    # ListOffsets through the admin client, retried while a new topic's leaders settle.
    ranges = watermarks(clients.admin(), [(topic, p) for p in md.partitions],
                        read_committed=isolation == "read_committed")
    consumer = clients.consumer(**{"isolation.level": isolation,
                                   "enable.partition.eof": "true", "fetch.wait.max.ms": "10"})
    try:
        return sorted(read_ranges(consumer, ranges, timeout_s=timeout_s),
                      key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


__all__ = ["OFFSET_END", "Record", "ReadTimeout", "header_values", "read_all", "read_ranges",
           "stream_ranges"]

"""Read and decode the internal topics replication leaves behind, streaming, in constant memory.

`TopicDump` reads every partition from its low watermark to the end offset pinned when the dump
starts (records written meanwhile are not waited for), in batches, decoding as it goes; a record
that does not decode is counted and sampled, never fatal. Full history yields rows as they are
read; `latest` keeps one row per key (the view Replicator and MM2 act on).

JSON Lines schema of `drctl dump-consumer-timestamps` (stable; fields are only ever added).
Every line has "type"; record lines also carry record_partition, record_offset,
record_timestamp_ms and record_timestamp (ISO) of the internal record itself, and
`provenance` {hex, strings, timestamps_ms} when it has a `__replicator_id` header:
    consumer-timestamp: group, topic, partition, timestamp_ms, timestamp, delta, key_layout,
                        value_layout, key_version, value_version
    checkpoint:  group, topic, partition, upstream_offset, downstream_offset, metadata
    offset-sync: topic, partition, upstream_offset, downstream_offset
    heartbeat:   source_alias, target_alias, timestamp_ms, timestamp
    undecodable: record_*, reason, key_hex, value_hex (the first N only)
    summary:     kind, cluster, topic, records, outside_window, decoded, matched, emitted,
                 undecodable, partitions, latest, stopped_at_limit, elapsed_s, note
Undecodable records are counted whatever --group/--topic say (their group and topic are
unknown), but only inside the --since/--until window.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import lru_cache
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from drctl.codecs.confluent import (
    LAYOUT_NOTE,
    PROVENANCE_HEADER,
    ConsumerTimestamp,
    Provenance,
    decode_consumer_timestamp,
    decode_provenance,
)
from drctl.codecs.mm2 import (
    Checkpoint,
    Heartbeat,
    OffsetSync,
    decode_checkpoint,
    decode_heartbeat,
    decode_offset_sync,
)
from drctl.config import ReplicationSettings
from drctl.errors import DecodeError, DrctlError, Unreachable, UsageError
from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import watermarks
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call

BATCH = 10_000
UNDECODABLE_SAMPLES = 20

Decoded = ConsumerTimestamp | Checkpoint | OffsetSync | Heartbeat


class DumpKind(StrEnum):
    consumer_timestamps = "consumer-timestamps"
    checkpoints = "checkpoints"
    offset_syncs = "offset-syncs"
    heartbeats = "heartbeats"


_DECODERS: dict[DumpKind, Callable[[bytes | None, bytes | None], Any]] = {
    DumpKind.consumer_timestamps: decode_consumer_timestamp,
    DumpKind.checkpoints: decode_checkpoint,
    DumpKind.offset_syncs: decode_offset_sync,
    DumpKind.heartbeats: decode_heartbeat,
}
# Data columns per kind, in output order (CSV header, table columns).
COLUMNS: dict[DumpKind, tuple[str, ...]] = {
    DumpKind.consumer_timestamps: ("group", "topic", "partition", "timestamp_ms", "timestamp",
                               "delta", "key_layout", "value_layout", "key_version",
                               "value_version"),
    DumpKind.checkpoints: ("group", "topic", "partition", "upstream_offset", "downstream_offset",
                       "metadata"),
    DumpKind.offset_syncs: ("topic", "partition", "upstream_offset", "downstream_offset"),
    DumpKind.heartbeats: ("source_alias", "target_alias", "timestamp_ms", "timestamp"),
}
RECORD_COLUMNS = ("record_partition", "record_offset", "record_timestamp_ms", "record_timestamp")


class TopicNotFound(DrctlError):
    """The internal topic to read does not exist on the cluster."""


class DumpError(Unreachable):
    """Reading the topic failed part-way (a broker went away, a read stalled)."""


@dataclass(frozen=True)
class Location:
    cluster: str
    topic: str


def resolve_location(kind: DumpKind, rep: ReplicationSettings | None, cluster: str | None = None,
                     topic: str | None = None) -> Location:
    """Where the topic lives, by Confluent's and MM2's defaults unless told: the
    `__consumer_timestamps` and offset-sync topics on the replication source, checkpoints and
    heartbeats on the target; names from the cluster aliases."""
    def need(what: str) -> ReplicationSettings:
        if rep is None:
            raise UsageError(f"--kind {kind.value} needs a 'replication' section in the config "
                             f"to know {what}.", "Add one, or pass --cluster and --topic-name.")
        return rep

    if cluster is None:
        source_side = kind in (DumpKind.consumer_timestamps, DumpKind.offset_syncs)
        settings = need("which cluster to read")
        cluster = settings.source if source_side else settings.target
    if topic is None:
        if kind == DumpKind.consumer_timestamps:
            topic = "__consumer_timestamps"
        elif kind == DumpKind.heartbeats:
            topic = "heartbeats"
        elif kind == DumpKind.checkpoints:
            topic = f"{need('the source alias').source_alias}.checkpoints.internal"
        else:
            topic = f"mm2-offset-syncs.{need('the target alias').target_alias}.internal"
    return Location(cluster, topic)


def parse_time(text: str, option: str) -> int:
    """Epoch milliseconds from digits, or from an ISO 8601 time (UTC unless it says)."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option} {text!r} is neither an ISO time nor epoch milliseconds.",
                         "Examples: 2024-05-01T12:00:00Z, 2024-05-01, 1714564800000.") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def iso_ms(ms: int) -> str | None:
    """`2024-05-01T12:00:00.000+00:00`, or None when out of datetime's range."""
    second = _iso_second(ms // 1000)
    return None if second is None else f"{second}.{ms % 1000:03d}+00:00"


@lru_cache(maxsize=4096)
def _iso_second(seconds: int) -> str | None:
    # Internal records come in bursts: formatting each second once is most of the cost saved.
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return None


@dataclass(frozen=True)
class DumpFilter:
    """Whole-name regexes on group and topic; a half-open window [since, until) in epoch ms on
    the internal record's own timestamp (when it was written)."""

    group: str | None = None
    topic: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None

    def validate(self, kind: DumpKind) -> None:
        if (self.group is not None
                and kind not in (DumpKind.consumer_timestamps, DumpKind.checkpoints)):
            raise UsageError(f"--group does not apply to {kind.value} (they name no group).")
        if self.topic is not None and kind == DumpKind.heartbeats:
            raise UsageError("--topic does not apply to heartbeats (they name no topic).")
        for option, pattern in (("--group", self.group), ("--topic", self.topic)):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise UsageError(f"{option} {pattern!r} is not a valid regex: {exc}.") \
                        from None
        if (self.since_ms is not None and self.until_ms is not None
                and self.since_ms >= self.until_ms):
            raise UsageError("--since must be before --until.")

    def in_window(self, ts: int) -> bool:
        return ((self.since_ms is None or ts >= self.since_ms)
                and (self.until_ms is None or ts < self.until_ms))

    def predicate(self) -> Callable[[Any], bool] | None:
        """A test on a decoded value, or None when every value passes."""
        group = re.compile(self.group) if self.group is not None else None
        topic = re.compile(self.topic) if self.topic is not None else None
        if group is None and topic is None:
            return None

        def test(item: Any) -> bool:
            return ((group is None or group.fullmatch(item.group) is not None)
                    and (topic is None or topic.fullmatch(item.topic) is not None))
        return test


@dataclass(slots=True)
class DumpRow:
    kind: DumpKind
    value: Decoded
    record_partition: int
    record_offset: int
    record_timestamp_ms: int
    provenance: Provenance | None = None

    def key(self) -> tuple[Any, ...]:
        v = self.value
        if isinstance(v, (ConsumerTimestamp, Checkpoint)):
            return (v.group, v.topic, v.partition)
        if isinstance(v, OffsetSync):
            return (v.topic, v.partition)
        return (v.source_alias, v.target_alias)

    def as_dict(self) -> dict[str, Any]:
        v = self.value
        data: dict[str, Any]
        if isinstance(v, ConsumerTimestamp):
            data = {"type": "consumer-timestamp", "group": v.group, "topic": v.topic,
                    "partition": v.partition, "timestamp_ms": v.timestamp_ms,
                    "timestamp": iso_ms(v.timestamp_ms), "delta": v.delta,
                    "key_layout": v.key_layout, "value_layout": v.value_layout,
                    "key_version": v.key_version, "value_version": v.value_version}
        elif isinstance(v, Checkpoint):
            data = {"type": "checkpoint", "group": v.group, "topic": v.topic,
                    "partition": v.partition, "upstream_offset": v.upstream_offset,
                    "downstream_offset": v.downstream_offset, "metadata": v.metadata}
        elif isinstance(v, OffsetSync):
            data = {"type": "offset-sync", "topic": v.topic, "partition": v.partition,
                    "upstream_offset": v.upstream_offset,
                    "downstream_offset": v.downstream_offset}
        else:
            data = {"type": "heartbeat", "source_alias": v.source_alias,
                    "target_alias": v.target_alias, "timestamp_ms": v.timestamp_ms,
                    "timestamp": iso_ms(v.timestamp_ms)}
        data["record_partition"] = self.record_partition
        data["record_offset"] = self.record_offset
        data["record_timestamp_ms"] = self.record_timestamp_ms
        data["record_timestamp"] = iso_ms(self.record_timestamp_ms)
        if self.provenance is not None:
            data["provenance"] = {"hex": self.provenance.hex,
                                  "strings": list(self.provenance.strings),
                                  "timestamps_ms": list(self.provenance.timestamps_ms)}
        return data


@dataclass(frozen=True)
class Undecodable:
    record_partition: int
    record_offset: int
    record_timestamp_ms: int
    key: bytes | None
    value: bytes | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"type": "undecodable", "record_partition": self.record_partition,
                "record_offset": self.record_offset,
                "record_timestamp_ms": self.record_timestamp_ms,
                "record_timestamp": iso_ms(self.record_timestamp_ms), "reason": self.reason,
                "key_hex": None if self.key is None else self.key.hex(),
                "value_hex": None if self.value is None else self.value.hex()}


@dataclass
class DumpStats:
    kind: DumpKind
    cluster: str
    topic: str
    latest: bool
    partitions: int = 0
    total: int = 0  # offsets between the low watermarks and the pinned ends
    records: int = 0  # records read
    outside_window: int = 0  # written before --since or from --until on: not decoded
    decoded: int = 0
    matched: int = 0  # decoded and passing the filters
    emitted: int = 0
    undecodable: int = 0
    samples: list[Undecodable] = field(default_factory=list)
    stopped_at_limit: bool = False
    elapsed_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"type": "summary", "kind": self.kind.value, "cluster": self.cluster,
                "topic": self.topic, "records": self.records,
                "outside_window": self.outside_window, "decoded": self.decoded,
                "matched": self.matched, "emitted": self.emitted,
                "undecodable": self.undecodable, "partitions": self.partitions,
                "latest": self.latest, "stopped_at_limit": self.stopped_at_limit,
                "elapsed_s": round(self.elapsed_s, 3),
                "note": LAYOUT_NOTE if self.kind == DumpKind.consumer_timestamps else None}


@dataclass
class TopicDump:
    """One pass over an internal topic. Iterate it for the rows; `stats` is complete when the
    iteration ends."""

    clients: ClusterClients
    kind: DumpKind
    topic: str
    filter: DumpFilter = DumpFilter()
    latest: bool = False
    limit: int | None = None
    samples: int = UNDECODABLE_SAMPLES
    policy: RetryPolicy = RetryPolicy(attempts=1)
    batch: int = BATCH
    stall_timeout_s: float = 60.0
    on_start: Callable[[int], None] | None = None  # total offsets to read
    on_progress: Callable[[int], None] | None = None  # records read since the last call
    on_undecodable: Callable[[Undecodable], None] | None = None  # every one, not a sample
    stats: DumpStats = field(init=False)

    def __post_init__(self) -> None:
        self.filter.validate(self.kind)
        if self.limit is not None and self.limit < 0:
            raise UsageError("--limit must be at least 0.")
        self.stats = DumpStats(self.kind, self.clients.name, self.topic, self.latest)

    def __iter__(self) -> Iterator[DumpRow]:
        started = time.monotonic()
        try:
            if self.latest:
                yield from self._latest()
            else:
                yield from self._history()
        finally:
            self.stats.elapsed_s = time.monotonic() - started

    def _history(self) -> Iterator[DumpRow]:
        stats = self.stats
        if self.limit == 0:
            stats.stopped_at_limit = True
            return
        if self.limit is None:
            try:
                yield from self._rows()
            finally:
                stats.emitted = stats.matched
            return
        for row in self._rows():
            stats.emitted += 1
            yield row
            if self.limit is not None and stats.emitted >= self.limit:
                stats.stopped_at_limit = True
                return

    def _latest(self) -> Iterator[DumpRow]:
        latest: dict[tuple[Any, ...], DumpRow] = {}
        for row in self._rows():
            key = row.key()
            prev = latest.get(key)
            # Within a partition the later offset wins (compaction's rule); a key met in two
            # partitions (the partition count changed) goes by the record time.
            if (prev is None or prev.record_partition == row.record_partition
                    or row.record_timestamp_ms >= prev.record_timestamp_ms):
                latest[key] = row
        for n, key in enumerate(sorted(latest)):
            if self.limit is not None and n >= self.limit:
                self.stats.stopped_at_limit = True
                return
            self.stats.emitted += 1
            yield latest[key]

    def _rows(self) -> Iterator[DumpRow]:
        kind, stats, filt = self.kind, self.stats, self.filter
        decode = _DECODERS[kind]
        test = filt.predicate()
        windowed = filt.since_ms is not None or filt.until_ms is not None
        for batch in self._batches():
            # Counted per batch: updating attributes per record costs as much as decoding.
            seen = outside = failed = matched = 0
            try:
                for msg in batch:
                    seen += 1
                    ts = msg.timestamp()[1]
                    if windowed and not filt.in_window(ts):
                        outside += 1
                        continue
                    key, value = msg.key(), msg.value()
                    try:
                        item = decode(key, value)
                    except DecodeError as exc:
                        failed += 1
                        self._undecodable(msg, ts, key, value, str(exc))
                        continue
                    if test is not None and not test(item):
                        continue
                    matched += 1
                    headers = msg.headers()
                    yield DumpRow(kind, item, msg.partition(), msg.offset(), ts,
                                  _provenance(headers) if headers else None)
            finally:
                stats.records += seen
                stats.outside_window += outside
                stats.decoded += seen - outside - failed
                stats.matched += matched

    def _undecodable(self, msg: Any, ts: int, key: bytes | None, value: bytes | None,
                     reason: str) -> None:
        stats = self.stats
        stats.undecodable += 1
        if len(stats.samples) < self.samples or self.on_undecodable is not None:
            bad = Undecodable(msg.partition(), msg.offset(), ts, key, value, reason)
            if len(stats.samples) < self.samples:
                stats.samples.append(bad)
            if self.on_undecodable is not None:
                self.on_undecodable(bad)

    def _batches(self) -> Iterator[list[Any]]:
        ranges = self._ranges()
        # librdkafka prefetches up to queued.min.messages (100,000 by default) per partition,
        # a few hundred bytes each beyond the payload: bounded here so memory stays flat
        # however long the topic is.
        consumer = self.clients.consumer(**{
            "enable.partition.eof": "true", "auto.offset.reset": "earliest",
            "fetch.max.bytes": "8388608", "max.partition.fetch.bytes": "1048576",
            "queued.min.messages": "10000", "queued.max.messages.kbytes": "16384",
            "fetch.wait.max.ms": "100"})
        try:
            yield from _read(consumer, self.topic, ranges, batch=self.batch,
                             stall_timeout_s=self.stall_timeout_s,
                             on_progress=self.on_progress)
        except KafkaException as exc:
            raise DumpError(f"reading {self.topic} on '{self.clients.name}' failed: "
                            f"{exc.args[0] if exc.args else exc}.",
                            "Check that the cluster is up, then run again.") from exc
        finally:
            consumer.close()

    def _ranges(self) -> dict[int, tuple[int, int]]:
        admin = self.clients.admin()

        def fetch() -> dict[int, tuple[int, int]] | None:
            md = admin.list_topics(self.topic, timeout=10).topics.get(self.topic)
            if md is None or (md.error is not None
                              and md.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                return None
            if md.error is not None:
                raise KafkaException(md.error)
            marks = watermarks(admin, [(self.topic, p) for p in md.partitions])
            return {p: bounds for (_, p), bounds in marks.items()}

        try:
            ranges = retry_call(fetch, self.policy, retry_on=(KafkaException,))
        except RetriesExhausted as exc:
            raise Unreachable(f"cluster '{self.clients.name}' at {self.clients.bootstrap} did "
                              f"not answer ({exc.attempts} attempt(s); last error: "
                              f"{exc.last}).",
                              "Check that the brokers run and that this machine can reach "
                              "that address.") from exc
        if ranges is None:
            raise TopicNotFound(f"topic {self.topic} does not exist on '{self.clients.name}'.",
                                _missing_hint(self.kind))
        self.stats.partitions = len(ranges)
        self.stats.total = sum(max(0, end - low) for low, end in ranges.values())
        if self.on_start is not None:
            self.on_start(self.stats.total)
        return ranges


def _missing_hint(kind: DumpKind) -> str:
    if kind == DumpKind.consumer_timestamps:
        return ("No consumer with Confluent's ConsumerTimestampsInterceptor has committed on "
                "this cluster, or the topic has another name: pass --cluster/--topic-name.")
    return ("Is MirrorMaker 2 running with these cluster aliases (replication.source_alias/"
            "target_alias)? Otherwise pass --cluster/--topic-name.")


def _provenance(headers: list[tuple[str, bytes | None]]) -> Provenance | None:
    for name, value in headers:
        if name == PROVENANCE_HEADER and value is not None:
            return decode_provenance(value)
    return None


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
                raise DumpError(f"reading {topic} stalled for {stall_timeout_s:.0f} s with "
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


# -- library views for offset translation --------------------------------------------------


def read_checkpoints(clients: ClusterClients, topic: str, *,
                     policy: RetryPolicy = RetryPolicy(attempts=1),
                     on_undecodable: Callable[[Undecodable], None] | None = None,
                     ) -> dict[tuple[str, str, int], Checkpoint]:
    """The latest checkpoint per (group, target topic, partition)."""
    dump = TopicDump(clients, DumpKind.checkpoints, topic, latest=True, policy=policy, samples=0,
                     on_undecodable=on_undecodable)
    out: dict[tuple[str, str, int], Checkpoint] = {}
    for row in dump:
        cp = cast(Checkpoint, row.value)
        out[(cp.group, cp.topic, cp.partition)] = cp
    return out


def read_offset_syncs(clients: ClusterClients, topic: str, *,
                      policy: RetryPolicy = RetryPolicy(attempts=1),
                      on_undecodable: Callable[[Undecodable], None] | None = None,
                      ) -> dict[tuple[str, int], list[OffsetSync]]:
    """Every offset sync per (source topic, partition), sorted by upstream offset; syncs with
    equal upstream offsets keep the order they were written in (the last is the newest)."""
    dump = TopicDump(clients, DumpKind.offset_syncs, topic, policy=policy, samples=0,
                     on_undecodable=on_undecodable)
    out: dict[tuple[str, int], list[OffsetSync]] = {}
    for row in dump:
        sync = cast(OffsetSync, row.value)
        out.setdefault((sync.topic, sync.partition), []).append(sync)
    for syncs in out.values():
        syncs.sort(key=lambda s: s.upstream_offset)
    return out

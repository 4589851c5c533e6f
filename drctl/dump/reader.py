"""`TopicDump`: one streaming pass over an internal topic, decoding, filtering and counting;
and where each kind's topic lives."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from drctl.codecs.confluent import PROVENANCE_HEADER, Provenance, decode_provenance
from drctl.config import ReplicationSettings
from drctl.dump.filters import DumpFilter
from drctl.dump.rows import DECODERS, DumpKind, DumpRow, DumpStats, Undecodable
from drctl.errors import DecodeError, UsageError
from drctl.kafka.checkpoints import MISSING_MM2_TOPIC_HINT
from drctl.kafka.clients import ClusterClients, describe_with_retry
from drctl.kafka.topic_scan import SCAN_BATCH, read_batches, replaces, topic_ranges
from drctl.retry import RetryPolicy

UNDECODABLE_SAMPLES = 20


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
                             f"to know {what}.", "Add one, or pass --cluster and --internal-topic.")
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
            flow = need("the source alias")
            topic = flow.mm2_topic(flow.source_alias, "checkpoints", "internal")
        else:
            flow = need("the target alias")
            topic = flow.mm2_topic("mm2-offset-syncs", flow.target_alias, "internal")
    return Location(cluster, topic)


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
    batch: int = SCAN_BATCH
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
            if prev is None or replaces(prev.record_partition, prev.record_timestamp_ms,
                                        row.record_partition, row.record_timestamp_ms):
                latest[key] = row
        for n, key in enumerate(sorted(latest)):
            if self.limit is not None and n >= self.limit:
                self.stats.stopped_at_limit = True
                return
            self.stats.emitted += 1
            yield latest[key]

    def _rows(self) -> Iterator[DumpRow]:
        kind, stats, filt = self.kind, self.stats, self.filter
        decode = DECODERS[kind]
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
        # One round trip first: it ends with librdkafka's reason (refused, TLS, SASL) as soon
        # as it has one, where listing the topic would wait out its timeout.
        describe_with_retry(self.clients, self.policy)
        ranges = topic_ranges(self.clients, self.topic, policy=self.policy,
                              missing_hint=_missing_hint(self.kind))
        self.stats.partitions = len(ranges)
        self.stats.total = sum(max(0, end - low) for low, end in ranges.values())
        if self.on_start is not None:
            self.on_start(self.stats.total)
        yield from read_batches(self.clients, self.topic, ranges, batch=self.batch,
                                stall_timeout_s=self.stall_timeout_s,
                                on_progress=self.on_progress)


def _missing_hint(kind: DumpKind) -> str:
    if kind == DumpKind.consumer_timestamps:
        return ("No consumer with Confluent's ConsumerTimestampsInterceptor has committed on "
                "this cluster, or the topic has another name: pass --cluster/--internal-topic.")
    return MISSING_MM2_TOPIC_HINT


def _provenance(headers: list[tuple[str, bytes | None]]) -> Provenance | None:
    for name, value in headers:
        if name == PROVENANCE_HEADER and value is not None:
            return decode_provenance(value)
    return None

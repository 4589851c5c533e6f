"""A deterministic workload for drills and tests: what makes DR hard, on purpose.

Keyed and null-key records, tombstones, bursts sharing one timestamp, a few out-of-order
timestamps, headers, repeated identical payloads, transactional batches (some aborted), and
consumer groups committed at chosen positions. The same seed gives the same records.
"""

from __future__ import annotations

import random
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from drctl.errors import UsageError
from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.groups import alter_offsets
from drctl.progress import Notify


@dataclass(frozen=True)
class WorkloadSpec:
    topics: tuple[str, ...] = ("orders", "payments")
    partitions: int = 3
    records: int = 1000  # per topic, committed (visible) records
    seed: int = 7
    keys: int = 50
    null_key_every: int = 9
    tombstone_every: int = 13
    duplicate_every: int = 17  # re-send an earlier payload verbatim (same key, value, headers)
    burst_every: int = 250
    burst_size: int = 25
    out_of_order_every: int = 97
    transactions: int = 4  # transactional batches per topic; every other one aborted
    transaction_size: int = 10
    groups: tuple[str, ...] = ("start=0", "middle=50%", "end=end")
    base_timestamp_ms: int | None = None


# How values are written: (topic, the plain value) -> the bytes produced; `lab load
# --schema-registry` encodes them with a registry (drctl/lab/registry.py `avro_values`).
ValueEncoder = Callable[[str, bytes], bytes]


@dataclass(frozen=True)
class ProducedRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...]
    # keyed, unkeyed, tombstone, burst, identical (same record again, same millisecond),
    # duplicate (same payload later), txn-committed, txn-aborted
    kind: str


@dataclass
class WorkloadResult:
    records: list[ProducedRecord] = field(default_factory=list)
    groups: dict[str, dict[str, dict[int, int]]] = field(default_factory=dict)

    def visible(self, topic: str | None = None) -> list[ProducedRecord]:
        return [r for r in self.records
                if r.kind != "txn-aborted" and (topic is None or r.topic == topic)]

    def summary(self) -> dict[str, Any]:
        by_topic: dict[str, dict[str, int]] = {}
        for r in self.records:
            row = by_topic.setdefault(r.topic, {})
            row[r.kind] = row.get(r.kind, 0) + 1
        return {"topics": by_topic, "groups": self.groups, "visible": len(self.visible())}


def partition_for(key: bytes | None, partitions: int, counter: int) -> int:
    """Keys stay on one partition (like Kafka's partitioner); null keys go round robin."""
    if key is None:
        return counter % partitions
    return zlib.crc32(key) % partitions


def create_topics(clients: ClusterClients, topics: tuple[str, ...], partitions: int,
                  config: dict[str, str] | None = None) -> None:
    admin = clients.admin()
    existing = cluster_metadata(clients).topics
    new = [NewTopic(t, num_partitions=partitions, replication_factor=1, config=config or {})
           for t in topics if t not in existing]
    if not new:
        return
    for _topic, fut in admin.create_topics(new, operation_timeout=30).items():
        try:
            fut.result(timeout=30)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise


class _Generator:
    def __init__(self, spec: WorkloadSpec, topic: str, base_ts: int,
                 encode: ValueEncoder | None = None) -> None:
        self.spec = spec
        self.topic = topic
        self.encode = encode
        self.rng = random.Random(spec.seed)
        self.base_ts = base_ts
        self.i = 0
        self.history: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]] = []

    def next(self) -> tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...], int, str]:
        key: bytes | None
        value: bytes | None
        headers: tuple[tuple[str, bytes], ...]
        spec, i = self.spec, self.i
        self.i += 1
        ts = self.base_ts + i
        if spec.out_of_order_every and i % spec.out_of_order_every == spec.out_of_order_every - 1:
            ts -= 5000  # a producer with a skewed clock
        if spec.duplicate_every and self.history and i % spec.duplicate_every == 0:
            key, value, headers = self.history[self.rng.randrange(len(self.history))]
            return key, value, headers, ts, "duplicate"
        kind = "keyed"
        key = f"key-{self.rng.randrange(spec.keys)}".encode()
        if spec.null_key_every and i % spec.null_key_every == 0:
            key, kind = None, "unkeyed"
        value = f"{self.topic}:{i}:{self.rng.getrandbits(48):012x}".encode()
        if self.encode is not None:
            value = self.encode(self.topic, value)
        if key is not None and spec.tombstone_every and i % spec.tombstone_every == 0:
            value, kind = None, "tombstone"
        headers = ()
        if i % 3 == 0:
            headers = (("source", b"drctl-load"), ("seq", str(i).encode()))
        self.history.append((key, value, headers))
        return key, value, headers, ts, kind


def run_workload(clients: ClusterClients, spec: WorkloadSpec,
                 notify: Notify = lambda _: None,
                 encode: ValueEncoder | None = None) -> WorkloadResult:
    group_specs = [_parse_group(g) for g in spec.groups]
    create_topics(clients, spec.topics, spec.partitions)
    base_ts = spec.base_timestamp_ms or int(time.time() * 1000) - spec.records - 10_000
    result = WorkloadResult()
    producer = clients.producer()
    delivered: list[ProducedRecord] = []

    def on_delivery(meta: dict[str, Any]) -> Callable[[Any, Any], None]:
        def callback(err: Any, msg: Any) -> None:
            if err is None:
                delivered.append(ProducedRecord(offset=msg.offset(), partition=msg.partition(),
                                                **meta))
        return callback

    for topic in spec.topics:
        notify(f"Producing {spec.records} records to {topic} ({spec.partitions} partitions)")
        gen = _Generator(spec, topic, base_ts, encode)
        txn_points = {int(spec.records * (k + 1) / (spec.transactions + 1))
                      for k in range(spec.transactions)}
        txn_index = 0
        produced = 0
        rr = 0
        while produced < spec.records:
            due = {pt for pt in txn_points if pt <= produced}
            if due:
                txn_points -= due
                producer.flush(30)
                _transaction(clients, spec, topic, gen, txn_index, delivered)
                produced += spec.transaction_size if txn_index % 2 == 0 else 0
                txn_index += 1
                continue
            if spec.burst_every and produced and produced % spec.burst_every == 0:
                burst_ts = gen.base_ts + gen.i
                previous: tuple[Any, ...] | None = None
                for j in range(min(spec.burst_size, spec.records - produced)):
                    if previous is not None and j % 5 == 4:
                        # The same record again, same partition, same millisecond: identical
                        # fingerprints, so translation must count copies.
                        key, value, headers, p = previous
                        kind = "identical"
                    else:
                        key, value, headers, _, kind = gen.next()
                        kind = "burst" if kind == "keyed" else kind
                        p = partition_for(key, spec.partitions, rr)
                        rr += 1
                        previous = (key, value, headers, p)
                    meta = dict(topic=topic, key=key, value=value, timestamp_ms=burst_ts,
                                headers=headers, kind=kind)
                    producer.produce(topic, value=value, key=key, partition=p,
                                     timestamp=burst_ts, headers=list(headers),
                                     on_delivery=on_delivery(meta))
                    produced += 1
                continue
            key, value, headers, ts, kind = gen.next()
            p = partition_for(key, spec.partitions, rr)
            rr += 1
            meta = dict(topic=topic, key=key, value=value, timestamp_ms=ts, headers=headers,
                        kind=kind)
            producer.produce(topic, value=value, key=key, partition=p, timestamp=ts,
                             headers=list(headers), on_delivery=on_delivery(meta))
            produced += 1
            producer.poll(0)
    remaining = producer.flush(60)
    if remaining:
        raise UsageError(f"{remaining} records were not delivered within 60 s.")
    result.records = sorted(delivered, key=lambda r: (r.topic, r.partition, r.offset))
    for name, position in group_specs:
        result.groups[name] = commit_group_positions(clients, name, spec.topics, position,
                                                     result)
    return result


def _transaction(clients: ClusterClients, spec: WorkloadSpec, topic: str, gen: _Generator,
                 index: int, delivered: list[ProducedRecord]) -> None:
    abort = index % 2 == 1
    txp = clients.producer(**{"transactional.id": f"drctl-load-{spec.seed}-{topic}-{index}"})
    txp.init_transactions(30)
    txp.begin_transaction()
    pending: list[ProducedRecord] = []
    for j in range(spec.transaction_size):
        key, value, headers, ts, _ = gen.next()
        p = partition_for(key, spec.partitions, j)

        def callback(err: Any, msg: Any, key: bytes | None = key, value: bytes | None = value,
                     headers: tuple[tuple[str, bytes], ...] = headers, ts: int = ts) -> None:
            if err is None:
                pending.append(ProducedRecord(topic, msg.partition(), msg.offset(), key, value,
                                              ts, headers,
                                              "txn-aborted" if abort else "txn-committed"))
        txp.produce(topic, value=value, key=key, partition=p, timestamp=ts,
                    headers=list(headers), on_delivery=callback)
    txp.flush(30)
    if abort:
        txp.abort_transaction(30)
    else:
        txp.commit_transaction(30)
    delivered.extend(pending)


_POSITION = re.compile(r"^(end|\d+%|\d+)$")


def _parse_group(text: str) -> tuple[str, str]:
    name, sep, position = text.partition("=")
    if not sep or not name or not _POSITION.match(position):
        raise UsageError(f"'{text}' is not a group position.",
                         "Use NAME=0, NAME=<offset>, NAME=<percent>% or NAME=end.")
    return name, position


def commit_group_positions(clients: ClusterClients, group: str, topics: tuple[str, ...],
                           position: str, result: WorkloadResult) -> dict[str, dict[int, int]]:
    """Commit `group` on every partition of `topics` at the chosen position."""
    ends: dict[tuple[str, int], int] = {}
    for r in result.records:
        ends[(r.topic, r.partition)] = max(ends.get((r.topic, r.partition), 0), r.offset + 1)
    offsets = []
    committed: dict[str, dict[int, int]] = {}
    for (topic, partition), end in sorted(ends.items()):
        if topic not in topics:
            continue
        if position == "end":
            off = end
        elif position.endswith("%"):
            off = end * int(position[:-1]) // 100
        else:
            off = min(int(position), end)
        offsets.append(TopicPartition(topic, partition, off))
        committed.setdefault(topic, {})[partition] = off
    commit_offsets(clients, group, offsets)
    return committed


def commit_offsets(clients: ClusterClients, group: str, offsets: list[TopicPartition]) -> None:
    """Commit like a consumer of `group` would (retried while the coordinator loads)."""
    alter_offsets(clients, group, {(tp.topic, tp.partition): tp.offset for tp in offsets})

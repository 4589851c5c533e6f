"""Open transactions that pin a partition's last stable offset (LSO).

A producer that died mid-transaction leaves the LSO at its transaction's first record until
the coordinator aborts it (its transaction.timeout.ms), or for ever when the coordinator
lost track of it (a hanging transaction, KIP-664): `read_committed` consumers stall there,
and a failover point or a gap read taken at the LSO misses everything after it.

The Python client has no ListTransactions/DescribeTransactions, so an open transaction is
seen from what every client can read: the LSO below the high watermark, and the timestamp of
the record at the LSO (the transaction's first) for how long it has been open. Anything open
longer than the brokers' `transaction.max.timeout.ms` cannot belong to a live producer.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, OffsetSpec, ResourceType

from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import list_offsets
from drctl.kafka.records import read_ranges
from drctl.kafka.topics import TP

# Kafka's default transaction.max.timeout.ms: no producer may hold a transaction longer.
DEFAULT_MAX_TRANSACTION_S = 900.0


@dataclass(frozen=True)
class OpenTransaction:
    topic: str
    partition: int
    stable: int  # the last stable offset: the open transaction's first record
    end: int  # the high watermark
    since_ms: int | None  # the timestamp of its first record (None: not readable)
    leader: int  # the partition leader's broker id (kafka-transactions.sh find-hanging)

    def age_s(self, now_ms: int) -> float | None:
        return None if self.since_ms is None else max(0.0, (now_ms - self.since_ms) / 1000)

    def abort_commands(self, bootstrap: str) -> str:
        return (f"kafka-transactions.sh --bootstrap-server {bootstrap} find-hanging "
                f"--broker-id {self.leader}; kafka-transactions.sh --bootstrap-server "
                f"{bootstrap} abort --topic {self.topic} --partition {self.partition} "
                f"--start-offset {self.stable}")


def max_transaction_s(clients: ClusterClients, timeout_s: float = 15.0) -> float:
    """The brokers' transaction.max.timeout.ms in seconds (Kafka's default when unreadable)."""
    admin = clients.admin()
    try:
        brokers = admin.list_topics(timeout=timeout_s).brokers
        broker = str(min(brokers)) if brokers else "0"
        futures = admin.describe_configs([ConfigResource(ResourceType.BROKER, broker)],
                                         request_timeout=timeout_s)
        for future in futures.values():
            entry = future.result(timeout=timeout_s).get("transaction.max.timeout.ms")
            if entry is not None and entry.value:
                return int(entry.value) / 1000
    except (KafkaException, ValueError):
        pass
    return DEFAULT_MAX_TRANSACTION_S


def open_transactions(clients: ClusterClients, partitions: Iterable[TP]
                      ) -> list[OpenTransaction]:
    """The partitions whose LSO is below their high watermark, with when the transaction
    holding it began. Two ListOffsets for all partitions; one read per open one."""
    parts = sorted(set(partitions))
    if not parts:
        return []
    admin = clients.admin()
    stable = list_offsets(admin, {tp: OffsetSpec.latest() for tp in parts}, read_committed=True)
    ends = list_offsets(admin, {tp: OffsetSpec.latest() for tp in parts}, read_committed=False)
    pinned = {tp: (stable[tp], ends[tp]) for tp in parts if stable[tp] < ends[tp]}
    if not pinned:
        return []
    leaders = {(t, p): meta.leader
               for t, tmeta in admin.list_topics(timeout=30).topics.items()
               for p, meta in tmeta.partitions.items() if (t, p) in pinned}
    first: dict[TP, int] = {}
    consumer = clients.consumer(**{"isolation.level": "read_uncommitted",
                                   "enable.partition.eof": "true"})
    try:
        for rec in read_ranges(consumer, {tp: (lso, lso + 1) for tp, (lso, _) in pinned.items()},
                               timeout_s=30):
            first.setdefault((rec.topic, rec.partition), rec.timestamp_ms)
    finally:
        consumer.close()
    return [OpenTransaction(t, p, lso, end, first.get((t, p)), leaders.get((t, p), -1))
            for (t, p), (lso, end) in sorted(pinned.items())]


def hanging(open_: Iterable[OpenTransaction], max_age_s: float,
            now_ms: int | None = None) -> list[OpenTransaction]:
    """Those open longer than `max_age_s` (or whose start cannot be read: unknown is not
    young)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    out = []
    for t in open_:
        age = t.age_s(now_ms)
        if age is None or age > max_age_s:
            out.append(t)
    return out


def hanging_on(clients: ClusterClients, topics: Iterable[str], max_age_s: float | None,
               now_ms: int) -> tuple[list[OpenTransaction], int, float | None]:
    """The hanging transactions on `topics` (those the cluster has), how many partitions were
    looked at, and the age limit used (`max_age_s`, or the brokers' own when None; None when
    nothing was open, so no limit was needed)."""
    meta = clients.admin().list_topics(timeout=30).topics
    parts = [(t, p) for t in sorted(set(topics)) if t in meta for p in meta[t].partitions]
    still_open = open_transactions(clients, parts)
    if not still_open:
        return [], len(parts), None
    limit = max_age_s if max_age_s is not None else max_transaction_s(clients)
    return hanging(still_open, limit, now_ms), len(parts), limit

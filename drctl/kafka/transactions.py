"""Open transactions that pin a partition's last stable offset (LSO).

A producer that died mid-transaction leaves the LSO at its transaction's first record until
the coordinator aborts it (its transaction.timeout.ms), or for ever when the coordinator
lost track of it (a hanging transaction, KIP-664): `read_committed` consumers stall there,
and a failover point or a gap read taken at the LSO misses everything after it.

What a client can see: the end (high watermark) and the LSO. The end is read first, the LSO
second: a partition written between the two reads then shows an LSO at or past the end read
first, never a false "open". A partition whose LSO stays below that end, at the same offset,
over a second reading is open. confluent-kafka 2.16's AdminClient has no DescribeProducers,
ListTransactions or DescribeTransactions, so the broker's transaction start time cannot be
asked for; the record at the LSO carries a producer-set CreateTime (an event time, often hours
old on a healthy topic), which says nothing about when the transaction began. How long a
transaction has been open is therefore what drctl itself saw: the first time it found the
partition pinned at that offset (`PinnedSightings`, kept in the state directory across runs),
a lower bound. Anything seen open longer than the brokers' `transaction.max.timeout.ms`
cannot belong to a live producer.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, OffsetSpec, ResourceType

from drctl.kafka.clients import ClusterClients, ClusterUnreachable, cluster_metadata
from drctl.kafka.offsets import list_offsets
from drctl.kafka.topics import TP, topic_partitions

# Kafka's default transaction.max.timeout.ms: no producer may hold a transaction longer.
DEFAULT_MAX_TRANSACTION_S = 900.0
# How long a pinned LSO is watched before it counts as an open transaction (a transaction
# that commits within this is not one anybody waits for).
CONFIRM_S = 1.0


@dataclass(frozen=True)
class OpenTransaction:
    topic: str
    partition: int
    stable: int  # the last stable offset: the open transaction's first record
    end: int  # the high watermark
    leader: int  # the partition leader's broker id (kafka-transactions.sh find-hanging)
    # When drctl first saw this partition's LSO pinned at `stable` (epoch ms), and when it
    # last saw it so: the transaction has been open at least that long.
    seen_since_ms: int
    seen_at_ms: int

    @property
    def open_s(self) -> float:
        """How long drctl has seen it open, at least (not when it began: that is unknown)."""
        return max(0.0, (self.seen_at_ms - self.seen_since_ms) / 1000)

    @property
    def held_back(self) -> int:
        """Offsets at or after the LSO: the transaction's records, and every record written
        after it (committed or not), which read_committed readers cannot see yet."""
        return self.end - self.stable

    def abort_commands(self, bootstrap: str) -> str:
        return (f"kafka-transactions.sh --bootstrap-server {bootstrap} find-hanging "
                f"--broker-id {self.leader}; kafka-transactions.sh --bootstrap-server "
                f"{bootstrap} abort --topic {self.topic} --partition {self.partition} "
                f"--start-offset {self.stable}")

    def describe(self) -> str:
        return (f"{self.topic}-{self.partition} (last stable offset {self.stable}, end "
                f"{self.end}: {self.held_back} offset(s) held back)")


class PinnedSightings:
    """When drctl first saw each partition's LSO pinned at an offset, per cluster: the only
    sound age of an open transaction a client without DescribeTransactions has. Kept in a
    small JSON file (`path`; None keeps nothing between runs); a partition seen unpinned, or
    pinned at another offset, starts again."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def _load(self) -> dict[str, dict[str, list[int]]]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def record(self, cluster: str, looked_at: Iterable[TP], pinned: Mapping[TP, int],
               seen_ms: int) -> dict[TP, int]:
        """Note what a reading of `looked_at` found pinned (partition -> LSO) since `seen_ms`;
        returns, per pinned partition, since when it has been seen pinned at that LSO."""
        data = self._load()
        seen = data.setdefault(cluster, {})
        for tp in looked_at:
            key = f"{tp[0]}:{tp[1]}"
            lso = pinned.get(tp)
            if lso is None:
                seen.pop(key, None)
            elif not (isinstance(seen.get(key), list) and seen[key][0] == lso):
                seen[key] = [lso, seen_ms]
        out = {tp: int(seen[f"{tp[0]}:{tp[1]}"][1]) for tp in pinned}
        if not seen:
            data.pop(cluster, None)
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(data, sort_keys=True))
                os.replace(tmp, self.path)
            except OSError:
                pass  # a sighting not kept only makes the next run's age start later
        return out


def max_transaction_s(clients: ClusterClients, timeout_s: float = 15.0) -> float:
    """The brokers' transaction.max.timeout.ms in seconds (Kafka's default when unreadable)."""
    try:
        # A setting read on the way: asked again for seconds, not for the deadline.
        brokers = cluster_metadata(clients, timeout_s=timeout_s, deadline_s=timeout_s).brokers
        broker = str(min(brokers)) if brokers else "0"
        futures = clients.admin().describe_configs(
            [ConfigResource(ResourceType.BROKER, broker)], request_timeout=timeout_s)
        for future in futures.values():
            entry = future.result(timeout=timeout_s).get("transaction.max.timeout.ms")
            if entry is not None and entry.value:
                return int(entry.value) / 1000
    except (KafkaException, ClusterUnreachable, ValueError):
        pass
    return DEFAULT_MAX_TRANSACTION_S


def pinned_offsets(clients: ClusterClients, partitions: Iterable[TP]
                   ) -> dict[TP, tuple[int, int]]:
    """The partitions whose LSO is below their end, as (LSO, end): the end read first, so a
    write between the two reads never looks like an open transaction."""
    parts = sorted(set(partitions))
    if not parts:
        return {}
    admin = clients.admin()
    ends = list_offsets(admin, {tp: OffsetSpec.latest() for tp in parts}, read_committed=False)
    stable = list_offsets(admin, {tp: OffsetSpec.latest() for tp in parts}, read_committed=True)
    return {tp: (stable[tp], ends[tp]) for tp in parts if stable[tp] < ends[tp]}


def open_transactions(clients: ClusterClients, partitions: Iterable[TP], *,
                      sightings: PinnedSightings | None = None,
                      confirm_s: float = CONFIRM_S) -> list[OpenTransaction]:
    """The partitions an open transaction pins: LSO below the end in two readings
    `confirm_s` apart, at the same LSO. Two ListOffsets per reading for all partitions; the
    second reading only for those the first found pinned."""
    parts = sorted(set(partitions))
    first = pinned_offsets(clients, parts)
    first_ms = _now_ms()
    if first and confirm_s > 0:
        time.sleep(confirm_s)
    second_ms = _now_ms()
    second = pinned_offsets(clients, first) if first else {}
    still = {tp: (lso, end) for tp, (lso, end) in second.items() if first[tp][0] == lso}
    since = (sightings or PinnedSightings(None)).record(
        clients.bootstrap, parts, {tp: lso for tp, (lso, _) in still.items()}, first_ms)
    if not still:
        return []
    leaders = {(t, p): meta.leader
               for t, tmeta in cluster_metadata(clients).topics.items()
               for p, meta in tmeta.partitions.items() if (t, p) in still}
    return [OpenTransaction(t, p, lso, end, leaders.get((t, p), -1),
                            min(since[(t, p)], first_ms), second_ms)
            for (t, p), (lso, end) in sorted(still.items())]


def _now_ms() -> int:
    return int(time.time() * 1000)


def hanging(open_: Iterable[OpenTransaction], max_age_s: float) -> list[OpenTransaction]:
    """Those drctl has seen open for `max_age_s` or longer."""
    return [t for t in open_ if t.open_s >= max_age_s]


def hanging_on(clients: ClusterClients, topics: Iterable[str], max_age_s: float | None,
               sightings: PinnedSightings | None = None
               ) -> tuple[list[OpenTransaction], list[OpenTransaction], int, float | None]:
    """On `topics` (those the cluster has): the hanging transactions, the other open ones,
    how many partitions were looked at, and the age limit used (`max_age_s`, or the brokers'
    own when None; None when nothing was open, so no limit was needed). A pinned partition
    is watched for up to CONFIRM_S, or for `max_age_s` when shorter (an operator's limit of a
    second is then proven within this run)."""
    parts = [(t, p) for t, ps in topic_partitions(clients, sorted(set(topics))).items()
             for p in ps]
    confirm = CONFIRM_S if max_age_s is None else min(CONFIRM_S, max_age_s)
    still_open = open_transactions(clients, parts, sightings=sightings, confirm_s=confirm)
    if not still_open:
        return [], [], len(parts), None
    limit = max_age_s if max_age_s is not None else max_transaction_s(clients)
    old = hanging(still_open, limit)
    return old, [t for t in still_open if t not in old], len(parts), limit

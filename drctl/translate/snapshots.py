"""Offset snapshots: exact group positions `drctl guard` keeps on the target while the source
answers, so failover can use them when it no longer does (docs/design.md §3, `snapshot`).

One record per group and source partition in a compacted topic on the target; the key names
the position, the value (JSON) holds its exact translation and how old it is. The newest
record per key is the snapshot; a tombstone is never written (a group that disappears keeps
its last position, which is what its consumers would resume from).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from drctl.errors import DrctlError
from drctl.fingerprint import record_fingerprint
from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import Record, read_ranges
from drctl.kafka.topics import TP
from drctl.translate.model import Confidence
from drctl.translate.reader import BatchReader, RangeRequest

SNAPSHOT_PARTITIONS = 6
_SEP = "\x00"  # never part of a group id or topic name a broker accepts in practice


@dataclass(frozen=True)
class OffsetSnapshot:
    group: str
    topic: str  # on the source
    partition: int
    source_offset: int  # the group's committed position on the source
    target_offset: int  # its exact translation on the target
    confidence: str  # the translation's (exact, clamped, ...)
    fingerprint: str | None  # hex digest of the last record it consumed (the proof)
    seen_ms: int  # when guard first saw this committed position
    snapshot_ms: int  # when guard wrote this snapshot
    # A position ahead of replication (confidence clamped): the group had consumed `ahead`
    # records past target_offset that were not copied yet; its last one is the
    # `occurrence`-th record with `fingerprint` from there (see settle_ahead).
    ahead: int | None = None
    occurrence: int | None = None
    fingerprint_ts: bool = True  # the fingerprint covers the timestamp (CreateTime)

    @property
    def key(self) -> bytes:
        return _SEP.join((self.group, self.topic, str(self.partition))).encode()

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, value: bytes) -> OffsetSnapshot:
        raw = json.loads(value)
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})

    @property
    def settles_later(self) -> bool:
        return self.confidence == Confidence.CLAMPED and self.fingerprint is not None \
            and self.ahead is not None and bool(self.occurrence)


def settle_ahead(clients: ClusterClients, snapshots: Sequence[tuple[OffsetSnapshot, TP]],
                 marks: Mapping[TP, tuple[int, int]]) -> list[tuple[int, str] | None]:
    """`settle_one` for many snapshots: the target's records past each one, read in one go."""
    reqs: list[RangeRequest] = []
    for snap, tp in snapshots:
        low, end = marks[tp]
        start = snap.target_offset if low <= snap.target_offset <= end else end
        reqs.append(RangeRequest(tp, start, min(end, start + 2 * (snap.ahead or 0) + 1_000)))
    return [settle_one(snap, recs, *marks[tp]) for (snap, tp), recs
            in zip(snapshots, BatchReader(clients).read(reqs), strict=True)]


def settle_one(snap: OffsetSnapshot, records: Sequence[Record], low: int, end: int
               ) -> tuple[int, str] | None:
    """Where a snapshot that was ahead of replication stands now, from the target alone, given
    the target's records from its offset on. Replication copies a partition in order, so the
    copy of the group's last record is the `occurrence`-th identical record from there (an
    earlier identical re-copy only moves the answer back: re-delivery, never a skip). If the
    target ends before that copy arrived, every record it holds past the offset is one the
    group consumed: the end. None: not settled (retention took the offset, or the target holds
    more than the group could have consumed yet not the copy): the snapshot's offset stands."""
    if not snap.settles_later or not low <= snap.target_offset <= end:
        return None
    wanted = bytes.fromhex(snap.fingerprint or "")
    copies = [r.offset for r in records if r.offset >= snap.target_offset
              and record_fingerprint(r, snap.fingerprint_ts) == wanted]
    k = snap.occurrence or 0
    if len(copies) >= k:
        return copies[k - 1] + 1, "the copy of the last record it read"
    if end - snap.target_offset <= (snap.ahead or 0):
        return end, "the target's end (the rest of what it read was never copied)"
    return None


INVENTORY_KEY = b"\x00inventory"


@dataclass(frozen=True)
class SourceInventory:
    """What drctl last saw on the source (translate/inventory.py keeps it): its topics in
    scope (with partition counts) and the groups with commits on them. With the source gone,
    failover names what of it has no mirror or no position (no group or topic left behind
    silently)."""

    topics: dict[str, int]
    groups: dict[str, list[str]]  # group -> topics it has commits on
    written_ms: int
    # Groups listed on the source whose commits were not read yet (reads are bounded per
    # call): their topics are unknown, so failover names them whatever they read.
    unread: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, value: bytes) -> SourceInventory:
        raw = json.loads(value)
        return cls(dict(raw["topics"]), {g: list(t) for g, t in raw["groups"].items()},
                   int(raw["written_ms"]), list(raw.get("unread", [])))


GUARD_ROUND_KEY = b"\x00guard-round"


@dataclass(frozen=True)
class GuardRound:
    """Guard's last successful round, written every round: whether guard runs, and how old
    the positions it keeps can be (`drctl check`)."""

    round_ms: int  # when the round ended
    interval_s: float  # the interval guard runs at
    positions: int  # committed positions in scope it looked at
    host: str = ""  # where it runs

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, value: bytes) -> GuardRound:
        raw = json.loads(value)
        return cls(int(raw["round_ms"]), float(raw["interval_s"]), int(raw["positions"]),
                   str(raw.get("host", "")))


def ensure_snapshot_topic(clients: ClusterClients, topic: str) -> None:
    """Create the compacted snapshot topic on the target if it is missing."""
    meta = cluster_metadata(clients)
    if topic in meta.topics:
        return
    brokers = len(meta.brokers)
    futures = clients.admin().create_topics([NewTopic(topic, SNAPSHOT_PARTITIONS, min(3, brokers),
                                            config={"cleanup.policy": "compact"})])
    for future in futures.values():
        try:
            future.result(timeout=60)
        except Exception as exc:  # created meanwhile by another guard is fine
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise DrctlError(f"Cannot create the snapshot topic {topic}: {exc}",
                                 "Grant drctl CREATE on the target cluster or create the "
                                 "topic (cleanup.policy=compact) yourself.") from exc


def snapshot_producer(clients: ClusterClients) -> Producer:
    """The producer snapshots are written with; a long-running writer (guard) keeps one, as
    starting one (connections, an idempotent producer id) costs half a second."""
    return clients.producer(**{"acks": "all", "enable.idempotence": "true"})


def write_snapshots(clients: ClusterClients, topic: str,
                    snapshots: Iterable[OffsetSnapshot],
                    inventory: SourceInventory | None = None, *,
                    producer: Producer | None = None,
                    guard_round: GuardRound | None = None, timeout_s: float = 60.0) -> int:
    """Write snapshots (and the inventory) and wait up to `timeout_s` until every one is
    acknowledged; returns how many snapshots."""
    producer = producer or snapshot_producer(clients)
    failed: list[str] = []
    count = 0
    for snap in snapshots:
        producer.produce(topic, key=snap.key, value=snap.encode(),
                         on_delivery=lambda err, _m: failed.append(str(err)) if err else None)
        count += 1
        producer.poll(0)
    if inventory is not None:
        producer.produce(topic, key=INVENTORY_KEY, value=inventory.encode(),
                         on_delivery=lambda err, _m: failed.append(str(err)) if err else None)
    if guard_round is not None:
        producer.produce(topic, key=GUARD_ROUND_KEY, value=guard_round.encode(),
                         on_delivery=lambda err, _m: failed.append(str(err)) if err else None)
    if producer.flush(timeout_s) or failed:
        raise DrctlError(f"Writing {count} offset snapshot(s) to {topic} failed"
                         + (f": {failed[0]}" if failed else "") + ".",
                         "guard retries in its next round.")
    return count


def read_snapshots(clients: ClusterClients, topic: str
                   ) -> dict[tuple[str, str, int], OffsetSnapshot]:
    """The newest snapshot per (group, source topic, partition); empty without the topic."""
    return read_snapshot_topic(clients, topic).snapshots


@dataclass
class SnapshotTopic:
    """What the snapshot topic holds: the newest snapshot per position, the newest
    inventory, and guard's last round (None when guard never ran against this target)."""

    snapshots: dict[tuple[str, str, int], OffsetSnapshot] = field(default_factory=dict)
    inventory: SourceInventory | None = None
    guard_round: GuardRound | None = None


def read_snapshot_topic(clients: ClusterClients, topic: str) -> SnapshotTopic:
    """The whole snapshot topic, newest record per key; empty without the topic."""
    meta = cluster_metadata(clients).topics.get(topic)
    out = SnapshotTopic()
    if meta is None:
        return out
    marks = watermarks(clients.admin(), [(topic, p) for p in meta.partitions])
    ranges: Mapping[tuple[str, int], tuple[int, int]] = {
        tp: m for tp, m in marks.items() if m[1] > m[0]}
    consumer = clients.consumer(**{"enable.partition.eof": "true"})
    try:
        for rec in read_ranges(consumer, ranges):
            if rec.value is None:
                continue
            if rec.key == INVENTORY_KEY:
                found = SourceInventory.decode(rec.value)
                if out.inventory is None or found.written_ms >= out.inventory.written_ms:
                    out.inventory = found
                continue
            if rec.key == GUARD_ROUND_KEY:
                last = GuardRound.decode(rec.value)
                if out.guard_round is None or last.round_ms >= out.guard_round.round_ms:
                    out.guard_round = last
                continue
            snap = OffsetSnapshot.decode(rec.value)
            key = (snap.group, snap.topic, snap.partition)
            have = out.snapshots.get(key)
            if have is None or snap.snapshot_ms >= have.snapshot_ms:
                out.snapshots[key] = snap
    finally:
        consumer.close()
    return out

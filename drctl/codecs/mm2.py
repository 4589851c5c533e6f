"""MirrorMaker 2's internal records (Apache Kafka `connect/mirror-client`), whose layouts are
exact: checkpoints, offset syncs and heartbeats. Decoders are strict — a wrong version, a
truncated field or trailing bytes raise DecodeError — so records of another kind are never
mistaken for these."""

from __future__ import annotations

from dataclasses import dataclass

from drctl.codecs import wire
from drctl.errors import DecodeError

CHECKPOINT_VERSION = 0
HEARTBEAT_VERSION = 0


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A group's position on the source (upstream) and its translation on the target.
    `topic` is the topic's name on the target (e.g. `primary.orders` with MM2's default
    naming)."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """An exact pair: the record at `upstream_offset` of the source topic is at
    `downstream_offset` on the target. `topic` is the source topic's name."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    source_alias: str
    target_alias: str
    timestamp_ms: int


def _require(key: bytes | None, value: bytes | None, what: str) -> tuple[bytes, bytes]:
    if key is None:
        raise DecodeError(f"{what}: null key")
    if value is None:
        raise DecodeError(f"{what}: null value (a tombstone)")
    return key, value


def decode_checkpoint(key: bytes | None, value: bytes | None) -> Checkpoint:
    key, value = _require(key, value, "checkpoint")
    group, pos = wire.read_string(key, 0, "checkpoint key group")
    topic, pos = wire.read_string(key, pos, "checkpoint key topic")
    partition, pos = wire.read_int32(key, pos, "checkpoint key partition")
    wire.expect_end(key, pos, "checkpoint key")
    version, pos = wire.read_int16(value, 0, "checkpoint version")
    if version != CHECKPOINT_VERSION:
        raise DecodeError(f"checkpoint version {version} is not {CHECKPOINT_VERSION}")
    upstream, pos = wire.read_int64(value, pos, "checkpoint upstreamOffset")
    downstream, pos = wire.read_int64(value, pos, "checkpoint downstreamOffset")
    metadata, pos = wire.read_string(value, pos, "checkpoint metadata")
    wire.expect_end(value, pos, "checkpoint value")
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)


def encode_checkpoint(cp: Checkpoint) -> tuple[bytes, bytes]:
    key = wire.string(cp.group) + wire.string(cp.topic) + wire.int32(cp.partition)
    value = (wire.int16(CHECKPOINT_VERSION) + wire.int64(cp.upstream_offset)
             + wire.int64(cp.downstream_offset) + wire.string(cp.metadata))
    return key, value


def decode_offset_sync(key: bytes | None, value: bytes | None) -> OffsetSync:
    key, value = _require(key, value, "offset sync")
    topic, pos = wire.read_string(key, 0, "offset-sync key topic")
    partition, pos = wire.read_int32(key, pos, "offset-sync key partition")
    wire.expect_end(key, pos, "offset-sync key")
    upstream, pos = wire.read_int64(value, 0, "offset-sync upstreamOffset")
    downstream, pos = wire.read_int64(value, pos, "offset-sync downstreamOffset")
    wire.expect_end(value, pos, "offset-sync value")
    return OffsetSync(topic, partition, upstream, downstream)


def encode_offset_sync(sync: OffsetSync) -> tuple[bytes, bytes]:
    key = wire.string(sync.topic) + wire.int32(sync.partition)
    return key, wire.int64(sync.upstream_offset) + wire.int64(sync.downstream_offset)


def decode_heartbeat(key: bytes | None, value: bytes | None) -> Heartbeat:
    key, value = _require(key, value, "heartbeat")
    source, pos = wire.read_string(key, 0, "heartbeat key sourceClusterAlias")
    target, pos = wire.read_string(key, pos, "heartbeat key targetClusterAlias")
    wire.expect_end(key, pos, "heartbeat key")
    version, pos = wire.read_int16(value, 0, "heartbeat version")
    if version != HEARTBEAT_VERSION:
        raise DecodeError(f"heartbeat version {version} is not {HEARTBEAT_VERSION}")
    timestamp, pos = wire.read_int64(value, pos, "heartbeat timestamp")
    wire.expect_end(value, pos, "heartbeat value")
    return Heartbeat(source, target, timestamp)


def encode_heartbeat(hb: Heartbeat) -> tuple[bytes, bytes]:
    key = wire.string(hb.source_alias) + wire.string(hb.target_alias)
    return key, wire.int16(HEARTBEAT_VERSION) + wire.int64(hb.timestamp_ms)

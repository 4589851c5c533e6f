"""The rows of a dump, per DumpKind: decoders, columns, and the JSON Lines shapes
(`drctl.dump` documents the schema)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import lru_cache
from typing import Any

from drctl.codecs.confluent import (
    LAYOUT_NOTE,
    ConsumerTimestamp,
    Provenance,
    decode_consumer_timestamp,
)
from drctl.codecs.mm2 import (
    Checkpoint,
    Heartbeat,
    OffsetSync,
    decode_checkpoint,
    decode_heartbeat,
    decode_offset_sync,
)

Decoded = ConsumerTimestamp | Checkpoint | OffsetSync | Heartbeat


class DumpKind(StrEnum):
    consumer_timestamps = "consumer-timestamps"
    checkpoints = "checkpoints"
    offset_syncs = "offset-syncs"
    heartbeats = "heartbeats"


DECODERS: dict[DumpKind, Callable[[bytes | None, bytes | None], Any]] = {
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

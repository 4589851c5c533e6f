"""Confluent's `__consumer_timestamps` records and Replicator's `__replicator_id` header.

Neither byte layout is published by Confluent, and no public source or artifact was found to
test against, so everything here is INFERRED: the decoder tries the plausible layouts below,
says which one matched, and raises DecodeError (with the reason) for anything else — callers
show such records as raw hex.

`__consumer_timestamps` key (Confluent's GroupTopicPartition), tried in this order:
  gtp     group string, topic string, partition int32
  v+gtp   int16 version, then as gtp
value (TimestampAndDelta; older releases wrote Kafka's LongSerializer bytes), told apart by size:
  ts           8 bytes: int64 timestamp
  v+ts         10 bytes: int16 version, int64 timestamp
  ts+delta     16 bytes: int64 timestamp, int64 delta
  v+ts+delta   18 bytes: int16 version, int64 timestamp, int64 delta
Strings are Kafka strings (int16 length, UTF-8); integers big-endian.

A layout matches only if it consumes every byte and its fields are plausible: a legal topic
name, a non-empty group id without control characters, a partition >= 0, a version in
0..15 and a timestamp between 1970 and 9999. The plausibility rules are what keeps one layout
from being misread as another (a versioned key read without its version starts its group id
with a control character).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from drctl.codecs import wire
from drctl.errors import DecodeError

TOPIC = "__consumer_timestamps"
PROVENANCE_HEADER = "__replicator_id"
LAYOUT_NOTE = ("The __consumer_timestamps layout is inferred: Confluent does not publish it, "
               "and drctl has not been tested against bytes written by Confluent's "
               "interceptor. Check the matched layout (key_layout/value_layout) against a "
               "known group before relying on it.")

KEY_LAYOUTS = {
    "gtp": "group string, topic string, partition int32",
    "v+gtp": "int16 version, group string, topic string, partition int32",
}
VALUE_LAYOUTS = {
    "ts": "int64 timestamp",
    "v+ts": "int16 version, int64 timestamp",
    "ts+delta": "int64 timestamp, int64 delta",
    "v+ts+delta": "int16 version, int64 timestamp, int64 delta",
}

MAX_VERSION = 15
MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_I16 = struct.Struct(">h")
# Keys repeat (one per group, topic and partition, committed again and again): decoding each
# distinct key once makes a long history several times faster. Bounded, so memory stays flat.
_KEY_CACHE: dict[bytes, tuple[str, str, int, str, int | None]] = {}
_KEY_CACHE_SIZE = 16_384
_I64 = struct.Struct(">q")
_I64X2 = struct.Struct(">qq")
# Value layouts by size: (name, where the timestamp starts, what follows the version).
_VALUE_BY_SIZE = {8: ("ts", 0, _I64), 10: ("v+ts", 2, _I64), 16: ("ts+delta", 0, _I64X2),
                  18: ("v+ts+delta", 2, _I64X2)}


@dataclass(slots=True)
class ConsumerTimestamp:
    """The timestamp of a group's committed position on one partition (inferred layout).
    Not frozen only because a dump builds millions of them (frozen costs 3x); treat it as a
    value."""

    group: str
    topic: str
    partition: int
    timestamp_ms: int
    delta: int | None = None
    key_layout: str = "gtp"
    value_layout: str = "ts"
    key_version: int | None = None
    value_version: int | None = None


def _gtp(buf: bytes, pos: int) -> tuple[str, str, int]:
    group, pos = wire.read_string(buf, pos, "group")
    if not group:
        raise DecodeError("empty group id")
    if _CONTROL.search(group):
        raise DecodeError("group id holds control characters")
    topic, pos = wire.read_string(buf, pos, "topic")
    if not _TOPIC_NAME.fullmatch(topic):
        raise DecodeError(f"{topic!r} is not a legal topic name")
    partition, pos = wire.read_int32(buf, pos, "partition")
    if partition < 0:
        raise DecodeError(f"negative partition {partition}")
    wire.expect_end(buf, pos, "key")
    return group, topic, partition


def _version(buf: bytes) -> int:
    version = int(_I16.unpack_from(buf, 0)[0])
    if not 0 <= version <= MAX_VERSION:
        raise DecodeError(f"version {version} is outside 0..{MAX_VERSION}")
    return version


def decode_key(key: bytes | None) -> tuple[str, str, int, str, int | None]:
    """(group, topic, partition, layout, version) of a `__consumer_timestamps` key."""
    if key is None:
        raise DecodeError("null key")
    cached = _KEY_CACHE.get(key) if isinstance(key, bytes) else None
    if cached is not None:
        return cached
    decoded = _decode_key(key)
    if isinstance(key, bytes):
        if len(_KEY_CACHE) >= _KEY_CACHE_SIZE:
            _KEY_CACHE.clear()
        _KEY_CACHE[key] = decoded
    return decoded


def _decode_key(key: bytes) -> tuple[str, str, int, str, int | None]:
    try:
        return (*_gtp(key, 0), "gtp", None)
    except DecodeError as plain:
        try:
            if len(key) < 2:
                raise DecodeError("shorter than a version") from None
            version = _version(key)
            return (*_gtp(key, 2), "v+gtp", version)
        except DecodeError as versioned:
            raise DecodeError(f"key matches no known layout (gtp: {plain}; "
                              f"v+gtp: {versioned})") from None


def decode_value(value: bytes | None) -> tuple[int, int | None, str, int | None]:
    """(timestamp_ms, delta, layout, version) of a `__consumer_timestamps` value."""
    if value is None:
        raise DecodeError("null value (a tombstone)")
    spec = _VALUE_BY_SIZE.get(len(value))
    if spec is None:
        raise DecodeError(f"value of {len(value)} bytes matches no known layout "
                          "(8, 10, 16 or 18 bytes)")
    layout, body, fields = spec
    version = _version(value) if body else None
    if fields is _I64X2:
        timestamp, delta = _I64X2.unpack_from(value, body)
    else:
        timestamp, delta = _I64.unpack_from(value, body)[0], None
    if not 0 <= timestamp <= MAX_TIMESTAMP_MS:
        raise DecodeError(f"value of {len(value)} bytes ({layout}) holds {timestamp}, "
                          "not a plausible timestamp in ms")
    return timestamp, delta, layout, version


def decode_consumer_timestamp(key: bytes | None, value: bytes | None) -> ConsumerTimestamp:
    group, topic, partition, key_layout, key_version = decode_key(key)
    timestamp, delta, value_layout, value_version = decode_value(value)
    return ConsumerTimestamp(group, topic, partition, timestamp, delta, key_layout,
                             value_layout, key_version, value_version)


def encode_consumer_timestamp(ct: ConsumerTimestamp) -> tuple[bytes, bytes]:
    """Bytes in the layouts `ct` names (for tests and the lab; the real layout is unknown)."""
    if ct.key_layout not in KEY_LAYOUTS or ct.value_layout not in VALUE_LAYOUTS:
        raise ValueError(f"unknown layout {ct.key_layout}/{ct.value_layout}")
    key = wire.string(ct.group) + wire.string(ct.topic) + wire.int32(ct.partition)
    if ct.key_layout == "v+gtp":
        key = wire.int16(ct.key_version or 0) + key
    value = wire.int64(ct.timestamp_ms)
    if ct.value_layout.endswith("delta"):
        value += wire.int64(ct.delta or 0)
    if ct.value_layout.startswith("v+"):
        value = wire.int16(ct.value_version or 0) + value
    return key, value


# -- __replicator_id ------------------------------------------------------------------------

_PRINTABLE = re.compile(rb"[\x20-\x7e]{3,}")
_TS_LOW, _TS_HIGH = 946_684_800_000, 4_102_444_800_000  # 2000 .. 2100


@dataclass(frozen=True, slots=True)
class Provenance:
    """Replicator's provenance header, layout unpublished: the raw bytes plus what can be seen
    in them — printable strings (cluster id, topic) and 8-byte values that read as
    timestamps between 2000 and 2100."""

    raw: bytes
    strings: tuple[str, ...]
    timestamps_ms: tuple[int, ...]

    @property
    def hex(self) -> str:
        return self.raw.hex()


def decode_provenance(value: bytes | None) -> Provenance:
    if value is None:
        raise DecodeError(f"{PROVENANCE_HEADER}: null header value")
    strings = tuple(m.group().decode("ascii") for m in _PRINTABLE.finditer(value))
    stamps = tuple(ts for i in range(len(value) - 7)
                   if _TS_LOW <= (ts := _I64.unpack_from(value, i)[0]) < _TS_HIGH)
    return Provenance(bytes(value), strings, stamps)

"""The one definition of a record fingerprint (DESIGN section 2).

Shared by offset translation, gap analysis and reconcile; the Spark job computes the same bytes
with Spark SQL built-ins (`drctl.gap.spark_fingerprint`), and a test proves both agree.

Encoding, all integers big-endian:
    partition                int32
    key, value               field
    header count             int32   (after leaving out replication-added headers)
    each header              field(key as UTF-8), field(value)
    timestamp                0x00 (not compared) | 0x01 int64 milliseconds
    field(b)                 0x00 when null | 0x01 int32 length, bytes
digest = first 16 bytes (128 bits) of SHA-256 over that encoding.

The null flag and the length prefix keep a null key, an empty key and a field shifted into its
neighbour from ever encoding alike.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence

# Headers a replicator or drctl adds on the way; they must not make a copy look different.
REPLICATION_HEADERS = frozenset({"__replicator_id", "drctl-reconciled"})
DIGEST_BYTES = 16

Header = tuple[str, bytes | None]


def _field(data: bytes | None) -> bytes:
    if data is None:
        return b"\x00"
    return b"\x01" + struct.pack(">i", len(data)) + data


def kept_headers(headers: Iterable[Header] | None) -> list[Header]:
    return [(k, v) for k, v in (headers or ()) if k not in REPLICATION_HEADERS]


def encode(partition: int, key: bytes | None, value: bytes | None,
           headers: Sequence[Header] | None, timestamp_ms: int | None) -> bytes:
    kept = kept_headers(headers)
    parts = [struct.pack(">i", partition), _field(key), _field(value),
             struct.pack(">i", len(kept))]
    for hkey, hvalue in kept:
        parts.append(_field(hkey.encode("utf-8")))
        parts.append(_field(hvalue))
    parts.append(b"\x00" if timestamp_ms is None else b"\x01" + struct.pack(">q", timestamp_ms))
    return b"".join(parts)


def fingerprint(partition: int, key: bytes | None, value: bytes | None,
                headers: Sequence[Header] | None = None,
                timestamp_ms: int | None = None) -> bytes:
    """128-bit digest of a record; equal for a record and its faithful replica."""
    return hashlib.sha256(encode(partition, key, value, headers, timestamp_ms)).digest()[
        :DIGEST_BYTES]


def fingerprint_message(msg: object, *, with_timestamp: bool = True) -> bytes:
    """Fingerprint of a confluent_kafka Message (CreateTime timestamps compared by default)."""
    partition = msg.partition()  # type: ignore[attr-defined]
    ts_type, ts = msg.timestamp()  # type: ignore[attr-defined]
    headers = msg.headers() or []  # type: ignore[attr-defined]
    return fingerprint(partition, msg.key(), msg.value(), headers,  # type: ignore[attr-defined]
                       ts if with_timestamp and ts_type == 1 else None)

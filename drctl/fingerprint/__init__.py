"""The one definition of a record fingerprint (docs/design.md §2).

Shared by offset translation, gap analysis and reconcile; the Spark job computes the same digest
with Spark SQL built-ins (`drctl.fingerprint.spark`, beside this module), and a test proves
both agree.

A record is turned into a sequence of typed items, in this order:
    partition                 int32
    key is null, key          bool, then bytes unless null
    value is null, value      bool, then bytes unless null
    header count              int32   (after leaving out replication-added headers)
    each header               bytes (key, UTF-8), bool (value is null), bytes unless null
    timestamp compared, ts    bool, then int64 milliseconds when compared
The items are hashed as a chain of XXH64 (each item's hash seeds the next), in two chains with
different starts; digest = the two 64-bit results, big-endian: 128 bits.

This is the chain Spark's built-in `xxhash64(col, ...)` computes (int32 and bool hash as 4
little-endian bytes, int64 as 8, bytes and strings as themselves, null columns skipped), so the
Spark job gets the identical digest from code-generated built-ins at the speed of reading the
records — SHA-256 over a concatenated encoding cost the job as much as the read itself. The
explicit null flags and the chaining (an item's length is part of its hash) keep a null, an
empty and a shifted field from ever hashing alike. XXH64 is not a cryptographic hash: the
fingerprint guards against accidents, not against someone crafting colliding records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Protocol

import xxhash

# The header of drctl's own copies of gap records (reconcile, quarantine): its value names the
# incident and the source record. Such a copy is the source's own record, never a write.
RECONCILED_HEADER = "drctl-reconciled"
# Headers a replicator or drctl adds on the way; they must not make a copy look different.
REPLICATION_HEADERS = frozenset({"__replicator_id", RECONCILED_HEADER})
DIGEST_BYTES = 16
CHAINS = (1, 2)  # each chain starts by hashing this int32 ...
SPARK_SEED = 42  # ... with the seed Spark's xxhash64 uses

Header = tuple[str, bytes | None]
Item = int | bool | bytes  # int: int32 unless wrapped by `Int64`


class Int64(int):
    """An item hashed as a 64-bit integer."""


_MASK = (1 << 64) - 1


def is_reconciled(headers: Iterable[Header]) -> bool:
    """Whether a record is one of drctl's reconciled copies (`RECONCILED_HEADER`)."""
    return any(k == RECONCILED_HEADER for k, _ in headers)


def kept_headers(headers: Iterable[Header] | None) -> list[Header]:
    return [(k, v) for k, v in (headers or ()) if k not in REPLICATION_HEADERS]


def items(partition: int, key: bytes | None, value: bytes | None,
          headers: Sequence[Header] | None, timestamp_ms: int | None) -> list[Item]:
    kept = kept_headers(headers)
    out: list[Item] = [partition]
    for field in (key, value):
        out.append(field is None)
        if field is not None:
            out.append(field)
    out.append(len(kept))
    for hkey, hvalue in kept:
        out += [hkey.encode("utf-8"), hvalue is None]
        if hvalue is not None:
            out.append(hvalue)
    out.append(timestamp_ms is not None)
    if timestamp_ms is not None:
        out.append(Int64(timestamp_ms))
    return out


_TRUE, _FALSE = struct.pack("<i", 1), struct.pack("<i", 0)
_INT32, _INT64 = struct.Struct("<i").pack, struct.Struct("<q").pack


def _encode(item: Item) -> bytes:
    """The bytes Spark's xxhash64 hashes for one item."""
    kind = type(item)  # exact types first: translation encodes millions of items
    if kind is bytes:
        return item  # type: ignore[return-value]
    if kind is bool:
        return _TRUE if item else _FALSE
    if kind is int:
        return _INT32(item)
    if isinstance(item, bytes):
        return item
    if item is True or item is False:
        return _TRUE if item else _FALSE
    if isinstance(item, Int64):
        return _INT64(item)
    return _INT32(int(item))  # int32


def chain(record_items: Iterable[Item], start: int) -> int:
    """Spark's xxhash64(start, items...) as an unsigned 64-bit integer."""
    return _chain_encoded([_encode(i) for i in record_items], start)


# Each chain's first step: the same for every record.
_CHAIN_START = {start: xxhash.xxh64_intdigest(_encode(start), SPARK_SEED) for start in CHAINS}


def _chain_encoded(encoded: Sequence[bytes], start: int) -> int:
    h = _CHAIN_START.get(start)
    if h is None:
        h = xxhash.xxh64_intdigest(_encode(start), SPARK_SEED)
    digest = xxhash.xxh64_intdigest
    for data in encoded:
        h = digest(data, h)
    return h & _MASK


def fingerprint(partition: int, key: bytes | None, value: bytes | None,
                headers: Sequence[Header] | None = None,
                timestamp_ms: int | None = None) -> bytes:
    """128-bit digest of a record; equal for a record and its faithful replica."""
    # Encoded once for both chains: translation digests hundreds of thousands of records.
    encoded = [_encode(i) for i in items(partition, key, value, headers, timestamp_ms)]
    return b"".join(_chain_encoded(encoded, start).to_bytes(8, "big") for start in CHAINS)


class FingerprintedRecord(Protocol):
    """What a fingerprint reads of a record (`kafka.records.Record` has it)."""

    @property
    def partition(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]: ...
    @property
    def timestamp_ms(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...  # Kafka's coding: 1 CreateTime, 2 LogAppendTime


def record_fingerprint(rec: FingerprintedRecord, with_timestamp: bool | None = None) -> bytes:
    """`with_timestamp` defaults to the record's own type (CreateTime). Matching across
    clusters passes the *searched* record's choice to both sides: a LogAppendTime source
    record arrives as CreateTime on the target, with the same value."""
    if with_timestamp is None:
        with_timestamp = rec.timestamp_type == 1
    ts = rec.timestamp_ms if with_timestamp else None
    return fingerprint(rec.partition, rec.key, rec.value, rec.headers, ts)


def same_record(x: FingerprintedRecord, y: FingerprintedRecord,
                with_timestamp: bool | None = None) -> bool:
    """Whether two records have the same fingerprint, decided on what it covers (`items`)
    without digesting them: translation compares hundreds of thousands of candidate copies,
    and a digest costs some twenty times a comparison. `with_timestamp` as
    `record_fingerprint`'s: both records take it when given, else each its own type."""
    x_ts = x.timestamp_type == 1 if with_timestamp is None else with_timestamp
    y_ts = y.timestamp_type == 1 if with_timestamp is None else with_timestamp
    return (x_ts == y_ts and x.partition == y.partition and x.key == y.key
            and x.value == y.value and (not x_ts or x.timestamp_ms == y.timestamp_ms)
            and kept_headers(x.headers) == kept_headers(y.headers))

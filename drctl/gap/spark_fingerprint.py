"""`drctl.fingerprint` in Spark SQL built-ins: the same bytes, the same digest, no Python UDF.

Every record stays in the JVM (a Python UDF would ship each record to a Python worker and back).
The encoding is built with binary `concat`; big-endian integers are `lpad(hex(n))` turned back
into bytes with `unhex`; headers are filtered and folded with `filter` and `aggregate`; the
digest is the first 16 bytes of `sha2(..., 256)`. tests/unit/test_spark_fingerprint.py proves
that both implementations agree.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from drctl.fingerprint import DIGEST_BYTES, REPLICATION_HEADERS


def _null() -> Column:
    return F.expr("X'00'")


def _present() -> Column:
    return F.expr("X'01'")


def _int32(n: Column) -> Column:
    # hex() of an int widens it to a long; masking to 32 bits keeps two's complement right.
    return F.unhex(F.lpad(F.hex(n.cast("bigint").bitwiseAND(F.lit(0xFFFFFFFF))), 8, "0"))


def _int64(n: Column) -> Column:
    # hex() of a negative long is its 16-digit two's complement already.
    return F.unhex(F.lpad(F.hex(n.cast("bigint")), 16, "0"))


def _field(data: Column) -> Column:
    return F.when(data.isNull(), _null()).otherwise(
        F.concat(_present(), _int32(F.length(data)), data))


def kept_headers(headers: Column) -> Column:
    """The headers a fingerprint covers: replication-added ones left out, null as empty."""
    replication = F.array(*(F.lit(k) for k in sorted(REPLICATION_HEADERS)))
    present = F.coalesce(headers, F.array().cast("array<struct<key:string,value:binary>>"))
    return F.filter(present, lambda h: ~F.array_contains(replication, h["key"]))


def _header_bytes(headers: Column) -> Column:
    """int32 count of kept headers, then field(key), field(value) for each."""
    kept = kept_headers(headers)
    folded = F.aggregate(
        kept, F.expr("X''"),
        lambda acc, h: F.concat(acc, _field(F.encode(h["key"], "UTF-8")), _field(h["value"])))
    # Higher-order functions run interpreted (several times slower than the rest of the
    # expression); most records carry no headers, and they skip them.
    return F.when(headers.isNull() | (F.size(headers) == 0), F.expr("X'00000000'")).otherwise(
        F.concat(_int32(F.size(kept)), folded))


def encoding(partition: Column, key: Column, value: Column, headers: Column,
             timestamp_ms: Column) -> Column:
    """The bytes `drctl.fingerprint.encode` produces; `timestamp_ms` NULL means not compared."""
    stamp = F.when(timestamp_ms.isNull(), _null()).otherwise(
        F.concat(_present(), _int64(timestamp_ms)))
    return F.concat(_int32(partition), _field(key), _field(value), _header_bytes(headers),
                    stamp)


def fingerprint(partition: Column, key: Column, value: Column, headers: Column,
                timestamp_ms: Column) -> Column:
    """128-bit digest, equal to `drctl.fingerprint.fingerprint` for the same record."""
    digest = F.unhex(F.sha2(encoding(partition, key, value, headers, timestamp_ms), 256))
    return F.substring(digest, 1, DIGEST_BYTES)


def timestamp_ms(timestamp: Column, compared: bool) -> Column:
    """Milliseconds of Spark's Kafka `timestamp` column, or NULL when timestamps are not
    compared (either side's topic uses LogAppendTime)."""
    return F.unix_millis(timestamp) if compared else F.lit(None).cast("bigint")

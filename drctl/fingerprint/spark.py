"""`drctl.fingerprint` in Spark SQL built-ins: the same digest, no Python UDF.

Every record stays in the JVM (a Python UDF would ship each record to a Python worker and back),
and the digest is two calls of the built-in `xxhash64` over the fingerprint's items, which
Spark generates code for: computing it costs next to nothing beside reading the record. In a
DataFrame the digest is a struct of two longs (`h1`, `h2`), cheaper to shuffle and group than
bytes; `digest_bytes` gives the 16 bytes `drctl.fingerprint.fingerprint` returns.
tests/unit/fingerprint/test_spark.py proves that both implementations agree.
"""

from __future__ import annotations

import struct
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from drctl.fingerprint import CHAINS, REPLICATION_HEADERS

FP_TYPE = "struct<h1:bigint,h2:bigint>"  # a fingerprint column's type
# The Kafka source's header element, as hashed: key, "value is null", value.
_HEADER_ITEMS = "array<struct<key:string,null_value:boolean,value:binary>>"


def kept_headers(headers: Column) -> Column:
    """The headers a fingerprint covers: replication-added ones left out, null as empty."""
    replication = F.array(*(F.lit(k) for k in sorted(REPLICATION_HEADERS)))
    present = F.coalesce(headers, F.array().cast("array<struct<key:string,value:binary>>"))
    return F.filter(present, lambda h: ~F.array_contains(replication, h["key"]))


def _header_items(headers: Column) -> tuple[Column, Column]:
    """(count, items) of the kept headers. Higher-order functions run interpreted (several
    times slower than generated code); most records carry no headers, and they skip them."""
    none = headers.isNull() | (F.size(headers) == 0)
    kept = kept_headers(headers)
    count = F.when(none, F.lit(0)).otherwise(F.size(kept))
    listed = F.when(none, F.lit(None).cast(_HEADER_ITEMS)).otherwise(F.transform(
        kept, lambda h: F.struct(h["key"].alias("key"), h["value"].isNull().alias("null_value"),
                                 h["value"].alias("value"))))
    return count, listed


def fingerprint(partition: Column, key: Column, value: Column, headers: Column,
                timestamp_ms: Column) -> Column:
    """struct<h1:long, h2:long>, equal to `drctl.fingerprint.fingerprint` for the same record
    (see `digest_bytes`); `timestamp_ms` NULL means not compared."""
    count, listed = _header_items(headers)
    record_items = [partition.cast("int"), key.isNull(), key, value.isNull(), value, count,
                    listed, timestamp_ms.isNotNull(), timestamp_ms.cast("bigint")]
    h1, h2 = (F.xxhash64(F.lit(start), *record_items) for start in CHAINS)
    return F.struct(h1.alias("h1"), h2.alias("h2"))


def digest_bytes(fp: Any) -> bytes:
    """The 16 bytes of a collected fingerprint struct (Spark's longs are signed)."""
    return struct.pack(">qq", fp["h1"], fp["h2"])


def timestamp_ms(timestamp: Column, compared: bool) -> Column:
    """Milliseconds of Spark's Kafka `timestamp` column, or NULL when timestamps are not
    compared (either side's topic uses LogAppendTime)."""
    return F.unix_millis(timestamp) if compared else F.lit(None).cast("bigint")

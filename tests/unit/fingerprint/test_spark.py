"""The Spark SQL fingerprint and drctl.fingerprint agree bit for bit on the same records."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StructField,
    StructType,
)

from drctl import fingerprint as pyfp
from drctl.fingerprint import spark as sfp
from tests.spark_support import HEADER, spark_session

pytestmark = pytest.mark.spark

Row = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int | None]

SCHEMA = StructType([
    StructField("partition", IntegerType()),
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("headers", ArrayType(HEADER)),
    StructField("ts", LongType()),
])

EDGE_CASES: list[Row] = [
    (0, None, None, None, None),
    (0, b"", None, None, None),
    (0, None, b"", None, None),
    (0, b"", b"", None, None),
    (0, b"ab", b"c", None, 0),
    (0, b"a", b"bc", None, 0),  # a byte shifted between key and value
    (1, b"k", None, [], 1),  # tombstone, empty header list
    (2, b"k", b"v", [("h", None)], 1),  # header with a null value
    (2, b"k", b"v", [("h", b"")], 1),
    (3, b"k", b"v", [("__replicator_id", b"mm2"), ("a", b"1")], 5),
    (3, b"k", b"v", [("a", b"1"), ("drctl-reconciled", b"x")], 5),
    (3, b"k", b"v", [("a", b"1"), ("a", b"1"), ("\u00e9t\u00e9", b"\x00\xff")], 5),
    (7, b"\x00" * 300, b"\xff" * 70000, [("x", b"y" * 256)], -1),
    (2_147_483_647, b"k", b"v", None, -62_135_596_800_000),  # year 1
    (5, b"k", b"v", None, 253_402_300_799_999),  # 9999-12-31T23:59:59.999
    (5, b"k", b"v", None, 1_700_000_000_123),
    (5, b"k", b"v", None, -1),
    (4, b"k", b"v", [("ab", b"")], 1),  # bytes shifted between a header's key and value
    (4, b"k", b"v", [("a", b"b")], 1),
    (4, b"k", b"v", [("a", None), ("b", None)], 1),
    (4, b"k", b"v", [("a", b"b"), ("b", None)], 1),
    (4, b"k", b"v", [("a", b""), ("b", None)], 1),
]


def random_rows(n: int, seed: int) -> list[Row]:
    rng = random.Random(seed)

    def blob() -> bytes | None:
        return None if rng.random() < 0.15 else rng.randbytes(rng.randrange(0, 40))

    rows: list[Row] = []
    for _ in range(n):
        headers = None if rng.random() < 0.3 else [
            (rng.choice(["a", "b", "__replicator_id", "drctl-reconciled", "ü"]), blob())
            for _ in range(rng.randrange(0, 4))]
        ts = None if rng.random() < 0.2 else rng.randrange(-2**45, 2**45)
        rows.append((rng.randrange(0, 2**31), blob(), blob(), headers, ts))
    return rows


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    return spark_session()


def spark_digests(spark: SparkSession, rows: list[Row]) -> list[bytes]:
    df = spark.createDataFrame([(i, *r) for i, r in enumerate(rows)],
                               StructType([StructField("i", IntegerType()), *SCHEMA.fields]))
    cols = (F.col("partition"), F.col("key"), F.col("value"), F.col("headers"), F.col("ts"))
    out = df.select("i", sfp.fingerprint(*cols).alias("fp")).orderBy("i").collect()
    return [sfp.digest_bytes(r["fp"]) for r in out]


@pytest.mark.parametrize("rows", [EDGE_CASES, random_rows(400, seed=11)],
                         ids=["edge-cases", "random"])
# Generated code (a large plan's) and interpreted expressions (a small plan's, gap/job.py
# `_sql_defaults`) compute the same digest.
@pytest.mark.parametrize("factory", ["FALLBACK", "NO_CODEGEN"])
def test_spark_and_python_fingerprints_agree(spark: SparkSession, rows: list[Row],
                                             factory: str) -> None:
    spark.conf.set("spark.sql.codegen.factoryMode", factory)
    try:
        got = spark_digests(spark, rows)
    finally:
        spark.conf.unset("spark.sql.codegen.factoryMode")
    for row, fp in zip(rows, got, strict=True):
        assert fp == pyfp.fingerprint(*row), row
        assert len(fp) == pyfp.DIGEST_BYTES


def test_edge_cases_never_collide(spark: SparkSession) -> None:
    digests = spark_digests(spark, EDGE_CASES)
    # Rows 9 and 10 differ only in replication headers, which the fingerprint leaves out.
    assert digests[9] == digests[10] == pyfp.fingerprint(3, b"k", b"v", [("a", b"1")], 5)
    distinct = [d for i, d in enumerate(digests) if i != 10]
    assert len(set(distinct)) == len(distinct)


def test_kafka_timestamp_column_in_milliseconds(spark: SparkSession) -> None:
    """What the job feeds the fingerprint: Spark's timestamp column, back in milliseconds."""
    df = spark.createDataFrame([(1_700_000_000_123,), (-1,), (0,)], "ms long")
    rows = df.select(sfp.timestamp_ms(F.timestamp_millis("ms"), True).alias("a"),
                     sfp.timestamp_ms(F.timestamp_millis("ms"), False).alias("b")).collect()
    assert [r["a"] for r in rows] == [1_700_000_000_123, -1, 0]
    assert [r["b"] for r in rows] == [None, None, None]

"""One local SparkSession per test process, shared by every Spark test module.

Pure DataFrame tests need no Kafka connector: drctl's Spark job runs in its own process.
"""

from __future__ import annotations

import functools

from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from drctl.gap.class_archive import QUICK_JIT

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
# Exactly the rows Spark's Kafka source yields with includeHeaders=true.
KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
    StructField("headers", ArrayType(HEADER)),
])


@functools.cache
def spark_session() -> SparkSession:
    spark = (SparkSession.builder.master("local[1]").appName("drctl-tests")
             .config("spark.sql.shuffle.partitions", "1")
             .config("spark.sql.adaptive.enabled", "false")
             .config("spark.sql.codegen.wholeStage", "false")
             # Interpreted expressions, as the gap job runs a small plan (gap/job.py
             # `_sql_defaults`): compiling generated code was most of a tiny query's time.
             # tests/unit/fingerprint/test_spark.py proves both ways compute one digest.
             .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
             # The diff's plans join the same inputs many times: inferring filters from
             # constraints was most of the optimizer's time on them (2.1 s of a tiny query's
             # 6 s; 0.8 s without), and these tests run hundreds of such queries.
             .config("spark.sql.constraintPropagation.enabled", "false")
             # C1 only, as the gap job's small plans and the lab's JVMs: these tests run
             # hundreds of tiny queries, and C2 compiling their hot paths cost more than it
             # won (the session's JVM: 117-133 CPU-s with both compilers, 80-84 with C1).
             .config("spark.driver.extraJavaOptions", QUICK_JIT)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark

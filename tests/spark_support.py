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
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark

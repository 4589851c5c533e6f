"""The Spark Connect side of the gap job (drctl/gap/remote.py) without a server: one that does
not answer is exit 4 naming it, PySpark's process-wide mode is put back, and a server without
Spark's Kafka source is named with the package to add."""

from __future__ import annotations

import os

import pytest

from drctl.config import SparkSettings
from drctl.errors import ExitStatus
from drctl.gap import remote


def test_a_server_that_does_not_answer_is_unreachable_naming_it_and_the_mode_is_put_back(
        ) -> None:
    before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    # Port 9 on loopback: nothing listens there.
    settings = SparkSettings(remote="sc://127.0.0.1:9/;token=not-for-your-eyes")
    with pytest.raises(remote.SparkServerUnreachable) as info:
        with remote.connected(settings, 1.0):
            pass
    assert info.value.exit_status == ExitStatus.UNREACHABLE
    assert info.value.message.startswith(
        "The Spark Connect sc://127.0.0.1:9/;token=**** server did not answer:")
    assert "not-for-your-eyes" not in str(info.value)
    assert os.environ.get("SPARK_CONNECT_MODE_ENABLED") == before
    reading, error = remote.check(settings, 1.0)
    assert reading == {"remote": "sc://127.0.0.1:9/;token=****", "reachable": False,
                       "error": error.message if error else None}
    assert isinstance(error, remote.SparkServerUnreachable)


def test_a_server_without_kafka_is_a_usage_error_naming_the_package() -> None:
    error = remote.lacks_kafka(SparkSettings(remote="sc://spark:15002"), "4.1.1")
    assert error.exit_status == ExitStatus.USAGE
    assert "sc://spark:15002" in error.message and "Spark 4.1.1" in error.message
    assert "--packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1" in (error.hint or "")


@pytest.mark.parametrize(("text", "missing"), [
    ("[DATA_SOURCE_NOT_FOUND] Failed to find the data source: kafka. Make sure", True),
    ("Failed to find data source: kafka. Please deploy the application", True),
    ("[DATA_SOURCE_NOT_FOUND] Failed to find the data source: parquet2.", False),
    ("[UNRESOLVED_COLUMN] A column ...", False),
])
def test_the_kafka_source_missing_is_told_from_other_failures(text: str,
                                                              missing: bool) -> None:
    assert remote.connector_missing(RuntimeError(text)) is missing

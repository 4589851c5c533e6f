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


class _FakeSession:
    """What `connected` asks of a Spark Connect session, counted."""

    made: list[_FakeSession] = []

    def __init__(self) -> None:
        self.stopped = 0
        self.conf = self
        self.settings: dict[str, str] = {}
        self.client = self
        _FakeSession.made.append(self)

    version = "4.3.0"

    def set_retry_policies(self, _: object) -> None:
        pass

    def set(self, key: str, value: str) -> None:
        self.settings[key] = value

    def stop(self) -> None:
        self.stopped += 1


class _FakeBuilder:
    def remote(self, _: str) -> _FakeBuilder:
        return self

    def create(self) -> _FakeSession:
        return _FakeSession()


def test_a_commands_gap_jobs_share_one_session_closed_with_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 57: within `sessions_kept` (failback, run again after a dropped cluster), the
    jobs on one server share one session, closed when the command ends; a job that failed
    gives its session up, so the next starts afresh. Outside it, a session per job."""
    import pyspark.sql

    class Fake:
        builder = _FakeBuilder()

    monkeypatch.setattr(pyspark.sql, "SparkSession", Fake)
    _FakeSession.made.clear()
    before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    settings = SparkSettings(remote="sc://127.0.0.1:15002", conf={"spark.x": "1"})
    with remote.sessions_kept():
        with remote.connected(settings, 5) as first:
            assert os.environ["SPARK_CONNECT_MODE_ENABLED"] == "1"
        with remote.connected(settings, 5) as second:
            assert second is first and first.stopped == 0  # type: ignore[attr-defined]
        remote.forget_session(settings)  # its job failed
        assert first.stopped == 1  # type: ignore[attr-defined]
        with remote.connected(settings, 5) as third:
            assert third is not first and third.settings == {"spark.x": "1"}  # type: ignore[attr-defined]
        assert os.environ["SPARK_CONNECT_MODE_ENABLED"] == "1"  # the session is open
    assert [s.stopped for s in _FakeSession.made] == [1, 1]
    assert os.environ.get("SPARK_CONNECT_MODE_ENABLED") == before
    with remote.connected(settings, 5):
        pass
    with remote.connected(settings, 5):
        pass
    assert [s.stopped for s in _FakeSession.made] == [1, 1, 1, 1]
    assert os.environ.get("SPARK_CONNECT_MODE_ENABLED") == before


def test_the_client_is_imported_in_a_thread_while_the_plan_reads_kafka() -> None:
    """`import_client_early` starts the Spark Connect client's import (pandas among it) in a
    thread once per process; `client_imported` waits for it. In an interpreter of its own,
    which has not imported it yet."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from drctl.gap import remote\n"
        "assert 'pyspark.sql.connect.session' not in sys.modules\n"
        "remote.import_client_early()\n"
        "first = remote._client_import\n"
        "remote.import_client_early()\n"
        "remote.client_imported()\n"
        "print(first is not None and remote._client_import is first, first.name,\n"
        "      'pyspark.sql.connect.session' in sys.modules, 'pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "drctl-spark-client-import", "True", "True"]

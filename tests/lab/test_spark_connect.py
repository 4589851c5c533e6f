"""The gap job on a Spark Connect server (`spark.remote`, issue 45): the same findings as a
local job of its own, for `gap-analysis` and for `failback`'s gap step, with both namings; the
records come back over the session. A server that is down is exit 4 naming it; one without
Spark's Kafka source is exit 2 naming the jar to add."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.config import SparkSettings, load_config
from drctl.gap import remote
from drctl.gap.result import GapResult
from drctl.kafka.records import read_all
from drctl.lab.processes import wait_until
from drctl.lab.spark_cluster import start_spark
from drctl.lab.spark_connect import SERVER_CLASS, SparkConnectServer
from drctl.lab.workload import create_topics
from tests.conftest import PORT_BASE, RunningLab
from tests.lab.support import keyed, produce, run_json, wait_replicated
from tests.lab.test_failback import outage, restore
from tests.lab.test_failover import scoped_config

pytestmark = [pytest.mark.lab, pytest.mark.spark]


@pytest.fixture
def restored(any_lab: RunningLab) -> Iterator[RunningLab]:
    yield any_lab
    restore(any_lab)


def _with_spark(config: Path, spark: dict[str, Any], name: str) -> Path:
    """`config` with another `spark:` section, beside it."""
    raw = yaml.safe_load(config.read_text())
    raw["spark"] = spark
    path = config.with_name(name)
    path.write_text(yaml.safe_dump(raw))
    return path


def _findings(out: dict[str, Any], report_dir: Path) -> tuple[Any, ...]:
    """What a gap analysis found: its totals, per partition rows and every record."""
    records = sorted(GapResult.load(report_dir).records(),
                     key=lambda r: (r.topic, r.partition, r.offset))
    return out["totals"], out["partitions"], records


def test_gap_analysis_and_failback_find_the_same_on_the_server_as_in_a_job_of_their_own(
        restored: RunningLab, ns: str, tmp_path: Path) -> None:
    lab = restored
    o = outage(lab, ns, tmp_path)
    on_server = o["config"]
    assert load_config(on_server).spark.remote  # the test worker's server
    own_job = _with_spark(on_server, {"master": "local[2]"}, "own-job.yaml")

    found = {}
    for name, config in (("server", on_server), ("own job", own_job)):
        report_dir = tmp_path / name.replace(" ", "-")
        status, out = run_json("--config", str(config), "gap-analysis", "--check-order",
                               "--report-dir", str(report_dir))
        assert status == 3, out  # order conflicts
        found[name] = _findings(out, report_dir)
    assert found["server"] == found["own job"]
    totals, _, records = found["server"]
    assert (totals["safe"], totals["conflict"], totals["unkeyed"]) == (
        len(o["safe"]), len(o["conflict"]), len(o["unkeyed"]))
    assert sorted(r.value for r in records) == sorted(
        v for _, v in o["safe"] + o["conflict"] + o["unkeyed"])

    # Failback's gap step on the server: the same records, and the safe ones copied once.
    before = {(r.partition, r.offset) for r in read_all(lab.secondary, o["topic"])}
    status, back = run_json("--config", str(on_server), "failback", "--check-order",
                            "--reconcile", "copy-safe", "--yes", "--groups", f"{ns}-.*")
    assert status == 0, back
    assert (back["gap"]["safe"], back["gap"]["conflict"], back["gap"]["unkeyed"]) == (
        totals["safe"], totals["conflict"], totals["unkeyed"])
    added = [r for r in read_all(lab.secondary, o["topic"])
             if (r.partition, r.offset) not in before]
    assert sorted(r.value for r in added) == sorted(
        r.value for r in records if r.classification == "safe")


def test_a_spark_connect_server_that_is_down_is_exit_4_naming_it(
        lab: RunningLab, ns: str, tmp_path: Path) -> None:
    topic = f"{ns}-down"
    create_topics(lab.primary, (topic,), 1)
    produce(lab.primary, topic, keyed("k", 5, partitions=1))
    wait_replicated(lab, topic, 5)
    # Nothing listens on port 9 of loopback.
    config = _with_spark(scoped_config(lab, ns, tmp_path), {"remote": "sc://127.0.0.1:9"},
                         "down.yaml")
    started = time.monotonic()
    status, out = run_json("--config", str(config), "gap-analysis", "--topics", topic,
                           "--deadline", "3s")
    print(f"gap-analysis with the server down: exit {status} after "
          f"{time.monotonic() - started:.1f} s (planning included)")
    assert status == 4, out
    message = out["error"]["message"]
    assert "sc://127.0.0.1:9" in message and "did not answer" in message, message
    assert "connection refused" in message.lower(), message

    status, checked = run_json("--config", str(config), "config", "check", "--deadline", "3s")
    assert status == 4, checked
    reading = checked["gap_job"]["spark_connect"]
    assert (reading["remote"], reading["reachable"]) == ("sc://127.0.0.1:9", False), reading


@pytest.fixture
def server_without_kafka(tmp_path: Path) -> Iterator[str]:
    """A Spark Connect server started the plain way, without Spark's Kafka connector."""
    server = SparkConnectServer(tmp_path, PORT_BASE + 91)
    proc = server.process()
    start_spark(proc, "org.apache.spark.deploy.SparkSubmit",
                ["--class", SERVER_CLASS, "--conf", "spark.master=local[1]",
                 "--conf", "spark.ui.enabled=false",
                 "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                 "--conf", f"spark.connect.grpc.binding.port={server.port}"],
                env={"SPARK_DAEMON_MEMORY": "512m"})
    try:
        def answers() -> bool:
            with remote.connected(SparkSettings(remote=server.url), 5):
                return True

        wait_until(answers, deadline_s=300, what="a Spark Connect server without Kafka",
                   log_file=proc.log_file, alive=proc.is_running)
        yield server.url
    finally:
        server.down()


def test_a_server_without_the_kafka_source_is_exit_2_naming_the_jar(
        lab: RunningLab, ns: str, tmp_path: Path, server_without_kafka: str) -> None:
    topic = f"{ns}-nokafka"
    create_topics(lab.primary, (topic,), 1)
    produce(lab.primary, topic, keyed("k", 5, partitions=1))
    wait_replicated(lab, topic, 5)
    config = _with_spark(scoped_config(lab, ns, tmp_path), {"remote": server_without_kafka},
                         "nokafka.yaml")

    status, checked = run_json("--config", str(config), "config", "check")
    assert status == 2, checked
    reading = checked["gap_job"]["spark_connect"]
    assert reading["reachable"] and reading["kafka_connector"] is False, reading
    assert reading["version"] == "4.3.0", reading

    status, out = run_json("--config", str(config), "gap-analysis", "--topics", topic)
    assert status == 2, out
    error = out["error"]
    assert "has no Kafka source" in error["message"], error
    assert "org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0" in error["hint"], error

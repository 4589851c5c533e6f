"""Waits you can see and bound: catch-up lines, the Spark step's timeout and its retry when a
cluster drops mid-job (pure logic; the job runner is a fake function)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drctl.errors import ExitStatus, TimedOut, Unreachable
from drctl.gap.plan import GapPlan
from drctl.gap.runner import (
    GapJobFailed,
    GapJobLostKafka,
    _failure,
    clusters_named,
    kafka_dropped,
)
from drctl.ops.catch_up import catch_up_timed_out, describe_left
from drctl.ops.gap_step import PhaseLines, run_job_with_retries
from drctl.progress import Ticker
from drctl.retry import RetryPolicy
from drctl.timeparse import format_duration

# What a Py4J error looks like when the secondary's broker was SIGKILLed mid-job.
DROPPED = """An error occurred while calling o465.parquet.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 7.0 failed
Caused by: org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before \
the position for partition orders-0 could be determined
"""
DISCONNECTED = ("WARN NetworkClient: [Consumer clientId=x] Connection to node 1 "
                "(localhost/127.0.0.1:29092) could not be established. Node may not be "
                "available.")


@pytest.mark.parametrize("text", [
    DROPPED, DISCONNECTED,
    "org.apache.kafka.common.errors.DisconnectException: null",
    "Caused by: org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node "
    "assignment. Call: describeTopics",
    "org.apache.kafka.common.errors.NotLeaderOrFollowerException: For requests intended only "
    "for the leader",
])
def test_a_cluster_that_dropped_mid_job_is_transient(text: str) -> None:
    assert kafka_dropped(text)


@pytest.mark.parametrize("text", [
    "An error occurred while calling o465.parquet.",  # no cause: not known to be transient
    "Failed to find data source: kafka. Please deploy the application as per the deployment "
    "section of Structured Streaming + Kafka Integration Guide.",
    "java.lang.ClassNotFoundException: org.apache.spark.sql.kafka010.KafkaSourceProvider",
    "org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed during "
    "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
    "org.apache.kafka.clients.consumer.OffsetOutOfRangeException: Fetch position "
    "FetchPosition{offset=5} is out of range for partition orders-0",
    "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column with name `kye` cannot be resolved.",
    "KeyError: 'topics'",
])
def test_a_job_that_fails_for_another_reason_is_not(text: str) -> None:
    assert not kafka_dropped(text)


def _plan(tmp_path: Path) -> GapPlan:
    return GapPlan(kind="diff", replication_kind="mirrormaker2", source_cluster="primary",
                   target_cluster="secondary",
                   source_kafka={"kafka.bootstrap.servers": "127.0.0.1:19092",
                                 "kafka.sasl.jaas.config": "secret-jaas"},
                   target_kafka={"kafka.bootstrap.servers": "127.0.0.1:29092"},
                   topics=[], out_dir=str(tmp_path))


def test_the_cluster_a_failure_names(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    assert clusters_named(DISCONNECTED, plan) == ("secondary",)
    assert clusters_named("node 127.0.0.1:19092 and :29092) gone", plan) == \
        ("primary", "secondary")
    assert clusters_named(DROPPED, plan) == ()
    assert clusters_named("port 290921 is not 29092's", plan) == ()


def test_job_failures_are_told_apart(tmp_path: Path) -> None:
    plan, log = _plan(tmp_path), tmp_path / "job.log"
    lost = _failure({"error": {"kind": "failed", "message": "An error occurred while calling "
                               "o465.parquet.", "detail": DROPPED + DISCONNECTED}},
                    log, False, plan)
    assert isinstance(lost, GapJobLostKafka) and lost.clusters == ("secondary",)
    assert "lost Kafka cluster 'secondary' mid-job" in lost.message
    assert "TimeoutException" in lost.message and "o465.parquet" in lost.message
    failed = _failure({"error": {"kind": "failed", "message": "KeyError: 'topics'",
                                 "detail": "KeyError: 'topics' secret-jaas"}}, log, False, plan)
    assert type(failed) is GapJobFailed
    unnamed = _failure({"error": {"kind": "failed", "message": "o465.parquet",
                                  "detail": DROPPED}}, log, False, plan)
    assert isinstance(unnamed, GapJobLostKafka) and unnamed.clusters == ()
    assert "'primary' or 'secondary'" in unnamed.message


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _lost(cluster: str = "secondary") -> GapJobLostKafka:
    return GapJobLostKafka(f"The gap-analysis Spark job lost Kafka cluster '{cluster}' "
                           "mid-job (TimeoutException).", None, (cluster,))


def test_the_gap_job_runs_again_after_a_cluster_dropped() -> None:
    clock, lines, given = FakeClock(), [], []

    def job(left: float) -> str:
        given.append(left)
        clock.now += 20  # each run takes 20 s
        if len(given) < 3:
            raise _lost()
        return "result"

    assert run_job_with_retries(job, RetryPolicy(), 600, ("primary", "secondary"),
                                lines.append, sleep=clock.sleep, clock=clock) == "result"
    assert clock.slept == [1.0, 2.0]  # the policy's backoff
    assert given == [600, 579, 557]  # each run gets what is left of --timeout
    assert len(lines) == 2 and "lost Kafka cluster 'secondary'" in lines[0]
    assert "again in 1s (attempt 2 of 16)" in lines[0]


def test_a_job_that_keeps_losing_its_cluster_is_exit_4_naming_it() -> None:
    clock = FakeClock()

    def job(_: float) -> str:
        clock.now += 10
        raise _lost()

    with pytest.raises(Unreachable) as info:
        run_job_with_retries(job, RetryPolicy(attempts=3), 600, ("primary", "secondary"),
                             lambda _: None, sleep=clock.sleep, clock=clock)
    assert info.value.exit_status == ExitStatus.UNREACHABLE
    assert "lost Kafka ('secondary') 3 time(s)" in info.value.message
    assert "Bring 'secondary' back" in (info.value.hint or "")


def test_retries_stay_within_the_timeout() -> None:
    clock, runs = FakeClock(), []

    def job(left: float) -> str:
        runs.append((clock.now, left))
        clock.now += 50
        raise _lost()

    with pytest.raises(Unreachable):
        run_job_with_retries(job, RetryPolicy(), 120, ("primary", "secondary"),
                             lambda _: None, sleep=clock.sleep, clock=clock)
    # The third run gets the 17 s left; a fourth would start past 120 s.
    assert runs == [(0, 120), (51, 69), (103, 17)]


@pytest.mark.parametrize("error", [
    GapJobFailed("The gap-analysis Spark job failed: KeyError: 'topics'"),
    TimedOut("The gap-analysis Spark job did not finish in 30m"),
])
def test_other_failures_are_not_retried(error: Exception) -> None:
    calls = []

    def job(_: float) -> str:
        calls.append(1)
        raise error

    with pytest.raises(type(error)):
        run_job_with_retries(job, RetryPolicy(), 600, ("primary", "secondary"),
                             lambda _: None, sleep=lambda _: None)
    assert calls == [1]


def test_records_left_read_well() -> None:
    left = {("orders", 0): 1000, ("orders", 1): 0, ("orders", 2): 150, ("pay", 0): None}
    assert describe_left(left) == (
        "1,150 record(s) left in 3 partition(s): orders[0] 1,000, orders[2] 150, pay[0] ? "
        "(? = not countable: the copy holds writes of its own)")
    many = {("t", p): p + 1 for p in range(8)}
    assert describe_left(many).startswith("36 record(s) left in 8 partition(s): t[7] 8, t[6] 7")
    assert describe_left(many).endswith("t[3] 4 and 3 more")
    assert describe_left({("t", 0): 0}) == "no records left"
    error = catch_up_timed_out("Reverse replication", 1800, {("orders", 0): 12}, "Check it.")
    assert error.exit_status == ExitStatus.FAILURE
    assert error.message == ("Reverse replication did not catch up in 30m: 12 record(s) left "
                             "in 1 partition(s): orders[0] 12.")


@pytest.mark.parametrize(("seconds", "text"), [
    (0.5, "0.5s"), (45, "45s"), (60, "1m"), (750, "12m30s"), (1800, "30m"), (3600, "1h"),
    (7500, "2h05m")])
def test_durations_as_people_read_them(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_ticker_waits_a_little_then_ticks_every_ten_seconds() -> None:
    clock = FakeClock()
    ticker = Ticker(clock=clock)
    ticks = []
    for _ in range(30):
        ticks.append(ticker.due())
        clock.now += 1
    assert [i for i, t in enumerate(ticks) if t] == [2, 12, 22]


def test_spark_phases_become_lines() -> None:
    clock, lines = FakeClock(), []
    phases = PhaseLines(lines.append, Ticker(first_s=10, clock=clock))
    phases.update(description="Starting Spark", completed=0, total=None)
    phases.update(description="Comparing fingerprints", completed=0, total=None)
    phases.update(description="Comparing fingerprints (Spark tasks)", completed=3, total=40)
    clock.now = 11
    phases.update(description="Comparing fingerprints (Spark tasks)", completed=30, total=40)
    phases.update(description="Comparing fingerprints (Spark tasks)", completed=31, total=40)
    assert lines == ["Spark: Starting Spark", "Spark: Comparing fingerprints",
                     "Spark: Comparing fingerprints (Spark tasks): 30 of 40 task(s)"]

"""The gap job's runner (drctl/gap/runner.py). On a Spark cluster the driver checks that
it sees every record the executors wrote (an output directory that is not shared would
make reconcile miss records), and a plan notes it. A failed job is told apart: a Kafka
cluster that dropped mid-job (transient, and named) or another reason."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from drctl.config import SparkSettings
from drctl.errors import DrctlError, ExitStatus, TimedOut
from drctl.gap.plan import DIFF, GapPlan
from drctl.gap.result import RECORDS_DIR, GapResult
from drctl.gap.runner import (
    GapJobFailed,
    GapJobLostKafka,
    _failure,
    check_shared_output,
    clusters_named,
    kafka_dropped,
    note_shared_output,
)
from drctl.kafka.clients import ClusterClients, ClusterUnreachable
from drctl.retry import RetryPolicy


def result_with(tmp_path: Path, counted: int, files: list[int]) -> GapResult:
    records = tmp_path / RECORDS_DIR
    records.mkdir(parents=True)
    for i, rows in enumerate(files):
        pq.write_table(pa.table({"offset": list(range(rows))}),
                       records / f"part-{i:05d}.parquet")
    # The summary counts what this machine sees; Spark counted what its executors wrote.
    seen = sum(files)
    return GapResult(out_dir=tmp_path, kind="multiset", replication_kind="mirrormaker2",
                     check_order=False,
                     partitions=[{"unreplicated": seen - seen // 2},
                                 {"unreplicated": seen // 2}], records_written=counted)


def test_every_record_visible_to_the_driver_passes(tmp_path: Path) -> None:
    result = result_with(tmp_path, 7, [3, 4])
    assert result.records_on_disk() == 7
    check_shared_output(result, "spark://127.0.0.1:7077")


def test_records_missing_on_the_driver_name_the_output_directory(tmp_path: Path) -> None:
    result = result_with(tmp_path, 7, [3])  # an executor elsewhere wrote the other 4
    with pytest.raises(DrctlError) as err:
        check_shared_output(result, "spark://10.0.0.5:7077")
    assert "7 unreplicated" in str(err.value) and "holds 3" in str(err.value)
    assert "shared storage" in (err.value.hint or "")


def test_a_local_master_is_not_checked(tmp_path: Path) -> None:
    check_shared_output(result_with(tmp_path, 7, [3]), "local[2]")


def _plan_for(out_dir: str) -> GapPlan:
    return GapPlan(kind=DIFF, replication_kind="mirrormaker2", source_cluster="primary",
                   target_cluster="secondary", source_kafka={}, target_kafka={}, topics=[],
                   out_dir=out_dir)


def test_a_cluster_master_notes_shared_output_once() -> None:
    plan = _plan_for("/data/gap")
    told: list[str] = []
    note_shared_output(plan, "spark://10.0.0.1:7077", told.append)
    note_shared_output(plan, "spark://10.0.0.1:7077", told.append)
    assert len(plan.notes) == 1 and told == plan.notes
    assert "/data/gap" in plan.notes[0] and "driver reads" in plan.notes[0]


def test_local_masters_add_no_note() -> None:
    plan = _plan_for("/data/gap")
    for master in ("local", "local[2]", "local[*]"):
        note_shared_output(plan, master)
    assert plan.notes == []


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


class _Reader:
    """Spark's DataFrameReader as the job uses it: what options a Kafka read gets."""

    def __init__(self) -> None:
        self.given: dict[str, str] = {}

    def format(self, _name: str) -> _Reader:
        return self

    def options(self, **options: str) -> _Reader:
        self.given.update(options)
        return self

    def option(self, key: str, value: str) -> _Reader:
        self.given[key] = value
        return self

    def load(self) -> str:
        return "df"


def test_the_jobs_kafka_reads_wait_no_longer_than_the_deadline(tmp_path: Path) -> None:
    """Issue 51 #14: the job's Kafka client, left to its defaults, waits minutes for a broker
    that is gone (216 s at --deadline 30s): each read carries waits derived from --deadline
    (a cluster's own settings still win), and a very short deadline keeps a floor."""
    from drctl.gap.job import GapJob, JobEvents
    from drctl.gap.kafka_options import MIN_WAIT_S, deadline_options

    plan = _plan(tmp_path)
    plan.waits = deadline_options(40)
    plan.target_kafka["kafka.request.timeout.ms"] = "90000"  # the cluster's own
    reader = _Reader()
    spark = SimpleNamespace(read=reader, sparkContext=SimpleNamespace(defaultParallelism=2))
    job = GapJob(spark, GapPlan.from_json(plan.to_json()), JobEvents(None))  # type: ignore[arg-type]
    assert job.read(job.plan.target_kafka, {"orders": {0: (0, 10)}}) == "df"
    assert reader.given["kafkaConsumer.pollTimeoutMs"] == "40000"
    assert reader.given["kafka.default.api.timeout.ms"] == "40000"
    assert reader.given["fetchOffset.numRetries"] == "1"
    assert reader.given["kafka.request.timeout.ms"] == "90000"
    assert deadline_options(2)["kafkaConsumer.pollTimeoutMs"] == str(int(MIN_WAIT_S * 1000))


def test_a_cluster_lost_mid_job_interrupts_it_on_the_server_and_names_the_cluster(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51 #14: the secondary gone while the job runs on a Spark Connect server. The
    job's Kafka client would wait out its timeouts (here: a job that answers nothing for a
    minute, then fails as Spark does); instead the cluster, asked while the job runs, does
    not answer within --deadline: the job's operations are interrupted on the server, the
    command does not wait for the job to give up, and the error names the cluster (exit 4)."""
    from drctl.gap import job as job_module
    from drctl.gap import remote, runner

    interrupted = threading.Event()

    class Session:
        def interruptAll(self) -> list[str]:  # pyspark's name
            interrupted.set()
            return ["op-1"]

    @contextmanager
    def connected(_settings: SparkSettings, _deadline: float | None) -> Iterator[Session]:
        yield Session()

    released = threading.Event()
    gave_up: list[bool] = []

    def run_job(*_: Any) -> None:
        # A server blocked in the Kafka client's own timeouts, deaf to the interrupt.
        gave_up.append(not released.wait(60))
        raise RuntimeError("org.apache.kafka.common.errors.TimeoutException: Timeout of "
                           "60000ms expired before the position for partition orders-0 "
                           "could be determined")

    monkeypatch.setattr(remote, "connected", connected)
    monkeypatch.setattr(job_module, "run_job", run_job)
    monkeypatch.setattr(runner, "_INTERRUPT_GRACE_S", 0.5)
    gone = ClusterClients("secondary", {"bootstrap.servers": "127.0.0.1:1"})
    watch = runner.ClusterWatch([gone], RetryPolicy(initial_s=0.1, max_s=0.2, deadline_s=1.0),
                                interval_s=0.1)
    plan = _plan(tmp_path / "drctl-gap-made-by-the-planner")
    plan.temporary_out = True
    with pytest.raises(ClusterUnreachable) as lost:
        runner.run_gap_analysis(plan, SparkSettings(remote="sc://spark:15002"),
                                deadline_s=1.0, watch=watch)
    # drctl's own output directory goes with the job: nothing in it to read (one was left in
    # the temp directory per interrupted job).
    assert not Path(plan.out_dir).exists()
    assert gave_up == []  # the command went on without waiting for the job to give up
    released.set()
    assert interrupted.is_set()
    assert lost.value.cluster == "secondary"
    assert lost.value.exit_status == ExitStatus.UNREACHABLE and not lost.value.transient
    assert lost.value.message.startswith("cluster 'secondary' at 127.0.0.1:1 did not answer")
    assert "drctl interrupted the gap job on the Spark Connect sc://spark:15002 server " \
           "(1 operation stopped there)" in lost.value.message


def test_a_failed_jobs_temporary_directory_stays_while_the_error_names_its_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that failed for a reason drctl does not know writes Spark's trace to its log, and
    the error points there: that directory stays; a --report-dir the operator gave always
    stays."""
    from drctl.gap import job as job_module
    from drctl.gap import remote, runner

    @contextmanager
    def connected(_settings: SparkSettings, _deadline: float | None) -> Iterator[object]:
        yield SimpleNamespace(interruptAll=lambda: [])

    def run_job(*_: Any) -> None:
        raise RuntimeError("java.lang.OutOfMemoryError: Java heap space")

    monkeypatch.setattr(remote, "connected", connected)
    monkeypatch.setattr(job_module, "run_job", run_job)
    for temporary in (True, False):
        plan = _plan(tmp_path / f"out-{temporary}")
        plan.temporary_out = temporary
        with pytest.raises(GapJobFailed) as failed:
            runner.run_gap_analysis(plan, SparkSettings(remote="sc://spark:15002"))
        log = Path(plan.out_dir) / runner.WORK_DIR / "job.log"
        assert str(log) in failed.value.hint
        assert "OutOfMemoryError" in log.read_text()


@pytest.mark.parametrize("ending", ["lacks-kafka", "interrupted"])
def test_drctls_own_directory_goes_when_the_job_ends_at_its_first_query(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: str) -> None:
    """A server without Kafka's source (exit 2, said by the job's first query: no probe
    before it) or Ctrl-C / SIGTERM then: the temporary directory the planner made goes with
    the command (each suite run left two empty ones behind)."""
    from drctl.gap import job as job_module
    from drctl.gap import remote, runner
    from drctl.interrupts import Terminated, sigterm_interrupts

    stopped = threading.Event()

    @contextmanager
    def connected(_settings: SparkSettings, _deadline: float | None) -> Iterator[object]:
        yield SimpleNamespace(interruptAll=lambda: [stopped.set()], version="4.1.1")

    def run_job(*_: Any) -> None:  # its first query
        if ending == "interrupted":
            # SIGTERM, which drctl's processes turn into Terminated on the main thread
            # (drctl/interrupts.py) — whatever SIGINT's disposition in this test process.
            os.kill(os.getpid(), signal.SIGTERM)
            stopped.wait(30)
            raise RuntimeError("the operation was interrupted on the server")
        raise RuntimeError("[DATA_SOURCE_NOT_FOUND] Failed to find the data source: kafka.")

    monkeypatch.setattr(remote, "connected", connected)
    monkeypatch.setattr(job_module, "run_job", run_job)
    for temporary in (True, False):
        stopped.clear()
        plan = _plan(tmp_path / f"out-{temporary}")
        plan.temporary_out = temporary
        with pytest.raises(Terminated if ending == "interrupted"
                           else remote.ServerLacksKafka) as ended, sigterm_interrupts():
            runner.run_gap_analysis(plan, SparkSettings(remote="sc://spark:15002"))
        if ending == "lacks-kafka":  # exit 2, the jars of the server's version named
            assert ended.value.exit_status == ExitStatus.USAGE
            assert "spark-sql-kafka-0-10_2.13:4.1.1" in (ended.value.hint or "")
        assert stopped.is_set() or ending != "interrupted"  # the job interrupted on its server
        # A --report-dir the operator gave stays.
        assert Path(plan.out_dir).exists() is not temporary


def test_a_job_its_timeout_stopped_on_the_server_leaves_no_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server answers drctl's interrupt by failing the operation (OPERATION_CANCELED):
    that trace is drctl's own doing, not a log to keep — the timed-out job's temporary
    directory was left with it (the suite's timeout test, one per run)."""
    from drctl.gap import job as job_module
    from drctl.gap import remote, runner

    cancelled = threading.Event()

    @contextmanager
    def connected(_settings: SparkSettings, _deadline: float | None) -> Iterator[object]:
        yield SimpleNamespace(interruptAll=lambda: [cancelled.set()])

    def run_job(*_: Any) -> None:
        assert cancelled.wait(30)
        raise RuntimeError("[OPERATION_CANCELED] Operation has been canceled.")

    monkeypatch.setattr(remote, "connected", connected)
    monkeypatch.setattr(job_module, "run_job", run_job)
    plan = _plan(tmp_path / "drctl-gap-made-by-the-planner")
    plan.temporary_out = True
    with pytest.raises(TimedOut) as stopped:
        runner.run_gap_analysis(plan, SparkSettings(remote="sc://spark:15002"), timeout_s=0.2)
    assert "Spark log" not in (stopped.value.hint or "")
    assert not Path(plan.out_dir).exists()

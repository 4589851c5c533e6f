"""Runs the gap-analysis Spark job where the config says (`SparkSettings`) and follows it.

On a Spark Connect server (`spark.remote`): in this process, on a session of its own
(remote.py); the results come back over the session. Otherwise in a process of its own,
because a JVM's classpath is fixed when it starts: the connector jars must be there from the
first moment, whatever Spark session the calling process may already hold, and a finished job
gives all of its memory back. That job reports progress and its outcome as JSON lines on a
pipe; Spark's own output goes to a log file (or to stderr with --debug). The events, the
timeout and the failures read the same either way.

While it runs, its clusters are asked (`ClusterWatch`): one that does not answer within
--deadline stops the job — its operation interrupted on the server, or its process ended —
rather than the job waiting out its Kafka client's timeouts.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from drctl.config import SparkSettings
from drctl.errors import DrctlError, TimedOut
from drctl.gap.class_archive import class_archive
from drctl.gap.jars import (
    Connector,
    SparkConnectorMissing,
    first_resolution,
    keep_resolved,
    resolve_connector,
)
from drctl.gap.plan import GapPlan, SparkJobSettings
from drctl.gap.result import GapResult
from drctl.kafka.clients import ClusterClients, ClusterUnreachable, describe_with_retry
from drctl.progress import Notify
from drctl.retry import RetryPolicy
from drctl.timeparse import format_duration

WORK_DIR = ".work"
_PHASES = {"starting": "Starting Spark", "diff": "Comparing fingerprints",
           "duplicates": "Matching identical copies", "overlap": "Comparing the overlap",
           "compaction": "Finding records compacted away on the target",
           "payloads": "Reading unreplicated records", "check-order": "Joining post-failover "
           "writes", "write": "Writing results"}


class Progress(Protocol):
    def update(self, **fields: Any) -> None: ...


class GapJobFailed(DrctlError):
    """The Spark job ended without a result."""


class GapJobLostKafka(GapJobFailed):
    """The job failed because a cluster stopped answering mid-job (a Kafka timeout or
    disconnect): worth running again once the cluster is back. `clusters` names the ones the
    error text points at (empty when it names no broker address)."""

    transient = True

    def __init__(self, message: str, hint: str | None, clusters: tuple[str, ...]) -> None:
        super().__init__(message, hint)
        self.clusters = clusters


# What the Java Kafka client says when a broker goes away or does not answer in time; a bad
# plan, a missing jar, failed authentication or a record gone to retention say otherwise.
_KAFKA_DROPPED = re.compile(
    r"org\.apache\.kafka\.common\.errors\.(TimeoutException|DisconnectException|"
    r"NetworkException|NotLeaderOrFollowerException|LeaderNotAvailableException|"
    r"NotCoordinatorException|CoordinatorNotAvailableException)"
    r"|Timed out waiting for a node assignment"
    r"|could not be established\. (Broker|Node) may not be available"
    r"|Timeout of \d+ms expired before"
    r"|Connection to node -?\d+ .*(was disconnected|could not be established)")


def kafka_dropped(text: str) -> bool:
    """Whether a job's failure text says a Kafka cluster dropped or timed out mid-job."""
    return bool(_KAFKA_DROPPED.search(text))


def clusters_named(text: str, plan: GapPlan) -> tuple[str, ...]:
    """The plan's clusters whose bootstrap addresses (host:port, or :port) the text names."""
    named = []
    for cluster, options in ((plan.source_cluster, plan.source_kafka),
                             (plan.target_cluster, plan.target_kafka)):
        servers = [s.strip() for s in options.get("kafka.bootstrap.servers", "").split(",")]
        if any(s and (s in text or re.search(re.escape(":" + s.rpartition(":")[2]) + r"\b",
                                             text)) for s in servers):
            named.append(cluster)
    return tuple(named)


class ClusterWatch:
    """The job's clusters asked while it runs: each in turn, every `interval_s`, a metadata
    request retried within `policy`'s deadline (--deadline; each retry a line through
    `notify`). The first that does not answer within it stops the job (`stop`) and is
    `lost`: the job's own Kafka client would wait out its timeouts first, minutes, and its
    failure would name no cluster."""

    def __init__(self, clusters: Sequence[ClusterClients], policy: RetryPolicy,
                 notify: Notify = lambda _: None, interval_s: float | None = None) -> None:
        self.clusters = tuple(clusters)
        self.policy = policy
        self.notify = notify
        deadline = policy.deadline_s or 30.0
        self.interval_s = interval_s if interval_s is not None else min(5.0, max(1.0,
                                                                               deadline / 6))
        self.lost: ClusterUnreachable | None = None
        self._halt = threading.Event()

    def start(self, stop: Callable[[], None]) -> None:
        def watch() -> None:
            while not self._halt.wait(self.interval_s):
                for clients in self.clusters:
                    try:
                        describe_with_retry(clients, self.policy, notify=self.notify)
                    except ClusterUnreachable as exc:
                        if not self._halt.is_set():
                            self.lost = exc
                            stop()
                        return
                    except Exception:  # noqa: BLE001 - a refusal is the job's to meet and say
                        pass
                    if self._halt.is_set():
                        return

        threading.Thread(target=watch, name="drctl-gap-watch", daemon=True).start()

    def close(self) -> None:
        """No more asking (a request under way ends on its own, within the deadline)."""
        self._halt.set()

    def error(self, stopped: str) -> ClusterUnreachable:
        """The lost cluster as the job's outcome: named, and what became of the job."""
        lost = self.lost
        assert lost is not None
        error = ClusterUnreachable(lost.cluster, lost.address, lost.cause,
                                   f"{lost.message.rstrip('.')}; {stopped}.", lost.hint,
                                   detail=lost.detail)
        error.measured_as(lost)
        return error


# How long a job interrupted on a Spark Connect server is given to say so before the command
# goes on without it (the session is released on the way out, which ends what is left).
_INTERRUPT_GRACE_S = 10.0


def job_path() -> Path:
    """The job file, for spark-submit."""
    return Path(__file__).resolve().parent / "job.py"


def spark_submit_command(plan_file: Path, connector: Connector, master: str) -> list[str]:
    """The spark-submit line that runs the same job on a plan made with --plan-out."""
    import pyspark

    submit = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"
    cmd = [str(submit), "--master", master, "--conf", "spark.ui.showConsoleProgress=false"]
    if connector.jars:
        cmd += ["--jars", ",".join(connector.jars)]
    if connector.packages:
        cmd += ["--packages", ",".join(connector.packages)]
    for key, value in connector.spark_conf().items():
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, str(job_path()), str(plan_file)]


def note_shared_output(plan: GapPlan, master: str, notify: Notify = lambda _: None) -> None:
    """On a cluster, executors write the results: the plan notes (and the summary) say that
    the output directory must be storage the driver reads too."""
    if master.startswith("local"):
        return
    note = (f"Spark master {master}: executors write the results to {plan.out_dir}, which "
            "must be storage every executor writes and the driver reads (the same disk, NFS, "
            "HDFS, S3).")
    if note not in plan.notes:
        plan.notes.append(note)
        notify(note)


def check_shared_output(result: GapResult, master: str) -> None:
    """On a cluster, the records the executors wrote must be the ones the driver reads: what
    Spark counted as they wrote them against the Parquet files the driver sees. A mismatch is
    an output directory that is not shared; reconciling from it would miss records."""
    if master.startswith("local"):
        return
    counted = result.records_written if result.records_written is not None \
        else result.totals["unreplicated"]
    here = result.records_on_disk()
    if here != counted:
        raise DrctlError(
            f"The gap job on {master} found {counted} unreplicated record(s), but "
            f"{result.records_path} holds {here} on this machine: the output directory is not "
            "storage the executors and the driver share.",
            "Give --report-dir a directory on shared storage (NFS, or HDFS/S3 mounted on the "
            "driver and every executor), or run with a local master.")


def run_gap_analysis(plan: GapPlan, spark: SparkSettings, progress: Progress | None = None,
                     *, debug: bool = False, notify: Notify = lambda _: None,
                     connector: Connector | None = None,
                     timeout_s: float | None = None,
                     deadline_s: float | None = None,
                     watch: ClusterWatch | None = None) -> GapResult:
    """Run the job on `plan` and load what it found. The plan's out_dir receives
    `records/` (Parquet) and `summary.json`; a temporary out_dir (`plan_gap_analysis` without
    one) is removed by `GapResult.cleanup()`.

    A job still running after `timeout_s` is stopped (its process: SIGTERM, then SIGKILL
    after 15 s; on a Spark Connect server: interrupted) and is a TimedOut error naming the
    phase it was in. A Spark Connect server that does not answer within `deadline_s` is
    SparkServerUnreachable (exit 4). A cluster `watch` finds gone stops the job the same way
    and is ClusterUnreachable naming it (exit 4)."""
    if spark.remote:
        return _run_job(plan, spark, progress, debug=debug, notify=notify,
                        connector=Connector(source="server"), timeout_s=timeout_s,
                        deadline_s=deadline_s, watch=watch)
    connector = connector or resolve_connector(spark, notify=notify)
    with first_resolution(connector) as resolved:
        return _run_job(plan, spark, progress, debug=debug, notify=notify, connector=resolved,
                        timeout_s=timeout_s, watch=watch)


def _run_job(plan: GapPlan, spark: SparkSettings, progress: Progress | None, *, debug: bool,
             notify: Notify, connector: Connector, timeout_s: float | None,
             deadline_s: float | None = None, watch: ClusterWatch | None = None) -> GapResult:
    out = Path(plan.out_dir)
    work = out / WORK_DIR
    work.mkdir(parents=True, exist_ok=True)
    followed = _Followed(log=work / "job.log")
    try:
        if spark.remote:
            _follow_in_session(followed, plan, spark, progress, timeout_s, deadline_s, watch)
        else:
            _follow_own_process(followed, plan, spark, connector, progress, debug, timeout_s,
                                notify, watch)
    except BaseException:
        # The server lost, Ctrl-C or SIGTERM mid-job: no error points at the directory, so
        # drctl's own goes (two were left per suite run), a log of the interrupted job too.
        if plan.temporary_out:
            shutil.rmtree(plan.out_dir, ignore_errors=True)
        raise
    finally:
        if watch is not None:
            watch.close()
    try:
        _raise_unless_succeeded(followed, plan, debug, timeout_s, watch)
    except DrctlError:
        _drop_temporary_output(plan, followed.log)
        raise
    if not spark.remote:
        keep_resolved(connector)
    if not debug:
        shutil.rmtree(work, ignore_errors=True)
    result = GapResult.load(out, plan=plan.public(), connector=connector.describe(),
                            temporary=plan.temporary_out)
    try:
        if not spark.remote:  # the records came over the session
            check_shared_output(result, spark.master)
    except DrctlError:
        result.cleanup()  # drctl's own temporary directory; a --report-dir the operator gave stays
        raise
    return result


def _raise_unless_succeeded(followed: _Followed, plan: GapPlan, debug: bool,
                            timeout_s: float | None, watch: ClusterWatch | None) -> None:
    if watch is not None and watch.lost is not None and not followed.succeeded:
        raise watch.error(followed.stopped or "drctl stopped the gap job")
    outcome, log = followed.outcome, followed.log
    if followed.timed_out:
        where = f"; the Spark log: {log}" if log.exists() else ""
        raise TimedOut(
            f"The gap-analysis Spark job did not finish in {format_duration(timeout_s or 0)} "
            f"(it was {outcome.get('phase', 'starting')}); drctl stopped it.",
            "Run it again with a longer --timeout; give Spark more cores or memory "
            f"(spark.master, spark.conf) for a large gap{where}.")
    if not followed.succeeded:
        raise _failure(outcome, log, debug, plan)


def _drop_temporary_output(plan: GapPlan, log: Path) -> None:
    """A failed job's output directory, when drctl made it (no --report-dir) and it holds no
    log for the error to point at: one was left in the temp directory per timed-out or
    interrupted job on a Spark Connect server."""
    if plan.temporary_out and not log.exists():
        shutil.rmtree(plan.out_dir, ignore_errors=True)


@dataclass
class _Followed:
    """What following a job's events found."""

    log: Path  # Spark's own output
    outcome: dict[str, Any] = field(default_factory=dict)
    timed_out: bool = False
    exited_ok: bool = True  # the job's own process, when it had one
    stopped: str | None = None  # what drctl did to a job whose cluster was lost, in words

    @property
    def succeeded(self) -> bool:
        return "summary" in self.outcome and self.exited_ok and not self.timed_out


def _expiring(timeout_s: float | None, stop: Callable[[], None]) -> tuple[threading.Event,
                                                                          threading.Timer | None]:
    """A timer that stops the job after `timeout_s`, and the flag it sets when it fires."""
    fired = threading.Event()

    def expire() -> None:
        fired.set()
        stop()

    timer = threading.Timer(timeout_s, expire) if timeout_s else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    return fired, timer


def _follow_in_session(followed: _Followed, plan: GapPlan, spark: SparkSettings,
                       progress: Progress | None, timeout_s: float | None,
                       deadline_s: float | None, watch: ClusterWatch | None = None) -> None:
    """The job in this process, on a Spark Connect session of its own; a timeout interrupts
    what the session runs, and what it would run next does not start. A server that does not
    answer (at the start, or mid-job) is SparkServerUnreachable; one without the Kafka
    source, ServerLacksKafka.

    The job runs in a thread of its own, which this one follows: a lost cluster (`watch`), a
    timeout or Ctrl-C interrupts its operations on the server, and the command goes on after
    a short grace whether or not the server has answered the interrupt yet (the session is
    released on the way out)."""
    from drctl.gap import remote

    try:
        _in_session(followed, plan, spark, progress, timeout_s, deadline_s, watch)
    finally:
        if not followed.succeeded:
            remote.forget_session(spark)  # a command's next job starts a session afresh


def _in_session(followed: _Followed, plan: GapPlan, spark: SparkSettings,
                progress: Progress | None, timeout_s: float | None,
                deadline_s: float | None, watch: ClusterWatch | None) -> None:
    from drctl.gap import remote

    remote.client_imported()  # before job.py imports pyspark
    from drctl.gap import job

    with remote.connected(spark, deadline_s) as session:
        interrupted: list[str] = []
        asked = threading.Event()

        def interrupt() -> None:
            if not asked.is_set():
                asked.set()
                try:
                    interrupted.extend(session.interruptAll())
                except Exception:  # noqa: BLE001 - a server gone has nothing left to stop
                    pass

        fired, timer = _expiring(timeout_s, interrupt)
        lost = threading.Event()

        def follow(event: dict[str, Any]) -> None:
            if fired.is_set() or lost.is_set():
                raise TimedOut("the gap job was stopped")
            _follow(event, progress, followed.outcome)

        failure: list[BaseException] = []

        def work() -> None:
            try:
                given = dict(spark.conf)
                summary = job.run_job(plan, job.JobEvents(follow),
                                      lambda p: job.plan_session(session, p, given))
                follow({"event": "done", "summary": str(summary)})
            except TimedOut as exc:
                if not (fired.is_set() or lost.is_set()):
                    failure.append(exc)
            except DrctlError as exc:
                failure.append(exc)
            except Exception as exc:  # noqa: BLE001 - classified here, as its own process does
                if lost.is_set() or fired.is_set():
                    # What drctl's own interrupt caused: the lost cluster or the timeout is
                    # the outcome, and the server's "cancelled" trace no log to keep.
                    return
                if remote.server_gone(exc):
                    failure.append(remote.unreachable(spark, exc, deadline_s or 0))
                    return
                if remote.connector_missing(exc):
                    # Said by the job's first query: no probe of the server before it (two
                    # round trips of every job).
                    failure.append(remote.lacks_kafka_in(session, spark))
                    return
                with contextlib.suppress(OSError):  # the command removed it on Ctrl-C
                    followed.log.write_text("".join(traceback.format_exception(exc)))
                followed.outcome["error"] = job.error_event(exc)

        def cluster_lost() -> None:
            lost.set()
            interrupt()

        if watch is not None:
            watch.start(cluster_lost)
        worker = threading.Thread(target=work, name="drctl-gap-job", daemon=True)
        try:
            worker.start()  # in the try: Ctrl-C right after it still interrupts the job
            while worker.is_alive() and not lost.is_set():
                worker.join(0.2)
        finally:
            if worker.is_alive():  # a lost cluster, or Ctrl-C here
                interrupt()
                worker.join(_INTERRUPT_GRACE_S)
            if timer is not None:
                timer.cancel()
            followed.timed_out = fired.is_set() and "summary" not in followed.outcome
        if lost.is_set():
            ops = len(interrupted)
            followed.stopped = (f"drctl interrupted the gap job on the {spark.where} server "
                                f"({ops} operation{'s' if ops != 1 else ''} stopped there)")
        elif failure:
            raise failure[0]


def _follow_own_process(followed: _Followed, plan: GapPlan, spark: SparkSettings,
                        connector: Connector, progress: Progress | None, debug: bool,
                        timeout_s: float | None, notify: Notify,
                        watch: ClusterWatch | None = None) -> None:
    """The job in a process of its own, which ends with it."""
    note_shared_output(plan, spark.master, notify)
    archive = class_archive()
    if archive is not None and archive.recording is not None:
        notify("Recording the classes Spark loads, so later gap jobs start sooner (this "
               "first run on the machine takes longer)")
    plan.spark = SparkJobSettings(master=spark.master, jars=list(connector.jars),
                                  packages=list(connector.packages),
                                  conf={**connector.spark_conf(), **spark.conf},
                                  debug=debug,
                                  driver_java_options=archive.java_options() if archive else [])
    plan_file = plan.write(Path(plan.out_dir) / WORK_DIR / "plan.json")
    try:
        _follow_job_process(followed, plan_file, progress, debug, timeout_s, watch)
    finally:
        plan_file.unlink(missing_ok=True)  # it holds the clusters' credentials
        plan.spark = None
        if archive is not None:
            if followed.succeeded:
                archive.keep()
            archive.discard()


def _follow_job_process(followed: _Followed, plan_file: Path, progress: Progress | None,
                        debug: bool, timeout_s: float | None,
                        watch: ClusterWatch | None = None) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"):
        env.pop(name, None)  # a JVM of its own, whatever the calling process set
    read_fd, write_fd = os.pipe()
    try:
        with followed.log.open("w") as log_fh:
            sink = None if debug else log_fh
            proc = subprocess.Popen(
                [sys.executable, "-m", "drctl.gap.job", str(plan_file),
                 "--events-fd", str(write_fd)],
                pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=sink, stderr=sink,
                env=env)
            os.close(write_fd)
            write_fd = -1
            # Stopping the job ends its event stream, which ends the loop below.
            fired, timer = _expiring(timeout_s, lambda: _stop(proc))
            if watch is not None:
                followed.stopped = "drctl stopped the gap job's process"
                watch.start(lambda: _stop(proc))
            try:
                with os.fdopen(read_fd, "r") as events:
                    read_fd = -1
                    for line in events:
                        _follow(json.loads(line), progress, followed.outcome)
                proc.wait()
            finally:
                if timer is not None:
                    timer.cancel()
                _stop(proc)
                # A job that finished as the timer fired keeps its result.
                followed.timed_out = fired.is_set() and "summary" not in followed.outcome
                followed.exited_ok = proc.returncode == 0
    finally:
        for fd in (read_fd, write_fd):
            if fd >= 0:
                os.close(fd)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End the job if it still runs: SIGTERM lets Spark stop its executors; SIGKILL after 15 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _follow(event: dict[str, Any], progress: Progress | None,
            outcome: dict[str, Any]) -> None:
    kind = event.get("event")
    if kind == "phase":
        outcome["phase"] = _PHASES.get(event["phase"], event["phase"]).lower()
    if kind == "phase" and progress is not None:
        progress.update(description=_PHASES.get(event["phase"], event["phase"]),
                        completed=0, total=None)
    elif kind == "progress" and progress is not None:
        label = _PHASES.get(event["phase"], event["phase"])
        progress.update(description=f"{label} (Spark tasks)", completed=event["done"],
                        total=event["total"])
    elif kind == "done":
        outcome["summary"] = event["summary"]
    elif kind == "error":
        outcome["error"] = event


def _failure(outcome: dict[str, Any], log: Path, debug: bool, plan: GapPlan) -> DrctlError:
    error = outcome.get("error") or {}
    where = "its output is above" if debug else f"read {log}"
    if error.get("kind") == "connector-missing":
        return SparkConnectorMissing(
            "Spark could not load its Kafka connector ('Failed to find data source: kafka').",
            "Check the jars in the config's spark.jars / spark.packages match the installed "
            f"PySpark, or remove them to let drctl fetch the connector ({where}).")
    message = error.get("message") or "the job exited without a result"
    detail = error.get("detail") or message
    if kafka_dropped(detail):
        clusters = clusters_named(detail, plan)
        cause = _KAFKA_DROPPED.search(detail)
        who = " and ".join(f"'{c}'" for c in clusters) or (
            f"'{plan.source_cluster}' or '{plan.target_cluster}'")
        return GapJobLostKafka(
            f"The gap-analysis Spark job lost Kafka cluster {who} mid-job "
            f"({cause.group(0) if cause else 'timeout'}): {plan_redact(message, plan)}",
            f"Check that {who} is up; see the Spark log ({where}).", clusters)
    return GapJobFailed(f"The gap-analysis Spark job failed: {plan_redact(message, plan)}",
                        f"See the Spark log ({where}); --debug shows it as it runs.")


def plan_redact(text: str, plan: GapPlan) -> str:
    """Client settings never reach a message, even when an exception quotes them."""
    for side in (plan.source_kafka, plan.target_kafka):
        for key, value in side.items():
            if value and key != "kafka.bootstrap.servers" and value in text:
                text = text.replace(value, "****")
    return text

"""Issue 12, item 6: the secondary's broker (which holds the Connect worker's internal topics)
restarts after an unplanned failover. The MirrorMaker 2 connectors drctl stopped come back
without confirming STOPPED; failback re-issues the stop, says what is wrong, and completes with
nothing lost and nothing twice. Also when the broker dies during failback: waited for within
--deadline (exit 4 when it stays down), and a run again continues exactly. Issue 51: the same
for a failover whose target's broker restarts right after the stop of replication."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import TopicPartition

from drctl.config import load_config
from drctl.kafka.clients import ClusterClients, describe
from drctl.kafka.groups import committed_offsets
from drctl.kafka.offsets import watermarks
from drctl.lab.workload import commit_offsets, create_topics
from drctl.replication.control import ConnectorActivity, ConnectorReading
from drctl.state import marker_store
from tests.conftest import RunningLab, only_on_kafka_3
from tests.lab.support import assert_waited_out, keyed, produce, wait_replicated
from tests.lab.test_failback import outage, restore_lab
from tests.lab.test_failover import run_json, scoped_config
from tests.lab.test_reprotect import _everything, _sides

pytestmark = [pytest.mark.lab, pytest.mark.spark]
__all__ = ["restore_lab"]  # the fixture, used by name


@pytest.fixture
def restore_worker(lab: RunningLab, restore_lab: None) -> Iterator[None]:
    """Both brokers up, then a fresh Connect worker (clears connectors a restart stranded)
    before `restore_lab` restarts the forward flow for the other tests. The brokers first: a
    worker started while its source is down leaves MirrorMaker 2's source connector hung in
    its own start and stop, and the next test would begin on that."""
    yield
    for cluster in ("primary", "secondary"):
        if not lab.lab.process(cluster).is_running():
            lab.lab.heal(cluster)
    if lab.lab.process("connect").is_running():
        lab.lab.fail("replication")
    lab.lab.heal("replication")


def restart_secondary(lab: RunningLab, asking: ClusterClients | None = None,
                      down_s: float = 15) -> None:
    """SIGKILL the secondary's broker and start it again; down longer than the Connect
    worker's session timeout (10 s), so the worker loses its group. `asking` keeps asking
    it meanwhile, as a command retrying would."""
    lab.lab.fail("secondary")
    end = time.monotonic() + down_s
    while time.monotonic() < end:
        if asking is not None:
            with contextlib.suppress(Exception):
                describe(asking, timeout_s=1)
        time.sleep(1)
    lab.lab.heal("secondary")


def forward_readings(lab: RunningLab, settle_s: float = 60) -> dict[str, ConnectorReading]:
    """The forward connectors once Connect answers for all of them again and the reading no
    longer changes for 10 s (or after `settle_s`)."""
    client = lab.lab.connect_client(lab.state)
    names = lab.lab.flow(lab.state).connector_names()
    end = time.monotonic() + settle_s
    last: dict[str, ConnectorReading] | None = None
    stable_since = time.monotonic()
    while True:
        try:
            now = {n: ConnectorReading.read(client, n) for n in names.values()}
        except Exception:  # noqa: BLE001 - the worker is still rejoining its Kafka
            now = None
        if now != last:
            last, stable_since = now, time.monotonic()
        if last is not None and (time.monotonic() - stable_since > 10
                                 or time.monotonic() > end):
            return last
        time.sleep(1)


def assert_end_state(lab: RunningLab, o: dict) -> None:
    """Every safe gap record once on the secondary (copy-safe), conflicts and unkeyed ones
    not copied; every post-failover write once on the primary, every original once."""
    # The session's own clients, on purpose: their admin client cached leader epochs from
    # before the restart, and ListOffsets must refresh them (not stay FENCED_LEADER_EPOCH).
    # Each side's every topic of the records: prefixed, the secondary's mirror and failover
    # topic, the primary's own topic and the reverse copies.
    on_primary, on_secondary = _sides(lab, o["topic"])
    secondary = [r.value for r in _everything(lab.secondary, on_secondary)]
    for _, v in o["safe"]:
        assert secondary.count(v) == 1, v
    for _, v in o["conflict"] + o["unkeyed"]:
        assert secondary.count(v) == 0, v
    primary = [r.value for r in _everything(lab.primary, on_primary)]
    for _, v in o["post"]:
        assert primary.count(v) == 1, v
    for _, v in o["base"] + o["safe"] + o["conflict"] + o["unkeyed"]:
        assert primary.count(v) == 1, v
    assert len(primary) == len(o["base"]) + 14 + len(o["post"])


def test_secondary_restart_before_failback(lab: RunningLab, ns: str, tmp_path: Path,
                                           restore_worker: None) -> None:
    o = outage(lab, ns, tmp_path)
    # Group requests through clients that lived through the restart answer at once: an admin
    # client that knew the group's coordinator before (librdkafka#5511) was replaced.
    group, watcher = f"{ns}-post", lab.lab.clients(lab.state, "secondary")
    before = committed_offsets(watcher, [group], deadline_s=10)[group]
    restart_secondary(lab, watcher)
    describe(watcher, timeout_s=10)  # a command's preflight asks the cluster first
    assert committed_offsets(watcher, [group], deadline_s=10)[group] == before
    readings = forward_readings(lab)
    source = readings[lab.lab.flow(lab.state).connector_names()["source"]]
    print("after the restart:", {n: r.describe() for n, r in readings.items()})
    # Measured once on Kafka 4.x: the stopped connectors came back UNASSIGNED with no tasks
    # (stranded); other runs restore STOPPED. Never copying.
    stranded = source.activity is ConnectorActivity.IDLE
    assert stranded or source.activity is ConnectorActivity.STOPPED, source
    assert not source.tasks
    assert all(r.activity is not ConnectorActivity.COPYING for r in readings.values())

    # A failover re-run re-issues the stop when it no longer holds, and only then.
    status, out = run_json("--config", str(o["config"]), "failover", "--yes", "--groups",
                           f"{ns}-.*", "--deadline", "2")
    assert status == 0, out
    stop_step = out["marker"]["steps"]["stop-replication"]["result"]
    if stranded:
        assert source.name in stop_step["reissued"]["found"]
        assert source.name in stop_step["reissued"]["now"]["restopped"]
    else:
        assert "reissued" not in stop_step

    status, out = run_json("--config", str(o["config"]), "failback", "--check-order",
                           "--reconcile", "copy-safe", "--yes", "--groups", f"{ns}-.*")
    assert status == 0, out
    preflight = out["marker"]["steps"].get("failback:preflight")
    print("failback preflight:", preflight)
    if stranded:
        assert preflight["result"]["forward"]["copying"] == []
    assert out["reconcile"]["copy_safe"]["copied"] == len(o["safe"])
    assert_end_state(lab, o)


def failback_meanwhile(argv: list[str], at: tuple[str, ...],
                       then: Callable[[], None]) -> tuple[int, str, str, float]:
    """Failback as a process; `then()` runs once a stderr line says one of `at`. Its exit
    status, stdout, stderr, and the seconds from `then()` starting to the exit."""
    out_file = tempfile.TemporaryFile("w+")
    run = subprocess.Popen(argv, stdout=out_file, stderr=subprocess.PIPE, text=True,
                           start_new_session=True, env=os.environ.copy())
    reached = threading.Event()
    err_lines: list[str] = []

    def watch() -> None:
        assert run.stderr is not None
        for line in run.stderr:
            err_lines.append(line)
            if any(a in line for a in at):
                reached.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        assert reached.wait(300), "".join(err_lines)[-3000:]
        acted = time.monotonic()
        then()
        run.wait(900)
        took = time.monotonic() - acted
    finally:
        if run.poll() is None:
            print("failback still running; its stderr:", "".join(err_lines)[-5000:])
            os.killpg(run.pid, signal.SIGKILL)  # the operator gives up on it
            run.wait(30)
    watcher.join(10)
    out_file.seek(0)
    out = out_file.read()
    out_file.close()
    print("failback exit:", run.returncode, f"{took:.0f} s after the kill;",
          "".join(err_lines)[-2500:])
    return run.returncode, out, "".join(err_lines), took


@only_on_kafka_3()
def test_secondary_dropping_mid_failback_is_waited_for_within_the_deadline(
        lab: RunningLab, ns: str, tmp_path: Path, restore_worker: None) -> None:
    """Issue 38: the secondary SIGKILLed mid-failback and left down — failback used to retry
    for its --timeout (30 min). Within --deadline, then exit 4 saying what to do; the run
    after the broker is back continues and ends exact; and a broker back within --deadline
    (killed again in that run) lets the same run finish on its own. On Kafka 3.9, both
    namings. On Kafka 4.x the same moments are asserted by
    test_secondary_lost_during_the_gap_job_interrupts_it_on_the_server (left down: exit 4
    naming the cluster, the run again exact) and the drill's fault rounds (a broker killed
    mid-failback and started again: ridden out, every record once)."""
    o = outage(lab, ns, tmp_path)

    def failback(deadline_s: float) -> list[str]:
        return [sys.executable, "-m", "drctl", "--config", str(o["config"]), "-o", "json",
                "failback", "--check-order", "--reconcile", "copy-safe", "--yes", "--groups",
                f"{ns}-.*", "--deadline", f"{deadline_s:g}s"]

    # Both clusters answer, the procedure is under way: the step before the Spark job reads
    # both clusters.
    gap_step = ("Proving where replication stopped", "Gap analysis")

    deadline_s = 20
    status, out, err, _ = failback_meanwhile(failback(deadline_s), gap_step,
                                             lambda: lab.lab.fail("secondary"))
    assert status == 4, err[-3000:]
    # Waited for the secondary within the deadline, as drctl measured it.
    assert_waited_out(json.loads(out), deadline_s)
    assert "Failback stopped: cluster 'secondary' at 127.0.0.1:" in err
    assert "Bring 'secondary' back, then run it again: it continues after the last step " \
           "recorded." in err
    assert "ipv4#" not in err  # the cause in words; librdkafka's text is --debug's
    cfg = load_config(o["config"])
    assert "failback:reconcile" not in marker_store(cfg, None).open_markers()[0].steps

    lab.lab.heal("secondary")

    def restart() -> None:
        lab.lab.fail("secondary")
        time.sleep(3)
        started = time.monotonic()
        lab.lab.heal("secondary")  # a broker's start: 10 s, a minute on a loaded machine
        print(f"the secondary was back {time.monotonic() - started:.0f} s after its start")

    # A deadline that a broker's restart fits in (an operator's choice, as in a planned
    # maintenance window).
    status, out, err, _ = failback_meanwhile(failback(180), gap_step, restart)
    assert status == 0, err[-3000:]
    shown = json.loads(out)
    assert shown["phase"] == "failed-back"
    assert shown["reconcile"]["copy_safe"]["copied"] == len(o["safe"])
    readings = forward_readings(lab)
    print("after the restarts:", {n: r.describe() for n, r in readings.items()})
    assert all(r.activity is not ConnectorActivity.COPYING for r in readings.values())
    assert_end_state(lab, o)


def test_connect_dropping_mid_failback_ends_it_within_the_deadline_naming_connect(
        lab: RunningLab, ns: str, tmp_path: Path, restore_worker: None) -> None:
    """Issue 43: Connect is not a Kafka cluster. Its worker SIGKILLed mid-failback: the
    first step that needs it waits for it within --deadline, then failback ends (exit 4)
    naming Connect — it used to run failback again up to 16 times, each waiting the
    deadline, while both Kafka clusters answered (about 25 minutes at --deadline 30s)."""
    o = outage(lab, ns, tmp_path)
    deadline_s = 20
    argv = [sys.executable, "-m", "drctl", "--config", str(o["config"]), "-o", "json",
            "failback", "--check-order", "--reconcile", "copy-safe", "--yes", "--groups",
            f"{ns}-.*", "--deadline", f"{deadline_s}s"]
    status, out, err, _ = failback_meanwhile(
        argv, ("Proving where replication stopped", "Gap analysis"),
        lambda: lab.lab.fail("replication"))
    assert status == 4, err[-3000:]
    # Waited for the worker within the deadline, as drctl measured it.
    assert_waited_out(json.loads(out), deadline_s)
    assert "Failback stopped: Kafka Connect at http" in err, err[-3000:]
    assert "Bring the Kafka Connect worker (http" in err
    assert "Running failback again" not in err


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP): its state in /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] in "Tt"


def test_the_targets_broker_restarting_mid_failover_is_waited_for_within_the_deadline(
        lab: RunningLab, ns: str, tmp_path: Path, restore_worker: None) -> None:
    """Issue 51, finding 9: the failover point read the target's topics with one raw metadata
    request per topic, after replication was stopped, and failover was never run again on a
    dropped cluster: the target's broker SIGKILLed right after the stop was recorded, and
    started again only once failover had waited for it, ended the failover (exit 4, no
    cluster named). Now the failover waits for it within --deadline and ends exact (or exit 4
    naming it), and a run again is exact."""
    topic = f"{ns}-acct"
    create_topics(lab.primary, (topic,), 3)
    produce(lab.primary, topic, keyed("acct", 300, 3))
    wait_replicated(lab, topic, 300)
    ends = {tp[1]: end for tp, (_, end) in
            watermarks(lab.secondary.admin(), [(topic, p) for p in range(3)]).items()}
    group = f"{ns}-pre"
    commit_offsets(lab.primary, group, [TopicPartition(topic, p, ends[p] // 2)
                                        for p in range(3)])
    config = scoped_config(lab, ns, tmp_path)
    argv = [sys.executable, "-m", "drctl", "--config", str(config), "-o", "json", "failover",
            "--yes", "--groups", f"{ns}-.*", "--deadline", "300s"]
    out_file = tempfile.TemporaryFile("w+")
    run = subprocess.Popen(argv, stdout=out_file, stderr=subprocess.PIPE, text=True,
                           start_new_session=True,
                           env={**os.environ, "DRCTL_PAUSE_AT": "stop-replication"})
    err_lines: list[str] = []
    retrying = threading.Event()

    def watch() -> None:
        assert run.stderr is not None
        for line in run.stderr:
            err_lines.append(line)
            if "secondary (127.0.0.1:" in line and "retrying in" in line:
                retrying.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        # Stopped right after the stop of replication was recorded.
        while run.poll() is None and not _stopped(run.pid):
            time.sleep(0.2)
        assert run.poll() is None, "".join(err_lines)[-3000:]
        lab.lab.fail("secondary")
        os.kill(run.pid, signal.SIGCONT)
        # The broker stays down until failover says it waits for it (or gave up on it).
        while run.poll() is None and not retrying.is_set():
            time.sleep(0.2)
        lab.lab.heal("secondary")
        run.wait(900)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(30)
    watcher.join(10)
    out_file.seek(0)
    doc = json.loads(out_file.read())
    err = "".join(err_lines)
    print("failover exit:", run.returncode, err[-3000:])
    if run.returncode == 4:
        message = doc["error"]["message"]
        assert "'secondary'" in message, message
        assert "Bring 'secondary' back, then run it again" in doc["error"]["hint"]
    else:
        assert run.returncode == 0, err[-3000:]
    assert retrying.is_set(), err[-3000:]  # it waited for the broker, naming it

    status, again = run_json("--config", str(config), "failover", "--yes", "--groups",
                             f"{ns}-.*")
    assert status == 0, again
    marker = again["marker"]
    assert "failover" in marker["steps"] and marker["replication_stop"] == "stopped"
    assert {int(p): o for p, o in marker["failover_point"][topic].items()} == ends
    moved = marker["groups"][group]
    assert moved["applied"] and moved["confidence"] == ["exact"], moved
    on_target = committed_offsets(lab.secondary, [group], deadline_s=30)[group]
    assert on_target == {(topic, p): ends[p] // 2 for p in range(3)}


def test_secondary_lost_during_the_gap_job_interrupts_it_on_the_server(
        lab: RunningLab, ns: str, tmp_path: Path, restore_worker: None) -> None:
    """Issue 51 #14: the secondary's broker SIGKILLed while the gap job runs on the lab's
    Spark Connect server, and left down. The job's Kafka client used to wait out its own
    timeouts (failback exit 4 after 216 s at --deadline 30s); now the cluster, asked while the
    job runs, is missed within --deadline: the job's operations are interrupted on the server,
    failback ends exit 4 naming the cluster. The server stays usable: the run again once the
    broker is back runs its gap job there and ends exact."""
    o = outage(lab, ns, tmp_path)
    deadline_s = 20
    # An estate's own Java client timeouts (minutes), as a `java:` map sets them: only drctl's
    # watch can end the job within --deadline. Left to the waits drctl derives from the
    # deadline (gap/kafka_options.py), the job's Kafka client and the watch give up together
    # and either may say so first (a fresh-clone CI run met the client's TimeoutException).
    settings = yaml.safe_load(o["config"].read_text())
    for name in ("primary", "secondary"):
        settings["clusters"][name]["java"] = {"request.timeout.ms": "600000",
                                              "default.api.timeout.ms": "600000"}
    o["config"].write_text(yaml.safe_dump(settings))

    def failback(deadline: float) -> list[str]:
        return [sys.executable, "-m", "drctl", "--config", str(o["config"]), "-o", "json",
                "failback", "--check-order", "--reconcile", "copy-safe", "--yes", "--groups",
                f"{ns}-.*", "--deadline", f"{deadline:g}s"]

    # Said as the job starts on the server (ops/one_way/gap_step.py): the broker dies before the job
    # can have read from it, and long before the job could finish.
    status, out, err, _ = failback_meanwhile(failback(deadline_s), ("Gap analysis (Spark",),
                                             lambda: lab.lab.fail("secondary"))
    assert status == 4, err[-3000:]
    # drctl's watch missed the cluster within the deadline (as it measured the wait), not
    # the Java client's own timeouts (216 s).
    assert_waited_out(json.loads(out), deadline_s)
    assert "Failback stopped: cluster 'secondary' at 127.0.0.1:" in err, err[-3000:]
    assert "drctl interrupted the gap job on the Spark Connect sc://" in err, err[-3000:]
    assert "Bring 'secondary' back, then run it again: it continues after the last step " \
           "recorded." in err
    assert "ipv4#" not in err  # the cause in words; librdkafka's text is --debug's
    cfg = load_config(o["config"])
    assert "failback:reconcile" not in marker_store(cfg, None).open_markers()[0].steps

    lab.lab.heal("secondary")
    status, out, err, _ = failback_meanwhile(failback(60), ("Gap analysis (Spark",),
                                             lambda: None)
    assert status == 0, err[-3000:]
    shown = json.loads(out)
    assert shown["phase"] == "failed-back"
    assert shown["reconcile"]["copy_safe"]["copied"] == len(o["safe"])
    assert_end_state(lab, o)

"""failover against the real lab: planned switchover, outage, crash and re-run, bad situations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import NewPartitions

from drctl.cli.app import main
from drctl.config import load_config
from drctl.kafka.groups import committed_offsets
from drctl.kafka.records import read_all
from drctl.lab.workload import WorkloadSpec, commit_offsets, create_topics, run_workload
from drctl.state import FailoverMarker, MarkerStore, marker_store
from tests.conftest import RunningLab
from tests.lab.support import (
    die_mid_transaction,
    keyed,
    produce,
    run_json,
    stop_forward_quietly,
    wait_replicated,
)
from tests.lab.test_translate import busy_on_target

pytestmark = pytest.mark.lab


def scoped_config(lab: RunningLab, ns: str, tmp_path: Path, **replication: object) -> Path:
    """The lab's config, limited to this test's topics, with its own marker store and its
    own snapshot topic: the inventory there is one per flow, and a test before on the same lab
    (1,000 groups, most of them never read) left its own for a failover with the source down
    to name as left behind (exit 3; seen with five workers, where the order changed)."""
    raw = yaml.safe_load(lab.config_file.read_text())
    raw["replication"]["topics"] = {"include": [f"{ns}-.*"]}
    raw["replication"].update(replication)
    raw["state"] = {"dir": str(tmp_path / "state"), "topic": f"_drctl_state_{ns}",
                    "snapshots_topic": f"_drctl_snapshots_{ns}"}
    raw["retry"] = {"initial_s": 0.2, "max_s": 1}
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "drctl.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
def restore_replication(lab: RunningLab) -> Iterator[None]:
    """Failover stops the shared lab's connectors; start them again afterwards."""
    yield
    if not lab.lab.process("primary").is_running():
        lab.lab.heal("primary")
    lab.lab.up(ports=lab.state.ports, names_kept=lab.names_kept)



def test_planned_switchover_with_running_producers(lab: RunningLab, ns: str, tmp_path: Path,
                                                   restore_replication: None) -> None:
    topic = f"{ns}-sw"
    result = run_workload(lab.primary, WorkloadSpec(topics=(topic,), partitions=4, records=2000,
                                                    groups=()))
    # A planned switchover is of topics MirrorMaker 2 mirrors already: wait until it found
    # this new one (preflight rightly refuses a topic missing on the secondary).
    wait_replicated(lab, topic, 2000)
    groups = [f"{ns}-g{i:02d}" for i in range(50)]
    ends = {r.partition: r.offset + 1 for r in result.records}
    for i, g in enumerate(groups):
        commit_offsets(lab.primary, g, [TopicPartition(topic, p, e * i // 50)
                                        for p, e in ends.items()])
    # Producers are still writing when the operator starts the switchover...
    stop = threading.Event()

    def produce() -> None:
        producer = lab.primary.producer()
        i = 0
        while not stop.is_set():
            producer.produce(topic, key=f"live-{i}".encode(), value=b"x", partition=i % 4)
            producer.poll(0)
            i += 1
            time.sleep(0.005)
        producer.flush(30)

    writer = threading.Thread(target=produce)
    writer.start()
    threading.Timer(3.0, stop.set).start()  # ...and stops them a moment later.
    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--planned", "--yes",
                           "--groups", f"{ns}-.*")
    writer.join()
    assert status == 0, out
    marker = out["marker"]
    assert marker["replication_stop"] == "stopped"
    assert set(marker["steps"]) == {"catch-up", "stop-replication", "failover-point",
                                    "translate-offsets", "failover"}
    assert set(marker["groups"]) == set(groups)
    assert all(g["applied"] and g["confidence"] == ["exact"] for g in marker["groups"].values())
    report = json.loads(Path(out["reports"][2]).read_text())
    assert report["unreplicated"] and all(r["estimate"] == 0 for r in report["unreplicated"])
    assert Path(out["reports"][0]).read_text().startswith("# Failover report")
    # The marker is durable in both places.
    cfg = load_config(config)
    local = marker_store(cfg, None).get(marker["incident"])
    remote = [m for m in marker_store(cfg, "secondary").load_all()
              if m.incident == marker["incident"]]
    assert local.steps.keys() == remote[0].steps.keys()


def test_unplanned_failover_with_primary_down(lab: RunningLab, ns: str, tmp_path: Path,
                                              restore_replication: None) -> None:
    topic = f"{ns}-out"
    run_workload(lab.primary, WorkloadSpec(topics=(topic,), partitions=2, records=600,
                                           groups=(f"{ns}-g1=40%", f"{ns}-g2=80%")))
    wait_replicated(lab, topic, 600 - 10)
    # Failover with the source down moves what MM2 checkpointed: wait for both groups.
    for group, commits in committed_offsets(lab.primary,
                                            [f"{ns}-g1", f"{ns}-g2"]).items():
        lab.wait_checkpointed(group, topic, {p: o for (t, p), o in commits.items()
                                             if t == topic})
    lab.lab.fail("primary")
    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--yes", "--groups",
                           f"{ns}-.*", "--deadline", "2")
    assert status == 0, out
    marker = out["marker"]
    assert marker["source_end"] is None and not marker["planned"]
    assert out["preflight"]["source_reachable"] is False
    assert out["translation"]["method"] == "auto"
    parts = [p for g in out["translation"]["groups"] for p in g["partitions"]]
    assert parts and {p["method"] for p in parts} == {"checkpoint"}
    assert any("unreachable" in n for n in out["translation"]["notes"])
    md = Path(out["reports"][0]).read_text()
    assert "gap is unknown" in md


def test_a_group_already_consuming_on_the_target_is_left_behind_and_named_first(
        lab: RunningLab, ns: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        restore_replication: None) -> None:
    """Consumers started early on the target: failover does not move their group (it would
    rewind them under their feet), names it as left behind with what to do — on stderr and at
    the top of the report — and exits 3, not 0 with the skip only in the JSON."""
    with busy_on_target(lab, ns, f"{ns}-early"):
        config = scoped_config(lab, ns, tmp_path)
        capsys.readouterr()
        status, out = run_json("--config", str(config), "failover", "--yes", "--groups",
                               f"{ns}-.*")
    err = capsys.readouterr().err
    assert status == 3, out
    groups = {g["group"]: g for g in out["translation"]["groups"]}
    assert groups[f"{ns}-idle"]["applied"] is True
    assert groups[f"{ns}-busy"]["applied"] is False
    [left] = out["marker"]["left_behind"]["groups"]
    assert left["group"] == f"{ns}-busy" and "active" in left["reason"], left
    assert f"Left behind: Group {ns}-busy: not moved" in err
    report = Path(out["reports"][0]).read_text()
    assert "## Left behind" in report and f"Group {ns}-busy" in report
    # The report opens with it: before the groups' positions.
    assert report.index("## Left behind") < report.index(f"{ns}-idle")


def test_crash_mid_failover_then_rerun_finishes_without_reapplying(
        lab: RunningLab, ns: str, tmp_path: Path, restore_replication: None) -> None:
    topic = f"{ns}-crash"
    run_workload(lab.primary, WorkloadSpec(topics=(topic,), partitions=2, records=300,
                                           groups=(f"{ns}-g=50%",)))
    wait_replicated(lab, topic, 300)
    # Replication stops; the primary then gets records stamped 40 s ago and later: the gap,
    # whose oldest record the RPO measured at the failover point must name.
    stop_forward_quietly(lab, topic)
    gap_ms = int(time.time() * 1000) - 40_000
    producer = lab.primary.producer()
    for i in range(4):
        producer.produce(topic, key=f"gap-{i}".encode(), value=b"gap", partition=i % 2,
                         timestamp=gap_ms + i * 1000)
    producer.flush(30)
    # A group ahead of replication: it read the gap on the primary. A failover places it at
    # the failover point F — also on a re-run, after post-failover writes moved the end.
    ahead = f"{ns}-ahead"
    commit_offsets(lab.primary, ahead, [TopicPartition(topic, p, _end(lab.primary, topic, p))
                                        for p in (0, 1)])
    config = scoped_config(lab, ns, tmp_path)
    env = {**os.environ, "DRCTL_CRASH_AT": "failover-point"}
    crashed = subprocess.run([sys.executable, "-m", "drctl", "--config", str(config), "failover",
                              "--yes", "--groups", f"{ns}-.*"], env=env, capture_output=True,
                             timeout=300)
    assert crashed.returncode == -9
    cfg = load_config(config)
    [marker] = marker_store(cfg, "secondary").open_markers()
    assert set(marker.steps) == {"stop-replication", "failover-point"}
    before = {k: v.at for k, v in marker.steps.items()}
    # Post-failover writes land before the re-run: the failover point must not move.
    producer = lab.secondary.producer()
    producer.produce(lab.mirror(topic), value=b"after failover", partition=0)
    producer.flush(30)
    rerun = subprocess.run([sys.executable, "-m", "drctl", "--config", str(config), "-o",
                            "json", "failover", "--yes", "--groups", f"{ns}-.*"],
                           capture_output=True, timeout=300, text=True)
    assert rerun.returncode == 0, rerun.stderr
    out = json.loads(rerun.stdout)
    assert out["resumed"] is True and out["incident"] == marker.incident
    done = out["marker"]
    assert {k: v["at"] for k, v in done["steps"].items() if k in before} == before
    assert done["failover_point"] == {t: {str(p): o for p, o in parts.items()}
                                      for t, parts in marker.failover_point.items()}
    assert done["groups"][f"{ns}-g"]["applied"] is True
    placed = done["groups"][ahead]["positions"][lab.mirror(topic)]
    assert {int(p): v["offset"] for p, v in placed.items()} == {
        int(p): o for p, o in done["failover_point"][lab.mirror(topic)].items()}, placed
    on_target = committed_offsets(lab.secondary, [ahead])[ahead]
    assert {p: on_target[(lab.mirror(topic), p)] for p in (0, 1)} == {
        int(p): o for p, o in done["failover_point"][lab.mirror(topic)].items()}
    # RPO: from the oldest record the target lacked at F, to F.
    rpo = out["rpo"]
    assert (rpo["method"], rpo["since_ms"]) == ("records", gap_ms), rpo
    assert rpo["seconds"] == round((done["failover_time_ms"] - gap_ms) / 1000, 3) >= 40
    assert rpo["text"].startswith("records after ") and "were not replicated" in rpo["text"]
    # RTO by phase: this run's phases, and the crashed run kept once, not counted twice.
    timing = out["timing"]
    [crashed_run] = timing["earlier_runs"]
    assert crashed_run["phases"][-1]["phase"] == "failover-point" and not crashed_run["ended"]
    this_run = [p["phase"] for p in timing["this_run"]["phases"]]
    assert this_run[-2:] == ["translate-offsets", "report"] and "failover-point" not in this_run
    assert len(done["timings"]) == 2 and timing["runs"] == 2 and timing["finished"]
    assert timing["busy_s"] == pytest.approx(crashed_run["total_s"]
                                             + timing["this_run"]["total_s"], abs=0.002)


def _end(clients: Any, topic: str, partition: int) -> int:
    from drctl.kafka.offsets import watermarks

    return watermarks(clients.admin(), [(topic, partition)])[(topic, partition)][1]


def test_bad_situations_are_clear(lab: RunningLab, ns: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str],
                                  restore_replication: None) -> None:
    topic = f"{ns}-bad"
    create_topics(lab.primary, (topic,), 3)
    lab.wait_mirror_topic(topic)
    # With replication down, the source grows a topic and gets a new one the target lacks:
    # preflight fails, exit 3. (A running MM2 would sync partition counts.)
    lab.lab.fail("replication")
    admin = lab.primary.admin()
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(30)
    create_topics(lab.primary, (f"{ns}-new",), 1)
    config = scoped_config(lab, ns, tmp_path)
    assert main(["--config", str(config), "failover", "--planned", "--yes"]) == 3
    err = capsys.readouterr().err
    assert "Preflight failed" in err and "has 3 partitions" in err
    assert f"{lab.mirror(ns + '-new')} is missing" in err
    lab.lab.heal("replication")

    # A connector that does not exist: a clear error, exit 1, nothing stopped.
    config = scoped_config(lab, f"{ns}-none", tmp_path,
                           connect={"url": f"http://127.0.0.1:{lab.state.ports.connect}",
                                    "source_connector": "no-such-connector"})
    assert main(["--config", str(config), "failover", "--yes"]) == 1
    assert "no-such-connector" in capsys.readouterr().err

    # Connect unreachable: the stop is recorded as pending and said loudly.
    config = scoped_config(lab, f"{ns}-pend", tmp_path / "p",
                           connect={"url": "http://127.0.0.1:9", "source_connector": "x"})
    status, out = run_json("--config", str(config), "failover", "--yes", "--deadline", "2")
    assert status == 0
    assert out["marker"]["replication_stop"] == "pending"

    # Non-interactive without --yes: nothing happens, exit 5.
    assert main(["--config", str(config), "failover"]) == 5


def test_a_marker_of_ten_thousand_groups_is_kept_on_the_state_topic(lab: RunningLab, ns: str,
                                                                    tmp_path: Path) -> None:
    """Production size: every position of 10,000 groups x 16 partitions in one marker (far
    over Kafka's 1 MB default) is written to the state topic and read back whole."""
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    marker.groups = {f"{ns}-g{g:05d}": {"positions": {f"{ns}-t{g % 7}": {
        str(p): 1_000_000 + g * 16 + p for p in range(16)}}} for g in range(10_000)}
    assert len(marker.to_json()) > 3_000_000
    MarkerStore(tmp_path / "writer", f"{ns}-state", lab.secondary).save(marker)
    # A host with an empty state dir reads it from the topic alone.
    [read] = MarkerStore(tmp_path / "reader", f"{ns}-state", lab.secondary).load_all()
    assert read.groups == marker.groups and read.incident == marker.incident


def test_an_old_or_doubled_open_incident_is_refused_never_continued(
        lab: RunningLab, ns: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A new outage never continues an incident left open: one opened longer ago than
    --continue-within, or two open for one flow, are exit 2 naming them, and nothing moves:
    replication keeps running, no marker is written."""
    topic = f"{ns}-stale"
    create_topics(lab.primary, (topic,), 1)
    lab.wait_mirror_topic(topic)
    config = scoped_config(lab, ns, tmp_path)
    cfg = load_config(config)
    rep = cfg.require_replication()
    store = marker_store(cfg, rep.target)
    old = FailoverMarker.new(rep.source, rep.target, rep.kind, planned=False)
    old.created_at = (datetime.now(UTC) - timedelta(hours=13)).isoformat(timespec="seconds")
    old.record("stop-replication")
    store.save(old)
    assert main(["--config", str(config), "failover", "--yes"]) == 2
    err = capsys.readouterr().err
    assert f"Incident {old.incident}" in err and "--new-incident" in err, err

    recent = FailoverMarker.new(rep.source, rep.target, rep.kind, planned=False)
    store.save(recent)
    assert main(["--config", str(config), "failover", "--yes"]) == 2
    err = capsys.readouterr().err
    assert "2 open incidents" in err and old.incident in err and recent.incident in err, err

    fresh = marker_store(load_config(config), rep.target)
    assert sorted(m.incident for m in fresh.load_all()) == sorted([old.incident,
                                                                  recent.incident])
    client = lab.lab.connect_client(lab.state)
    name = lab.lab.flow(lab.state).connector_names()["source"]
    assert client.connector_state(name)[0] == "RUNNING"


def test_a_switchover_waits_for_an_open_transaction_and_names_it(
        any_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    """A producer died mid-transaction (its timeout: 10 minutes); plain records followed it
    on the same partition. MirrorMaker 2 reads committed: it copies nothing from the
    transaction on. A planned switchover names the partition, its last stable offset and
    the abort command, refuses after --timeout, and completes once the transaction is
    aborted — with every plain record on the target."""
    lab = any_lab
    topic = f"{ns}-txn"
    create_topics(lab.primary, (topic,), 2)
    produce(lab.primary, topic, keyed("k", 20))
    wait_replicated(lab, topic, 20)
    txn_id = f"{topic}-dead"
    # Dies mid-transaction: partition 0's last stable offset stays at 10.
    die_mid_transaction(lab.primary.bootstrap, txn_id, topic, 4)
    switchover: subprocess.Popen[str] | None = None
    try:
        produce(lab.primary, topic, [(0, f"after-{i}".encode(), b"v") for i in range(5)])
        config = scoped_config(lab, ns, tmp_path)
        abort = (f"kafka-transactions.sh --bootstrap-server {lab.primary.bootstrap} abort "
                 f"--topic {topic} --partition 0 --start-offset 10")
        status, out = run_json("--config", str(config), "failover", "--planned", "--yes",
                               "--groups", f"{ns}-.*", "--timeout", "3s")
        assert status == 3, out
        message = out["error"]["message"]
        assert f"{topic}-0 (last stable offset 10, end 19: 9 offset(s) held back)" in message
        assert abort in out["error"]["hint"]
        switchover = subprocess.Popen(
            [sys.executable, "-m", "drctl", "--config", str(config), "--output", "json",
             "failover", "--planned", "--yes", "--groups", f"{ns}-.*", "--timeout", "120s"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert switchover.stderr is not None
        said = []
        for line in switchover.stderr:
            said.append(line)
            if "open transaction" in line:
                break
        assert f"{topic}-0 (last stable offset 10" in said[-1] and abort in said[-1], said
        # The operator aborts it (a producer with the same transactional.id fences the dead
        # one and aborts what it left open).
        Producer({"bootstrap.servers": lab.primary.bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 600000}).init_transactions(30)
        stdout, stderr = switchover.communicate(timeout=240)
        assert switchover.returncode == 0, "".join(said) + stderr
        result = json.loads(stdout)
        assert result["rpo"]["seconds"] == 0.0, result["rpo"]
        copied = sorted(r.key or b"" for r in read_all(lab.secondary, lab.mirror(topic)))
        assert copied == sorted([f"after-{i}".encode() for i in range(5)]
                                + [f"k-{i}".encode() for i in range(20)])
    finally:
        if switchover is not None and switchover.poll() is None:
            switchover.kill()
            switchover.wait()
        Producer({"bootstrap.servers": lab.primary.bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 600000}).init_transactions(30)
        lab.lab.up(ports=lab.state.ports, names_kept=lab.names_kept)

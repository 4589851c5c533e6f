"""`drctl check` against the real lab: a clean flow is ready (exit 0); each thing that would
make a failover go wrong is found with exit 3 and its fix; RPO in seconds matches the
timestamps the test wrote."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from drctl.kafka.checkpoints import read_offset_syncs
from drctl.lab.workload import commit_offsets, create_topics
from drctl.replication.connect import wait_connector_state
from tests.conftest import RunningLab
from tests.lab.support import (
    checkpointed_topic,
    die_mid_transaction,
    keyed,
    produce,
    run_json,
    stop_forward_quietly,
    wait_count,
    wait_replicated,
)
from tests.lab.test_failover import scoped_config

pytestmark = pytest.mark.lab


def own_config(lab: RunningLab, ns: str, tmp_path: Path) -> Path:
    """The lab's config for this test alone: its topics and groups, its own state and
    snapshot topics (another test's guard rounds are not this test's guard)."""
    path = scoped_config(lab, ns, tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["groups"] = {"include": [f"{ns}-.*", f"console-consumer-{ns}-.*"]}
    raw["state"]["snapshots_topic"] = f"_drctl_snapshots_{ns}"
    path.write_text(yaml.safe_dump(raw))
    return path


def check(config: Path, *args: str) -> tuple[int, dict[str, Any]]:
    return run_json("--config", str(config), "check", *args)


def check_metrics(config: Path, *args: str) -> dict[str, float]:
    """`drctl check --metrics`: the exposition parsed into {series: value}."""
    import contextlib
    import io

    from drctl.cli.app import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["--config", str(config), "check", "--metrics", *args])
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in buf.getvalue().splitlines() if line and not line.startswith("#")}


def risks(out: dict[str, Any], area: str) -> list[dict[str, str]]:
    return [f for f in out["findings"] if f["area"] == area and f["severity"] == "risk"]


def set_topic_config(clients: Any, topic: str, key: str, value: str | None) -> None:
    """Set (or with None delete) one topic config, incrementally."""
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(key, value or "", incremental_operation=op)])
    for future in clients.admin().incremental_alter_configs([resource]).values():
        future.result(30)


@pytest.fixture
def ready_topic(lab: RunningLab, ns: str, tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """A mirrored topic with a group checkpointed on it: what a clean check looks at."""
    topic, group = checkpointed_topic(lab, ns, "ready")
    yield topic, group, own_config(lab, ns, tmp_path)


def test_a_clean_flow_is_ready_and_each_config_drift_is_a_risk_with_its_fix(
        lab: RunningLab, ready_topic: tuple[str, str, Path]) -> None:
    topic, group, config = ready_topic
    status, out = check(config, "--topics", topic, "--groups", group)
    assert status == 0, out["findings"]
    assert out["verdict"] == "ready" and out["risks"] == 0 and out["blind"] == 0
    assert out["checked"]["topics"] == 1 and out["checked"]["positions"] == 2
    assert out["rpo"]["seconds"] == 0.0 and out["rpo"]["behind"] == 0

    # MirrorMaker 2's default config filter syncs neither of these.
    set_topic_config(lab.primary, topic, "min.insync.replicas", "2")
    set_topic_config(lab.secondary, lab.mirror(topic), "message.timestamp.type", "LogAppendTime")
    try:
        status, out = check(config, "--topics", topic, "--groups", group)
        assert status == 3
        found = {f["difference"].split(" ")[0]: f for f in risks(out, "topics")}
        assert set(found) == {"min.insync.replicas", "message.timestamp.type"}, found
        assert found["min.insync.replicas"]["difference"] == \
            "min.insync.replicas 2 on primary, 1 on secondary"
        assert found["message.timestamp.type"]["fix"].endswith(
            f"--entity-name {lab.mirror(topic)} --add-config message.timestamp.type=CreateTime")
        # The same, as metrics for alerting.
        series = check_metrics(config, "--topics", topic, "--groups", group)
        flow = 'flow="primary->secondary"'
        assert series[f'drctl_readiness_findings{{{flow},kind="topics"}}'] == 2
        assert series[f'drctl_readiness_findings{{{flow},kind="acls"}}'] == 0
        assert series[f'drctl_replication_lag_records{{{flow},topic="{topic}"}}'] == 0
    finally:
        set_topic_config(lab.primary, topic, "min.insync.replicas", None)
        set_topic_config(lab.secondary, lab.mirror(topic), "message.timestamp.type", None)
    assert check(config, "--topics", topic, "--groups", group)[0] == 0


def test_a_group_mirrormaker_never_checkpoints_is_named(lab: RunningLab,
                                                        ready_topic: tuple[str, str, Path]) -> None:
    topic, checkpointed, config = ready_topic
    # MirrorMaker 2's default groups.exclude leaves console-consumer-* groups out.
    group = f"console-consumer-{checkpointed}"
    commit_offsets(lab.primary, group, [TopicPartition(topic, 0, 5)])
    # A group committed after it is checkpointed: MirrorMaker 2 had its chance.
    later = f"{checkpointed}-later"
    commit_offsets(lab.primary, later, [TopicPartition(topic, p, 10) for p in (0, 1)])
    lab.wait_checkpointed(later, topic, {0: 10, 1: 10})
    status, out = check(config, "--topics", topic, "--groups", f"{group}|{checkpointed}|{later}")
    assert status == 3
    named = risks(out, "positions")
    assert [f["object"] for f in named] == [f"group {group}"], named
    assert f"{topic}-0" in named[0]["difference"] and "auto.offset.reset" in named[0]["risk"]


def test_a_hanging_transaction_is_found_and_failover_refuses_to_take_f_behind_it(
        lab: RunningLab, ready_topic: tuple[str, str, Path], tmp_path: Any) -> None:
    topic, group, config = ready_topic
    txn_id = f"{topic}-txn"
    # Dies mid-transaction: the partition's last stable offset is pinned.
    die_mid_transaction(lab.primary.bootstrap, txn_id, topic, 3)
    try:
        time.sleep(1.5)
        status, out = check(config, "--topics", topic, "--groups", group, "--transaction-age", "1s")
        assert status == 3
        [found] = risks(out, "transactions")
        assert found["object"] == f"partition {topic}-0 on primary"
        # The transaction's first record is where the replicated 10 records of partition 0 end.
        assert "last stable offset 10 held below the end 13" in found["difference"]
        assert f"abort --topic {topic} --partition 0 --start-offset 10" in found["fix"]
        # Failover's preflight refuses to take a failover point behind it; nothing changes.
        status, out = run_json("--config", str(config), "failover", "--dry-run",
                               "--new-incident", "--transaction-age", "1s",
                               "--report-dir", str(tmp_path))
        assert status == 3, out
        assert "hanging transaction" in out["error"]["message"]
        assert f"{topic}-0 on primary" in out["error"]["message"]
    finally:
        # A new producer with the same transactional.id aborts what the dead one left open.
        Producer({"bootstrap.servers": lab.primary.bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 600000}).init_transactions(30)
    assert check(config, "--topics", topic, "--groups", group, "--transaction-age", "1s")[0] == 0


def test_rpo_in_seconds_is_the_age_of_the_oldest_record_the_target_lacks(
        lab: RunningLab, ready_topic: tuple[str, str, Path]) -> None:
    topic, group, config = ready_topic
    connect = lab.lab.connect_client(lab.state)
    source = lab.lab.flow(lab.state).connector_names()["source"]
    connect.pause(source)
    try:
        end = time.monotonic() + 60
        while connect.connector_state(source) != ("PAUSED", ["PAUSED"]):  # nothing copies
            assert time.monotonic() < end, connect.connector_state(source)
            time.sleep(0.2)
        first_ms = int(time.time() * 1000)
        produce(lab.primary, topic, [(0, b"late-1", b"v", first_ms, []),
                                     (1, b"late-2", b"v", first_ms + 500, [])])
        time.sleep(3)
        before = time.time()
        status, out = check(config, "--topics", topic, "--groups", group)
        after = time.time()
        rpo = out["rpo"]
        assert rpo["behind"] == 2, rpo
        assert rpo["method"] == "records", rpo
        by_part = {p["partition"]: p["seconds"] for p in rpo["lagging"]}
        # Each partition's RPO is the age of its own oldest missing record, as written.
        assert before - first_ms / 1000 - 0.2 <= by_part[0] <= after - first_ms / 1000 + 0.2
        assert abs((by_part[0] - by_part[1]) - 0.5) <= 0.3, by_part
        assert rpo["seconds"] == by_part[0] >= 3
    finally:
        connect.resume(source)
    wait_replicated(lab, topic, 22)


def test_records_mirrormaker_was_moved_past_are_lost_not_rpo_0(
        any_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    """MirrorMaker 2's stored position of partition 0 is moved past 5 records it never
    copied (connector stopped, Connect's offsets API, resumed). Its own offsets say "caught
    up"; the target says otherwise: the RPO is not 0, `status` not protected, and `check`
    names the partition — before new records are copied after them, and after."""
    lab = any_lab
    topic = f"{ns}-moved"
    create_topics(lab.primary, (topic,), 2)
    produce(lab.primary, topic, keyed("k", 20))
    wait_replicated(lab, topic, 20)
    config = own_config(lab, ns, tmp_path)
    connect = lab.lab.connect_client(lab.state)
    source = lab.lab.flow(lab.state).connector_names()["source"]
    stop_forward_quietly(lab, topic)
    try:
        written_ms = int(time.time() * 1000)
        produce(lab.primary, topic, [(p, f"never-{p}-{i}".encode(), b"v", written_ms, [])
                                     for p in (0, 1) for i in range(5)])
        # Partition 0's position set to its end (Connect stores the last copied offset).
        connect.alter_offsets(source, [{"partition": {"cluster": "primary", "topic": topic,
                                                      "partition": 0},
                                        "offset": {"offset": 14}}])
    finally:
        connect.resume(source)
        wait_connector_state(connect, source, "RUNNING")
    wait_count(lab.secondary, lab.mirror(topic), 25)  # partition 1 copies its 5
    stored = {(e["partition"]["topic"], e["partition"]["partition"]): e["offset"]["offset"]
              for e in connect.offsets(source)["offsets"]}
    assert stored[(topic, 0)] == 14  # what the replicator claims: everything copied

    def named_and_not_0(expected_behind: int) -> None:
        status, out = check(config, "--topics", topic, "--groups", "^$")
        assert status == 3, out
        [found] = risks(out, "rpo")
        assert found["object"] == f"partition {topic}-0 on primary", found
        assert "lacks 5 record(s) from offset 10" in found["difference"], found
        assert f"/connectors/{source}/offsets" in found["fix"] and '"offset":9' in found["fix"]
        rpo = out["rpo"]
        assert rpo["seconds"] is not None and rpo["seconds"] > 0, rpo
        assert rpo["behind"] == expected_behind, rpo
        assert [(p["topic"], p["partition"]) for p in rpo["lagging"]] == [(topic, 0)], rpo
        status, st = run_json("--config", str(config), "status")
        protection = st["replication"]["protection"]
        assert status == 3 and protection["state"] == "exposed", protection
        assert protection["lost"] == [f"{topic}-0: 5 record(s) passed over from offset 10"]

    # Nothing copied after the skipped records: the target's tail tells.
    named_and_not_0(5)
    # New records copied after them: MirrorMaker 2's copy points skip 5 source offsets.
    produce(lab.primary, topic, [(0, f"after-{i}".encode(), b"v") for i in range(3)])
    wait_count(lab.secondary, lab.mirror(topic), 28)
    syncs = "mm2-offset-syncs.secondary.internal"
    end = time.monotonic() + 30
    while not any(s.upstream_offset >= 15 for s in
                  read_offset_syncs(lab.primary, syncs).get((topic, 0), [])):
        assert time.monotonic() < end, "MirrorMaker 2 wrote no offset sync after the skip"
        time.sleep(0.5)
    named_and_not_0(5)

"""The DR cycle (issue 24): fail over, fail back, return to protection — twice in a row, with
topic names kept and prefixed.

After each return every record the primary holds is on the secondary exactly once (content per
partition, replication headers aside), every command exits 0, `drctl status` says exposed
after failback and protected after the return, and the group's positions are exact in both
failovers (guard's snapshots with the primary gone).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import TopicPartition

from drctl.config import load_config
from drctl.fingerprint import kept_headers
from drctl.kafka.records import Record, read_all
from drctl.lab.workload import commit_offsets, create_topics
from drctl.replication.connect import ConnectorActivity, ConnectorReading
from drctl.replication.mirrormaker2 import INCIDENT_KEY, reverse_connector_name
from drctl.state import marker_store
from tests.conftest import RunningLab
from tests.lab.support import fresh_clients, produce
from tests.lab.test_failback import restore
from tests.lab.test_failover import run_json, scoped_config

pytestmark = [pytest.mark.lab, pytest.mark.spark]
PARTS = 2
BASE, GAP, POST, NEW = 200, 10, 20, 30


@pytest.fixture
def cycled(any_lab: RunningLab) -> Iterator[RunningLab]:
    yield any_lab
    restore(any_lab)


def _send(clients: Any, topic: str, prefix: str, per_partition: int) -> None:
    # Keys never repeat across writes: every gap record is safe to copy.
    produce(clients, topic, [(p, f"{prefix}-{p}-{i}".encode(), f"{prefix}-v-{p}-{i}".encode(), 0,
                              [("trace", f"{prefix}{i}".encode())])
                             for p in range(PARTS) for i in range(per_partition)])


def _content(records: list[Record]) -> Counter[tuple[Any, ...]]:
    return Counter((r.partition, r.key, r.value, r.timestamp_ms,
                    tuple(kept_headers(r.headers))) for r in records)


def _everything(clients: Any, topics: list[str]) -> list[Record]:
    out: list[Record] = []
    names = clients.admin().list_topics(timeout=10).topics
    for t in topics:
        if t in names:
            out += read_all(clients, t)
    return out


def _wait_same(lab: RunningLab, topic: str, deadline_s: float = 90) -> None:
    """Until the secondary holds every record of the primary, once (the same multiset)."""
    primary_topics = [topic, f"secondary.{topic}"]  # the second: reverse copies, prefixed
    secondary_topics = [lab.mirror(topic)] + ([] if lab.names_kept else [topic])
    end = time.monotonic() + deadline_s
    while True:
        want = _content(_everything(lab.lab.clients(lab.state, "primary"), primary_topics))
        got = _content(_everything(lab.lab.clients(lab.state, "secondary"), secondary_topics))
        if want == got:
            return
        if time.monotonic() > end:
            raise AssertionError(f"missing on the secondary: {sum((want - got).values())}, "
                                 f"there twice or extra: {sum((got - want).values())}")
        time.sleep(1)


def _status(config: Path) -> tuple[int, dict[str, Any]]:
    return run_json("--config", str(config), "status", "--deadline", "10s")


def _break_replication_quietly(lab: RunningLab) -> None:
    """MirrorMaker 2's source connector stops (and nothing else)."""
    client = lab.lab.connect_client(lab.state)
    source_connector = lab.lab.flow(lab.state).connector_names()["source"]
    time.sleep(2.5)  # Connect flushes the source offsets of what was copied
    client.stop(source_connector)
    # Stopped for good: the connector STOPPED and no task left that could still copy.
    end = time.monotonic() + 60
    while ConnectorReading.read(client, source_connector).activity is not \
            ConnectorActivity.STOPPED:
        assert time.monotonic() < end, "the source connector did not stop"
        time.sleep(0.2)


def _round(lab: RunningLab, config: Path, topic: str, group: str, r: int) -> None:
    # The group read everything replicated; guard snapshots its position exactly.
    ends = {p: _end(lab, topic, p) for p in range(PARTS)}
    commit_offsets(fresh_clients(lab, "primary"), group,
                   [TopicPartition(topic, p, e) for p, e in ends.items()])
    status, out = run_json("--config", str(config), "guard", "--once")
    assert status == 0, out
    _break_replication_quietly(lab)
    _send(fresh_clients(lab, "primary"), topic, f"gap{r}", GAP)
    lab.lab.fail("primary")

    status, out = run_json("--config", str(config), "failover", "--yes",
                           "--deadline", "2")
    assert status == 0, out
    mirror = lab.mirror(topic)
    placed = out["marker"]["groups"][group]["positions"][mirror]
    # Exact: the group had read everything replicated, so it resumes at the failover point
    # (guard's snapshot), with nothing to read again.
    assert {int(p): v["offset"] for p, v in placed.items()} == {
        int(p): o for p, o in out["marker"]["failover_point"][mirror].items()}, placed
    assert all(v["max_redelivered"] == 0 for v in placed.values()), placed
    incident = out["incident"]

    _send(fresh_clients(lab, "secondary"), topic, f"post{r}", POST)
    # The group reads the post-failover writes on the secondary.
    failover_ends = {p: _end(lab, topic, p, "secondary") for p in range(PARTS)}
    commit_offsets(fresh_clients(lab, "secondary"), group,
                   [TopicPartition(topic, p, e) for p, e in failover_ends.items()])
    lab.lab.heal("primary")
    connect = lab.lab.connect_client(lab.state)
    reverse = reverse_connector_name(load_config(config).require_replication())
    if r == 2:
        # The reverse connector of round 1, left paused with its stored offsets: resumed as
        # it is, it would start after this incident's post-failover writes.
        connect.create(reverse, _left_over[0], initial_state="PAUSED")

    status, out = run_json("--config", str(config), "failback", "--check-order", "--reconcile",
                           "copy-safe", "--yes")
    assert status == 0, out
    assert out["gap"]["safe"] == GAP * PARTS, out["gap"]
    assert connect.config(reverse)[INCIDENT_KEY] == incident
    if r == 1:
        _left_over.append(connect.config(reverse))
    else:
        assert out["reverse"]["reset_from_incident"] == _left_over[0][INCIDENT_KEY], out["reverse"]
    assert out["next_command"] == f"drctl reprotect --incident {incident}"
    assert out["phase"] == "failed-back"
    status, st = _status(config)
    protection = st["replication"]["protection"]
    assert (status, protection["state"]) == (3, "exposed"), protection
    assert protection["next_command"] == f"drctl reprotect --incident {incident}"

    if r == 1:
        _refusals_before_the_return(lab, config, topic)
    status, out = run_json("--config", str(config), "reprotect", "--yes", "--settle", "2s")
    assert status == 0, out
    assert out["status"] == "closed" and out["verified_ok"] is True, out
    status, st = _status(config)
    assert st["replication"]["protection"]["state"] == "protected", st["replication"]
    assert status == 0, st

    # Protected: new writes to the primary reach the secondary, and nothing twice; the
    # group's new commits are checkpointed again (the next failover with the source gone
    # would find them).
    _send(fresh_clients(lab, "primary"), topic, f"new{r}", NEW)
    _wait_same(lab, topic)
    ends = {p: _end(lab, topic, p) for p in range(PARTS)}
    commit_offsets(fresh_clients(lab, "primary"), group,
                   [TopicPartition(topic, p, e) for p, e in ends.items()])
    lab.wait_checkpointed(group, topic, ends)


_left_over: list[dict[str, str]] = []  # round 1's reverse connector config, for round 2


def _refusals_before_the_return(lab: RunningLab, config: Path, topic: str) -> None:
    """A dry run shows where forward replication would start and changes nothing; producers
    still writing to the secondary make the return refuse (exit 3), naming the topic."""
    status, dry = run_json("--config", str(config), "reprotect", "--dry-run", "--settle", "1s")
    assert status == 0, dry
    [cut] = [step for step in dry["plan"] if step["step"] == "cut-over"]
    assert {int(p): o for p, o in cut["forward_starts"][topic].items()} == {
        p: _end(lab, topic, p) for p in range(PARTS)}, cut
    assert dry["status"] == "open" and not dry["steps"], dry["steps"]
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            produce(fresh_clients(lab, "secondary"), topic, [(0, f"late-{i}".encode(), b"v")])
            i += 1
            stop.wait(0.3)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        status, out = run_json("--config", str(config), "reprotect", "--yes", "--settle", "3s")
    finally:
        stop.set()
        writer.join(30)
    assert status == 3, out
    assert topic in out["error"]["message"], out["error"]
    [marker] = marker_store(load_config(config), "secondary").open_markers()
    assert not any(step.startswith("reprotect:") for step in marker.steps), marker.steps


def _end(lab: RunningLab, topic: str, p: int, cluster: str = "primary") -> int:
    admin = lab.lab.clients(lab.state, cluster).admin()
    from drctl.kafka.offsets import watermarks

    return watermarks(admin, [(topic, p)])[(topic, p)][1]


def test_fail_over_fail_back_and_return_twice(cycled: RunningLab, ns: str,
                                             tmp_path: Path) -> None:
    lab = cycled
    topic = f"{ns}-acct"
    group = f"{ns}-app"
    create_topics(lab.primary, (topic,), PARTS)
    config = scoped_config(lab, ns, tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["state"]["snapshots_topic"] = f"_drctl_snapshots_{ns}"
    raw["groups"] = {"include": [f"{ns}-.*"]}
    config.write_text(yaml.safe_dump(raw))
    _send(lab.primary, topic, "base", BASE)
    _wait_same(lab, topic)
    _left_over.clear()
    for r in (1, 2):
        _round(lab, config, topic, group, r)


def test_a_crash_at_each_step_of_the_return_then_a_rerun_ends_the_same(
        lab: RunningLab, ns: str, tmp_path: Path) -> None:
    """DRCTL_CRASH_AT at every recorded step of reprotect, one after the other: each re-run
    continues and the last one ends protected, nothing twice."""
    topic = f"{ns}-crash"
    create_topics(fresh_clients(lab, "primary"), (topic,), PARTS)
    config = scoped_config(lab, ns, tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["state"]["snapshots_topic"] = f"_drctl_snapshots_{ns}"
    raw["groups"] = {"include": [f"{ns}-.*"]}
    config.write_text(yaml.safe_dump(raw))
    try:
        _send(fresh_clients(lab, "primary"), topic, "base", BASE)
        _wait_same(lab, topic)
        _break_replication_quietly(lab)
        _send(fresh_clients(lab, "primary"), topic, "gap", GAP)
        lab.lab.fail("primary")
        status, out = run_json("--config", str(config), "failover", "--yes",
                               "--deadline", "2")
        assert status == 0, out
        _send(fresh_clients(lab, "secondary"), topic, "post", POST)
        lab.lab.heal("primary")
        status, out = run_json("--config", str(config), "failback", "--yes")
        assert status == 0, out
        incident = out["incident"]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        steps = ["reprotect:quiet", "reprotect:reverse-retired", "reprotect:cut-over",
                 "reprotect:forward-start", "reprotect:forward-resumed", "reprotect:verified"]
        for step in steps:
            crashed = subprocess.run(
                [sys.executable, "-m", "drctl", "--config", str(config), "reprotect", "--yes",
                 "--settle", "1s"], env={**env, "DRCTL_CRASH_AT": step},
                capture_output=True, text=True, timeout=600)
            assert crashed.returncode == -9, (step, crashed.stderr[-3000:])
            [marker] = marker_store(load_config(config), "secondary").open_markers()
            assert marker.done(step), step
        final = subprocess.run([sys.executable, "-m", "drctl", "--config", str(config), "-o",
                                "json", "reprotect", "--yes", "--settle", "1s"], env=env,
                               capture_output=True, text=True, timeout=600)
        assert final.returncode == 0, final.stderr[-3000:]
        markers = marker_store(load_config(config), "secondary").load_all()
        assert [m.status for m in markers if m.incident == incident] == ["closed"]
        _send(fresh_clients(lab, "primary"), topic, "new", NEW)
        _wait_same(lab, topic)
    finally:
        restore(lab)


def test_a_planned_switchover_there_and_back_is_exact(lab: RunningLab, ns: str,
                                                      tmp_path: Path) -> None:
    """failover --planned (producers stopped) -> work on the secondary -> failback ->
    reprotect: no gap, the group exact at every step (nothing lost, nothing twice), nothing
    twice on either cluster, and the pair protected again."""
    from drctl.kafka.groups import committed_offsets

    topic = f"{ns}-plan"
    group = f"{ns}-app"
    create_topics(fresh_clients(lab, "primary"), (topic,), PARTS)
    config = scoped_config(lab, ns, tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["groups"] = {"include": [f"{ns}-.*"]}
    config.write_text(yaml.safe_dump(raw))
    try:
        _send(fresh_clients(lab, "primary"), topic, "base", BASE)
        _wait_same(lab, topic)
        ends = {p: _end(lab, topic, p) for p in range(PARTS)}
        commit_offsets(fresh_clients(lab, "primary"), group,
                       [TopicPartition(topic, p, e) for p, e in ends.items()])

        status, out = run_json("--config", str(config), "failover", "--planned", "--yes")
        assert status == 0, out
        placed = out["marker"]["groups"][group]["positions"][topic]
        assert {int(p): v["offset"] for p, v in placed.items()} == {
            p: _end(lab, topic, p, "secondary") for p in range(PARTS)}, placed
        incident = out["incident"]

        _send(fresh_clients(lab, "secondary"), topic, "post", POST)
        on_secondary = {p: _end(lab, topic, p, "secondary") for p in range(PARTS)}
        commit_offsets(fresh_clients(lab, "secondary"), group,
                       [TopicPartition(topic, p, e) for p, e in on_secondary.items()])

        status, out = run_json("--config", str(config), "failback", "--check-order",
                               "--reconcile", "copy-safe", "--yes", "--settle", "2s")
        assert status == 0, out
        assert out["gap"]["safe"] == 0 and out["phase"] == "failed-back", out["gap"]
        # Back on the primary the group stands at its end: it read every post-failover write
        # on the secondary, and each is on the primary once.
        back = committed_offsets(fresh_clients(lab, "primary").admin(), [group])[group]
        assert {p: back[(topic, p)] for p in range(PARTS)} == {
            p: _end(lab, topic, p) for p in range(PARTS)} == {
            p: BASE + POST for p in range(PARTS)}, back

        status, out = run_json("--config", str(config), "reprotect", "--yes", "--settle", "2s")
        assert status == 0, out
        assert out["status"] == "closed" and out["verified_ok"] is True, out
        assert out["incident"] == incident
        _send(fresh_clients(lab, "primary"), topic, "new", NEW)
        _wait_same(lab, topic)
        status, st = _status(config)
        assert (status, st["replication"]["protection"]["state"]) == (0, "protected"), st
    finally:
        restore(lab)

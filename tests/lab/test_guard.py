"""`drctl guard` keeps exact positions on the target; a failover with the source down uses
them: every group, including one created just before the outage, starts exactly where it
was on the source (nothing skipped, nothing re-read)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from confluent_kafka import TopicPartition

from drctl.config import load_config
from drctl.kafka.groups import committed_offsets
from drctl.kafka.records import read_all
from drctl.lab.workload import commit_offsets, create_topics
from drctl.translate.snapshots import (
    GUARD_ROUND_KEY,
    INVENTORY_KEY,
    GuardRound,
    OffsetSnapshot,
    SourceInventory,
    read_snapshot_topic,
    read_snapshots,
)
from tests.conftest import RunningLab, on_kafka_3
from tests.lab.support import wait_offsets_stored, wait_replicated
from tests.lab.test_failover import run_json, scoped_config

pytestmark = pytest.mark.lab
PARTITIONS = 2


def _guard(config: Path, *extra: str) -> tuple[int, dict]:
    return run_json("--config", str(config), "guard", "--once", "--groups", ".*", *extra)


@on_kafka_3()
def test_failover_with_the_source_down_starts_groups_at_guards_snapshots(
        lab: RunningLab, ns: str, tmp_path: Path) -> None:
    topic = f"{ns}-g"
    create_topics(lab.primary, (topic,), PARTITIONS)
    producer = lab.primary.producer()
    for p in range(PARTITIONS):
        for i in range(200):
            producer.produce(topic, key=f"k{i % 7}".encode(), value=f"v-{p}-{i}".encode(),
                             partition=p)
    assert producer.flush(30) == 0
    wait_replicated(lab, topic, 200 * PARTITIONS)
    config = scoped_config(lab, ns, tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["state"]["snapshots_topic"] = f"_drctl_snapshots_{ns}"
    raw["groups"] = {"include": [f"{ns}-.*"]}
    config.write_text(yaml.safe_dump(raw))
    commits = {f"{ns}-steady": 150, f"{ns}-done": 200}
    for group, offset in commits.items():
        commit_offsets(lab.primary, group, [TopicPartition(topic, p, offset)
                                            for p in range(PARTITIONS)])
    status, out = _guard(config)
    assert status == 0, out
    first = out["rounds"][0]
    assert (first["positions"], first["moved"], first["written"]) == (4, 4, 4), first
    status, out = _guard(config)
    # A new guard process remembers nothing: it writes again (idempotent by key).
    assert out["rounds"][0]["written"] == 4

    # A long-running guard: a group created just before the outage and a group that moves
    # are snapshotted within a round or two; SIGTERM ends it cleanly.
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "drctl", "--config", str(config), "guard",
                             "--interval", "0.5"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        commits[f"{ns}-new"] = 77
        commits[f"{ns}-steady"] = 180
        for group in (f"{ns}-new", f"{ns}-steady"):
            commit_offsets(lab.primary, group, [TopicPartition(topic, p, commits[group])
                                                for p in range(PARTITIONS)])
        cfg = load_config(config)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            snaps = read_snapshots(lab.secondary, cfg.state.snapshots_topic)
            if all(snaps.get((g, topic, p)) is not None
                   and snaps[(g, topic, p)].source_offset == o
                   for g, o in commits.items() for p in range(PARTITIONS)):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"snapshots did not catch up: {snaps}")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err[-2000:]
        assert "snapshot(s) written" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # After guard's last round the steady group reads on: its snapshot is now behind.
    seen = dict(commits)
    commits[f"{ns}-steady"] = 195
    commit_offsets(lab.primary, f"{ns}-steady", [TopicPartition(topic, p, 195)
                                                 for p in range(PARTITIONS)])
    # A group ahead of replication when guard snapshots it: replication stalls, the group
    # reads 30 new records per partition; its snapshot can only say "the target's end" and
    # what it read past it. The copies arrive before the outage: failover settles the
    # snapshot on the copy of its last record, not at the end guard saw.
    lab.lab.fail("replication")
    for p in range(PARTITIONS):
        for i in range(200, 250):
            producer.produce(topic, key=f"k{i % 7}".encode(), value=f"v-{p}-{i}".encode(),
                             partition=p)
    assert producer.flush(30) == 0
    ahead = f"{ns}-ahead"
    commits[ahead] = seen[ahead] = 230
    commit_offsets(lab.primary, ahead, [TopicPartition(topic, p, 230)
                                        for p in range(PARTITIONS)])
    status, out = _guard(config, "--groups", ahead)
    assert status == 0 and out["rounds"][0]["pending"] == PARTITIONS, out
    snaps = read_snapshots(lab.secondary, cfg.state.snapshots_topic)
    assert {(s.confidence, s.target_offset, s.ahead, s.occurrence)
            for (g, _t, _p), s in snaps.items() if g == ahead} == {("clamped", 200, 30, 1)}
    lab.lab.heal("replication")
    wait_replicated(lab, topic, 250 * PARTITIONS)

    # Replication breaks; a topic created now is never mirrored. Guard's inventory knows it.
    wait_offsets_stored(lab, topic)
    lab.lab.fail("replication")
    late = f"{ns}-late"
    create_topics(lab.primary, (late,), 1)
    for i in range(100):
        producer.produce(late, value=f"late-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    commit_offsets(lab.primary, f"{ns}-late-reader", [TopicPartition(late, 0, 40)])
    status, out = _guard(config, "--groups", f"{ns}-late.*")
    assert status == 0, out
    lab.lab.fail("primary")
    lab.lab.heal("replication")
    try:
        status, out = run_json("--config", str(config), "failover", "--yes", "--groups",
                               f"{ns}-.*", "--deadline", "2")
        # Nothing left silently: the unmirrored topic and its reader, named, exit 3.
        assert status == 3, out
        left = out["marker"]["left_behind"]
        assert left["topics"] == [{"topic": late, "groups": [f"{ns}-late-reader"]}], left
        assert [g["group"] for g in left["groups"]] == [f"{ns}-late-reader"], left
        report = next(Path(p) for p in out["reports"] if p.endswith(".md")).read_text()
        assert "## Left behind" in report and late in report
        assert "at most re-read" in report
        parts = [p for g in out["translation"]["groups"] for p in g["partitions"]]
        assert len(parts) == len(commits) * PARTITIONS
        assert {p["confidence"] for p in parts} <= {"snapshot", "checkpoint"}, parts
        # Independent count: the position right after the copy of the last record the group
        # read on the source, found by value on the secondary.
        target = read_all(lab.secondary, lab.mirror(topic))
        offset_of = {(r.partition, r.value): r.offset for r in target}
        applied = committed_offsets(lab.secondary, list(commits))
        behind: dict[tuple[str, int], int] = {}
        for group, offset in commits.items():
            for p in range(PARTITIONS):
                exact = offset_of[(p, f"v-{p}-{offset - 1}".encode())] + 1
                got = applied[group][(lab.mirror(topic), p)]
                if offset == seen[group]:  # guard saw it: exactly there
                    assert got == exact, (group, p)
                else:  # it moved on after the last snapshot: behind, never past it
                    assert got <= exact, (group, p)
                behind[(group, p)] = exact - got
        for g in out["translation"]["groups"]:
            for p in g["partitions"]:
                # The stated bound holds for what the group really re-reads.
                assert 0 <= behind[(g["group"], p["partition"])] <= p["max_redelivered"]
                if p["confidence"] == "snapshot":
                    assert p["age_s"] is not None
        assert out["translation"]["summary"]["missing"] == 0
        settled = [p for g in out["translation"]["groups"] if g["group"] == ahead
                   for p in g["partitions"]]
        assert all(p["confidence"] == "snapshot" and "settled on the target" in p["note"]
                   for p in settled), settled
    finally:
        lab.lab.heal("primary")
    try:
        # The audit, once the source is back: what each group re-reads, counted by drctl,
        # equals the test's own count from the records.
        status, audit = run_json("--config", str(config), "audit")
        assert status == 0, audit
        rows = {(r["group"], r["partition"]): r for r in audit["positions"]}
        assert set(rows) == set(behind)
        for key, n in behind.items():
            assert (rows[key]["redelivered"], rows[key]["skipped"]) == (n, 0), rows[key]
            assert rows[key]["redelivered"] <= rows[key]["max_redelivered"]
        assert audit["totals"]["redelivered"] == sum(behind.values())
        assert sum(behind.values()) > 0  # the steady group's move after the last snapshot
    finally:
        lab.lab.up(ports=lab.state.ports, names_kept=lab.names_kept)


def _guard_config(lab: RunningLab, ns: str, tmp_path: Path) -> Path:
    config = scoped_config(lab, ns, tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["state"]["snapshots_topic"] = f"_drctl_snapshots_{ns}"
    raw["groups"] = {"include": [f"{ns}-.*"]}
    config.write_text(yaml.safe_dump(raw))
    return config


def _fill(lab: RunningLab, topic: str, per_partition: int) -> None:
    create_topics(lab.primary, (topic,), PARTITIONS)
    producer = lab.primary.producer()
    for p in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, value=f"v-{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    wait_replicated(lab, topic, per_partition * PARTITIONS)


def test_without_guard_status_keeps_the_inventory_and_failover_names_a_young_group(
        lab: RunningLab, ns: str, tmp_path: Path) -> None:
    """No guard: `drctl status` before the outage keeps the inventory, so a group MirrorMaker
    2 never checkpointed is named (with what its consumers will do) and failover exits 3."""
    topic = f"{ns}-i"
    _fill(lab, topic, 100)
    config = _guard_config(lab, ns, tmp_path)
    cfg = load_config(config)
    old, young = f"{ns}-old", f"{ns}-young"
    commit_offsets(lab.primary, old, [TopicPartition(topic, p, 50) for p in range(PARTITIONS)])
    lab.wait_checkpointed(old, topic, {p: 50 for p in range(PARTITIONS)}, deadline_s=60)
    # config check reads the checkpoint connector over Connect: the lab's test-speed settings.
    status, out = run_json("--config", str(config), "config", "check")
    assert status == 0, out
    costs = out["translation_costs"]
    assert (costs["checkpoint_interval_s"], costs["group_refresh_s"], costs["groups"]) \
        == (1, 2, ".*"), costs

    # MirrorMaker 2 is down while the young group starts committing: it never sees it.
    lab.lab.fail("replication")
    try:
        commit_offsets(lab.primary, young, [TopicPartition(topic, p, 60)
                                            for p in range(PARTITIONS)])
        status, out = run_json("--config", str(config), "status")
        inventory = out["replication"]["inventory"]
        assert inventory["wrote"] and inventory["error"] is None, inventory
        assert (inventory["topics"], inventory["groups"]) == (1, 2), inventory
        kept = read_snapshot_topic(lab.secondary, cfg.state.snapshots_topic).inventory
        assert kept is not None and kept.groups == {old: [topic], young: [topic]}, kept
        # Nothing changed: the next status reads the group list only and writes nothing.
        status, again = run_json("--config", str(config), "status")
        second = again["replication"]["inventory"]
        assert (second["wrote"], second["read_groups"], second["written_ms"]) \
            == (False, 0, inventory["written_ms"]), second
        assert second["age_s"] is not None and second["age_s"] >= 0

        lab.lab.fail("primary")
        lab.lab.heal("replication")
        status, out = run_json("--config", str(config), "failover", "--yes", "--groups",
                               f"{ns}-.*", "--deadline", "2")
        assert status == 3, out
        left = out["marker"]["left_behind"]
        assert [g["group"] for g in left["groups"]] == [young], left
        assert "auto.offset.reset" in left["groups"][0]["reason"]
        assert "inventory" in left["groups"][0]["reason"]
        assert {g["group"] for g in out["translation"]["groups"]} == {old}
        report = next(Path(p) for p in out["reports"] if p.endswith(".md")).read_text()
        assert young in report and "auto.offset.reset" in report
    finally:
        if not lab.lab.process("primary").is_running():
            lab.lab.heal("primary")
        lab.lab.up(ports=lab.state.ports, names_kept=lab.names_kept)


def test_guard_survives_broker_restarts_on_both_sides_and_sigterm_mid_write(
        lab: RunningLab, ns: str, tmp_path: Path) -> None:
    """A background guard: the target's broker restarts (writes fail), then the source's
    (reads fail); after each it snapshots the group's new position again. SIGTERM while it
    writes ends it with 0 and leaves every snapshot record whole."""
    topic = f"{ns}-f"
    _fill(lab, topic, 400)
    config = _guard_config(lab, ns, tmp_path)
    cfg = load_config(config)
    group = f"{ns}-mover"

    def move(offset: int) -> None:
        # Fresh clients: the session's admin client may hang on a restarted broker.
        commit_offsets(lab.lab.clients(lab.state, "primary"), group,
                       [TopicPartition(topic, p, offset) for p in range(PARTITIONS)])

    def snapshotted(offset: int, after_ms: int, deadline_s: float = 240) -> int:
        """When guard has written `offset` for every partition (newer than `after_ms`). The
        deadline is above a round's worst case right after a restart (a read of the target
        gives up after 120 s); a guard that stalls past it dumps its threads' stacks."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:  # fresh clients: a restarted broker's leader epochs moved on
                snaps = read_snapshots(lab.lab.clients(lab.state, "secondary"),
                                       cfg.state.snapshots_topic)
            except Exception:  # noqa: BLE001 - the broker is still coming back
                snaps = {}
            mine = [snaps.get((group, topic, p)) for p in range(PARTITIONS)]
            if all(s is not None and s.source_offset == offset and s.snapshot_ms > after_ms
                   and s.confidence == "exact" for s in mine):
                return max(s.snapshot_ms for s in mine if s is not None)
            time.sleep(0.5)
        if proc.poll() is None:  # hung: its threads' stacks into the log (faulthandler)
            proc.send_signal(signal.SIGABRT)
            proc.wait(30)
        raise AssertionError(f"no snapshot of {offset} after {after_ms}: {mine}\n"
                             + log.read_text()[-6000:])

    log = tmp_path / "guard.log"

    def idle() -> None:
        """Until guard has finished a round with nothing to write (its next one starts with
        the cluster about to fail, so that round fails rather than waiting inside a write)."""
        seen = log.read_text().count("\n")
        end = time.monotonic() + 60
        while not any(" 0 moved" in line for line in log.read_text().splitlines()[seen:]):
            assert time.monotonic() < end, log.read_text()[-2000:]
            time.sleep(0.2)

    def a_round_failed(before: int) -> None:
        """Until guard's log says more rounds failed than `before` (the cluster it needs is
        down longer than a round waits for it)."""
        end = time.monotonic() + 90
        while log.read_text().count("round failed") <= before:
            assert time.monotonic() < end, log.read_text()[-2000:]
            time.sleep(0.5)

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "PYTHONFAULTHANDLER": "1"}
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "drctl", "--config", str(config),
                                 "guard", "--interval", "1s", "--deadline", "3s"],
                                env=env, stderr=err,
                                stdout=subprocess.DEVNULL)
    try:
        move(10)
        written = snapshotted(10, 0)
        idle()
        # The target's broker restarts: snapshot writes fail, are retried, then land. Down
        # until a round has failed (each of its waits on a cluster is the 3 s --deadline).
        failures = log.read_text().count("round failed")
        lab.lab.fail("secondary")
        move(20)
        a_round_failed(failures)
        assert proc.poll() is None, log.read_text()[-2000:]
        lab.lab.heal("secondary")
        written = snapshotted(20, written)
        # The source's broker restarts: reads fail, are retried; it moves on once back.
        failures = log.read_text().count("round failed")
        idle()
        # Down until a round has failed (its group listing waits the 3 s --deadline).
        lab.lab.fail("primary")
        a_round_failed(failures)
        assert proc.poll() is None, log.read_text()[-2000:]
        lab.lab.heal("primary")
        move(30)
        written = snapshotted(30, written)
        text = log.read_text()
        assert text.count("round failed") > failures and "retrying in" in text
        assert "recovered after" in text
        # SIGTERM while it writes: the group keeps moving, guard writes every round.
        for offset in range(31, 60):
            move(offset)
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0, log.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for broker in ("primary", "secondary"):
            if not lab.lab.process(broker).is_running():
                lab.lab.heal(broker)

    try:
        # Every record whole; reading the topic gives each key's newest snapshot.
        secondary = lab.lab.clients(lab.state, "secondary")
        records = read_all(secondary, cfg.state.snapshots_topic)
        newest: dict[tuple[str, str, int], OffsetSnapshot] = {}
        for rec in records:
            assert rec.value is not None
            if rec.key == INVENTORY_KEY:
                SourceInventory.decode(rec.value)
                continue
            if rec.key == GUARD_ROUND_KEY:
                GuardRound.decode(rec.value)
                continue
            snap = OffsetSnapshot.decode(rec.value)
            assert snap.key == rec.key
            key = (snap.group, snap.topic, snap.partition)
            if key not in newest or snap.snapshot_ms >= newest[key].snapshot_ms:
                newest[key] = snap
        whole = read_snapshot_topic(secondary, cfg.state.snapshots_topic)
        read, inventory = whole.snapshots, whole.inventory
        assert read == newest and inventory is not None and group in inventory.groups
        last = read[(group, topic, 0)].source_offset
        assert 30 <= last <= 59
        status, out = run_json("--config", str(config), "translate-offsets", "--method",
                               "snapshot", "--groups", group, "--dry-run")
        assert status == 0, out
        parts = out["groups"][0]["partitions"]
        assert len(parts) == PARTITIONS
        for p in parts:
            snap = read[(group, topic, p["partition"])]
            # The snapshot, or a later MirrorMaker 2 checkpoint (it kept running).
            assert p["source_offset"] >= snap.source_offset
            if p["confidence"] == "snapshot":
                assert (p["source_offset"], p["target_offset"]) \
                    == (snap.source_offset, snap.target_offset)
            else:
                assert p["confidence"] == "checkpoint", p
    finally:
        # A restart of the secondary (it holds the Connect worker's topics) can strand the
        # connectors: a fresh worker, then the flow started again.
        if lab.lab.process("connect").is_running():
            lab.lab.fail("replication")
        lab.lab.heal("replication")
        lab.lab.up(ports=lab.state.ports, names_kept=lab.names_kept)

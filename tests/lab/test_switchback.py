"""Switch-back keeps the gap (issue 15): after failback every group, with what it read on the
primary before the outage, on the secondary during it, and what it will read on the primary
from the position failback gave it, receives every source record at least once —
quarantined conflicts excepted and listed — and the re-deliveries are the reported ones.
A group still consuming on the secondary is not moved; the next run moves it."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicPartition

from drctl.kafka.groups import committed_offsets
from drctl.kafka.records import Record, read_all
from drctl.lab.workload import commit_offsets, create_topics
from tests.conftest import RunningLab
from tests.lab.support import produce, wait_offsets_stored, wait_replicated
from tests.lab.test_failback import restore
from tests.lab.test_failover import run_json, scoped_config

pytestmark = [pytest.mark.lab, pytest.mark.spark]
PARTITIONS = 2
BASE, GAP, POST = 300, 10, 50


def _range(records: list[Record], p: int, start: int, end: int | None = None) -> list[bytes]:
    return [r.value for r in records if r.partition == p and r.offset >= start
            and (end is None or r.offset < end) and r.value is not None]


class _LiveConsumer:
    """A consumer of `group` that keeps reading the secondary (auto-commit) until stopped."""

    def __init__(self, lab: RunningLab, group: str, topics: list[str]) -> None:
        self.stop = threading.Event()
        self.consumer = lab.secondary.consumer(**{
            "group.id": group, "enable.auto.commit": "true", "auto.commit.interval.ms": "200",
            "auto.offset.reset": "earliest"})
        self.consumer.subscribe(topics)
        self.read: list[bytes] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for msg in self.consumer.consume(100, timeout=0.2):
                if msg.error() is None and msg.value() is not None:
                    self.read.append(msg.value())

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException:
            pass  # nothing read since the last auto-commit
        self.consumer.close()


def test_switch_back_delivers_every_gap_record_to_every_group(
        any_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    lab = any_lab
    try:
        _scenario(lab, ns, tmp_path)
    finally:
        restore(lab)


def _scenario(lab: RunningLab, ns: str, tmp_path: Path) -> None:
    topic = f"{ns}-sb"
    mirror = lab.mirror(topic)
    reverse = topic if lab.names_kept else f"secondary.{topic}"
    create_topics(lab.primary, (topic,), PARTITIONS)
    produce(lab.primary, topic, [(p, f"k{p}-{i % 30}".encode(), f"base-{p}-{i}".encode())
                                  for p in range(PARTITIONS) for i in range(BASE)])
    wait_replicated(lab, topic, BASE * PARTITIONS)
    groups = {name: f"{ns}-{name}" for name in "ABCD"}
    for g in groups.values():  # every group read everything on the primary
        commit_offsets(lab.primary, g, [TopicPartition(topic, p, BASE) for p in range(PARTITIONS)])
    for g in groups.values():  # failover with the source down moves checkpointed groups
        lab.wait_checkpointed(g, topic, {p: BASE for p in range(PARTITIONS)})
    wait_offsets_stored(lab, topic)  # no re-copy after the kill
    lab.lab.fail("replication")
    # The gap: per partition two records of keys written again after the failover
    # (conflicts, quarantined) first, then eight of keys never written again (safe).
    gap = [(p, f"conf-{p}-{i}".encode(), f"gap-old-{p}-{i}".encode())
           for p in range(PARTITIONS) for i in range(2)]
    gap += [(p, f"safe-{p}-{i}".encode(), f"gap-safe-{p}-{i}".encode())
            for p in range(PARTITIONS) for i in range(GAP - 2)]
    produce(lab.primary, topic, gap)
    lab.lab.fail("primary")
    lab.lab.heal("replication")
    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--yes", "--groups",
                           f"{ns}-.*", "--deadline", "2")
    assert status == 0, out
    assert out["marker"]["replication_stop"] == "stopped", out["marker"]
    failover_topic = topic  # producers keep the plain name
    post = [(p, (f"conf-{p}-{i % 2}" if i < 2 else f"new-{p}-{i}").encode(),
             f"post-{p}-{i}".encode()) for p in range(PARTITIONS) for i in range(POST)]
    produce(lab.secondary, failover_topic, post)
    fpoint = {p: (BASE if lab.names_kept else 0) for p in range(PARTITIONS)}

    # What each group read on the secondary: A every post-failover write, B 20 of them,
    # C none; D keeps consuming (from 10 on) through failback.
    read_to = {"A": POST, "B": 20, "C": 0, "D": 10}
    for name, n in read_to.items():
        offsets = [TopicPartition(failover_topic, p, fpoint[p] + n) for p in range(PARTITIONS)]
        if not lab.names_kept:
            offsets += [TopicPartition(mirror, p, BASE) for p in range(PARTITIONS)]
        commit_offsets(lab.secondary, groups[name], offsets)
    secondary_before = read_all(lab.secondary, failover_topic)
    lab.lab.heal("primary")
    live = _LiveConsumer(lab, groups["D"], sorted({mirror, failover_topic}))
    try:
        status, out = run_json("--config", str(config), "failback", "--check-order",
                               "--reconcile", "copy-safe", "--yes", "--groups", f"{ns}-.*")
        assert status == 3, out  # D is still consuming on the secondary
        sb = out["switch_back"]
        assert sb["summary"]["waiting"] == [groups["D"]]
        assert out["reconcile"]["copy_safe"]["copied"] == (GAP - 2) * PARTITIONS
        time.sleep(2)  # D reads the reconciled copies too: it drains
    finally:
        live.close()
    status, again = run_json("--config", str(config), "failback", "--yes", "--groups",
                             f"{ns}-.*")
    assert status == 0, again
    assert [g["group"] for g in again["switch_back"]["groups"]] == [groups["D"]]
    reports = {g["group"]: g for g in sb["groups"] + again["switch_back"]["groups"]
               if not g["skipped"]}

    primary = read_all(lab.primary, topic)
    primary_reverse = primary if lab.names_kept else read_all(lab.primary, reverse)
    secondary = read_all(lab.secondary, failover_topic)
    universe = Counter(r.value for r in primary if r.value is not None)
    if not lab.names_kept:
        universe.update(r.value for r in primary_reverse if r.value is not None)
    assert sum(universe.values()) == (BASE + GAP + POST) * PARTITIONS
    assert all(n == 1 for n in universe.values())  # every record once on the primary
    # A new client: the lab's own was made before the primary restarted.
    positions = committed_offsets(lab.lab.clients(lab.state, "primary"),
                                  list(groups.values()))
    by_value = {(r.partition, r.offset): r.value for r in primary}
    for name, group in groups.items():
        report = reports[group]
        parts = {(p["topic"], p["partition"]): p for p in report["partitions"]}
        got: Counter[bytes] = Counter()
        quarantined_missed: set[bytes] = set()
        for p in range(PARTITIONS):
            got.update(_range(primary, p, 0, BASE))  # before the outage
            if lab.names_kept:
                got.update(_range(secondary, p, fpoint[p], fpoint[p] + read_to[name]))
            else:
                got.update(_range(secondary, p, 0, read_to[name]))
            # From its position after failback to the end, on the primary.
            start = positions[group].get((topic, p))
            assert start is not None, (group, topic, p)
            got.update(_range(primary, p, start))
            if not lab.names_kept:
                rstart = positions[group].get((reverse, p), 0)
                got.update(_range(primary_reverse, p, rstart))
            for s, e in parts[(topic, p)]["quarantined_missed"]:
                quarantined_missed |= {by_value[(p, o)] for o in range(s, e)}
        if name == "D":  # and what its consumer read during failback
            got.update(live.read)
        missing = set(universe) - set(got)
        assert missing == quarantined_missed, (name, sorted(missing))
        twice = sum(n - 1 for n in got.values() if n > 1)
        assert twice == report["totals"]["redelivered"], (name, report)
        assert report["totals"]["not_delivered"] == 0
    # The gap is no longer lost: A and B are rewound onto it (kept names); D drained first
    # and reads nothing twice.
    if lab.names_kept:
        assert reports[groups["A"]]["totals"]["redelivered"] == POST * PARTITIONS
        assert reports[groups["B"]]["totals"]["redelivered"] == 20 * PARTITIONS
    assert reports[groups["D"]]["totals"]["redelivered"] == 0
    assert len(secondary) > len(secondary_before)  # the copies landed

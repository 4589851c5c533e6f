"""Fail over one application, not the whole flow (issue 37), with both namings: A (two topics,
its group) fails over, back and returns while B (its topic, its group, and one group of B
that also reads one of A's topics) keeps replicating the whole time; then a whole-flow
unplanned failover.

After each step nothing is missing or twice on either cluster for A and for B, A's group is
placed exactly, and B's groups are never moved by A's incident; `check --app A` names B's
group on A's edge, `status` shows A in its incident and B protected.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import TopicPartition

from drctl.kafka.groups import committed_offsets
from drctl.lab.workload import commit_offsets, create_topics
from tests.conftest import RunningLab, on_kafka_3
from tests.lab.support import (
    fresh_clients,
    produce,
    run_json,
    stop_forward_quietly,
    wait_tasks_assigned,
)
from tests.lab.test_failback import restore
from tests.lab.test_failover import scoped_config
from tests.lab.test_reprotect import PARTS, _end, _send, _wait_same

pytestmark = [pytest.mark.lab, pytest.mark.spark]
BASE, GAP, POST = 50, 10, 20


@pytest.fixture
def scoped_lab(any_lab: RunningLab) -> Iterator[RunningLab]:
    yield any_lab
    restore(any_lab)


class _Trickle:
    """B's producer writing to its topic the whole time, and a watch on the secondary that
    notes every moment B's mirror grew: the longest pause is what A's incident cost B."""

    def __init__(self, lab: RunningLab, topic: str) -> None:
        self.lab, self.topic = lab, topic
        self.stop = threading.Event()
        self.sent = 0
        self.grew: list[float] = []
        self.threads = [threading.Thread(target=self._write, daemon=True),
                        threading.Thread(target=self._watch, daemon=True)]
        for t in self.threads:
            t.start()

    def _write(self) -> None:
        clients = fresh_clients(self.lab, "primary")
        while not self.stop.is_set():
            produce(clients, self.topic, [(self.sent % PARTS, f"b-live-{self.sent}".encode(),
                                           b"v")])
            self.sent += 1
            self.stop.wait(0.25)

    def _watch(self) -> None:
        clients = fresh_clients(self.lab, "secondary")
        mirror, last = self.lab.mirror(self.topic), -1
        while not self.stop.is_set():
            try:
                end = sum(_end_of(clients, mirror, p) for p in range(PARTS))
            except Exception:  # noqa: BLE001 - a read that failed is no growth
                end = last
            if end > last:
                self.grew.append(time.monotonic())
                last = end
            self.stop.wait(0.5)

    def finish(self) -> float:
        """Stop both; the longest time B's mirror did not grow."""
        self.stop.set()
        for t in self.threads:
            t.join(30)
        gaps = [b - a for a, b in zip(self.grew, self.grew[1:], strict=False)]
        return max(gaps, default=float("inf"))


def _end_of(clients: Any, topic: str, p: int) -> int:
    from drctl.kafka.offsets import watermarks

    return watermarks(clients.admin(), [(topic, p)])[(topic, p)][1]


def _commit_at_end(lab: RunningLab, cluster: str, group: str, topics: list[str]) -> None:
    commit_offsets(fresh_clients(lab, cluster), group,
                   [TopicPartition(t, p, _end(lab, t, p, cluster)) for t in topics
                    for p in range(PARTS)])


@on_kafka_3("any_lab")
def test_one_application_fails_over_back_and_returns_while_the_other_replicates(
        scoped_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    lab = scoped_lab
    a1, a2, b1 = f"{ns}-a1", f"{ns}-a2", f"{ns}-b1"
    a_group, b_group, b_both = f"{ns}-a-app", f"{ns}-b-app", f"{ns}-b-both"
    config = scoped_config(lab, ns, tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["replication"]["topics"] = {"include": [f".*{ns}-.*"]}
    raw["state"]["snapshots_topic"] = f"_drctl_snapshots_{ns}"
    raw["groups"] = {"include": [f"{ns}-.*"]}
    raw["applications"] = {"A": {"topics": [f"{ns}-a.*"], "groups": [f"{ns}-a-.*"]},
                           "B": {"topics": [f"{ns}-b.*"], "groups": [f"{ns}-b-.*"]}}
    config.write_text(yaml.safe_dump(raw))
    c = ["--config", str(config)]
    create_topics(lab.primary, (a1, a2, b1), PARTS)
    for t in (a1, a2, b1):
        lab.wait_mirror_topic(t)
    wait_tasks_assigned(lab, a1, a2, b1)  # no copy twice by a task restarting
    for t in (a1, a2, b1):
        _send(fresh_clients(lab, "primary"), t, "base", BASE)
    for t in (a1, a2, b1):
        _wait_same(lab, t)
    _commit_at_end(lab, "primary", a_group, [a1, a2])
    _commit_at_end(lab, "primary", b_group, [b1])
    _commit_at_end(lab, "primary", b_both, [b1, a1])

    # Before the incident: B's group reading A's topic is named.
    status, ready = run_json(*c, "check", "--app", "A")
    assert status == 3, ready
    assert ready["scope"]["topics"] == [a1, a2] and ready["scope"]["groups"] == [a_group]
    assert [f["object"] for f in ready["findings"] if f["area"] == "scope"] == \
        [f"group {b_both}"], ready["findings"]

    trickle = _Trickle(lab, b1)
    try:
        # Refused before anything moves; --force fails over without moving B's group.
        status, out = run_json(*c, "failover", "--app", "A", "--yes")
        assert status == 3 and b_both in out["error"]["message"], out
        status, out = run_json(*c, "failover", "--app", "A", "--yes", "--force")
        assert status == 0, out
        marker = out["marker"]
        incident = marker["incident"]
        assert sorted(marker["topics"]) == [a1, a2] and list(marker["groups"]) == [a_group]
        placed = marker["groups"][a_group]["positions"][lab.mirror(a1)]
        assert {int(p): v["offset"] for p, v in placed.items()} == {
            int(p): o for p, o in marker["failover_point"][lab.mirror(a1)].items()}, placed
        f_a1 = {p: _end(lab, lab.mirror(a1), p, "secondary") for p in range(PARTS)}

        # A's writes after its replication stopped: the gap, never copied forward.
        _send(fresh_clients(lab, "primary"), a1, "gap", GAP)
        time.sleep(5)
        assert {p: _end(lab, lab.mirror(a1), p, "secondary") for p in range(PARTS)} == f_a1
        status, st = run_json(*c, "status", "--deadline", "10s")
        apps = st["replication"]["applications"]
        assert (apps["A"]["state"], apps["A"]["incident"]) == ("incident", incident), apps
        assert apps["B"]["state"] == "protected", apps
        assert status == 3, st  # an open incident

        # A's producers and consumers on the secondary.
        _send(fresh_clients(lab, "secondary"), a1, "post", POST)
        _commit_at_end(lab, "secondary", a_group, [lab.mirror(a1) if lab.names_kept else a1])
        status, out = run_json(*c, "failback", "--app", "A", "--yes")
        assert status == 0, out
        assert out["gap"]["safe"] == GAP * PARTS, out["gap"]
        # Only A's group goes back, and it misses nothing.
        moved = out["switch_back"]["summary"]
        assert (moved["groups"], moved["applied"], moved["not_delivered"]) == (1, 1, 0), moved
        status, out = run_json(*c, "reprotect", "--app", "A", "--yes", "--settle", "2s")
        assert status == 0 and out["status"] == "closed" and out["verified_ok"], out
    finally:
        longest = trickle.finish()
    assert longest < 30, f"B's records paused {longest:.0f} s on the secondary"
    for t in (a1, a2, b1):
        _wait_same(lab, t)
    # B's groups never moved by A's incident.
    back = committed_offsets(fresh_clients(lab, "primary"), [b_group, b_both])
    assert all(back[b_group][(b1, p)] == BASE for p in range(PARTS)), back[b_group]
    assert all(back[b_both][(t, p)] == BASE for t in (a1, b1) for p in range(PARTS))
    status, st = run_json(*c, "status", "--deadline", "10s")
    assert status == 0 and {a: v["state"] for a, v in
                            st["replication"]["applications"].items()} == {
        "A": "protected", "B": "protected"}, st["replication"]

    # Protected again: new writes reach the secondary. Then the whole flow: the primary's
    # datacenter is lost.
    for t in (a1, a2, b1):
        _send(fresh_clients(lab, "primary"), t, "new", 5)
    for t in (a1, a2, b1):
        _wait_same(lab, t)
    for group, topics in ((a_group, [a1, a2]), (b_group, [b1]), (b_both, [b1, a1])):
        _commit_at_end(lab, "primary", group, topics)
    status, out = run_json(*c, "guard", "--once")
    assert status == 0, out
    stop_forward_quietly(lab, a1, a2, b1)
    lab.lab.fail("primary")
    status, out = run_json(*c, "failover", "--yes", "--deadline", "2")
    assert status == 0, out
    marker = out["marker"]
    assert sorted(marker["topics"]) == [a1, a2, b1] and not marker["scope"], marker["scope"]
    for group, topics in ((a_group, [a1, a2]), (b_group, [b1]), (b_both, [b1, a1])):
        for t in topics:
            placed = marker["groups"][group]["positions"][lab.mirror(t)]
            assert {int(p): v["offset"] for p, v in placed.items()} == {
                int(p): o for p, o in marker["failover_point"][lab.mirror(t)].items()}, (
                group, t, placed)

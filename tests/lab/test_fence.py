"""The replication fence in a whole outage (issue 12, item 2): failover with Connect down fences
MirrorMaker 2 on the secondary; the worker that comes back copies nothing; failback stops it,
lifts the fence and ends with every post-failover write once on the primary. On the plain lab
(no authorizer) failover says it could not fence and why."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from drctl.kafka.acls import fenced_topics, lift_fence
from drctl.kafka.offsets import watermarks
from drctl.lab.security import MM2_PRINCIPAL
from drctl.lab.workload import create_topics
from tests.conftest import (
    RunningLab,
    grant_reverse_flow,
    restore_forward_replication,
    revoke_reverse_flow,
)
from tests.lab.support import (
    keyed,
    keys_on,
    produce,
    source_tasks,
    wait_offsets_stored,
    wait_replicated,
)
from tests.lab.test_failover import run_json, scoped_config

pytestmark = [pytest.mark.lab, pytest.mark.spark]


@pytest.fixture
def fenced_lab(secure_lab: RunningLab) -> Iterator[RunningLab]:
    """The shared secure lab, handed on as the test found it: forward replication running,
    no reverse flow or its ACLs, no fence left behind (a failed test may leave one)."""
    yield secure_lab
    revoke_reverse_flow(secure_lab)
    target = secure_lab.secondary.admin()
    topics = fenced_topics(target, MM2_PRINCIPAL)
    if topics:
        lift_fence(target, MM2_PRINCIPAL, sorted(topics))
    restore_forward_replication(secure_lab)


def test_fence_holds_the_returning_replicator_and_failback_lifts_it(
        fenced_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    lab = fenced_lab
    topic = f"{ns}-acct"
    create_topics(lab.primary, (topic,), 2)
    produce(lab.primary, topic, keyed("base", 20))
    wait_replicated(lab, topic, 20)
    wait_offsets_stored(lab, topic)  # no re-copy after the kill
    lab.lab.fail("replication")
    produce(lab.primary, topic, keyed("gap", 12))  # never reaches the secondary before failover

    config = str(scoped_config(lab, ns, tmp_path))
    status, out = run_json("--config", config, "failover", "--yes", "--groups", f"{ns}-.*",
                           "--deadline", "2")
    assert status == 0, out
    marker = out["marker"]
    assert marker["replication_stop"] == "pending"
    fence = marker["fence"]
    assert (fence["state"], fence["principal"], fence["topics"]) == \
        ("fenced", MM2_PRINCIPAL, [topic]), fence
    assert out["open_risks"] == []  # fenced: not a risk, though the stop is pending
    target = lab.secondary.admin()
    assert topic in fenced_topics(target, MM2_PRINCIPAL)
    failover_point = marker["failover_point"][topic]
    assert sum(failover_point.values()) == 20

    # drctl is a super user: the fence is not for it.
    produce(lab.secondary, topic, keyed("post", 8))
    status, st = run_json("--config", config, "status")
    assert status == 3, st
    (opened,) = st["open_failovers"]
    assert opened["fence"]["state"] == "fenced" and opened["open_risks"] == []

    # The primary's datacenter comes back with its Connect worker, MirrorMaker 2 RUNNING.
    lab.lab.heal("replication")
    # Its task fails on the fence's denial once it tries to write: nothing got through.
    end = time.monotonic() + 60
    while source_tasks(lab) != ["FAILED"] and time.monotonic() < end:
        time.sleep(0.5)
    on_target = keys_on(lab.secondary, topic)
    assert sum(on_target.values()) == 20 + 8, on_target
    assert not [k for k in on_target if k.startswith("gap-")], on_target  # no late copies
    assert source_tasks(lab) == ["FAILED"]  # its writes were denied
    ends = watermarks(target, [(topic, 0), (topic, 1)])
    assert [ends[(topic, p)][1] for p in (0, 1)] == [failover_point["0"] + 4,
                                                     failover_point["1"] + 4]

    # A failover re-run reaches Connect now: the stop is confirmed, the fence stays.
    status, out = run_json("--config", config, "failover", "--yes", "--groups", f"{ns}-.*",
                           "--deadline", "2")
    assert status == 0, out
    assert out["marker"]["replication_stop"] == "stopped"
    assert out["marker"]["fence"]["state"] == "fenced"
    assert out["marker"]["fence"]["fenced_at"] == fence["fenced_at"]
    assert topic in fenced_topics(target, MM2_PRINCIPAL)

    # The operator's part of failback: the reverse flow's principal may read the secondary
    # and write the primary (revoked after the test: the lab is shared).
    grant_reverse_flow(lab)
    status, back = run_json("--config", config, "failback", "--reconcile", "copy-safe", "--yes")
    assert status == 0, back
    fence = back["marker"]["fence"]
    assert fence["state"] == "lifted" and fence["lifted_at"] >= fence["fenced_at"]
    assert "failback:lift-fence" in back["marker"]["steps"]
    assert topic not in fenced_topics(target, MM2_PRINCIPAL)
    expected = Counter({**{f"base-{i}": 1 for i in range(20)},
                        **{f"gap-{i}": 1 for i in range(12)},
                        **{f"post-{i}": 1 for i in range(8)}})
    end = time.monotonic() + 60
    while keys_on(lab.primary, topic) != expected and time.monotonic() < end:
        time.sleep(1)
    assert keys_on(lab.primary, topic) == expected
    report = Path(next(p for p in back["reports"] if p.endswith(".md"))).read_text()
    assert "## Replication fence" in report and "until" in report

    # A re-run finds the failback done: nothing is lifted twice.
    status, again = run_json("--config", config, "failback", "--yes")
    assert status == 0 and again["phase"] == "failed-back", again
    assert again["marker"]["fence"] == back["marker"]["fence"]


def test_failover_without_an_authorizer_is_unfenced_and_says_why(
        lab: RunningLab, ns: str, tmp_path: Path) -> None:
    """The shared plain lab: Connect unreachable (a wrong URL, so the lab's own connectors
    are left alone) and no authorizer on the secondary."""
    topic = f"{ns}-plain"
    create_topics(lab.primary, (topic,), 2)
    produce(lab.primary, topic, keyed("base", 6))
    wait_replicated(lab, topic, 6)
    config = str(scoped_config(lab, ns, tmp_path, principal=MM2_PRINCIPAL,
                               connect={"url": "http://127.0.0.1:9", "source_connector": "x"}))
    status, out = run_json("--config", config, "failover", "--yes", "--groups", f"{ns}-.*",
                           "--deadline", "2")
    assert status == 0, out
    fence = out["marker"]["fence"]
    assert out["marker"]["replication_stop"] == "pending"
    assert fence["state"] == "unfenced" and fence["cause"] == "unsupported"
    assert "no authorizer" in fence["reason"]
    (risk,) = out["open_risks"]
    assert "NOT fenced" in risk and "stop the replicator by hand" in risk
    report = Path(next(p for p in out["reports"] if p.endswith(".md"))).read_text()
    assert "**NOT fenced**: the cluster has no authorizer" in report
    assert "## Open risks" in report
    status, st = run_json("--config", config, "status")
    assert status == 3
    assert st["open_failovers"][0]["open_risks"] == [risk]


def test_failback_stops_the_replicator_held_by_the_fence_before_lifting_it(
        fenced_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    """No failover re-run: failback finds MirrorMaker 2 RUNNING with its task FAILED on the
    fence, stops it through Connect, records the stop, then lifts the fence."""
    lab = fenced_lab
    client = lab.lab.connect_client(lab.state)
    topic = f"{ns}-ledger"
    create_topics(lab.primary, (topic,), 2)
    produce(lab.primary, topic, keyed("base", 10))
    wait_replicated(lab, topic, 10)
    wait_offsets_stored(lab, topic)
    lab.lab.fail("replication")
    produce(lab.primary, topic, keyed("gap", 6))
    config = str(scoped_config(lab, ns, tmp_path))
    status, out = run_json("--config", config, "failover", "--yes", "--groups", f"{ns}-.*",
                           "--deadline", "2")
    assert status == 0, out
    assert out["marker"]["fence"]["state"] == "fenced"
    produce(lab.secondary, topic, keyed("post", 4))
    lab.lab.heal("replication")
    end = time.monotonic() + 30
    while source_tasks(lab) != ["FAILED"] and time.monotonic() < end:
        time.sleep(0.5)
    assert source_tasks(lab) == ["FAILED"]

    grant_reverse_flow(lab)
    status, back = run_json("--config", config, "failback", "--reconcile", "copy-safe", "--yes")
    assert status == 0, back
    marker = back["marker"]
    assert marker["steps"]["failback:stop-replication"]["result"]["state"] == "stopped"
    assert marker["replication_stop"] == "stopped"
    assert marker["fence"]["state"] == "lifted"
    assert topic not in fenced_topics(lab.secondary.admin(), MM2_PRINCIPAL)
    name = lab.lab.flow(lab.state).connector_names()["source"]
    assert client.connector_state(name) == ("STOPPED", [])
    on_target = keys_on(lab.secondary, topic)
    assert max(on_target.values()) == 1 and sum(on_target.values()) == 10 + 6 + 4, on_target
    expected = Counter({**{f"base-{i}": 1 for i in range(10)},
                        **{f"gap-{i}": 1 for i in range(6)},
                        **{f"post-{i}": 1 for i in range(4)}})
    end = time.monotonic() + 60
    while keys_on(lab.primary, topic) != expected and time.monotonic() < end:
        time.sleep(1)
    assert keys_on(lab.primary, topic) == expected

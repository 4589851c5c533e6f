"""drctl on the Strimzi lab (issue 59): the flow's connectors are owned by a
`KafkaMirrorMaker2` resource and the lab's operator, which puts back every change made through
Kafka Connect's REST API — so whatever these tests see done went through the resource.

`config init --strimzi secondary/mm2` writes a config `check` accepts; `failover` stops the
flow and the resource's status says so (a REST resume is put back); `failback` creates the
reverse resource stopped with its offsets and starts it, `reprotect` retires it and resumes
the forward flow, every record exactly once on both sides; the operator stopped during a
failover is exit 4 naming it within --deadline, and a re-run with the operator back finishes.
The next incident: guard keeps the groups' positions, the primary is killed, failover places
every group exactly (audit counts nothing re-read, nothing skipped), and the cycle closes again.

The tests share one lab (Strimzi 1.x's v1; names kept per commit, prefixed in the matrix) and
run in order (tests/conftest.py `_SHARED_SETUP`): the last one leaves the flow failed over.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import TopicPartition

from drctl.kafka.connect_rest import ConnectClient, ConnectError
from drctl.kafka.groups import committed_offsets
from drctl.kafka.records import read_all
from drctl.kube.api import KubeClient, KubeNotFound
from drctl.lab.lab import STRIMZI, Lab, LabPorts
from drctl.lab.workload import commit_offsets, create_topics
from drctl.replication.mirrormaker2 import java_literal
from drctl.retry import RetryPolicy
from tests.conftest import PORT_BASE, RunningLab
from tests.lab.support import assert_waited_out, fresh_clients, run_drctl, run_json
from tests.lab.test_app_scope import _commit_at_end
from tests.lab.test_gap_compacted import wait_for
from tests.lab.test_reprotect import PARTS, _send, _wait_same

# Per commit with names kept; the prefixed lab in the full matrix (`make test-matrix`).
pytestmark = [pytest.mark.lab, pytest.mark.spark]
# + 40 .. + 59: clear of the shared labs (+ 0 .. + 39), the secure lab (+ 70), the registries
# (+ 80), the Spark Connect servers (+ 90, + 91), the Kafka 3.9 labs (+ 100, + 110), the test
# files' own (+ 120 .. + 150) and test_strimzi_lab.py's (+ 160 .. + 199). Not + 200 and up:
# that is the next xdist worker's PORT_BASE. A Strimzi lab takes 10 ports.
CYCLE_BASE = PORT_BASE + 40
PREFIXED_BASE = PORT_BASE + 50
SOURCE = "primary->secondary.MirrorSourceConnector"
CHECKPOINT = "primary->secondary.MirrorCheckpointConnector"
REVERSE = "secondary->primary.MirrorSourceConnector"
FORWARD_PATH = "/apis/kafka.strimzi.io/v1/namespaces/secondary/kafkamirrormaker2s/mm2"
REVERSE_PATH = "/apis/kafka.strimzi.io/v1/namespaces/primary/kafkamirrormaker2s/mm2"
BASE, GAP, POST, NEW = 30, 10, 20, 15


class StrimziCycle:
    def __init__(self, running: RunningLab, spark: str, tmp: Path) -> None:
        self.running = running
        self.lab = running.lab
        self.spark = spark
        self.tmp = tmp
        self.kube = KubeClient.from_kubeconfig(self.lab.strimzi.kubeconfig)
        self.connect = ConnectClient(self.lab.connect_url(running.state),
                                     policy=RetryPolicy(attempts=1))
        self.config = tmp / "drctl.yaml"

    def status_state(self, path: str, name: str) -> str | None:
        status = (self.kube.get(path).get("status") or {})
        for entry in status.get("connectors") or []:
            if entry.get("name") == name:
                return str(entry["connector"]["state"])
        return None

    def status_tasks(self, path: str, name: str) -> list[str] | None:
        status = (self.kube.get(path).get("status") or {})
        for entry in status.get("connectors") or []:
            if entry.get("name") == name:
                return [str(t["state"]) for t in entry.get("tasks") or []]
        return None

    def status_stopped(self, path: str, name: str) -> bool:
        """The status says `name` STOPPED with no task left."""
        status = (self.kube.get(path).get("status") or {})
        return any(e.get("name") == name and e["connector"]["state"] == "STOPPED"
                   and not e.get("tasks") for e in status.get("connectors") or [])

    def spec_state(self, path: str, role: str = "sourceConnector") -> str:
        return str(self.kube.get(path)["spec"]["mirrors"][0][role].get("state") or "running")

    def reconciled(self, path: str) -> bool:
        resource = self.kube.get(path)
        status = resource.get("status") or {}
        return status.get("observedGeneration") == resource["metadata"]["generation"] and \
            any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or [])

    def connect_state(self, name: str) -> str | None:
        try:
            return str(self.connect.connector_state(name)[0])
        except ConnectError:
            return None  # 404 (gone) or 409 around a rebalance

    def connect_tasks_down(self, name: str) -> bool:
        """Connect itself (read only) reports `name` with no task left: a STOPPED connector's
        task copies for a second or two after the connector says STOPPED."""
        try:
            state, tasks = self.connect.connector_state(name)
        except ConnectError:
            return False
        return state == "STOPPED" and not tasks

    def drctl(self, *argv: str) -> tuple[int, dict[str, Any]]:
        return run_json("--config", str(self.config), *argv)


@pytest.fixture(scope="module", params=["kept", pytest.param("prefixed",
                                                               marks=pytest.mark.matrix)])
def cycle(request: pytest.FixtureRequest, spark_remote: str,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[StrimziCycle]:
    """A Strimzi lab of this file's own (v1), topic names kept (per commit) or prefixed (the
    matrix); its gap jobs on the session's Spark Connect server."""
    kept = request.param == "kept"
    tmp = tmp_path_factory.mktemp(f"strimzi-cycle-{request.param}")
    lab = Lab(tmp / "lab")
    base = CYCLE_BASE if kept else PREFIXED_BASE
    try:
        state = lab.up(ports=LabPorts(base, base + 2, base + 4, base + 5, base + 9, base + 6,
                                      base + 7),
                       platform=STRIMZI, crd_version="v1", names_kept=kept,
                       spark_connect=spark_remote)
        running = RunningLab(lab, state)
        yield StrimziCycle(running, spark_remote, tmp)
        running.close()
    finally:
        lab.down(discard=True)  # a test's lab, done with: killed, not shut down


def test_config_init_from_the_resource_is_what_check_accepts(cycle: StrimziCycle) -> None:
    lab, state = cycle.lab, cycle.running.state
    status, out = run_json("config", "init", "--out", str(cycle.config), "--strimzi",
                           "secondary/mm2", "--kubeconfig", str(lab.strimzi.kubeconfig),
                           "--primary-bootstrap", lab.bootstrap(state, "primary"),
                           "--secondary-bootstrap", lab.bootstrap(state, "secondary"))
    assert status == 0, out
    raw = yaml.safe_load(cycle.config.read_text())
    rep = raw["replication"]
    assert rep["strimzi"]["namespace"] == "secondary" and rep["strimzi"]["name"] == "mm2", rep
    assert rep["connect"]["source_connector"] == SOURCE, rep
    assert rep["connect"]["checkpoint_connector"] == CHECKPOINT, rep
    # Where failback creates the reverse flow's resource: the user sets it, config init
    # cannot know (one KafkaMirrorMaker2 per target cluster, in its own namespace).
    assert "reverse_namespace" not in rep["strimzi"]
    rep["strimzi"].update(reverse_namespace="primary", reverse_name="mm2")
    # The tests' own: a marker store, quick retries, the session's Spark Connect server.
    raw["state"] = {"dir": str(cycle.tmp / "state")}
    raw["spark"] = {"remote": cycle.spark}
    raw["retry"] = {"initial_s": 0.2, "max_s": 1}
    cycle.config.write_text(yaml.safe_dump(raw))
    status, out = cycle.drctl("check")
    assert status == 0, [f for f in out.get("findings", []) if f["severity"] != "note"]


def test_failover_failback_reprotect_through_the_resources(cycle: StrimziCycle, ns: str
                                                           ) -> None:
    running = cycle.running
    topic, group = f"{ns}-acct", f"{ns}-app"
    create_topics(running.primary, (topic,), PARTS)
    running.wait_mirror_topic(topic)
    _send(fresh_clients(running, "primary"), topic, "base", BASE)
    _wait_same(running, topic)
    _commit_at_end(running, "primary", group, [topic])
    running.wait_checkpointed(group, topic, dict.fromkeys(range(PARTS), BASE))

    # Failover: the forward flow stopped in the resource, and its status says so.
    status, out = cycle.drctl("failover", "--yes")
    assert status == 0, out
    assert cycle.spec_state(FORWARD_PATH) == "stopped"
    assert cycle.spec_state(FORWARD_PATH, "checkpointConnector") == "stopped"
    assert cycle.reconciled(FORWARD_PATH)
    assert cycle.status_state(FORWARD_PATH, SOURCE) == "STOPPED"
    assert cycle.status_state(FORWARD_PATH, CHECKPOINT) == "STOPPED"
    # A resume through REST is put back: the resource, not the worker, holds the stop.
    log = cycle.lab.strimzi.operator.console_file
    put_back = f"Connector {SOURCE} is RUNNING: stop"
    before = log.read_text().count(put_back)
    cycle.connect.resume(SOURCE)
    wait_for("a REST resume put back", lambda: log.read_text().count(put_back) > before
             and cycle.connect_state(SOURCE) == "STOPPED", 20)
    # ... and reported so: the status written as the operator stopped it again may still
    # list the tasks Connect was shutting down (a copying connector, to failback).
    wait_for("the status says stopped again", lambda: cycle.status_stopped(FORWARD_PATH, SOURCE),
             20)
    # The put-back stop holds once the task the REST resume started is down: a gap record
    # written before that is copied (a fresh-clone run: 10 of 20 arrived, and were rightly
    # counted as post-failover writes in conflict).
    wait_for("the resumed task down again", lambda: cycle.connect_tasks_down(SOURCE), 30)

    # The gap (written on the primary after the stop) and the writes on the secondary.
    _send(fresh_clients(running, "primary"), topic, "gap", GAP)
    _send(fresh_clients(running, "secondary"), topic, "post", POST)
    _commit_at_end(running, "secondary", group, [topic])

    status, out = cycle.drctl("failback", "--yes")
    assert status == 0, out
    assert out["gap"]["safe"] == GAP * PARTS, out["gap"]
    assert out["reverse"]["connector"] == REVERSE, out["reverse"]
    moved = out["switch_back"]["summary"]
    assert (moved["groups"], moved["applied"], moved["not_delivered"]) == (1, 1, 0), moved
    # The reverse flow: a resource drctl made in the primary's namespace, its offsets given
    # through the ConfigMap key Strimzi reads, running.
    reverse = cycle.kube.get(REVERSE_PATH)
    assert reverse["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "drctl"
    assert reverse["spec"]["mirrors"][0]["source"]["alias"] == "secondary"
    assert cycle.spec_state(REVERSE_PATH) == "running"
    assert cycle.status_state(REVERSE_PATH, REVERSE) == "RUNNING"
    offsets = cycle.kube.get("/api/v1/namespaces/primary/configmaps/mm2-drctl-offsets")
    assert list(offsets["data"]) == ["secondary--primary.MirrorSourceConnector.json"]

    status, out = cycle.drctl("reprotect", "--yes", "--settle", "2s")
    assert status == 0, out
    assert out["status"] == "closed" and out["verified_ok"] is True, out
    with pytest.raises(KubeNotFound):  # retired: the resource drctl made is gone
        cycle.kube.get(REVERSE_PATH)
    wait_for("the reverse connector deleted", lambda: cycle.connect_state(REVERSE) is None, 20)
    assert cycle.spec_state(FORWARD_PATH) == "running"
    wait_for("forward runs", lambda: cycle.status_state(FORWARD_PATH, SOURCE) == "RUNNING", 20)

    # Protected again: new writes reach the secondary; every record once on both sides.
    _send(fresh_clients(running, "primary"), topic, "new", NEW)
    _wait_same(running, topic)
    status, st = cycle.drctl("status", "--deadline", "10s")
    assert st["replication"]["protection"]["state"] == "protected", st["replication"]
    assert status == 0, st


def test_the_source_killed_under_guard_then_the_next_cycle(cycle: StrimziCycle, ns: str
                                                          ) -> None:
    """The next incident, after the first cycle: guard keeps the groups' positions, the
    primary is killed, failover (the forward flow stopped through the resource with its source
    down) starts every group exactly where it was; once the primary is back, audit counts
    nothing re-read and nothing skipped, and failback and reprotect protect the pair again."""
    running = cycle.running
    topic, done, mid = f"{ns}-g", f"{ns}-done", f"{ns}-mid"
    create_topics(running.primary, (topic,), PARTS)
    running.wait_mirror_topic(topic)
    _send(fresh_clients(running, "primary"), topic, "base", BASE)
    _wait_same(running, topic)
    _commit_at_end(running, "primary", done, [topic])
    commit_offsets(fresh_clients(running, "primary"), mid,
                   [TopicPartition(topic, p, BASE // 2) for p in range(PARTS)])
    status, out = cycle.drctl("guard", "--once", "--groups", f"{ns}-.*")
    assert status == 0, out
    assert out["rounds"][0]["written"] == 2 * PARTS, out["rounds"]

    cycle.lab.fail("primary")
    try:
        status, out = cycle.drctl("failover", "--yes", "--groups", f"{ns}-.*",
                                  "--deadline", "5")
        assert status == 0, out
        assert cycle.spec_state(FORWARD_PATH) == "stopped"
        # No task left; the connector itself may hang in its stop() with its source down
        # (RUNNING with no tasks), as on the Connect lab.
        assert cycle.status_tasks(FORWARD_PATH, SOURCE) == [], cycle.kube.get(FORWARD_PATH)
        parts = [p for g in out["translation"]["groups"] for p in g["partitions"]]
        assert len(parts) == 2 * PARTS and {p["confidence"] for p in parts} == {"snapshot"}
        # Independent count: right after the copy of the last record each group read.
        offset_of = {(r.partition, r.value): r.offset
                     for r in read_all(fresh_clients(running, "secondary"),
                                       running.mirror(topic))}
        applied = committed_offsets(fresh_clients(running, "secondary"), [done, mid])
        for group, read_upto in ((done, BASE), (mid, BASE // 2)):
            for p in range(PARTS):
                last = f"base-v-{p}-{read_upto - 1}".encode()
                assert applied[group][(running.mirror(topic), p)] == offset_of[(p, last)] + 1
    finally:
        cycle.lab.heal("primary")
    status, audit = cycle.drctl("audit")
    assert status == 0, audit
    rows = [r for r in audit["positions"] if r["group"] in (done, mid)]
    assert len(rows) == 2 * PARTS and all(
        (r["redelivered"], r["skipped"]) == (0, 0) for r in rows), rows

    # The cycle closes as the first did: back, and protected again.
    _send(fresh_clients(running, "secondary"), topic, "post", POST)
    status, out = cycle.drctl("failback", "--yes")
    assert status == 0, out
    assert out["reverse"]["connector"] == REVERSE, out["reverse"]
    status, out = cycle.drctl("reprotect", "--yes", "--settle", "2s")
    assert status == 0 and out["verified_ok"] is True, out
    _send(fresh_clients(running, "primary"), topic, "new", NEW)
    _wait_same(running, topic)
    wait_for("forward runs", lambda: cycle.status_state(FORWARD_PATH, SOURCE) == "RUNNING", 20)


def test_one_applications_cycle_while_the_other_replicates(cycle: StrimziCycle, ns: str,
                                                          tmp_path: Path) -> None:
    """Application A's incident on the Strimzi lab: A's topics left out of the forward
    resource's mirror while B's go on copying, A's reverse flow in a resource of its own,
    A's start set in the forward source connector (stopped a moment, running again), every
    record once; B's groups never moved."""
    running = cycle.running
    a1, b1 = f"{ns}-a1", f"{ns}-b1"
    a_group, b_group = f"{ns}-a-app", f"{ns}-b-app"
    raw = yaml.safe_load(cycle.config.read_text())
    raw["state"] = {"dir": str(tmp_path / "state")}
    raw["groups"] = {"include": [f"{ns}-.*"]}
    raw["applications"] = {"A": {"topics": [f"{ns}-a.*"], "groups": [f"{ns}-a-.*"]},
                           "B": {"topics": [f"{ns}-b.*"], "groups": [f"{ns}-b-.*"]}}
    config = tmp_path / "drctl.yaml"
    config.write_text(yaml.safe_dump(raw))
    c = ["--config", str(config)]
    create_topics(running.primary, (a1, b1), PARTS)
    for t in (a1, b1):
        running.wait_mirror_topic(t)
        _send(fresh_clients(running, "primary"), t, "base", BASE)
    for t in (a1, b1):
        _wait_same(running, t)
    _commit_at_end(running, "primary", a_group, [a1])
    _commit_at_end(running, "primary", b_group, [b1])

    status, out = run_json(*c, "failover", "--app", "A", "--yes")
    assert status == 0, out
    mirror = cycle.kube.get(FORWARD_PATH)["spec"]["mirrors"][0]
    # Left out in the resource: the mirror's pattern, a regex matching A's topic alone.
    assert java_literal(a1) in str(mirror.get("topicsExcludePattern")), mirror
    assert cycle.spec_state(FORWARD_PATH) == "running"  # the rest copies
    _send(fresh_clients(running, "primary"), b1, "during", GAP)
    _wait_same(running, b1)  # B's records still reach the secondary
    _send(fresh_clients(running, "primary"), a1, "gap", GAP)
    _send(fresh_clients(running, "secondary"), a1, "post", POST)
    _commit_at_end(running, "secondary", a_group,
                   [running.mirror(a1) if running.names_kept else a1])

    status, out = run_json(*c, "failback", "--app", "A", "--yes")
    assert status == 0, out
    assert out["gap"]["safe"] == GAP * PARTS, out["gap"]
    moved = out["switch_back"]["summary"]
    assert (moved["groups"], moved["applied"], moved["not_delivered"]) == (1, 1, 0), moved
    resource = out["reverse"]["resource"]
    assert resource.startswith("primary/mm2-a-"), out["reverse"]
    status, out = run_json(*c, "reprotect", "--app", "A", "--yes", "--settle", "2s")
    assert status == 0 and out["status"] == "closed" and out["verified_ok"], out
    namespace, name = resource.split("/")
    with pytest.raises(KubeNotFound):  # A's reverse resource retired
        cycle.kube.get(f"/apis/kafka.strimzi.io/v1/namespaces/{namespace}/kafkamirrormaker2s/"
                       f"{name}")
    mirror = cycle.kube.get(FORWARD_PATH)["spec"]["mirrors"][0]
    assert java_literal(a1) not in str(mirror.get("topicsExcludePattern") or ""), mirror
    for t in (a1, b1):
        _send(fresh_clients(running, "primary"), t, "new", NEW)
    for t in (a1, b1):
        _wait_same(running, t)
    back = committed_offsets(fresh_clients(running, "primary"), [b_group])
    assert all(back[b_group][(b1, p)] == BASE for p in range(PARTS)), back
    status, st = run_json(*c, "status", "--deadline", "10s")
    assert status == 0 and {a: v["state"] for a, v in
                            st["replication"]["applications"].items()} == {
        "A": "protected", "B": "protected"}, st["replication"]


def test_the_operator_down_during_a_failover_is_exit_4_then_a_rerun_finishes(
        cycle: StrimziCycle) -> None:
    lab_dir = str(cycle.lab.dir)
    status, _, err = run_drctl("lab", "operator", "stop", "--dir", lab_dir)
    assert status == 0, err
    try:
        status, out = cycle.drctl("failover", "--yes", "--deadline", "8")
        assert status == 4, out
        assert "Strimzi's cluster operator" in out["error"]["message"], out["error"]
        assert "KafkaMirrorMaker2 secondary/mm2" in out["error"]["message"], out["error"]
        assert_waited_out(out, 8)
        # Written to the resource, not done: the worker still copies.
        assert cycle.spec_state(FORWARD_PATH) == "stopped"
        assert cycle.connect_state(SOURCE) == "RUNNING"
    finally:
        status, _, err = run_drctl("lab", "operator", "start", "--dir", lab_dir)
        assert status == 0, err
    status, out = cycle.drctl("failover", "--yes")
    assert status == 0, out
    assert cycle.reconciled(FORWARD_PATH)
    assert cycle.status_state(FORWARD_PATH, SOURCE) == "STOPPED"

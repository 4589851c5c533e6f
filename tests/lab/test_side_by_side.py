"""Incidents side by side (issue 44), with both namings, in one cycle: two one-off scopes A and
B (`--topics`) fail over at the same moment from two processes; the whole flow fails over
(the rest: C) and back; A fails back and returns while the whole flow still holds the forward
flow stopped (its return waits); B fails back; the whole flow returns and finishes A's; B's
return is killed while the shared source connector is stopped for its start, then refused for
a write after its cut-over, then finished.

Checked on the way: both processes' entries survive in the shared connectors, each `--topics`
incident really fails over (its own marker, topics and reverse connector), the forward
connectors stay stopped while the whole flow holds them, a crash between a stop and its
resume is repaired by the next run and a refusal leaves the flow copying. At the end, after
the last write: no reverse connector left, every forward connector running, every record on
both clusters exactly once, a new record copied once and nothing else moving (no loop), every
application PROTECTED, and both connectors' configs exactly as before — the source
connector's `topics.blacklist` kept through the cycle, the checkpoint connector's
`groups.exclude` absent again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from drctl.config import load_config
from drctl.flow_lock import LockRecord, TopicLog
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import read_all
from drctl.kafka.topics import log_append_time_topics
from drctl.lab.workload import commit_offsets, create_topics
from drctl.replication.control import ConnectorReading
from drctl.state import marker_store
from tests.conftest import RunningLab, on_kafka_3
from tests.lab.support import fresh_clients, produce, run_json
from tests.lab.test_failback import restore
from tests.lab.test_failover import scoped_config
from tests.lab.test_reprotect import PARTS, _end, _send, _sides, _wait_same

pytestmark = [pytest.mark.lab, pytest.mark.spark]
BASE, GAP, POST = 30, 5, 10


@pytest.fixture
def side_lab(any_lab: RunningLab) -> Iterator[RunningLab]:
    yield any_lab
    restore(any_lab)  # `lab up` puts the connectors' configs back and resumes them


def _drctl(config: Path, *argv: str, crash_at: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    if crash_at:
        env["DRCTL_CRASH_AT"] = crash_at
    return subprocess.Popen([sys.executable, "-m", "drctl", "--config", str(config), "-o",
                             "json", *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finished(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any], str]:
    out, err = proc.communicate(timeout=600)
    return proc.returncode, (json.loads(out) if out.strip() else {}), err


def _state(lab: RunningLab, name: str, settle_s: float = 60) -> str:
    """The connector's state once Connect has assigned it: Kafka Connect 3.9 reads a
    connector whose config changed while it was stopped UNASSIGNED until the rebalance the
    change started is over (4.x reads STOPPED at once)."""
    client = lab.lab.connect_client(lab.state)
    end = time.monotonic() + settle_s
    while (state := ConnectorReading.read(client, name).state) == "UNASSIGNED" \
            and time.monotonic() < end:
        time.sleep(0.5)
    return state


def _commit_at_end(lab: RunningLab, cluster: str, group: str, topic: str) -> None:
    """`group` at the end of `topic` (on the secondary: the failover topic, where the
    application's producers write)."""
    commit_offsets(fresh_clients(lab, cluster), group,
                   [TopicPartition(topic, p, _end(lab, topic, p, cluster))
                    for p in range(PARTS)])


def _ends(lab: RunningLab, topics: tuple[str, ...]) -> dict[tuple[str, str, int], int]:
    """Every partition's end of everything that holds `topics`' records on both clusters
    (their own topics, mirrors, failover topics and reverse copies)."""
    out = {}
    for cluster, side in (("primary", 0), ("secondary", 1)):
        admin = fresh_clients(lab, cluster).admin()
        there = admin.list_topics(timeout=10).topics
        tps = [(name, p) for t in topics for name in _sides(lab, t)[side] if name in there
               for p in range(PARTS)]
        out.update({(cluster, name, p): end
                    for (name, p), (_, end) in watermarks(admin, tps).items()})
    return out


@on_kafka_3("any_lab")
def test_incidents_side_by_side(side_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    lab = side_lab
    a1, b1, c1 = f"{ns}-a1", f"{ns}-b1", f"{ns}-c1"
    groups = {a1: f"{ns}-a-app", b1: f"{ns}-b-app", c1: f"{ns}-c-app"}
    config = scoped_config(lab, ns, tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["replication"]["topics"] = {"include": [f"{ns}-.*"]}
    raw["state"]["snapshots_topic"] = f"_drctl_snapshots_{ns}"
    raw["groups"] = {"include": [f"{ns}-.*"]}
    raw["applications"] = {n: {"topics": [f"{ns}-{n.lower()}.*"]} for n in "ABC"}
    config.write_text(yaml.safe_dump(raw))
    c = ["--config", str(config)]
    connect = lab.lab.connect_client(lab.state, deadline_s=60)
    names = lab.lab.flow(lab.state).connector_names()
    src, cp = names["source"], names["checkpoint"]
    # The operator keeps a topic out with MirrorMaker 2's old key.
    connect.put_config(src, {**connect.config(src), "topics.blacklist": f"{ns}-secret.*"})
    before = {n: connect.config(n) for n in (src, cp)}
    create_topics(lab.primary, (a1, b1, c1), PARTS)
    for t in (a1, b1, c1):
        lab.wait_mirror_topic(t)
    for t in (a1, b1, c1):
        _send(fresh_clients(lab, "primary"), t, "base", BASE)
    for t in (a1, b1, c1):
        _wait_same(lab, t)
        _commit_at_end(lab, "primary", groups[t], t)

    # (b), (c) A and B fail over at the same moment, two processes, two --topics scopes.
    runs = {t: _drctl(config, "failover", "--topics", f"{t}.*", "--groups",
                      f"{groups[t]}.*", "--yes") for t in (a1, b1)}
    done = {t: _finished(p) for t, p in runs.items()}
    for t, (status, out, err) in done.items():
        assert status == 0, (t, out, err[-3000:])
        assert list(out["marker"]["topics"]) == [t] and list(out["marker"]["groups"]) == [
            groups[t]], out["marker"]
    incident = {t: out["incident"] for t, (_, out, _) in done.items()}
    assert incident[a1] != incident[b1]
    during = {n: connect.config(n) for n in (src, cp)}
    for t in (a1, b1):  # both processes' entries survive
        assert t.replace("-", "\\-") in during[src]["topics.exclude"].split(","), during[src]
        assert groups[t].replace("-", "\\-") in during[cp]["groups.exclude"].split(","), during
    assert during[src]["topics.blacklist"] == f"{ns}-secret.*"
    for t in (a1, b1):  # their gap: never copied forward
        _send(fresh_clients(lab, "primary"), t, "gap", GAP)

    # (a) The whole flow fails over (the rest: C) while A and B are open.
    status, out = run_json(*c, "failover", "--yes")
    assert status == 0, out
    whole = out["incident"]
    assert list(out["marker"]["topics"]) == [c1], out["marker"]["topics"]
    assert _state(lab, src) == "STOPPED"
    # Every application's producers and consumers now on the secondary.
    for t in (a1, b1, c1):
        _send(fresh_clients(lab, "secondary"), t, "post", POST)
        _commit_at_end(lab, "secondary", groups[t], t)
    status, out = run_json(*c, "failback", "--incident", whole, "--yes")
    assert status == 0, out

    # A fails back and returns inside the open whole-flow incident: its return waits.
    status, out = run_json(*c, "failback", "--incident", incident[a1], "--yes")
    assert status == 0 and out["gap"]["safe"] == GAP * PARTS, out
    status, out = run_json(*c, "reprotect", "--incident", incident[a1], "--yes", "--settle",
                           "2s")
    assert status == 0 and out["waiting_for"] == whole and out["status"] == "open", out
    assert (_state(lab, src), _state(lab, cp)) == ("STOPPED", "STOPPED")  # held by the whole
    assert a1.replace("-", "\\-") not in connect.config(src)["topics.exclude"].split(",")
    status, out = run_json(*c, "failback", "--incident", incident[b1], "--yes")
    assert status == 0 and out["gap"]["safe"] == GAP * PARTS, out

    # The whole flow returns, and finishes A's return; B stays left out, its reverse flow on.
    status, out = run_json(*c, "reprotect", "--incident", whole, "--yes", "--settle", "2s")
    assert status == 0 and out["status"] == "closed" and out["verified_ok"], out
    assert [(f["incident"], f["status"], f["verified_ok"]) for f in out["finished"]] == [
        (incident[a1], "closed", True)], out["finished"]
    assert (_state(lab, src), _state(lab, cp)) == ("RUNNING", "RUNNING")

    # (d) B's return killed with the source connector stopped for its start: the next run
    # resumes it first; a write after the cut-over refuses that run, the flow still copying.
    status, out, err = _finished(_drctl(config, "reprotect", "--incident", incident[b1],
                                        "--yes", "--settle", "2s",
                                        crash_at="forward-start:paused"))
    assert status == -9, err[-3000:]
    assert _state(lab, src) == "STOPPED"  # what a crash leaves: the whole flow unprotected
    produce(fresh_clients(lab, "secondary"), b1, [(p, b"late", b"late") for p in range(PARTS)])
    status, out = run_json(*c, "reprotect", "--incident", incident[b1], "--yes", "--settle",
                           "2s")
    assert status == 3 and "wrote to secondary after the cut-over" in out["error"]["message"]
    assert (_state(lab, src), _state(lab, cp)) == ("RUNNING", "RUNNING")
    status, out = run_json(*c, "reprotect", "--incident", incident[b1], "--yes", "--settle",
                           "2s")
    assert status == 0 and out["status"] == "closed" and out["verified_ok"], out

    # After the last write: no reverse flow, nothing stopped, every record once.
    assert not [n for n in connect.connectors() if n.startswith("mm2-secondary-primary")]
    assert {n: _state(lab, n) for n in names.values()} == dict.fromkeys(names.values(),
                                                                        "RUNNING")
    for t in (a1, b1, c1):
        _wait_same(lab, t)
    # No loop: a new record is copied once and nothing else moves.
    before_ends = _ends(lab, (a1, b1, c1))
    for t in (a1, b1, c1):
        _send(fresh_clients(lab, "primary"), t, "last", 1)
    for t in (a1, b1, c1):
        _wait_same(lab, t)
    grew = {k: n - before_ends[k] for k, n in _ends(lab, (a1, b1, c1)).items()}
    copied = {("primary", t) for t in (a1, b1, c1)} | {("secondary", lab.mirror(t))
                                                      for t in (a1, b1, c1)}
    assert grew == {k: int(k[:2] in copied) for k in grew}, grew
    status, st = run_json(*c, "status", "--deadline", "10s")
    apps = st["replication"]["applications"]
    assert {a: v["state"] for a, v in apps.items()} == dict.fromkeys("ABC", "protected"), {
        a: v.get("why") for a, v in apps.items()}
    assert status == 0, st
    assert {n: connect.config(n) for n in (src, cp)} == before


def _app_config(lab: RunningLab, ns: str, tmp_path: Path, **apps: str) -> list[str]:
    """The lab's config limited to this test, with applications named by their topic and
    group prefix; `--config` and its path."""
    config = scoped_config(lab, ns, tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["state"]["snapshots_topic"] = f"_drctl_snapshots_{ns}"
    raw["groups"] = {"include": [f"{ns}-.*"]}
    raw["applications"] = {name: {"topics": [f"{ns}-{prefix}.*"],
                                  "groups": [f"{ns}-{prefix}-.*"]}
                           for name, prefix in apps.items()}
    config.write_text(yaml.safe_dump(raw))
    return ["--config", str(config)]


def _exact_and_protected(lab: RunningLab, c: list[str], topics: tuple[str, ...]) -> None:
    """Every record once on each side, a new record copied once and nothing else moving (no
    loop), every application PROTECTED."""
    for t in topics:
        _wait_same(lab, t)
    before_ends = _ends(lab, topics)
    for t in topics:
        _send(fresh_clients(lab, "primary"), t, "last", 1)
    for t in topics:
        _wait_same(lab, t)
    grew = {k: n - before_ends[k] for k, n in _ends(lab, topics).items()}
    copied = {("primary", t) for t in topics} | {("secondary", lab.mirror(t)) for t in topics}
    assert grew == {k: int(k[:2] in copied) for k in grew}, grew
    status, st = run_json(*c, "status", "--deadline", "10s")
    apps = st["replication"]["applications"]
    assert {a: v["state"] for a, v in apps.items()} == dict.fromkeys(apps, "protected"), {
        a: (v["state"], v.get("why")) for a, v in apps.items()}
    assert status == 0, st


def test_the_whole_flow_return_finishes_the_application_return_that_waited(
        side_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    """Issue 51, finding 13, as a new user meets it: A fails over, then the whole flow; both
    fail back; A's return waits for the whole flow's; A's producers are back on the primary
    and write; the whole flow's return resumes the forward flow, which copies those writes
    into A's topics on the secondary — copies, not writes to the secondary — and finishes A's
    return. Both closed, every record once, both re-runs exit 0 changing nothing."""
    lab = side_lab
    a1, c1 = f"{ns}-a1", f"{ns}-c1"
    groups = {a1: f"{ns}-a-app", c1: f"{ns}-c-app"}
    c = _app_config(lab, ns, tmp_path, A="a", C="c")
    connect = lab.lab.connect_client(lab.state, deadline_s=60)
    names = lab.lab.flow(lab.state).connector_names()
    src, cp = names["source"], names["checkpoint"]
    before = {n: connect.config(n) for n in (src, cp)}
    create_topics(lab.primary, (a1, c1), PARTS)
    for t in (a1, c1):
        lab.wait_mirror_topic(t)
    for t in (a1, c1):
        _send(fresh_clients(lab, "primary"), t, "base", BASE)
    for t in (a1, c1):
        _wait_same(lab, t)
        _commit_at_end(lab, "primary", groups[t], t)

    status, out = run_json(*c, "failover", "--app", "A", "--yes")
    assert status == 0, out
    app = out["incident"]
    _send(fresh_clients(lab, "primary"), a1, "gap", GAP)  # never copied forward
    status, out = run_json(*c, "failover", "--yes")
    assert status == 0 and list(out["marker"]["topics"]) == [c1], out
    whole = out["incident"]
    for t in (a1, c1):  # every producer and consumer on the secondary
        _send(fresh_clients(lab, "secondary"), t, "post", POST)
        _commit_at_end(lab, "secondary", groups[t], t)
    for incident in (app, whole):
        status, out = run_json(*c, "failback", "--incident", incident, "--yes")
        assert status == 0, out

    status, out = run_json(*c, "reprotect", "--app", "A", "--yes", "--settle", "2s")
    assert status == 0 and out["waiting_for"] == whole and out["status"] == "open", out
    assert (_state(lab, src), _state(lab, cp)) == ("STOPPED", "STOPPED")  # held by the whole
    # A's producers are back on the primary, as its return asked.
    _send(fresh_clients(lab, "primary"), a1, "back", POST)

    status, out = run_json(*c, "reprotect", "--incident", whole, "--yes", "--settle", "2s")
    assert status == 0 and out["status"] == "closed" and out["verified_ok"], out
    finished = {f["incident"]: f for f in out["finished"]}
    assert list(finished) == [app], out["finished"]
    # A's own check: what the primary received since A's cut-over, the back writes among it,
    # is on the secondary once, nothing there alone.
    assert (finished[app]["status"], finished[app]["verified_ok"]) == ("closed", True)
    assert finished[app]["forward_copied"] >= POST * PARTS, finished[app]
    assert (_state(lab, src), _state(lab, cp)) == ("RUNNING", "RUNNING")

    # Run again, each as it was run: nothing left to do, nothing applied twice.
    status, out = run_json(*c, "reprotect", "--incident", whole, "--yes", "--settle", "2s")
    assert status == 0 and out["status"] == "closed" and out["finished"] == [], out
    status, out = run_json(*c, "reprotect", "--app", "A", "--yes", "--settle", "2s")
    assert status == 0 and (out["incident"], out["status"]) == (app, "closed"), out
    _exact_and_protected(lab, c, (a1, c1))
    assert {n: connect.config(n) for n in (src, cp)} == before


def test_a_new_incident_leaves_out_the_topic_its_application_gained(
        side_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    """Issue 51, finding 2: A fails over (its topic a1 left out of the forward connectors);
    A gains a2, which replicates forward; a new outage: `failover --app A --new-incident`
    supersedes the old incident, keeps its entries and leaves a2 out too — a2's writes on the
    primary after the failover are gap, never copied forward — and the cycle ends exact, the
    connectors' configs as before."""
    lab = side_lab
    a1, a2 = f"{ns}-a1", f"{ns}-a2"
    group = f"{ns}-a-app"
    c = _app_config(lab, ns, tmp_path, A="a")
    connect = lab.lab.connect_client(lab.state, deadline_s=60)
    names = lab.lab.flow(lab.state).connector_names()
    src, cp = names["source"], names["checkpoint"]
    before = {n: connect.config(n) for n in (src, cp)}
    create_topics(lab.primary, (a1,), PARTS)
    lab.wait_mirror_topic(a1)
    _send(fresh_clients(lab, "primary"), a1, "base", BASE)
    _wait_same(lab, a1)
    _commit_at_end(lab, "primary", group, a1)

    status, out = run_json(*c, "failover", "--app", "A", "--yes")
    assert status == 0 and list(out["marker"]["topics"]) == [a1], out
    old = out["incident"]
    _send(fresh_clients(lab, "primary"), a1, "gap", GAP)  # never copied forward
    # A gains a topic; only a1 is left out, so the forward flow mirrors and copies it.
    create_topics(lab.primary, (a2,), PARTS)
    lab.wait_mirror_topic(a2)
    _send(fresh_clients(lab, "primary"), a2, "base", BASE)
    _wait_same(lab, a2)
    _commit_at_end(lab, "primary", group, a2)

    status, out = run_json(*c, "failover", "--app", "A", "--new-incident", "--yes")
    assert status == 0, out
    new = out["incident"]
    assert sorted(out["marker"]["topics"]) == [a1, a2], out["marker"]["topics"]
    left_out = {(e["connector"], e["key"]): e["wanted"] for e in out["marker"]["edits"]}
    literal = {t: t.replace("-", "\\-") for t in (a1, a2)}
    for name in (src, cp):
        assert sorted(left_out[(name, "topics.exclude")]) == sorted(literal.values()), left_out
        assert set(literal.values()) <= set(connect.config(name)["topics.exclude"].split(","))
    superseded = marker_store(load_config(Path(c[1])), None).get(old)
    assert superseded.status == "closed" and superseded.done("superseded"), superseded.steps
    # a2's gap: written on the primary after the failover, left to failback.
    _send(fresh_clients(lab, "primary"), a2, "gap", GAP)
    for t in (a1, a2):
        _send(fresh_clients(lab, "secondary"), t, "post", POST)
    _commit_at_end(lab, "secondary", group, a1)
    _commit_at_end(lab, "secondary", group, a2)
    status, out = run_json(*c, "failback", "--incident", new, "--yes")
    assert status == 0, out
    # Both gaps found, none copied forward meanwhile: a1's since the old failover, a2's.
    assert out["gap"]["safe"] == 2 * GAP * PARTS, out["gap"]
    status, out = run_json(*c, "reprotect", "--incident", new, "--yes", "--settle", "2s")
    assert status == 0 and out["status"] == "closed" and out["verified_ok"], out
    status, out = run_json(*c, "reprotect", "--incident", new, "--yes", "--settle", "2s")
    assert status == 0 and out["status"] == "closed", out
    _exact_and_protected(lab, c, (a1, a2))
    assert {n: connect.config(n) for n in (src, cp)} == before


def test_a_lock_topic_stamped_by_its_writers_is_set_to_the_brokers_time(
        lab: RunningLab, ns: str) -> None:
    """Issue 51 #3: a lock topic that exists with CreateTime (made by a tool that left the
    setting out) would compare two machines' clocks; the first lock record sets it to
    LogAppendTime, and what is read back carries the broker's time."""
    topic = f"{ns}.state.lock"
    clients = fresh_clients(lab, "secondary")
    admin = clients.admin()
    created = admin.create_topics([NewTopic(topic, 1, replication_factor=-1, config={
        "message.timestamp.type": "CreateTime"})])
    created[topic].result(30)
    assert topic not in log_append_time_topics(admin, [topic])
    heard: list[str] = []
    log = TopicLog(clients, topic, "primary->secondary", heard.append)
    claim = LockRecord("claim", "a", "drctl failover", "bastion", 7, 60_000)
    log.append(claim)
    assert topic in log_append_time_topics(admin, [topic])
    assert any("set it to the broker's" in line for line in heard), heard
    records = read_all(clients, topic)
    assert [r.timestamp_type for r in records] == [2]  # LogAppendTime
    assert [r.holder for r in log.read()] == ["a"]

"""Active-active (issue 52): MirrorMaker 2 both ways, names prefixed. Producers in both regions,
aggregate groups in both regions and a local-only group of the primary; the primary fails
over to the secondary and back. Every group, read end to end against what each producer
acknowledged: no record skipped, none delivered twice — with the primary SIGKILLed
mid-stream (the records it held that the secondary never got are named as late arrivals)
and in a planned switchover and back (no late arrival). Beside it, what MirrorMaker 2's own
checkpoints would have given each group, measured on the same run (printed; the numbers are
in the issue's note)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from drctl.config import load_config
from drctl.lab.workload import create_topics
from drctl.ops.active_active.pair import Pair
from drctl.ops.steps.guard import Guard
from tests.conftest import RunningLab
from tests.lab.support import fresh_clients, run_drctl

pytestmark = pytest.mark.lab
PARTITIONS = 2
REGIONS = ("primary", "secondary")


class RegionProducer:
    """A region's producer: writes `<region>:<n>` to the local topic of whichever region it
    runs in, in a thread, and keeps what was acknowledged."""

    def __init__(self, lab: RunningLab, region: str, topic: str) -> None:
        self.lab, self.region, self.topic = lab, region, topic
        self.acked: set[str] = set()
        self.sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None

    def start(self, cluster: str) -> None:
        assert self._thread is None
        self._stop.clear()
        self._producer = Producer({"bootstrap.servers": self.lab.lab.bootstrap(
            self.lab.state, cluster), "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 15000})
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"producer-{self.region}")
        self._thread.start()

    def _run(self) -> None:
        producer = self._producer
        assert producer is not None

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                self.acked.add(msg.value().decode())

        while not self._stop.is_set():
            value = f"{self.region}:{self.sent}"
            try:
                producer.produce(self.topic, key=str(self.sent % 11).encode(),
                                 value=value.encode(), on_delivery=delivered)
                self.sent += 1
            except BufferError:
                pass
            producer.poll(0)
            time.sleep(0.01)  # about 100 records a second: a small test

    def stop(self, *, flush_s: float = 20.0) -> None:
        """Stops writing; what is in flight is waited for (`flush_s`), the rest dropped."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        if self._producer is not None:
            self._producer.flush(flush_s)
            self._producer.purge()
            self._producer.flush(0)
        self._thread, self._producer = None, None

    def wait_acked(self, more: int, deadline_s: float = 60) -> None:
        want = len(self.acked) + more
        end = time.monotonic() + deadline_s
        while len(self.acked) < want:
            assert time.monotonic() < end, f"{self.region}: only {len(self.acked)} acked"
            time.sleep(0.05)


@dataclass
class App:
    """A consumer group as its application runs it: in one region at a time, subscribed to
    one regex there; every record it read, with where."""

    group: str
    home: str
    aggregate: bool
    topic: str
    read: list[tuple[str, str, int, int, str]] = field(default_factory=list)

    def pattern(self, lab: RunningLab, cluster: str) -> str:
        pair = Pair(load_config(lab.config_file))
        local = self.home == cluster
        if self.aggregate or not local:
            # Aggregate: the local topic and the other region's copy. Failed over, a
            # local-only group reads its records' copies and where its producers write now.
            return pair.aggregate_regex(cluster, [self.topic])
        return f"^{self.topic}$"

    def drain(self, lab: RunningLab, cluster: str, pattern: str | None = None) -> int:
        """Read until every partition it is assigned is at the end it had when the drain
        began (producers may be writing on), committing as it goes, then leave the group
        (inactive: drctl may move it). `pattern`: another subscription than its own."""
        consumer = Consumer({
            "bootstrap.servers": lab.lab.bootstrap(lab.state, cluster),
            "group.id": self.group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "isolation.level": "read_committed",
            "topic.metadata.refresh.interval.ms": 1000, "session.timeout.ms": 6000})
        pattern = pattern or self.pattern(lab, cluster)
        expected = _ends(lab, cluster, _topics_matching(lab, cluster, pattern))
        consumer.subscribe([pattern])
        got = 0
        end = time.monotonic() + 90
        try:
            while True:
                assert time.monotonic() < end, f"{self.group} did not drain on {cluster}"
                msgs = [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
                for m in msgs:
                    self.read.append((cluster, m.topic(), m.partition(), m.offset(),
                                      m.value().decode()))
                got += len(msgs)
                if msgs:
                    consumer.commit(asynchronous=False)
                # Producers may be writing on: done at the ends the drain began with.
                if _caught_up(consumer, expected):
                    return got
        finally:
            consumer.close()

    def verdict(self, expected: set[str], acked: set[str]) -> dict[str, Any]:
        """Against what the producers acknowledged (`expected`: what the group must read,
        `acked`: every region's): records never read, and records read twice because of a
        position (read from two places, or the same offset twice); a record MirrorMaker 2
        copied twice into one topic is counted apart, and so are the other region's records
        a local-only group read on the shared topic while failed over."""
        where: dict[str, list[tuple[str, str, int, int]]] = {}
        for cluster, topic, partition, offset, value in self.read:
            where.setdefault(value, []).append((cluster, topic, partition, offset))
        twice, recopied = [], []
        for value, places in where.items():
            if len(places) < 2:
                continue
            # The same topic-partition holding the value at several offsets, each read once:
            # the replicator's re-copy, not a position's doing.
            if len(set(places)) == len(places) and len({p[:3] for p in places}) == 1:
                recopied.append(value)
            else:
                twice.append(value)
        return {"read": len(self.read), "skipped": sorted(expected - where.keys()),
                "twice": sorted(twice), "recopied_by_mm2": sorted(recopied),
                "other_region": len((where.keys() & acked) - expected),
                "unacknowledged": len(where.keys() - acked)}


def copy_name(lab: RunningLab, region: str, topic: str) -> str:
    """`region`'s local `topic` as the other region holds it (its flow's rename: the suite's
    active-active lab runs MirrorMaker 2 with separator '_', primary_orders)."""
    return Pair(load_config(lab.config_file)).copy_name(region, topic)


def _topics_matching(lab: RunningLab, cluster: str, pattern: str) -> dict[str, int]:
    import re

    topics = fresh_clients(lab, cluster).admin().list_topics(timeout=10).topics
    return {t: len(m.partitions) for t, m in topics.items() if re.fullmatch(pattern[1:-1], t)}


def _ends(lab: RunningLab, cluster: str, topics: dict[str, int]) -> dict[tuple[str, int],
                                                                        tuple[int, int]]:
    from drctl.kafka.offsets import watermarks

    return watermarks(fresh_clients(lab, cluster).admin(),
                      [(t, p) for t, n in topics.items() for p in range(n)])


def _caught_up(consumer: Consumer, expected: dict[tuple[str, int], tuple[int, int]]) -> bool:
    assignment = consumer.assignment()
    if {(tp.topic, tp.partition) for tp in assignment} != set(expected):
        return False
    committed = {(tp.topic, tp.partition): tp.offset
                 for tp in consumer.committed(assignment, timeout=10)}
    for tp in consumer.position(assignment):
        low, high = expected[(tp.topic, tp.partition)]
        at = tp.offset if tp.offset >= 0 else committed.get((tp.topic, tp.partition), -1)
        if at < 0:
            at = low  # nothing committed: auto.offset.reset earliest
        if at < high:
            return False
    return True


@dataclass
class Cycle:
    lab: RunningLab
    ns: str
    topic: str
    producers: dict[str, RegionProducer]
    apps: list[App]

    def drain(self, region_of: dict[str, str]) -> None:
        for app in self.apps:
            app.drain(self.lab, region_of[app.group])

    def guard_rounds(self, groups: str | None = None,
                     regions: tuple[str, ...] = REGIONS) -> None:
        """guard, one round per flow (out of `regions`) until every position of the test's
        groups (`groups`) is exact on the other region (what `drctl guard` keeps while it
        runs)."""
        pair = Pair(load_config(self.lab.config_file))
        for region in regions:
            with pair.context(region) as ctx:
                guard = Guard(ctx, groups=groups or f"{self.ns}-.*", deadline_s=30)
                end = time.monotonic() + 60
                while True:
                    result = guard.run_round()
                    if result.error is None and result.pending == 0 and result.positions:
                        break
                    assert time.monotonic() < end, f"guard on {region}: {result}"
                    time.sleep(0.5)

    def verdicts(self) -> dict[str, dict[str, Any]]:
        everything = set().union(*(p.acked for p in self.producers.values()))
        return {app.group: app.verdict(everything if app.aggregate
                                       else self.producers[app.home].acked, everything)
                for app in self.apps}


@pytest.fixture
def cycle(lab_aa: RunningLab, ns: str) -> Iterator[Cycle]:
    topic = f"{ns}-orders"
    for region in REGIONS:
        create_topics(fresh_clients(lab_aa, region), (topic,), PARTITIONS)
    _wait_topics(lab_aa, {"primary": copy_name(lab_aa, "secondary", topic),
                          "secondary": copy_name(lab_aa, "primary", topic)})
    producers = {r: RegionProducer(lab_aa, r, topic) for r in REGIONS}
    apps = [App(f"{ns}-agg-primary", "primary", True, topic),
            App(f"{ns}-agg-secondary", "secondary", True, topic),
            App(f"{ns}-local-primary", "primary", False, topic)]
    c = Cycle(lab_aa, ns, topic, producers, apps)
    try:
        yield c
    finally:
        for p in producers.values():
            p.stop(flush_s=1)


def _wait_topics(lab: RunningLab, wanted: dict[str, str], deadline_s: float = 180) -> None:
    end = time.monotonic() + deadline_s
    for cluster, topic in wanted.items():
        while topic not in fresh_clients(lab, cluster).admin().list_topics(timeout=10).topics:
            assert time.monotonic() < end, f"MirrorMaker 2 did not create {topic} on {cluster}"
            time.sleep(0.5)


def _json(status_out: tuple[int, str, str]) -> tuple[int, dict[str, Any]]:
    status, out, err = status_out
    try:
        return status, json.loads(out)
    except json.JSONDecodeError:
        raise AssertionError(f"exit {status}: {err}") from None


def _home(c: Cycle) -> dict[str, str]:
    return {a.group: a.home for a in c.apps}


def _failed_over(c: Cycle) -> dict[str, str]:
    return {a.group: "secondary" for a in c.apps}


def _wait_flows_caught_up(c: Cycle) -> None:
    """Until each region's local topic is copied whole into the other region."""
    for region, other in (("primary", "secondary"), ("secondary", "primary")):
        src, dst = fresh_clients(c.lab, region), fresh_clients(c.lab, other)
        end = time.monotonic() + 90
        while True:
            a = _counts(src, c.topic)
            b = _counts(dst, copy_name(c.lab, region, c.topic))
            if all(b.get(p, 0) >= n for p, n in a.items()):  # MM2 may re-copy: >=
                break
            assert time.monotonic() < end, f"{region} -> {other} behind: {a} vs {b}"
            time.sleep(0.5)


def _wait_copied(c: Cycle, deadline_s: float = 180) -> None:
    """Until each region's copy of the other's local topic holds a record per partition."""
    end = time.monotonic() + deadline_s
    for region, other in (("primary", "secondary"), ("secondary", "primary")):
        dst = fresh_clients(c.lab, other)
        while not all(n > 0 for n in _counts(dst, copy_name(c.lab, region, c.topic)).values()):
            assert time.monotonic() < end, f"{region} -> {other}: nothing copied yet"
            time.sleep(0.5)


def _counts(clients: Any, topic: str) -> dict[int, int]:
    admin = clients.admin()
    from drctl.kafka.offsets import watermarks

    return {p: hi for (t, p), (_lo, hi) in
            watermarks(admin, [(topic, p) for p in range(PARTITIONS)]).items()}


def _failback(c: Cycle) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`drctl failback --region primary`: the first run records where the primary's
    producers left the secondary and, before it resumes a flow, names its local-only group,
    which has not read that far (exit 3, nothing resumed); the group reads on there — its
    local topic alone, as the message says — and stops; the second run moves it. The last
    run's JSON, and its comparison with MirrorMaker 2's checkpoints."""
    config = str(c.lab.config_file)
    for attempt in range(2):
        status, back = _json(run_drctl("-c", config, "-o", "json", "failback", "--region",
                                       "primary", "--yes", "--timeout", "120s"))
        if status == 0:
            assert back["done"], back
            return back, [back["mm2_checkpoints"] or {}]
        assert status == 3 and attempt == 0, back
        message = back["error"]["message"]
        assert f"{c.ns}-local-primary: a local-only group that has not read" in message, message
        alone = f"^({re.escape(c.topic)})$"
        assert f"subscribed to {alone} alone" in message, message
        assert "Nothing was resumed" in back["error"]["hint"]
        local = next(a for a in c.apps if a.group == f"{c.ns}-local-primary")
        local.drain(c.lab, "secondary", pattern=alone)
    raise AssertionError("failback did not finish")


def _wait_checkpointed(c: Cycle, group: str, deadline_s: float = 90) -> None:
    """Until MirrorMaker 2 (primary -> secondary) checkpointed `group` on every partition of
    the primary's local topic."""
    from drctl.kafka.checkpoints import read_checkpoints

    with Pair(load_config(c.lab.config_file)).context("primary") as ctx:
        topic = ctx.require_kind().checkpoints_topic(ctx.rep) or ""
        copy = copy_name(c.lab, "primary", c.topic)
        end = time.monotonic() + deadline_s
        while not all((group, copy, p) in read_checkpoints(ctx.target, topic)
                      for p in range(PARTITIONS)):
            assert time.monotonic() < end, f"no checkpoint of {group} in {topic}"
            time.sleep(0.5)


def _report(label: str, c: Cycle, data: dict[str, Any]) -> None:
    print(f"\n{label}: " + json.dumps(data, sort_keys=True))


def test_planned_switchover_and_back(cycle: Cycle) -> None:
    c, config = cycle, str(cycle.lab.config_file)
    for region in REGIONS:
        c.producers[region].start(region)
        c.producers[region].wait_acked(100)
    _wait_copied(c)  # the aggregate groups read the copies (see the outage test)
    c.drain(_home(c))
    # The switchover: the primary's producers and consumers stopped, then it fails over.
    c.producers["primary"].stop()
    c.drain(_home(c))
    status, out = _json(run_drctl("-c", config, "-o", "json", "failover", "--region",
                                  "primary", "--planned", "--groups", f"{c.ns}-.*",
                                  "--yes", "--timeout", "120s"))
    assert status == 0, out
    confidences = {p["confidence"] for g in out["translation"]["groups"]
                   for p in g["partitions"]}
    assert confidences <= {"exact", "failover-point"}, confidences
    mm2_failover = out["mm2_checkpoints"]
    # On the secondary: the primary's producers write there, its groups read there.
    c.producers["primary"].start("secondary")
    c.producers["primary"].wait_acked(100)
    c.drain(_failed_over(c))
    c.producers["primary"].stop()
    c.drain(_failed_over(c))
    back, mm2_back = _failback(c)
    assert back["late_arrivals"]["total"] == 0, back["late_arrivals"]
    c.producers["primary"].start("primary")
    c.producers["primary"].wait_acked(100)
    for p in c.producers.values():
        p.stop()
    _wait_flows_caught_up(c)
    c.drain(_home(c))
    verdicts = c.verdicts()
    _report("planned", c, {"verdicts": {g: {k: v if isinstance(v, int) else len(v)
                                            for k, v in d.items()} for g, d in verdicts.items()},
                           "mm2_failover": mm2_failover, "mm2_failback": mm2_back})
    for group, v in verdicts.items():
        assert not v["skipped"] and not v["twice"], (group, v["skipped"][:5], v["twice"][:5])
    # check: a group reading the secondary's copy without the primary's own topic misses
    # the primary's producers; the aggregate groups read both.
    from confluent_kafka import TopicPartition

    from drctl.lab.workload import commit_offsets

    commit_offsets(fresh_clients(c.lab, "primary"), f"{c.ns}-half",
                   [TopicPartition(copy_name(c.lab, "secondary", c.topic), p, 1)
                    for p in range(PARTITIONS)])
    _status, found = _json(run_drctl("-c", config, "-o", "json", "check", "--groups",
                                     f"{c.ns}-.*", "--deadline", "10s"))
    objects = {f["object"]: f for flow in found["flows"] for f in flow["findings"]
               if f["fix"].startswith("subscribe with")}
    assert set(objects) == {f"group {c.ns}-half on primary"}, objects
    prefix = Pair(load_config(c.lab.config_file)).prefix_into("primary")
    assert objects[f"group {c.ns}-half on primary"]["fix"] == \
        f"subscribe with ^({re.escape(prefix)})?{re.escape(c.topic)}$"


def test_primary_killed_mid_stream_and_back(cycle: Cycle) -> None:
    c, lab, config = cycle, cycle.lab, str(cycle.lab.config_file)
    for region in REGIONS:
        c.producers[region].start(region)
        c.producers[region].wait_acked(100)
    # The aggregate groups read the other region's copy before the outage: a group with no
    # commit on it is, by what it committed, local-only (a loaded machine's MirrorMaker 2
    # had not copied a record yet when the groups drained, and failover placed the primary's
    # aggregate group as local-only).
    _wait_copied(c)
    c.drain(_home(c))
    # The primary's consumers stop (they go down with it); guard keeps their positions on
    # the secondary.
    c.guard_rounds()
    # Records the secondary will not get before the outage: the primary -> secondary flow
    # held, the primary's producer writing on, then the primary killed mid-stream.
    client = lab.lab.connect_client(lab.state)
    source = lab.lab.flow(lab.state).connector_names()["source"]
    client.pause(source)
    end = time.monotonic() + 30
    while client.connector_state(source) != ("PAUSED", ["PAUSED"]):
        assert time.monotonic() < end, client.connector_state(source)
        time.sleep(0.2)
    c.producers["primary"].wait_acked(40)
    # Issue 58, finding 10: the local-only group reads some of those records at home before
    # the kill. Failback used to resume the flows first and have it read on with the
    # aggregate pattern on the secondary, where their late copies had landed: twice.
    next(a for a in c.apps if a.group == f"{c.ns}-local-primary").drain(lab, "primary")
    lab.lab.fail("primary")
    c.producers["primary"].stop(flush_s=2)
    held = len(c.producers["primary"].acked)
    try:
        status, out = _json(run_drctl("-c", config, "-o", "json", "--debug", "failover",
                                      "--region", "primary", "--groups", f"{c.ns}-.*",
                                      "--yes", "--deadline", "5s"))
        assert status == 0, out
        confidences = {p["confidence"] for g in out["translation"]["groups"]
                       for p in g["partitions"]}
        assert confidences <= {"snapshot", "checkpoint", "failover-point"}, confidences
        c.producers["primary"].start("secondary")
        c.producers["primary"].wait_acked(100)
        c.drain(_failed_over(c))
        _status, st = _json(run_drctl("-c", config, "-o", "json", "status", "--deadline",
                                      "3s"))
        assert st["regions"]["primary"]["applications_on"] == "secondary", st["regions"]
        assert st["regions"]["primary"]["incident"] == out["incident"]
    finally:
        lab.lab.heal("primary")
    c.producers["primary"].stop()
    c.drain(_failed_over(c))
    back, mm2_back = _failback(c)
    late = back["late_arrivals"]
    assert late["total"] >= 40, late  # named per partition: how many, when written
    assert sum(p["records"] for p in late["partitions"]) == late["total"]
    assert all(p["first_time"] <= p["last_time"] for p in late["partitions"])
    c.producers["primary"].start("primary")
    c.producers["primary"].wait_acked(100)
    for p in c.producers.values():
        p.stop()
    _wait_flows_caught_up(c)
    c.drain(_home(c))
    verdicts = c.verdicts()
    # Every late arrival is a record the primary's producer had acknowledged before the kill.
    assert held <= len(c.producers["primary"].acked)
    _report("outage", c, {"verdicts": {g: {k: v if isinstance(v, int) else len(v)
                                           for k, v in d.items()} for g, d in verdicts.items()},
                          "late_arrivals": late["total"], "audit": back["audit"]["totals"],
                          "mm2_failover": back["mm2_checkpoints_at_failover"],
                          "mm2_failback": mm2_back})
    # The audit measured every position the groups had on the primary (the local-only
    # group's place at the failover point has none there), whatever they read since.
    audit = back["audit"]["totals"]
    assert audit["audited"] == audit["positions"] - PARTITIONS, back["audit"]["positions"]
    assert audit["skipped"] == 0, back["audit"]["positions"]
    for group, v in verdicts.items():
        assert not v["skipped"], (group, v["skipped"][:5])
    # guard's last exact position of the local-only group is from before it read on at home
    # (ahead of the held flow it is not exact, so guard keeps the older one): what it read
    # since, of what the secondary held at the failover point, it reads again there — an
    # unplanned failover's at-least-once, each such record one the audit counted as
    # re-delivered. A late copy (past the failover point) it read at home is never read
    # again (finding 10), nor does any other group read a record twice.
    local = next(a for a in c.apps if a.group == f"{c.ns}-local-primary")
    assert sum(len(v["twice"]) for v in verdicts.values()) \
        == len(verdicts[local.group]["twice"]) == audit["redelivered"], back["audit"]
    copy, point = copy_name(lab, "primary", c.topic), out["marker"]["failover_point"]
    twice = set(verdicts[local.group]["twice"])
    for cluster, topic, partition, offset, value in local.read:
        if value in twice and cluster == "secondary":
            assert topic == copy and offset < point[copy][str(partition)], \
                (value, topic, partition, offset, point)


def test_a_region_lost_leaves_behind_a_group_whose_copy_position_nobody_kept(
        cycle: Cycle, tmp_path: Any) -> None:
    """Issue 58, findings 1, 2 and 4 with the primary SIGKILLed. A flow's topic filter that
    names only its local topics (config init writes MirrorMaker 2's own, `<ns>-.*`, never
    `secondary_<ns>-...`), copies named with the connectors' separator ('_'). guard kept the
    positions of two groups, not of an aggregate group that reads the secondary's copy on the
    primary — its inventory saw it read there. That group is left behind (exit 3), never
    committed at the failover point of orders on the secondary (where it skipped every
    record it had not read); the others move, the local-only group at the failover point.
    The first run is SIGKILLed right after its commits, before it recorded them: the run
    again knows them as its own (it refused every group as "a group of secondary")."""
    import os
    import subprocess
    import sys

    import yaml
    from confluent_kafka import TopicPartition

    from drctl.kafka.groups import committed_offsets
    from drctl.lab.workload import commit_offsets

    c, lab = cycle, cycle.lab
    for region in REGIONS:
        c.producers[region].start(region)
        c.producers[region].wait_acked(60)
        c.producers[region].stop()
    _wait_flows_caught_up(c)
    copy = copy_name(lab, "secondary", c.topic)  # the secondary's records on the primary
    primary = fresh_clients(lab, "primary")
    kept, unkept, local = f"{c.ns}-agg-kept", f"{c.ns}-agg-unkept", f"{c.ns}-local-only"
    for group in (kept, unkept):
        commit_offsets(primary, group, [TopicPartition(t, p, 5) for t in (c.topic, copy)
                                        for p in range(PARTITIONS)])
    commit_offsets(primary, local, [TopicPartition(c.topic, p, 5) for p in range(PARTITIONS)])
    # guard on every group but one (its inventory reads them all); MirrorMaker 2 checkpoints
    # that one on the primary's own topic, never on the copy.
    c.guard_rounds(f"{c.ns}-(agg-kept|local-only)", regions=("primary",))
    _wait_checkpointed(c, unkept)
    raw = yaml.safe_load(lab.config_file.read_text())
    for flow in raw["topology"]["flows"]:
        flow["topics"] = {"include": [f"{re.escape(c.ns)}-.*"]}
    config = tmp_path / "drctl.yaml"
    config.write_text(yaml.safe_dump(raw))
    argv = [sys.executable, "-m", "drctl", "--config", str(config), "-o", "json", "failover",
            "--region", "primary", "--groups", f"{c.ns}-(agg|local).*", "--yes",
            "--deadline", "5s"]
    lab.lab.fail("primary")
    try:
        crashed = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                                 env={**os.environ,
                                      "DRCTL_CRASH_AT": "translate-offsets:committed"})
        assert crashed.returncode == -9, crashed.stderr[-3000:]
        status, out = _json(run_drctl(*argv[3:]))
        assert status == 3, out
        refused = {line.partition(":")[0]: line for line in out["refused"]}
        assert set(refused) == {unkept}, out["refused"]
        assert f"it read {copy} on primary" in refused[unkept] \
            and "KAFKA-12635" in refused[unkept], refused
        secondary = fresh_clients(lab, "secondary")
        on_secondary = committed_offsets(secondary, [kept, unkept, local])
        assert on_secondary[unkept] == {}, on_secondary  # committed nowhere
        assert {t for t, _ in on_secondary[kept]} == {copy_name(lab, "primary", c.topic),
                                                      c.topic}, on_secondary
        at_failover = out["marker"]["failover_topics_end"][c.topic]
        assert {p: o for (t, p), o in on_secondary[local].items() if t == c.topic} == \
            {int(p): o for p, o in at_failover.items()}, on_secondary
        assert out["marker"]["groups"][local]["local_only"] == [c.topic]
    finally:
        lab.lab.heal("primary")
    status, back = _json(run_drctl("-c", str(config), "-o", "json", "failback", "--region",
                                   "primary", "--yes", "--timeout", "120s"))
    assert status == 0, back

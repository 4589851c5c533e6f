"""The DR cycle (issues 24, 35): fail over, fail back, return to protection — twice in a row,
with topic names kept and prefixed, the flow's topic filter matching the reverse copies (as
MirrorMaker 2's default `.*` does).

After each return every record the primary holds is on the secondary exactly once (content per
partition, replication headers aside), `status` and `check` exit 0 and the next planned
failover's dry run exits 0; the group's positions are exact in both failovers (guard's
snapshots with the primary gone). On the way: a producer trickling to the secondary makes the
return refuse (round 1); a record written on the primary among the reverse copies (a stray),
writes landing after the quiet check, and reprotect killed at each of its steps (round 2) end
the same; a compacted topic whose target compacted a reverse-copied value away keeps every
key's latest value (round 1); retention past the cut-over's start points is counted, never
copied twice (round 2).
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
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import Record, read_all
from drctl.lab.workload import commit_offsets, create_topics
from drctl.replication.mirrormaker2 import INCIDENT_KEY, reverse_connector_name
from drctl.state import marker_store
from tests.conftest import RunningLab, on_kafka_3
from tests.lab.support import fresh_clients, produce, run_json, stop_forward_quietly
from tests.lab.test_failback import restore
from tests.lab.test_failover import scoped_config
from tests.lab.test_gap_compacted import EAGER, set_configs, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.spark]
PARTS = 2
BASE, GAP, POST, NEW = 200, 10, 20, 30
# reprotect's recorded steps, in order, and the point between planning the cut-over and
# copying its strays.
STEPS = ["reprotect:quiet", "reprotect:reverse-retired", "reprotect:cut-over-planned",
         "reprotect:strays-copied", "reprotect:cut-over", "reprotect:forward-start",
         "reprotect:forward-resumed", "reprotect:verified"]


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


def _sides(lab: RunningLab, topic: str) -> tuple[list[str], list[str]]:
    """Where the topic's records live on each cluster: the primary's own topic and the
    reverse copies; the secondary's mirror and, prefixed, its failover topic."""
    return ([topic, f"secondary.{topic}"],
            [lab.mirror(topic)] + ([] if lab.names_kept else [topic]))


def _wait_same(lab: RunningLab, topic: str, deadline_s: float = 90) -> None:
    """Until the secondary holds every record of the primary, once (the same multiset)."""
    on_primary, on_secondary = _sides(lab, topic)
    end = time.monotonic() + deadline_s
    while True:
        want = _content(_everything(fresh_clients(lab, "primary"), on_primary))
        got = _content(_everything(fresh_clients(lab, "secondary"), on_secondary))
        if want == got:
            return
        if time.monotonic() > end:
            raise AssertionError(f"{topic}: missing on the secondary: "
                                 f"{sum((want - got).values())}, there twice or extra: "
                                 f"{sum((got - want).values())}")
        time.sleep(1)


def _end(lab: RunningLab, topic: str, p: int, cluster: str = "primary") -> int:
    admin = fresh_clients(lab, cluster).admin()
    return watermarks(admin, [(topic, p)])[(topic, p)][1]


def _status(config: Path) -> tuple[int, dict[str, Any]]:
    return run_json("--config", str(config), "status", "--deadline", "10s")


class _Topics:
    """The incident's topics: `acct` (plain, the group reads it), `ledger` (compacted; the
    target compacts a reverse-copied value away in round 1), `hist` (retention moves log
    starts past the cut-over's start points in round 2)."""

    def __init__(self, ns: str) -> None:
        self.acct, self.ledger, self.hist = f"{ns}-acct", f"{ns}-ledger", f"{ns}-hist"

    @property
    def all(self) -> list[str]:
        return [self.acct, self.ledger, self.hist]


def _latest(records: list[Record]) -> dict[tuple[int, bytes | None], bytes | None]:
    """Each key's current value (what compaction keeps): the last record per key."""
    out: dict[tuple[int, bytes | None], bytes | None] = {}
    for r in sorted(records, key=lambda r: (r.topic, r.partition, r.offset)):
        out[(r.partition, r.key)] = r.value
    return out


def _round(lab: RunningLab, config: Path, topics: _Topics, group: str, r: int) -> None:
    topic = topics.acct
    # The group read everything replicated; guard snapshots its position exactly.
    ends = {p: _end(lab, topic, p) for p in range(PARTS)}
    commit_offsets(fresh_clients(lab, "primary"), group,
                   [TopicPartition(topic, p, e) for p, e in ends.items()])
    status, out = run_json("--config", str(config), "guard", "--once")
    assert status == 0, out
    stop_forward_quietly(lab, *topics.all)
    for t in topics.all:
        _send(fresh_clients(lab, "primary"), t, f"gap{r}", GAP)
    lab.lab.fail("primary")

    status, out = run_json("--config", str(config), "failover", "--yes", "--deadline", "2")
    assert status == 0, out
    mirror = lab.mirror(topic)
    placed = out["marker"]["groups"][group]["positions"][mirror]
    # Exact: the group had read everything replicated, so it resumes at the failover point
    # (guard's snapshot), with nothing to read again.
    assert {int(p): v["offset"] for p, v in placed.items()} == {
        int(p): o for p, o in out["marker"]["failover_point"][mirror].items()}, placed
    assert all(v["max_redelivered"] == 0 for v in placed.values()), placed
    incident = out["incident"]

    secondary = fresh_clients(lab, "secondary")
    for t in topics.all:
        _send(secondary, t, f"post{r}", POST)
    # Post-failover versions of keys: v1 then v2 (the target compacts v1 away in round 1).
    produce(secondary, topics.ledger, [(0, b"kv", f"r{r}-v1".encode()),
                                       (0, b"kv", f"r{r}-v2".encode())])
    # The group reads the post-failover writes on the secondary.
    failover_ends = {p: _end(lab, topic, p, "secondary") for p in range(PARTS)}
    commit_offsets(secondary, group,
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
    assert out["gap"]["safe"] == GAP * PARTS * len(topics.all), out["gap"]
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
        _target_compacts_a_copied_value_away(lab, topics.ledger)
        _refusals_before_the_return(lab, config, topic)
        status, out = run_json("--config", str(config), "reprotect", "--yes", "--settle", "2s")
        assert status == 0, out
        assert out["steps"]["cut-over"]["superseded"] == (
            {f"{topics.ledger}[0]": 1} if lab.names_kept else {}), out["steps"]["cut-over"]
    else:
        _retention_past_the_start_points(lab, config, topics.hist, incident)
        out = _killed_at_every_step_then_finished(lab, config, topic, incident)
    assert out["status"] == "closed" and out["verified_ok"] is True, out
    status, st = _status(config)
    assert st["replication"]["protection"]["state"] == "protected", st["replication"]
    assert status == 0, st
    if not lab.names_kept:
        # The reverse copies are the retired flow's, never a topic to replicate.
        copies = {c["topic"]: c for c in st["replication"]["reverse_copies"]}
        assert copies[f"secondary.{topic}"]["origin"] == topic, copies
        assert not any(t.startswith("secondary.") for t in
                       (row["topic"] for row in st["replication"]["lag"] or [])), st

    # Protected: new writes to the primary reach the secondary, and nothing twice; the
    # group's new commits are checkpointed again (the next failover with the source gone
    # would find them).
    for t in topics.all:
        _send(fresh_clients(lab, "primary"), t, f"new{r}", NEW)
    _wait_same(lab, topics.acct)
    for t in (topics.ledger, topics.hist):  # compaction or retention took records
        _nothing_twice(lab, t, f"new{r}")
    on_primary, on_secondary = _sides(lab, topics.ledger)
    assert _latest(_everything(fresh_clients(lab, "primary"), on_primary)) == _latest(
        _everything(fresh_clients(lab, "secondary"), on_secondary)), "latest values differ"
    ends = {p: _end(lab, topic, p) for p in range(PARTS)}
    commit_offsets(fresh_clients(lab, "primary"), group,
                   [TopicPartition(topic, p, e) for p, e in ends.items()])
    lab.wait_checkpointed(group, topic, ends)
    status, out = run_json("--config", str(config), "guard", "--once")
    assert status == 0, out
    # Ready for the next incident.
    status, ready = run_json("--config", str(config), "check")
    assert status == 0, [f for f in ready.get("findings", []) if f["severity"] != "note"]
    status, dry = run_json("--config", str(config), "failover", "--planned", "--dry-run")
    assert status == 0, dry


_left_over: list[dict[str, str]] = []  # round 1's reverse connector config, for round 2


def _target_compacts_a_copied_value_away(lab: RunningLab, ledger: str) -> None:
    """The secondary compacts `kv`'s post-failover v1 away (after the reverse flow copied it
    to the primary, where it stays): its copy there pairs with nothing at the cut-over."""
    set_configs(fresh_clients(lab, "secondary"), ledger, EAGER)
    time.sleep(0.2)
    # A later write rolls the segment that holds v1 and v2 (segment.ms), so it can be cleaned.
    produce(fresh_clients(lab, "secondary"), ledger, [(0, b"roll", b"x")])

    def compacted() -> bool:
        values = [r.value for r in read_all(fresh_clients(lab, "secondary"), ledger)
                  if r.key == b"kv"]
        return values == [b"r1-v2"]

    wait_for("compaction of kv's v1 on the secondary", compacted, 240)
    set_configs(fresh_clients(lab, "secondary"), ledger, {"cleanup.policy": "compact",
                                                          "segment.ms": "604800000"})


def _refusals_before_the_return(lab: RunningLab, config: Path, topic: str) -> None:
    """A dry run shows where forward replication would start and changes nothing; a producer
    writing one record a second to the secondary makes the return refuse (exit 3), naming
    the topic, with nothing recorded; its writes reach the primary once it stopped."""
    status, dry = run_json("--config", str(config), "reprotect", "--dry-run", "--settle", "1s")
    assert status == 0, dry
    [cut] = [step for step in dry["plan"] if step["step"] == "cut-over"]
    assert {int(p): o for p, o in cut["forward_starts"][topic].items()} == {
        p: _end(lab, topic, p) for p in range(PARTS)}, cut
    assert dry["status"] == "open" and not dry["steps"], dry["steps"]
    stop = threading.Event()

    def write() -> None:
        # One producer, a record a second: the return's two readings `--settle` (6 s) apart
        # always see a write. A new client per record every 5 s (its metadata and connection
        # first) left a loaded CI machine more than 6 s between writes, and the return found
        # the secondary quiet (exit 0).
        clients, i = fresh_clients(lab, "secondary"), 0
        while not stop.is_set():
            produce(clients, topic, [(0, f"late-{i}".encode(), b"v")])
            i += 1
            stop.wait(1)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        status, out = run_json("--config", str(config), "reprotect", "--yes", "--settle", "6s")
    finally:
        stop.set()
        writer.join(30)
    assert status == 3, out
    assert topic in out["error"]["message"], out["error"]
    [marker] = marker_store(load_config(config), "secondary").open_markers()
    assert not any(step.startswith("reprotect:") for step in marker.steps), marker.steps


def _retention_past_the_start_points(lab: RunningLab, config: Path, hist: str,
                                     incident: str) -> None:
    """Retention (DeleteRecords) moves log starts past where the return reads from: on the
    secondary past the failover point and two post-failover writes of partition 0 (both
    already on the primary), on the primary past the first copy of partition 1."""
    from confluent_kafka import TopicPartition as TP

    [marker] = [m for m in marker_store(load_config(config), "secondary").open_markers()
                if m.incident == incident]
    starts = marker.failover_point if lab.names_kept else marker.failover_topics_end
    f0 = starts[hist][0]
    source_topic = hist if lab.names_kept else f"secondary.{hist}"
    if lab.names_kept:
        gap = marker.steps["failback:gap"].result["verified"]
        first_copy = next(int(v["source_end"]) for v in gap
                          if v["topic"] == hist and int(v["partition"]) == 1)
    else:
        first_copy = int(marker.steps["failback:reverse-source-start"].result["offsets"][
            source_topic]["1"])
    for clients, tp in ((fresh_clients(lab, "secondary"), TP(hist, 0, f0 + 2)),
                        (fresh_clients(lab, "primary"), TP(source_topic, 1, first_copy + 1))):
        for fut in clients.admin().delete_records([tp]).values():
            fut.result(timeout=30)


def _nothing_twice(lab: RunningLab, topic: str, new_prefix: str) -> None:
    """No record twice on either cluster, and every record written since the return on
    both (retention took others on one side or the other)."""
    on_primary, on_secondary = _sides(lab, topic)
    end = time.monotonic() + 90
    while True:
        want = _content(_everything(fresh_clients(lab, "primary"), on_primary))
        got = _content(_everything(fresh_clients(lab, "secondary"), on_secondary))
        assert max(want.values()) == 1 and max(got.values()) == 1, "a record twice"
        new = {k for k in want if k[1] and k[1].startswith(new_prefix.encode())}
        if len(new) == NEW * PARTS and new <= set(got):
            return
        assert time.monotonic() < end, f"{topic}: new writes not on the secondary"
        time.sleep(1)


def _killed_at_every_step_then_finished(lab: RunningLab, config: Path, topic: str,
                                        incident: str) -> dict[str, Any]:
    """A producer back on the primary early (a stray among the reverse copies), then
    reprotect SIGKILLed at each of its steps and run again; a write lands on the secondary
    after the reverse flow was retired. The last run ends protected, nothing twice."""
    produce(fresh_clients(lab, "primary"), topic, [(1, b"early", b"native")])
    produce(fresh_clients(lab, "secondary"), topic, [(1, b"carried", b"by-the-reverse-flow")])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for step in STEPS:
        crashed = subprocess.run(
            [sys.executable, "-m", "drctl", "--config", str(config), "reprotect", "--yes",
             "--settle", "1s"], env={**env, "DRCTL_CRASH_AT": step},
            capture_output=True, text=True, timeout=600)
        assert crashed.returncode == -9, (step, crashed.stderr[-3000:])
        [marker] = [m for m in marker_store(load_config(config), "secondary").open_markers()
                    if m.incident == incident]
        recorded = step if step.startswith(("reprotect:cut-over", "reprotect:quiet",
                                            "reprotect:reverse", "reprotect:forward",
                                            "reprotect:verified")) else "reprotect:cut-over"
        recorded = recorded.removesuffix("-planned")
        assert recorded in marker.steps, (step, list(marker.steps))
        if step == "reprotect:reverse-retired":
            # Between the quiet check and the cut-over, with the reverse flow gone.
            produce(fresh_clients(lab, "secondary"), topic,
                    [(0, b"after-quiet", b"carried-by-the-cut-over")])
    final = subprocess.run([sys.executable, "-m", "drctl", "--config", str(config), "-o",
                            "json", "reprotect", "--yes", "--settle", "1s"], env=env,
                           capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]
    import json

    out: dict[str, Any] = json.loads(final.stdout)
    cut = out["steps"]["cut-over"]
    assert cut["strays"] == ({f"{topic}[1]": 1} if lab.names_kept else {}), cut
    hist = topic.removesuffix("-acct") + "-hist"
    took = {**cut["retention"]["target"], **cut["carried"].get("retention", {}).get("target", {})}
    assert took.get(f"{hist}[0]") == 2, cut
    assert not cut["retention"]["lost"], cut
    return out


@on_kafka_3("any_lab")
def test_fail_over_fail_back_and_return_twice(cycled: RunningLab, ns: str,
                                             tmp_path: Path) -> None:
    lab = cycled
    topics = _Topics(ns)
    group = f"{ns}-app"
    create_topics(lab.primary, (topics.acct, topics.hist), PARTS)
    create_topics(lab.primary, (topics.ledger,), PARTS, {"cleanup.policy": "compact"})
    config = scoped_config(lab, ns, tmp_path)
    raw = yaml.safe_load(config.read_text())
    # As MirrorMaker 2's default '.*' does, the filter matches the reverse copies
    # (secondary.<topic>) too.
    raw["replication"]["topics"] = {"include": [f".*{ns}-.*"]}
    raw["state"]["snapshots_topic"] = f"_drctl_snapshots_{ns}"
    raw["groups"] = {"include": [f"{ns}-.*"]}
    config.write_text(yaml.safe_dump(raw))
    # MirrorMaker 2 copies at least once: tasks reconfigured for a topic found mid-copy
    # copy some records twice. Every mirror exists before the first record.
    for t in topics.all:
        lab.wait_mirror_topic(t)
    time.sleep(5)  # the tasks restarted with the new topics
    for t in topics.all:
        _send(lab.primary, t, "base", BASE)
    for t in topics.all:
        _wait_same(lab, t)
    _left_over.clear()
    for r in (1, 2):
        _round(lab, config, topics, group, r)


def test_a_read_below_the_log_start_starts_there_and_counts_what_retention_took(
        lab: RunningLab, ns: str) -> None:
    """drctl's reads assign their start offsets; one below the log start used to jump to
    the end and read nothing (a range 'done' with no record)."""
    from drctl.kafka.records import stream_ranges

    topic = f"{ns}-logstart"
    create_topics(lab.primary, (topic,), 1)
    produce(lab.primary, topic, [(0, b"k%d" % i, b"v") for i in range(20)])
    for fut in lab.primary.admin().delete_records([TopicPartition(topic, 0, 8)]).values():
        fut.result(timeout=30)
    gone: dict[tuple[str, int], int] = {}
    got = [r.offset for r in stream_ranges(lab.primary, {(topic, 0): (3, 15)},
                                           below_log_start=gone)]
    assert got == list(range(8, 15))
    assert gone == {(topic, 0): 5}
    # Entirely below it: nothing to read, all of it counted.
    gone.clear()
    assert not list(stream_ranges(lab.primary, {(topic, 0): (0, 6)}, below_log_start=gone))
    assert gone == {(topic, 0): 6}


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
        back = committed_offsets(fresh_clients(lab, "primary"), [group])[group]
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

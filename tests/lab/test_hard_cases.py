"""Exact until the data is unusual (issue 25): retention that deletes, LogAppendTime topics,
a state topic that cannot be read, partitions without a position, producers still writing to
the target, a broker that drops mid-failback. Each case measured on the real lab: where drctl
cannot prove a position or a gap it says so, and it never says "done" over a wrong end state.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from drctl.config import load_config
from drctl.context import OpsContext
from drctl.kafka.records import read_all
from drctl.lab.workload import commit_offsets, create_topics
from drctl.ops.one_way.failback import FailbackOptions, run_failback
from drctl.ops.one_way.gap_step import gap_finder
from tests.conftest import RunningLab
from tests.lab.support import (
    fresh_clients,
    produce,
    stop_forward_quietly,
    wait_offsets_stored,
    wait_replicated,
)
from tests.lab.test_failback import restore
from tests.lab.test_failover import run_json, scoped_config

pytestmark = [pytest.mark.lab, pytest.mark.spark]


@pytest.fixture
def restored(lab: RunningLab) -> Iterator[RunningLab]:
    yield lab
    restore(lab)


def _send(clients: Any, topic: str, partition: int, prefix: str, count: int) -> None:
    produce(clients, topic, [(partition, f"{prefix}-{partition}-{i}".encode(),
                              f"{prefix}-v-{i}".encode()) for i in range(count)])


def _delete_before(clients: Any, topic: str, offsets: dict[int, int]) -> None:
    """What retention does to the start of a partition (DeleteRecords moves its log start)."""
    futures = clients.admin().delete_records(
        [TopicPartition(topic, p, o) for p, o in offsets.items()], request_timeout=30)
    for fut in futures.values():
        fut.result(timeout=30)


def test_retention_before_failback_is_named_as_loss_and_only_then(
        restored: RunningLab, ns: str, tmp_path: Path) -> None:
    """Partition 0: retention deleted 10 records the secondary never received — lost, named
    with their offsets, exit 3. Partition 1: it deleted only records that were replicated —
    nothing lost, said so, no alarm."""
    lab = restored
    topic = f"{ns}-ret"
    create_topics(lab.primary, (topic,), 2)
    for p in (0, 1):
        _send(lab.primary, topic, p, "base", 100)
    wait_replicated(lab, topic, 200)
    stop_forward_quietly(lab, topic)
    for p in (0, 1):
        _send(lab.primary, topic, p, "gap", 20)
    # Retention runs on the primary: every replicated record is gone from both partitions,
    # and on partition 0 the first 10 of the never-replicated ones too.
    _delete_before(lab.primary, topic, {0: 110, 1: 100})
    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--yes", "--groups",
                           f"{ns}-.*")
    assert status == 0, out
    # In-process, to count the clients the command makes: one set per cluster, however
    # many steps (gap, reconcile, reverse, end-state check, switch-back) ask for them.
    ctx = OpsContext.from_config(load_config(config))
    result = run_failback(ctx, FailbackOptions(groups=f"{ns}-.*"), gap_finder())
    out = result.as_dict(result.write_reports(ctx))
    assert ctx.clients_built == 2
    status = result.exit_status
    assert status == 3, out
    assert out["gap"]["lost"] == [{"topic": topic, "partition": 0, "from": 100, "to": 110,
                                   "count": 10, "proof": out["gap"]["lost"][0]["proof"]}]
    assert "stored position" in out["gap"]["lost"][0]["proof"]
    # The rest of the gap was found and copied all the same: 10 on p0, 20 on p1.
    assert out["gap"]["safe"] == 30, out["gap"]
    statements = {v["partition"]: v["statement"] for v in out["gap"]["verified"]}
    assert "LOST: source offsets 100–109 (10)" in statements[0], statements
    assert "retention deleted only replicated records" in statements[1], statements
    report = next(Path(p) for p in out["reports"] if p.endswith(".md")).read_text()
    assert f"**Lost: `{topic}`[0]** — 10 record(s), source offsets 100–109" in report


def test_translation_to_a_logappendtime_target_is_exact(lab: RunningLab, ns: str) -> None:
    """The secondary's topic stamps records on append (MirrorMaker 2 does not copy
    message.timestamp.type): every copy has a new timestamp. Exact translation still places
    every group exactly (before: at the end, skipping everything it had not read)."""
    topic = f"{ns}-lat"
    create_topics(lab.secondary, (topic,), 2, {"message.timestamp.type": "LogAppendTime"})
    create_topics(lab.primary, (topic,), 2)
    producer = lab.primary.producer()
    base = int(time.time() * 1000) - 60_000
    for p in (0, 1):
        for i in range(60):
            # Bursts of identical timestamps (which the copies do not keep).
            producer.produce(topic, key=b"same", value=b"payload-%d" % i, partition=p,
                             timestamp=base + i // 5)
    assert producer.flush(30) == 0
    wait_replicated(lab, topic, 120)
    on_target = read_all(lab.secondary, topic)
    assert {r.timestamp_type for r in on_target} == {2}  # LogAppendTime: rewritten
    positions = {f"{ns}-g{o}": o for o in (1, 7, 23, 40, 59)}
    for group, offset in positions.items():
        commit_offsets(lab.primary, group, [TopicPartition(topic, p, offset) for p in (0, 1)])
    status, out = run_json("--config", str(lab.config_file), "translate-offsets",
                           "--groups", f"{ns}-.*", "--method", "exact", "--dry-run")
    assert status == 0, out
    for g in out["groups"]:
        for p in g["partitions"]:
            # Names kept, nothing lost: the copy of source offset o is target offset o.
            assert (p["target_offset"], p["confidence"]) == (positions[g["group"]],
                                                             "exact"), (g["group"], p)


def test_failback_with_the_state_topic_unreadable_is_exit_4_not_no_incident(
        restored: RunningLab, ns: str, tmp_path: Path) -> None:
    """Another machine runs failback (no local marker); the secondary, which holds the state
    topic, does not answer: the incident is unknown (exit 4 naming it), never "no open
    failover marker" (exit 2)."""
    lab = restored
    topic = f"{ns}-st"
    create_topics(lab.primary, (topic,), 1)
    _send(lab.primary, topic, 0, "r", 10)
    wait_replicated(lab, topic, 10)
    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--yes")
    assert status == 0, out
    shutil.rmtree(tmp_path / "state")  # the other machine has none of it
    lab.lab.fail("secondary")
    try:
        argv = [sys.executable, "-m", "drctl", "--config", str(config), "failback", "--yes",
                "--deadline", "2"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
        assert done.returncode == 4, done.stderr[-2000:]
        err = " ".join(done.stderr.split())
        # The cluster holding the markers is named with its address: unknown, exit 4.
        assert f"secondary ({lab.lab.bootstrap(lab.state, 'secondary')})" in err, err
        assert "No open incident" not in err and "no open failover" not in err.lower()
    finally:
        lab.lab.heal("secondary")


def test_failback_refuses_while_producers_write_to_the_target(
        restored: RunningLab, ns: str, tmp_path: Path) -> None:
    """The order check reads the post-failover writes once: a producer still writing to the
    secondary makes failback refuse (exit 3, the topic and its rate), before anything is
    copied; stopped, failback goes on."""
    lab = restored
    topic = f"{ns}-busy"
    create_topics(lab.primary, (topic,), 1)
    _send(lab.primary, topic, 0, "base", 20)
    wait_replicated(lab, topic, 20)
    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--yes")
    assert status == 0, out
    stop = threading.Event()

    def write() -> None:
        producer = lab.secondary.producer()
        i = 0
        while not stop.is_set():
            producer.produce(topic, key=b"k%d" % i, value=b"post", partition=0)
            producer.poll(0)
            i += 1
            time.sleep(0.05)
        producer.flush(30)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        status, out = run_json("--config", str(config), "failback", "--yes", "--settle", "2s")
    finally:
        stop.set()
        writer.join()
    assert status == 3, out
    assert "failback:reconcile" not in (out.get("marker") or {}).get("steps", {})
    status, out = run_json("--config", str(config), "failback", "--yes", "--settle", "2s")
    assert status == 0, out


def test_a_partition_without_checkpoint_is_named_by_failover_and_audited(
        restored: RunningLab, ns: str, tmp_path: Path) -> None:
    """With the primary gone, a group that committed on both partitions of a topic but was
    checkpointed on one only (MirrorMaker 2 keeps no offset sync for an empty partition) is
    named for the other (exit 3); failback's audit names the commit it had there."""
    lab = restored
    topic = f"{ns}-half"
    group = f"{ns}-app"
    create_topics(lab.primary, (topic,), 2)
    _send(lab.primary, topic, 0, "r", 30)  # partition 1 stays empty
    wait_replicated(lab, topic, 30)
    commit_offsets(lab.primary, group, [TopicPartition(topic, 0, 30),
                                        TopicPartition(topic, 1, 0)])
    lab.wait_checkpointed(group, topic, {0: 30})
    wait_offsets_stored(lab, topic)
    lab.lab.fail("primary")
    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--yes", "--groups",
                           f"{ns}-.*", "--deadline", "2")
    assert status == 3, out
    [left] = [g for g in out["marker"]["left_behind"]["groups"] if g["group"] == group]
    assert f"{lab.mirror(topic)}[1] (no checkpoint or snapshot)" in left["reason"], left
    lab.lab.heal("primary")
    status, out = run_json("--config", str(config), "failback", "--yes", "--groups",
                           f"{ns}-.*")
    assert status == 3, out
    assert out["audit"]["totals"]["not_placed"] == 1, out["audit"]
    [row] = [p for p in out["audit"]["positions"] if not p["placed"]]
    assert (row["group"], row["partition"]) == (group, 1)


def test_a_topic_never_mirrored_is_reconciled_at_failback(
        restored: RunningLab, ns: str, tmp_path: Path) -> None:
    """A topic MirrorMaker 2 had not mirrored yet when the primary died (created after
    replication broke; no inventory names it): failover cannot know it. Failback, with both
    clusters up, finds it under the flow's filter, compares it in full and copies its safe
    records to the secondary (before: 0 of 100 there, and no report named it)."""
    lab = restored
    kept, young = f"{ns}-kept", f"{ns}-young"
    create_topics(lab.primary, (kept,), 1)
    _send(lab.primary, kept, 0, "k", 10)
    wait_replicated(lab, kept, 10)
    stop_forward_quietly(lab, kept)
    create_topics(lab.primary, (young,), 2)
    for p in (0, 1):
        _send(lab.primary, young, p, "y", 50)
    lab.lab.fail("primary")
    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--yes",
                           "--deadline", "2")
    assert status == 0, out
    assert young not in out["marker"]["topics"]
    lab.lab.heal("primary")
    status, out = run_json("--config", str(config), "failback", "--yes")
    assert status == 0, out
    assert out["marker"]["steps"]["failback:unmirrored"]["result"]["topics"] == {young: young}
    assert out["gap"]["safe"] == 100 and out["reconcile"]["copy_safe"]["copied"] == 100
    on_secondary = read_all(lab.secondary, young)
    assert sorted(r.value for r in on_secondary) == sorted(
        b"y-v-%d" % i for i in range(50) for _ in (0, 1))


def test_partitions_added_during_the_outage_are_carried_both_ways(
        restored: RunningLab, ns: str, tmp_path: Path) -> None:
    """`grown` got a partition on the primary after replication broke (its mirror never did):
    its records are gap records, copied to the secondary's new partition. `busy` got a
    partition on the secondary during the outage: its post-failover writes go back to the
    primary's new partition, and the end-state check counts them (before: reconcile failed on
    a partition the failover topic lacked, and the new target partition was ignored)."""
    from confluent_kafka.admin import NewPartitions

    lab = restored
    grown, busy = f"{ns}-grown", f"{ns}-busy"
    create_topics(lab.primary, (grown, busy), 2)
    for topic in (grown, busy):
        for p in (0, 1):
            _send(lab.primary, topic, p, "base", 10)
        wait_replicated(lab, topic, 20)
    stop_forward_quietly(lab, grown, busy)
    for fut in lab.primary.admin().create_partitions([NewPartitions(grown, 3)]).values():
        fut.result(30)
    _send(lab.primary, grown, 2, "gap", 5)
    lab.lab.fail("primary")
    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--yes",
                           "--deadline", "2")
    assert status == 0, out
    for fut in lab.secondary.admin().create_partitions([NewPartitions(busy, 3)]).values():
        fut.result(30)
    _send(lab.secondary, busy, 2, "post", 5)
    lab.lab.heal("primary")
    status, out = run_json("--config", str(config), "failback", "--yes")
    assert status == 0, out
    assert out["marker"]["steps"]["failback:partitions"]["result"]["grown"] == {grown: 3,
                                                                               busy: 3}
    assert out["gap"]["safe"] == 5 and out["reconcile"]["copy_safe"]["copied"] == 5
    assert out["verification"]["ok"] is True and \
        out["verification"]["totals"]["expected"] == 5, out["verification"]
    assert sorted(r.value for r in read_all(fresh_clients(lab, "secondary"), grown)
                  if r.partition == 2) == \
        sorted(b"gap-v-%d" % i for i in range(5))
    back = [r.value for r in read_all(fresh_clients(lab, "primary"), busy) if r.partition == 2]
    assert sorted(back) == sorted(b"post-v-%d" % i for i in range(5))


def test_failback_is_exact_with_logappendtime_on_either_side_a_big_record_and_retention_of_copies(
        restored: RunningLab, ns: str, tmp_path: Path) -> None:
    """One outage, three unusual things at once, exit 0 and exact:
    - `src-lat` stamps records on append on the primary (its copies keep those times; the
      reverse flow's copies on the primary get new ones): the reverse catch-up and the
      end-state check compare by content;
    - `dst-lat` stamps them on append on the secondary (every forward copy has a new time):
      the gap is still found exactly, and the end state holds;
    - a 2 MB gap record on a topic that takes 3 MB (the client's default is 1 MB) is copied;
    - retention deleted only records the secondary had received: nothing is lost, and failback
      does not cry wolf (exit 0, the partition's proof stated)."""
    lab = restored
    src_lat, dst_lat = f"{ns}-src-lat", f"{ns}-dst-lat"
    big = {"max.message.bytes": "3145728"}
    create_topics(lab.primary, (src_lat,), 1, {"message.timestamp.type": "LogAppendTime"})
    create_topics(lab.secondary, (dst_lat,), 1, {"message.timestamp.type": "LogAppendTime",
                                                 **big})
    create_topics(lab.primary, (dst_lat,), 1, big)
    for topic in (src_lat, dst_lat):
        _send(lab.primary, topic, 0, "base", 50)
    for topic in (src_lat, dst_lat):
        wait_replicated(lab, topic, 50)
    assert {r.timestamp_type for r in read_all(lab.secondary, dst_lat)} == {2}
    stop_forward_quietly(lab, src_lat, dst_lat)
    for topic in (src_lat, dst_lat):
        _send(lab.primary, topic, 0, "gap", 8)
    producer = lab.primary.producer(**{"message.max.bytes": "3200000"})
    producer.produce(dst_lat, key=b"big", value=b"B" * 2_000_000, partition=0)
    assert producer.flush(30) == 0
    _delete_before(lab.primary, src_lat, {0: 50})  # every replicated record, and only those
    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--yes")
    assert status == 0, out
    for topic in (src_lat, dst_lat):
        _send(fresh_clients(lab, "secondary"), topic, 0, "post", 5)
    status, out = run_json("--config", str(config), "failback", "--reconcile", "copy-safe",
                           "--yes", "--timeout", "5m")
    assert status == 0, out
    assert out["gap"]["safe"] == 2 * 8 + 1 and not out["gap"].get("lost"), out["gap"]
    statements = {v["topic"]: v["statement"] for v in out["gap"]["verified"]}
    assert "retention deleted only replicated records" in statements[src_lat], statements
    # On the primary: every gap record once, every post-failover write once (reverse copies).
    for topic in (src_lat, dst_lat):
        keys = [(r.key or b"").decode() for r in read_all(fresh_clients(lab, "primary"), topic)]
        assert sorted(k for k in keys if k.startswith(("gap", "post", "big"))) == sorted(
            [f"gap-0-{i}" for i in range(8)] + [f"post-0-{i}" for i in range(5)]
            + (["big"] if topic == dst_lat else [])), topic
    # On the secondary: the gap's reconciled copies, the big one whole.
    copied = [r for r in read_all(fresh_clients(lab, "secondary"), dst_lat) if r.key == b"big"]
    assert len(copied) == 1 and copied[0].value == b"B" * 2_000_000

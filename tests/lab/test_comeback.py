"""The second fault: the failed datacenter's replicator comes back (issue 12).

Replication falls behind, the primary dies with its Connect worker, failover records the stop
as pending; producers write to the secondary; the primary and its Connect worker return with
MirrorMaker 2 RUNNING and copy the records the secondary never got — after the post-failover
writes — and, resuming from an offset it flushed long before, thousands it had copied already,
whose CreateTimes are an hour older than the last one it copied (producers set event times).
drctl must recognise those late copies by content, whatever their timestamps, keep them out of
reconcile and reverse replication, and end with the primary holding every record of its own
once and every post-failover write once (multiset counts per partition), client headers
byte-identical.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from drctl.kafka.records import Record, read_all
from drctl.lab.workload import commit_offsets, create_topics
from tests.conftest import RunningLab
from tests.lab.support import produce, wait_offsets_stored, wait_replicated
from tests.lab.test_failback import restore
from tests.lab.test_failover import run_json, scoped_config

pytestmark = [pytest.mark.lab, pytest.mark.spark]
PARTS = 3


@pytest.fixture
def restored(any_lab: RunningLab) -> Iterator[RunningLab]:
    yield any_lab
    restore(any_lab)


REWIND = 6_000  # records per partition a returning worker copies again


def rewind_stored_offsets(lab: RunningLab, topic: str, last_copied: dict[int, int]) -> None:
    """What a worker that last flushed long ago resumes from: the forward source connector's
    stored offsets (Connect's offsets topic, the worker being down) set back to
    `last_copied` per partition. The key is the one Connect wrote, byte for byte."""
    from drctl.codecs.connect import decode_source_offset

    name = lab.lab.flow(lab.state).connector_names()["source"]
    keys: dict[int, bytes] = {}
    for rec in read_all(lab.secondary, "connect-offsets.internal"):
        entry = decode_source_offset(rec.key, rec.value)
        if entry.connector == name and entry.partition.get("topic") == topic:
            keys[int(entry.partition["partition"])] = rec.key or b""
    assert set(keys) == set(last_copied), keys
    produce(lab.secondary, "connect-offsets.internal",
            [(0, keys[p], b'{"offset":%d}' % o) for p, o in last_copied.items()])


def send(clients: object, topic: str, records: list[tuple[int, bytes, bytes]],
         stamps: list[int] | None = None) -> None:
    # Client headers ride along; they must arrive byte-identical everywhere. A stamp of 0
    # lets the producer set the time.
    produce(clients, topic, [(p, key, value, stamps[i] if stamps else 0,
                              [("trace", b"\x00\xff%d" % i), ("x", b"x")])
                             for i, (p, key, value) in enumerate(records)])


def content(rec: Record) -> tuple[int, bytes | None, bytes | None, int, tuple]:
    return (rec.partition, rec.key, rec.value, rec.timestamp_ms, rec.headers)


def test_replicator_comes_back_after_an_unconfirmed_stop(restored: RunningLab, ns: str,
                                                         tmp_path: Path) -> None:
    lab = restored
    topic = f"{ns}-bal"
    create_topics(lab.primary, (topic,), PARTS)
    base = [(i % PARTS, b"acct-%d" % (i % 12), b"base-%d" % i)
            for i in range(PARTS * (REWIND + 30))]
    # Event times an hour old, but for the last ten records of each partition: what the
    # worker copies again is an hour older than the last record it had copied.
    hour_ago = int(time.time() * 1000) - 3_600_000
    send(lab.primary, topic, base, [hour_ago + i if i < PARTS * (REWIND + 20) else 0
                                    for i in range(len(base))])
    wait_replicated(lab, topic, len(base))
    # Near the end: MirrorMaker 2 keeps offset syncs dense only there (it drops old ones
    # as a partition grows), and translates nothing older than its earliest one.
    read_to = REWIND + 20
    commit_offsets(lab.primary, f"{ns}-app", [TopicPartition(topic, p, read_to)
                                              for p in range(PARTS)])
    lab.wait_checkpointed(f"{ns}-app", topic, {p: read_to for p in range(PARTS)})
    wait_offsets_stored(lab, topic)
    lab.lab.fail("replication")  # the Connect worker dies first: replication falls behind
    gap = [(i % PARTS, b"acct-%d" % (i % 12), b"gap-%d" % i) for i in range(18)]
    send(lab.primary, topic, gap)
    lab.lab.fail("primary")

    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--yes", "--groups",
                           f"{ns}-.*", "--deadline", "2")
    assert status == 0, out
    assert out["marker"]["replication_stop"] == "pending"
    # Producers keep the plain name (failover created it on the secondary for prefixed names).
    # New values for some of the gap's keys, and new keys.
    post = [(i % PARTS, b"acct-%d" % (i % 12), b"post-%d" % i) for i in range(24)]
    send(lab.secondary, topic, post)

    # The worker last flushed its source offsets a minute before it died (Connect's default
    # offset.flush.interval.ms, at 100 records/s a partition): it copies those again.
    rewind_stored_offsets(lab, topic, {p: 30 - 1 for p in range(PARTS)})
    lab.lab.heal("primary")
    lab.lab.heal("replication")  # the worker returns, its MM2 connectors RUNNING
    mirror = lab.mirror(topic)
    want = len(base) + PARTS * REWIND + len(gap) + (len(post) if lab.names_kept else 0)
    deadline = time.monotonic() + 90
    while len(read_all(lab.secondary, mirror)) < want:
        assert time.monotonic() < deadline, "the returning replicator copied nothing"
        time.sleep(1)

    # The re-run confirms the stop and says what came through meanwhile.
    status, out = run_json("--config", str(config), "failover", "--yes", "--groups",
                           f"{ns}-.*")
    assert status == 0, out
    late = out["marker"]["late_copies"]
    assert out["marker"]["replication_stop"] == "stopped"
    # Every re-copy is a late copy (more than 5,000 records back on each partition, an hour
    # older than the last one copied), none a post-failover write that reverse replication
    # would carry to the primary.
    assert late["total"] == PARTS * REWIND + len(gap), late
    of_gap = sum(part["of_gap"] for parts in late["partitions"].values()
                 for part in parts.values())
    assert of_gap == len(gap)
    if lab.names_kept:
        # Keys whose old value landed after their post-failover value.
        assert set(late["stale_keys"]) == {k.decode() for _, k, _ in gap} & {
            k.decode() for _, k, _ in post}

    status, out = run_json("--config", str(config), "failback", "--check-order",
                           "--reconcile", "copy-safe", "--yes", "--groups", f"{ns}-.*")
    assert status == 0, out
    # Late copies are on the target already: nothing is a gap, nothing is copied again.
    assert (out["gap"]["safe"], out["gap"]["conflict"], out["gap"]["unkeyed"]) == (0, 0, 0)
    assert out["gap"]["late_copies"] == late["total"]
    assert out["verification"]["ok"] is True

    # The primary: its own records once each, every post-failover write once, nothing else.
    originals = [r for r in read_all(lab.primary, topic)]
    back_topic = topic if lab.names_kept else f"secondary.{topic}"
    returned = [r for r in read_all(lab.primary, back_topic)] if not lab.names_kept else []
    own = Counter((p, k, v) for p, k, v in base + gap)
    posted = Counter((p, k, v) for p, k, v in post)
    if lab.names_kept:
        held = Counter((r.partition, r.key, r.value) for r in originals)
        assert held == own + posted
    else:
        assert Counter((r.partition, r.key, r.value) for r in originals) == own
        assert Counter((r.partition, r.key, r.value) for r in returned) == posted
    for rec in originals + returned:
        assert rec.headers[0][0] == "trace" and rec.headers[1] == ("x", b"x"), rec
    # On the secondary, every gap record exactly once (its late copy), none reconciled again.
    on_secondary = Counter(content(r)[:3] for r in read_all(lab.secondary, mirror))
    for p, k, v in gap:
        assert on_secondary[(p, k, v)] == 1

"""gap-analysis on a compacted topic whose copy on the secondary compacted on its own, eager
schedule: only the records never copied are the gap; the old versions and the expired tombstone
the target dropped after copying are counted as superseded and never classified."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from drctl.gap.result import GapResult
from drctl.kafka.clients import ClusterClients
from drctl.kafka.records import read_all
from drctl.lab.workload import create_topics
from tests.conftest import RunningLab
from tests.lab.test_failback import restore
from tests.lab.test_failover import run_json, scoped_config
from tests.lab.test_gap_e2e import PARTS, Producer, ends, gap_cli, ident

pytestmark = [pytest.mark.lab, pytest.mark.spark]
KEYS = 10
VERSIONS = 20
# The secondary compacts as soon as it may: every segment but the active one, at once, and
# expires tombstones almost as soon as it has cleaned them.
EAGER = {"segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
         "min.compaction.lag.ms": "0", "delete.retention.ms": "100",
         "cleanup.policy": "compact"}


def set_configs(clients: ClusterClients, topic: str, configs: dict[str, str]) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    for fut in clients.admin().incremental_alter_configs([resource]).values():
        fut.result(timeout=30)


def key(k: int) -> bytes:
    return b"key-%d" % k


def wait_for(what: str, done: Callable[[], bool], deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while not done():
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {deadline_s:.0f} s")
        time.sleep(1)


def test_compacted_copy_reports_only_records_never_copied(lab: RunningLab, ns: str,
                                                          tmp_path: Path) -> None:
    topic = f"{ns}-balances"
    mirror = lab.mirror(topic)
    create_topics(lab.primary, (topic,), PARTS, {"cleanup.policy": "compact"})
    lab.wait_mirror_topic(topic)
    set_configs(lab.secondary, mirror, EAGER)

    primary = Producer(lab.primary, topic)
    for version in range(VERSIONS):
        # Timestamps follow the clock: the mirror rolls its segments by them (segment.ms).
        primary.ts = max(primary.ts, int(time.time() * 1000) - 5_000)
        for k in range(KEYS):
            if version == VERSIONS // 2 and k == KEYS - 1:
                primary.send(k % PARTS, key(k), None, "copied")  # key-9 deleted, copied
            elif not (version > VERSIONS // 2 and k == KEYS - 1):
                primary.send(k % PARTS, key(k), b"v%d" % version, "copied")
        primary.flush()
        time.sleep(0.3)
    copied = len(primary.sent)
    wait_for("replication", lambda: sum(ends(lab.secondary, mirror).values()) >= copied, 120)
    # The secondary compacts the copy: most old versions disappear there, not on the primary.
    wait_for("compaction on the secondary",
             lambda: len(read_all(lab.secondary, mirror)) <= copied // 3, 240)
    # Its cleaner looks again every second and expires the tombstone a pass later: count the
    # dropped versions once the copy has stopped changing, or the gap job sees fewer records.
    counts = [-1]

    def settled() -> bool:
        time.sleep(2)
        counts.append(len(read_all(lab.secondary, mirror)))
        return counts[-1] == counts[-2]

    wait_for("the secondary's compaction to settle", settled, 120)

    lab.lab.fail("replication")
    try:
        for k in (0, 1, 2, 4):
            primary.send(k % PARTS, key(k), b"new-%d" % k, "gap")
        primary.send(5 % PARTS, key(5), None, "gap")  # a tombstone that never reached it
        primary.flush()
        gap = [s for s in primary.sent if s.expect == "gap"]
        assert len(gap) == 5

        source = read_all(lab.primary, topic)
        target = read_all(lab.secondary, mirror)
        assert len(source) == len(primary.sent)  # the primary compacted nothing
        on_target = {(r.partition, r.key, r.value, r.timestamp_ms) for r in target}
        not_on_target = [r for r in source
                         if (r.partition, r.key, r.value, r.timestamp_ms) not in on_target]
        dropped = len(not_on_target) - len(gap)
        assert dropped >= copied // 2  # the target really did compact the copy

        f_point = ends(lab.secondary, mirror)
        target_end = json.dumps({topic: {str(p): o for p, o in f_point.items()}})
        # Tail with --check-order also proves tail without it: same scope, same gap records.
        for scope, check_order in (("full", False), ("tail", True)):
            out = tmp_path / f"gap-{scope}-{check_order}"
            code, stdout, stderr = gap_cli(lab, [
                "--topics", topic, "--target-end", target_end, "--report-dir", str(out),
                "--scope", scope,
                *(["--check-order"] if check_order else [])])
            assert code == 0, stderr
            data = json.loads(stdout)
            result = GapResult.load(out)
            got = sorted((r.partition, r.offset, r.value) for r in result.iter_records())
            assert got == sorted((s.partition, s.offset, s.value) for s in gap)
            assert {ident(r) for r in result.iter_records()} == {s.ident() for s in gap}
            assert data["totals"]["unreplicated"] == len(gap)
            assert data["totals"]["superseded"] == dropped
            assert sum(p["superseded"] for p in data["partitions"]) == dropped
            if check_order:
                # Nothing was written after failover: the real gap is all safe, and the
                # superseded records are not classified at all.
                t = data["totals"]
                assert (t["safe"], t["conflict"], t["unkeyed"]) == (len(gap), 0, 0)
                assert {r.classification for r in result.iter_records()} == {"safe"}

        # The whole incident: the primary dies, failover, it comes back, failback appends
        # exactly the records never copied — once each, not the versions the copy compacted.
        lab.lab.fail("primary")
        lab.lab.heal("replication")  # its source is gone: it copies nothing
        config = str(scoped_config(lab, ns, tmp_path))
        status, over = run_json("--config", config, "failover", "--yes", "--deadline",
                                "2")
        assert status == 0, over
        lab.lab.heal("primary")
        before = {(r.partition, r.offset) for r in read_all(lab.secondary, mirror)}
        status, back = run_json("--config", config, "failback", "--check-order",
                                "--reconcile", "copy-safe", "--yes")
        assert status == 0, back
        assert back["gap"]["superseded"] == dropped
        assert back["reconcile"]["copy_safe"]["copied"] == len(gap)
        added = [r for r in read_all(lab.secondary, mirror)
                 if (r.partition, r.offset) not in before]
        assert sorted((r.partition, r.key, r.value) for r in added) == \
            sorted((s.partition, s.key, s.value) for s in gap)
        assert back["verification"]["ok"] is True, back["verification"]
    finally:
        restore(lab)

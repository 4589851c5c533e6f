"""translate-offsets against real clusters: every group resumes on the target exactly after the
last record it consumed on the source — 0 duplicated, 0 skipped."""

from __future__ import annotations

import random
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_STORED, KafkaError, TopicPartition

from drctl.fingerprint import fingerprint
from drctl.kafka.checkpoints import read_checkpoints
from drctl.kafka.groups import committed_offsets
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import Record, read_all
from drctl.lab.workload import (
    ProducedRecord,
    WorkloadSpec,
    commit_offsets,
    create_topics,
    partition_for,
    run_workload,
)
from drctl.translate import locate
from tests.conftest import RunningLab
from tests.lab.support import run_json, wait_offsets_stored, wait_replicated

pytestmark = pytest.mark.lab
PARTITIONS = 3


def fp(rec: ProducedRecord | Record) -> bytes:
    return fingerprint(rec.partition, rec.key, rec.value, list(rec.headers), rec.timestamp_ms)


def choose_positions(records: list[ProducedRecord], seed: int) -> dict[str, dict[int, int]]:
    """>= 30 groups at the positions that break naive translation."""
    rng = random.Random(seed)
    by_p: dict[int, list[ProducedRecord]] = defaultdict(list)
    for r in records:
        by_p[r.partition].append(r)
    ends = {p: max(r.offset for r in rs) + 1 for p, rs in by_p.items()}
    groups: dict[str, dict[int, int]] = {"at-0": dict.fromkeys(by_p, 0), "at-end": ends}
    for i in range(8):  # inside identical-timestamp bursts, including right between copies
        pos = {}
        for p, rs in by_p.items():
            inside = [r.offset for r in rs if r.kind in ("burst", "identical")]
            copies = [r.offset for r in rs if r.kind == "identical"]
            pool = copies if i % 2 == 0 and copies else inside
            pos[p] = pool[(i * 7) % len(pool)] + (i % 4 == 3)
        groups[f"burst-{i}"] = pos
    for i in range(4):  # right after an aborted (or committed) transaction
        pos = {}
        for p, rs in by_p.items():
            kind = "txn-aborted" if i < 3 else "txn-committed"
            txn = [r.offset for r in rs if r.kind == kind]
            pos[p] = (max(txn) + 1 + (i % 2)) if txn else ends[p] // 2
        groups[f"after-txn-{i}"] = pos
    for i in range(16):
        groups[f"random-{i}"] = {p: rng.randrange(1, ends[p]) for p in by_p}
    return groups


def successor(records: list[ProducedRecord], partition: int, offset: int) -> ProducedRecord | None:
    visible = sorted((r for r in records if r.partition == partition and r.kind != "txn-aborted"),
                     key=lambda r: r.offset)
    return next((r for r in visible if r.offset >= offset), None)


def first_records_from_committed(lab: RunningLab, group: str, topic: str
                                 ) -> dict[int, Record | None]:
    """What a real consumer of `group` on the secondary reads first, per partition."""
    consumer = lab.secondary.consumer(**{"group.id": group, "enable.partition.eof": "true"})
    consumer.assign([TopicPartition(topic, p, OFFSET_STORED) for p in range(PARTITIONS)])
    first: dict[int, Record | None] = {}
    deadline = time.monotonic() + 30
    try:
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(100, timeout=0.5):
                p = msg.partition()
                if p in first:
                    continue
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    first[p] = None
                elif err is None:
                    first[p] = Record.from_message(msg)
    finally:
        consumer.close()
    missing = set(range(PARTITIONS)) - set(first)
    assert not missing, f"{group}: no answer from partitions {missing}"
    return first


def kafka_tool_offsets(lab: RunningLab, group: str) -> dict[tuple[str, int], int]:
    """Ask Kafka's own kafka-consumer-groups tool (from the lab's jars)."""
    lib = Path(lab.state.lib_dir)
    main_class = ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
                  if lab.state.kafka_version.startswith("4")
                  else "kafka.admin.ConsumerGroupCommand")
    out = subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{lib}/*", main_class, "--bootstrap-server",
         lab.lab.bootstrap(lab.state, "secondary"), "--describe", "--group", group],
        capture_output=True, text=True, timeout=120, check=True).stdout
    offsets = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[0] == group and cols[3].isdigit():
            offsets[(cols[1], int(cols[2]))] = int(cols[3])
    return offsets


def produce_more(lab: RunningLab, topic: str, count: int) -> list[ProducedRecord]:
    producer = lab.primary.producer()
    sent: list[ProducedRecord] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None
        ts_type, ts = msg.timestamp()  # type: ignore[attr-defined]
        sent.append(ProducedRecord(topic, msg.partition(), msg.offset(),  # type: ignore
                                   msg.key(), msg.value(), ts, (), "extra"))  # type: ignore

    for i in range(count):
        key = f"late-{i}".encode()
        producer.produce(topic, key=key, value=b"late", partition=partition_for(key, PARTITIONS, i),
                         on_delivery=on_delivery)
    assert producer.flush(30) == 0
    return sent


def run_translate(lab: RunningLab, ns: str, *args: str) -> tuple[int, dict]:
    """`drctl -o json translate-offsets --groups NS-.* ARGS…`; the document checked against
    its schema."""
    return run_json("--config", str(lab.config_file), "translate-offsets", "--groups",
                    f"{ns}-.*", *args)


def test_exact_translation_resumes_every_group_exactly(any_lab: RunningLab, ns: str,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    lab = any_lab
    topic = f"{ns}-orders"
    spec = WorkloadSpec(topics=(topic,), partitions=PARTITIONS, records=1500, seed=3,
                        burst_every=150, burst_size=25, transactions=6, groups=())
    workload = run_workload(lab.primary, spec)
    wait_replicated(lab, topic, len(workload.visible()))
    positions = choose_positions(workload.records, seed=5)
    assert len(positions) >= 30
    for name, pos in positions.items():
        commit_offsets(lab.primary, f"{ns}-{name}",
                       [TopicPartition(topic, p, o) for p, o in pos.items()])

    # Replication stops; the primary takes more writes; one group reads them all.
    wait_offsets_stored(lab, topic)  # MM2 is at-least-once: no re-copy after the kill
    lab.lab.fail("replication")
    try:
        extra = produce_more(lab, topic, 40)
        records = workload.records + extra
        ends = {p: max(r.offset for r in records if r.partition == p) + 1
                for p in range(PARTITIONS)}
        commit_offsets(lab.primary, f"{ns}-ahead",
                       [TopicPartition(topic, p, e) for p, e in ends.items()])

        status, report = run_translate(lab, ns, "--method", "exact", "--yes")
        assert status == 0, capsys.readouterr().err
        groups = {g["group"]: g for g in report["groups"]}
        assert set(groups) == {f"{ns}-{n}" for n in positions} | {f"{ns}-ahead"}
        assert all(g["applied"] for g in groups.values())

        target_topic = lab.mirror(topic)
        for name, pos in positions.items():
            group = f"{ns}-{name}"
            parts = {p["partition"]: p for p in groups[group]["partitions"]}
            assert {p["confidence"] for p in parts.values()} == {"exact"}, (group, parts)
            first = first_records_from_committed(lab, group, target_topic)
            for p, offset in pos.items():
                expected = successor(workload.records, p, offset)
                got = first[p]
                if expected is None:
                    assert got is None, (group, p)
                else:
                    assert got is not None and fp(got) == fp(expected), (group, p, offset)

        ahead = {p["partition"]: p for p in groups[f"{ns}-ahead"]["partitions"]}
        target_ends = {p: len([r for r in read_all(lab.secondary, target_topic)
                              if r.partition == p]) for p in range(PARTITIONS)}
        for p in range(PARTITIONS):
            late = sum(1 for r in extra if r.partition == p)
            assert ahead[p]["confidence"] == "clamped"
            assert ahead[p]["missing"] == late
            assert ahead[p]["target_offset"] >= target_ends[p]  # the target's end
        assert report["summary"]["missing"] == len(extra)

        # Partitions read whole and looked up in memory answer exactly as ListOffsets and
        # ranged reads do (the path large partitions take).
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(locate, "LOAD_BUDGET", 0)
            status, remote = run_translate(lab, ns, "--method", "exact", "--dry-run")
        assert status == 0

        def answers(rep: dict) -> list[tuple]:
            return [(g["group"], p["partition"], p["target_offset"], p["confidence"],
                     p["missing"]) for g in rep["groups"] for p in g["partitions"]]
        assert answers(remote) == answers(report)

        # A client no one here wrote agrees.
        tool = kafka_tool_offsets(lab, f"{ns}-burst-0")
        ours = {(target_topic, p["partition"]): p["target_offset"]
                for p in groups[f"{ns}-burst-0"]["partitions"]}
        assert tool == ours
    finally:
        lab.lab.heal("replication")


def test_checkpoint_and_timestamp_predict_redelivery(lab: RunningLab, ns: str) -> None:
    topic = f"{ns}-pay"
    spec = WorkloadSpec(topics=(topic,), partitions=PARTITIONS, records=1200, seed=9,
                        burst_every=200, burst_size=30, transactions=2, groups=())
    workload = run_workload(lab.primary, spec)
    wait_replicated(lab, topic, len(workload.visible()))
    positions = {k: v for k, v in choose_positions(workload.records, seed=2).items()
                 if k.startswith(("burst", "random"))}
    for name, pos in positions.items():
        commit_offsets(lab.primary, f"{ns}-{name}",
                       [TopicPartition(topic, p, o) for p, o in pos.items()])
    # MirrorMaker 2 emits checkpoints every second for groups it has discovered.
    wanted = {(f"{ns}-{n}", lab.mirror(topic), p) for n, pos in positions.items() for p in pos}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        cps = read_checkpoints(lab.secondary, "primary.checkpoints.internal")
        have = {k for k in wanted if k in cps and
                cps[k].upstream_offset == positions[k[0][len(ns) + 1:]][k[2]]}
        if len(have) == len(wanted):
            break
        time.sleep(1)
    assert len(have) >= 0.9 * len(wanted), f"{len(have)}/{len(wanted)} checkpoints"

    target_topic = lab.mirror(topic)
    target = read_all(lab.secondary, target_topic)
    by_p = defaultdict(list)
    for r in target:
        by_p[r.partition].append(r)
    # Without replicator crashes the target is the source's visible records in order, so the
    # j-th visible source record is the j-th target record: an independent map of positions.
    visible = defaultdict(list)
    for r in sorted(workload.visible(), key=lambda r: r.offset):
        visible[r.partition].append(r)
    for p in range(PARTITIONS):
        assert [fp(r) for r in by_p[p]] == [fp(r) for r in visible[p]]

    for method in ("checkpoint", "timestamp"):
        status, report = run_translate(lab, ns, "--method", method, "--dry-run")
        assert status == 0
        compared = 0
        for g in report["groups"]:
            name = g["group"][len(ns) + 1:]
            for part in g["partitions"]:
                if part["target_offset"] is None:
                    continue
                expected = successor(workload.records, part["partition"],
                                     positions[name][part["partition"]])
                # Measured: records a consumer starting there reads before the successor.
                p = part["partition"]
                successor_at = (by_p[p][visible[p].index(expected)].offset
                                if expected is not None else by_p[p][-1].offset + 1)
                measured = sum(1 for r in by_p[p]
                               if part["target_offset"] <= r.offset < successor_at)
                assert (part["redelivered"] or 0) == measured, (method, g["group"], part)
                compared += 1
        assert compared >= 0.9 * len(wanted)
        if method == "checkpoint":
            assert report["summary"]["redelivered"] > 0  # MM2's checkpoints lag
            assert any(p["confidence"].startswith("checkpoint-lag:")
                       for p in (x for g in report["groups"] for x in g["partitions"]))


@contextmanager
def busy_on_target(lab: RunningLab, ns: str, topic: str) -> Iterator[None]:
    """`topic` (100 records) replicated; groups NS-idle and NS-busy committed at 50 on the
    primary; NS-busy has a live member on the secondary (consumers started there early)
    while the block runs."""
    workload = run_workload(lab.primary, WorkloadSpec(topics=(topic,), partitions=1,
                                                       records=100, groups=()))
    wait_replicated(lab, topic, len(workload.visible()))
    for g in ("idle", "busy"):
        commit_offsets(lab.primary, f"{ns}-{g}", [TopicPartition(topic, 0, 50)])
    busy = lab.secondary.consumer(**{"group.id": f"{ns}-busy"})
    busy.subscribe([lab.mirror(topic)])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not busy.assignment():
            busy.poll(0.2)
        assert busy.assignment()
        yield
    finally:
        busy.close()


def test_active_group_on_target_is_skipped(lab: RunningLab, ns: str) -> None:
    with busy_on_target(lab, ns, f"{ns}-act"):
        # Neither --yes nor --dry-run, and no one to ask: nothing is committed (exit 5).
        status, refused = run_translate(lab, ns)
        assert status == 5 and refused["error"]["kind"] == "Aborted"
        assert "--yes" in refused["error"]["hint"]
        assert committed_offsets(lab.secondary, [f"{ns}-idle"]).get(f"{ns}-idle",
                                                                            {}) == {}
        status, report = run_translate(lab, ns, "--yes")
    assert status == 3
    groups = {g["group"]: g for g in report["groups"]}
    assert groups[f"{ns}-idle"]["applied"] is True
    assert groups[f"{ns}-busy"]["applied"] is False
    assert "active" in groups[f"{ns}-busy"]["skipped"]


KEYS, VERSIONS = 30, 10  # per partition of the compacted topic: 300 records, 30 kept


def test_exact_translation_on_a_compacted_copy_places_every_group_or_names_it(
        any_lab: RunningLab, ns: str) -> None:
    """Both topics compacted: the primary keeps every version, the secondary's copy compacts
    eagerly (about 60 of the 300 records per partition stay). A group that read 150 records
    per partition finds none of them on partition 0's copy and only a never-updated key on
    partition 1's: exact translation places it at the first surviving copy of a record it has
    not read, exactly (before: "not placed", the group left where it was, and exit 0). A
    group between two identical records (a producer's retry), whose copy of the first the
    secondary's cleaner removed, is placed before the surviving copy — at most that one
    re-delivered, never skipped. With a scan bound too small to prove a position, the group is
    named and the exit status is 3."""
    from tests.lab.test_gap_compacted import EAGER, set_configs, wait_for

    lab = any_lab
    topic, mirror = f"{ns}-cmp", lab.mirror(f"{ns}-cmp")
    create_topics(lab.primary, (topic,), 2, {"cleanup.policy": "compact"})
    lab.wait_mirror_topic(topic)
    set_configs(lab.secondary, mirror, EAGER)
    producer = lab.primary.producer()
    # Partition 1 starts with a key that is never written again: it survives compaction.
    producer.produce(topic, key=b"static", value=b"static", partition=1)
    for version in range(VERSIONS + 2):
        if version == VERSIONS:  # a producer's retry: the same record twice
            stamp = int(time.time() * 1000)
            for _ in (0, 1):
                producer.produce(topic, key=b"twin", value=b"t", partition=1, timestamp=stamp)
        else:  # the last round (5 keys) rolls the twins' segment on the copy
            for p in (0, 1):
                for k in range(KEYS if version < VERSIONS else 5):
                    producer.produce(topic, key=b"k%d" % k, value=b"%d-v%d" % (k, version),
                                     partition=p)
        assert producer.flush(30) == 0
        time.sleep(0.3)  # the copy rolls a segment per round (segment.ms)
    # The copy's segment holding the twins rolls only when a record arrives after it: under
    # load MirrorMaker 2 copies the last rounds in one batch, so once it has copied
    # everything, one more record per partition (else the twins are never compacted).
    ends = watermarks(lab.primary.admin(), [(topic, 0), (topic, 1)])

    def copied() -> bool:
        held = watermarks(lab.secondary.admin(), [(mirror, 0), (mirror, 1)])
        return all(held[(mirror, p)][1] == ends[(topic, p)][1] for p in (0, 1))

    wait_for("the copy of every record", copied, 120)
    time.sleep(0.3)
    for p in (0, 1):
        producer.produce(topic, key=b"roll", value=b"roll-%d" % p, partition=p)
    assert producer.flush(30) == 0
    source = {p: [r for r in read_all(lab.primary, topic) if r.partition == p] for p in (0, 1)}
    twins = [r.offset for r in source[1] if r.key == b"twin"]
    reader, twin_reader = f"{ns}-reader", f"{ns}-between-twins"
    commit_offsets(lab.primary, reader, [TopicPartition(topic, p, 150) for p in (0, 1)])
    commit_offsets(lab.primary, twin_reader, [TopicPartition(topic, 1, twins[1])])

    def copy() -> dict[int, list[Any]]:
        held = read_all(lab.secondary, mirror)
        return {p: [r for r in held if r.partition == p] for p in (0, 1)}

    def compacted() -> bool:
        held = copy()
        return all(source[p][-1].value in {r.value for r in held[p]} for p in (0, 1)) \
            and not any(r.offset < 150 and r.key != b"static" for p in (0, 1) for r in held[p]) \
            and sum(r.key == b"twin" for r in held[1]) == 1

    wait_for("the secondary's compaction of the copy", compacted, 240)
    held = copy()
    origin = {(p, r.value): r.offset for p in (0, 1) for r in source[p] if r.key != b"twin"}

    def expected(p: int, position: int) -> int:
        """Right after the copy of the last record before `position` the copy holds."""
        read = [r.offset for r in held[p]
                if r.key != b"twin" and origin[(p, r.value)] < position]
        return read[-1] + 1 if read else 0

    status, out = run_json("--config", str(lab.config_file), "translate-offsets", "--groups",
                           f"{ns}-.*", "--method", "exact", "--yes")
    assert status == 0, out
    placed = {(g["group"], p["partition"]): p for g in out["groups"] for p in g["partitions"]}
    for p in (0, 1):
        got = placed[(reader, p)]
        assert (got["target_offset"], got["confidence"]) == (expected(p, 150), "exact"), got
        assert got["applied"], got
    assert placed[(reader, 0)]["proof"]["last_read"] is None  # nothing it read survives
    # Between the twins: before the surviving copy (it may be the first one's), one at most
    # read again; the old count of identical copies put the group after it.
    got = placed[(twin_reader, 1)]
    [twin_copy] = [r.offset for r in held[1] if r.key == b"twin"]
    assert got["target_offset"] <= twin_copy, got
    assert (got["confidence"], got["max_redelivered"]) == ("walked-back:1", 1), got
    assert not [r for r in held[1] if got["target_offset"] <= r.offset < twin_copy], got
    committed = committed_offsets(lab.secondary, [reader])[reader]
    assert committed == {(mirror, p): expected(p, 150) for p in (0, 1)}

    # The operator's scan bound is too small to prove where the group goes: named, exit 3.
    status, out = run_json("--config", str(lab.config_file), "translate-offsets", "--groups",
                           reader, "--method", "exact", "--max-scan", "1", "--dry-run")
    assert status == 3, out
    assert out["summary"]["unplaced"] == 2, out["summary"]
    assert {p["confidence"] for g in out["groups"] for p in g["partitions"]} == {"unproven"}

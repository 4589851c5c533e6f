"""The whole unplanned outage: failover, post-failover writes, primary back, failback with
--check-order and --reconcile copy-safe, reverse replication from the failover point, groups
switched back. Every number is counted, record by record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_STORED, KafkaError, TopicPartition

from drctl.cli.app import main
from drctl.config import load_config
from drctl.kafka.records import Record, read_all
from drctl.lab.workload import commit_offsets, create_topics, partition_for
from drctl.state import marker_store
from tests.conftest import RunningLab
from tests.lab import support
from tests.lab.support import wait_offsets_stored, wait_replicated
from tests.lab.test_failover import run_json, scoped_config

pytestmark = [pytest.mark.lab, pytest.mark.spark]
PARTITIONS = 3


@pytest.fixture
def restore_lab(lab: RunningLab) -> Iterator[None]:
    yield
    restore(lab)


def restore(lab: RunningLab) -> None:
    """The shared lab as the next test expects it: every process up, this test's reverse
    flow gone, forward replication running."""
    for part in ("primary", "connect"):
        if not lab.lab.process(part).is_running():
            lab.lab.heal("replication" if part == "connect" else part)
    client = lab.lab.connect_client(lab.state)
    for name in client.connectors():
        if name.startswith("mm2-secondary-primary"):
            client.delete(name)  # the reverse flow of this test
    lab.lab.up(ports=lab.state.ports, names_kept=lab.names_kept)


def produce(lab_clients: object, topic: str, records: list[tuple[bytes | None, bytes]],
            partitions: dict[int, int] | None = None, timestamp_ms: int = 0) -> None:
    """`records` by key (or at `partitions[i]`), at `timestamp_ms` + i when given."""
    support.produce(lab_clients, topic, [  # type: ignore[arg-type]
        (partition_for(key, PARTITIONS, i) if partitions is None else partitions[i], key, value,
         timestamp_ms + i if timestamp_ms else 0, []) for i, (key, value) in enumerate(records)])


def outage(lab: RunningLab, ns: str, tmp_path: Path, gap_age_s: float = 0) -> dict:
    """Primary loses its datacenter with records not yet replicated; failover; new writes.
    With `gap_age_s` the unreplicated records carry CreateTimes that long ago (replication
    broke quietly, long before the outage)."""
    topic = f"{ns}-acct"
    create_topics(lab.primary, (topic,), PARTITIONS)
    base = [(f"base-{i % 40}".encode(), f"base-{i}".encode()) for i in range(300)]
    produce(lab.primary, topic, base)
    wait_replicated(lab, topic, len(base))
    commit_offsets(lab.primary, f"{ns}-pre", [TopicPartition(topic, p, 100 + p)
                                               for p in range(PARTITIONS)])
    # Failover with the source down moves the groups MirrorMaker 2 checkpointed: wait until
    # it discovered this new group (a group refresh) and checkpointed its commits.
    lab.wait_checkpointed(f"{ns}-pre", topic, {p: 100 + p for p in range(PARTITIONS)})
    wait_offsets_stored(lab, topic)  # no re-copy after the kill
    lab.lab.fail("replication")
    safe = [(f"safe-{i}".encode(), f"gap-safe-{i}".encode()) for i in range(6)]
    conflict = [(f"conf-{i}".encode(), f"gap-old-{i}".encode()) for i in range(4)]
    unkeyed = [(None, f"gap-nokey-{i}".encode()) for i in range(4)]
    produce(lab.primary, topic, safe + conflict + unkeyed,
            timestamp_ms=int((time.time() - gap_age_s) * 1000) if gap_age_s else 0)
    lab.lab.fail("primary")
    lab.lab.heal("replication")  # the Connect worker lives on; its source is gone

    config = scoped_config(lab, ns, tmp_path)
    status, out = run_json("--config", str(config), "failover", "--yes", "--groups",
                           f"{ns}-.*", "--deadline", "2")
    assert status == 0, out
    assert out["marker"]["replication_stop"] == "stopped"

    post = ([(k, f"post-new-{k.decode()}".encode()) for k, _ in conflict]
            + [(f"new-{i}".encode(), f"post-{i}".encode()) for i in range(5)])
    produce(lab.secondary, topic, post)
    nokey_post = [(None, f"post-nokey-{i}".encode()) for i in range(2)]
    produce(lab.secondary, topic, nokey_post, partitions={0: 0, 1: 0})
    # A consumer on the secondary reads some post-failover records, then commits.
    marker = out["marker"]
    fpoint = {int(p): o for p, o in marker["failover_point"][lab.mirror(topic)].items()}
    # Where the post-failover writes begin: F in the mirror itself when names are kept, the
    # failover topic's end at failover when they are prefixed.
    post_start = fpoint if lab.names_kept else {
        int(p): o for p, o in marker["failover_topics_end"][topic].items()}
    written = {r.partition for r in read_all(lab.secondary, topic)
               if r.offset >= post_start[r.partition]}
    commit_offsets(lab.secondary, f"{ns}-post",
                   [TopicPartition(topic, p, post_start[p] + 1) for p in sorted(written)])
    lab.lab.heal("primary")
    return {"topic": topic, "config": config, "safe": safe, "conflict": conflict,
            "unkeyed": unkeyed, "post": post + nokey_post, "fpoint": fpoint, "base": base,
            "incident": marker["incident"]}


def first_on(clients: object, group: str, topic: str) -> dict[int, Record | None]:
    consumer = clients.consumer(**{"group.id": group,  # type: ignore[attr-defined]
                                   "enable.partition.eof": "true"})
    consumer.assign([TopicPartition(topic, p, OFFSET_STORED) for p in range(PARTITIONS)])
    first: dict[int, Record | None] = {}
    end = time.monotonic() + 30
    while len(first) < PARTITIONS and time.monotonic() < end:
        for msg in consumer.consume(50, timeout=0.5):
            if msg.partition() in first:
                continue
            err = msg.error()
            if err is not None and err.code() == KafkaError._PARTITION_EOF:
                first[msg.partition()] = None
            elif err is None:
                first[msg.partition()] = Record.from_message(msg)
    consumer.close()
    return first


def test_unplanned_outage_failback_check_order_copy_safe(lab: RunningLab, ns: str,
                                                         tmp_path: Path,
                                                         restore_lab: None) -> None:
    o = outage(lab, ns, tmp_path)
    topic = o["topic"]
    secondary_before = read_all(lab.secondary, topic)
    status, out = run_json("--config", str(o["config"]), "failback", "--check-order",
                           "--reconcile", "copy-safe", "--yes", "--groups", f"{ns}-.*")
    assert status == 0, out
    assert out["gap"]["safe"] == len(o["safe"])
    assert out["gap"]["conflict"] == len(o["conflict"])
    assert out["gap"]["unkeyed"] == len(o["unkeyed"])
    assert out["reconcile"]["copy_safe"]["copied"] == len(o["safe"])

    # The safe records now sit in the failover topic once, tagged; nothing else was added.
    seen = {(r.partition, r.offset) for r in secondary_before}
    added = [r for r in read_all(lab.secondary, topic) if (r.partition, r.offset) not in seen]
    assert sorted(r.value for r in added) == sorted(v for _, v in o["safe"])
    assert all(any(k == "drctl-reconciled" for k, _ in r.headers) for r in added)
    # Conflicts and unkeyed records are quarantined, not copied.
    quarantined = [json.loads(line) for line in
                   Path(out["reconcile"]["quarantine"]["file"]).read_text().splitlines()]
    import base64

    assert sorted(base64.b64decode(q["value"]) for q in quarantined) == \
        sorted(v for _, v in o["conflict"] + o["unkeyed"])

    # Reverse replication copied exactly the post-failover writes to the primary: once each,
    # nothing replicated before, not the reconciled copies.
    primary = read_all(lab.primary, topic)
    values = [r.value for r in primary]
    for _, v in o["post"]:
        assert values.count(v) == 1, v
    for _, v in o["safe"] + o["conflict"] + o["unkeyed"]:
        assert values.count(v) == 1, v  # the gap's originals, never a second copy
    assert len(primary) == len(o["base"]) + 14 + len(o["post"])

    # The group that read post-failover records on the secondary, but not the reconciled
    # copies, resumes on the primary at the first safe gap record of the partition (it never
    # read it), else with the record after the ones it read.
    on_secondary = read_all(lab.secondary, topic)
    first = first_on(lab.primary, f"{ns}-post", topic)
    consumed = {r.partition for r in on_secondary if r.offset == o["fpoint"][r.partition]}
    assert consumed
    safe_values = {v for _, v in o["safe"]}
    for p in sorted(consumed):
        gap_first = [r for r in primary if r.partition == p and r.value in safe_values]
        nxt = gap_first or [
            r for r in on_secondary if r.partition == p and r.offset >= o["fpoint"][p] + 1
            and not any(k == "drctl-reconciled" for k, _ in r.headers)]
        if nxt:
            assert first[p] is not None and first[p].value == nxt[0].value, p
        else:
            assert first[p] is None
    group = next(g for g in out["switch_back"]["groups"] if g["group"] == f"{ns}-post")
    assert group["totals"]["not_delivered"] == 0
    # The incident waits for the return to protection; failback again changes nothing and
    # says what to run next.
    assert out["phase"] == "failed-back"
    assert out["next_command"] == f"drctl reprotect --incident {o['incident']}"
    status, again = run_json("--config", str(o["config"]), "failback", "--yes")
    assert status == 0 and again["resumed"] is True, again
    assert again["reconcile"] == out["reconcile"]


def test_failback_finds_a_gap_that_began_hours_before_the_failover(
        lab: RunningLab, ns: str, tmp_path: Path, restore_lab: None) -> None:
    """No time window is assumed: records produced after replication broke, with CreateTimes
    three hours before the failover, are found and reconciled; the report says what was
    verified."""
    o = outage(lab, ns, tmp_path, gap_age_s=3 * 3600)
    status, out = run_json("--config", str(o["config"]), "failback", "--check-order",
                           "--reconcile", "copy-safe", "--yes", "--groups", f"{ns}-.*")
    assert status == 0, out
    assert (out["gap"]["safe"], out["gap"]["conflict"], out["gap"]["unkeyed"]) == (
        len(o["safe"]), len(o["conflict"]), len(o["unkeyed"]))
    assert out["reconcile"]["copy_safe"]["copied"] == len(o["safe"])
    verified = out["gap"]["verified"]
    assert {v["partition"] for v in verified} == set(range(PARTITIONS))
    assert all(v["scope"] == "tail" and "proved: source" in v["statement"] for v in verified)
    report = next(Path(p) for p in out["reports"] if p.endswith(".md"))
    assert "What was compared (tail scope)" in report.read_text()
    copied = [r for r in read_all(lab.secondary, o["topic"])
              if any(k == "drctl-reconciled" for k, _ in r.headers)]
    assert sorted(r.value for r in copied) == sorted(v for _, v in o["safe"])


def test_a_topic_never_mirrored_is_left_behind_by_failover_and_named_by_failback(
        lab: RunningLab, ns: str, tmp_path: Path, restore_lab: None) -> None:
    """An outage's failover with the source still answering: a topic the replicator never
    mirrored (`.replica` names are outside the lab's MirrorMaker 2) does not stop the failover
    of the rest. Failover names it and its reader (exit 3); failback, with both clusters up,
    compares it in full and reconciles it like any other gap."""
    mirrored, young = f"{ns}-kept", f"{ns}-young.replica"
    create_topics(lab.primary, (mirrored,), PARTITIONS)
    produce(lab.primary, mirrored, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(60)])
    wait_replicated(lab, mirrored, 60)
    create_topics(lab.primary, (young,), 1)
    produce(lab.primary, young, [(None, f"y{i}".encode()) for i in range(100)],
            partitions=dict.fromkeys(range(100), 0))
    commit_offsets(lab.primary, f"{ns}-kept-reader",
                   [TopicPartition(mirrored, p, 5) for p in range(PARTITIONS)])
    commit_offsets(lab.primary, f"{ns}-young-reader", [TopicPartition(young, 0, 40)])
    config = scoped_config(lab, ns, tmp_path)

    status, out = run_json("--config", str(config), "failover", "--yes", "--groups",
                           f"{ns}-.*")
    assert status == 3, out
    left = out["marker"]["left_behind"]
    assert left["topics"] == [{"topic": young, "groups": [f"{ns}-young-reader"]}], left
    assert [g["group"] for g in left["groups"]] == [f"{ns}-young-reader"], left
    assert "auto.offset.reset" in left["groups"][0]["reason"]
    # The rest failed over: replication stopped, the mirrored topic's reader placed exactly.
    assert out["marker"]["replication_stop"] == "stopped"
    assert young not in out["marker"]["failover_point"]
    kept = [p for g in out["translation"]["groups"] if g["group"] == f"{ns}-kept-reader"
            for p in g["partitions"]]
    assert len(kept) == PARTITIONS and all(p["confidence"] == "exact" and p["applied"]
                                           for p in kept), kept
    report = next(Path(p) for p in out["reports"] if p.endswith(".md")).read_text()
    assert "## Left behind" in report and young in report

    # With both clusters up failback takes it in: compared in full, its records reconciled
    # like any other gap (unkeyed here: quarantined), and says so.
    status, out = run_json("--config", str(config), "failback", "--yes", "--groups",
                           f"{ns}-.*")
    assert status == 0, out
    assert out["phase"] == "failed-back"
    assert out["marker"]["steps"]["failback:unmirrored"]["result"]["topics"] == {young: young}
    assert (out["gap"]["unkeyed"], out["reconcile"]["quarantine"]["count"]) == (100, 100)
    report = next(Path(p) for p in out["reports"] if p.endswith(".md")).read_text()
    head = report.split("\n## ")[0]
    assert f"**Topic `{young}` was never mirrored**" not in head
    assert f"Topic `{young}` was never mirrored to secondary before the failover: failback " \
        "compared it in full" in head


def test_failback_without_the_order_check_quarantines_every_gap_record(
        lab: RunningLab, ns: str, tmp_path: Path, restore_lab: None) -> None:
    """--no-check-order: the job classifies nothing, so no gap record is called safe or
    copied; every one is quarantined as unclassified, and each group's row lists them."""
    o = outage(lab, ns, tmp_path)
    topic = o["topic"]
    secondary_before = {(r.partition, r.offset) for r in read_all(lab.secondary, topic)}
    status, out = run_json("--config", str(o["config"]), "failback", "--no-check-order",
                           "--reconcile", "quarantine", "--yes", "--groups", f"{ns}-.*")
    assert status == 0, out
    gap = o["safe"] + o["conflict"] + o["unkeyed"]
    assert out["gap"]["check_order"] is False
    assert (out["gap"]["safe"], out["gap"]["conflict"], out["gap"]["unkeyed"],
            out["gap"]["unclassified"]) == (0, 0, 0, len(gap))
    assert "copy_safe" not in out["reconcile"]
    import base64

    quarantined = [json.loads(line) for line in
                   Path(out["reconcile"]["quarantine"]["file"]).read_text().splitlines()]
    assert sorted(base64.b64decode(q["value"]) for q in quarantined) == \
        sorted(v for _, v in gap)
    assert {q.get("classification") for q in quarantined} <= {None, "unclassified"}
    # Nothing was copied into the failover topic on the secondary.
    added = [r for r in read_all(lab.secondary, topic)
             if (r.partition, r.offset) not in secondary_before]
    assert not any(any(k == "drctl-reconciled" for k, _ in r.headers) for r in added)
    # Every group still gets every record but the quarantined ones; a group that read
    # post-failover writes resumes past the quarantined records of those partitions, and its
    # row lists them; the group that read nothing there reads them all on the primary.
    values = {v for _, v in gap}
    gap_in = Counter(r.partition for r in read_all(lab.primary, topic) if r.value in values)
    post_values = {v for _, v in o["post"]}
    read_post = {r.partition for r in read_all(lab.secondary, topic)
                 if r.offset == o["fpoint"][r.partition] and r.value in post_values}
    groups = {g["group"]: g["totals"] for g in out["switch_back"]["groups"]}
    assert all(t["not_delivered"] == 0 for t in groups.values()), groups
    assert groups[f"{ns}-pre"]["quarantined_missed"] == 0, groups
    assert groups[f"{ns}-post"]["quarantined_missed"] == sum(gap_in[p] for p in read_post), \
        groups


def test_crash_mid_failback_then_rerun_copies_nothing_twice(lab: RunningLab, ns: str,
                                                             tmp_path: Path,
                                                             restore_lab: None) -> None:
    o = outage(lab, ns, tmp_path)
    env = {**os.environ, "DRCTL_CRASH_AT": "failback:reconcile"}
    crashed = subprocess.run([sys.executable, "-m", "drctl", "--config", str(o["config"]),
                              "failback", "--yes", "--groups", f"{ns}-.*"], env=env,
                             capture_output=True, timeout=600)
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    cfg = load_config(o["config"])
    [marker] = marker_store(cfg, "secondary").open_markers()
    assert marker.done("failback:reconcile")
    rerun = subprocess.run([sys.executable, "-m", "drctl", "--config", str(o["config"]), "-o",
                            "json", "failback", "--yes", "--groups", f"{ns}-.*"],
                           capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    out = json.loads(rerun.stdout)
    assert out["resumed"] is True
    copies = [r for r in read_all(lab.secondary, o["topic"])
              if any(k == "drctl-reconciled" for k, _ in r.headers)]
    assert sorted(r.value for r in copies) == sorted(v for _, v in o["safe"])
    primary_values = [r.value for r in read_all(lab.primary, o["topic"])]
    assert all(primary_values.count(v) == 1 for _, v in o["post"])


def test_failback_end_state_check_catches_a_duplicate(lab: RunningLab, ns: str,
                                                       tmp_path: Path,
                                                       restore_lab: None) -> None:
    """Records that reach the source outside reverse replication's own copies — a second copy
    of a post-failover write, a copy of a record the source already holds — fail failback
    with the numbers (exit 3), and the incident stays open."""
    o = outage(lab, ns, tmp_path)
    env = {**os.environ, "DRCTL_CRASH_AT": "failback:caught-up"}
    crashed = subprocess.run([sys.executable, "-m", "drctl", "--config", str(o["config"]),
                              "failback", "--yes", "--groups", f"{ns}-.*"], env=env,
                             capture_output=True, timeout=600)
    assert crashed.returncode == -9, crashed.stderr[-2000:]
    topic = o["topic"]
    post = next(r for r in read_all(lab.secondary, topic)
                if r.offset >= o["fpoint"][r.partition]
                and not any(k == "drctl-reconciled" for k, _ in r.headers))
    original = next(r for r in read_all(lab.primary, topic) if r.value == o["safe"][0][1])
    producer = lab.primary.producer()
    for rec in (post, original):
        producer.produce(topic, key=rec.key, value=rec.value, partition=rec.partition,
                         timestamp=rec.timestamp_ms, headers=list(rec.headers))
    assert producer.flush(30) == 0

    rerun = subprocess.run([sys.executable, "-m", "drctl", "--config", str(o["config"]),
                            "failback", "--yes", "--groups", f"{ns}-.*"],
                           capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 3, rerun.stderr[-3000:]
    err = " ".join(rerun.stderr.split())
    assert f"of {len(o['post'])} post-failover writes 0 are missing" in err, err
    assert "1 records there were not expected and 1 are there twice" in err, err
    cfg = load_config(o["config"])
    [marker] = marker_store(cfg, "secondary").open_markers()
    step = marker.steps["failback:verify"]
    assert step.status == "failed"
    assert (step.result["totals"]["extra"], step.result["totals"]["twice"]) == (1, 1)


def test_failback_refuses_without_marker_or_with_source_down(lab: RunningLab, ns: str,
                                                             tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str],
                                                             restore_lab: None) -> None:
    config = scoped_config(lab, ns, tmp_path)
    assert main(["--config", str(config), "failback", "--yes"]) == 2
    assert "No open incident for primary -> secondary to fail back" in \
        capsys.readouterr().err
    create_topics(lab.primary, (f"{ns}-x",), 1)
    lab.wait_mirror_topic(f"{ns}-x")
    status, _ = run_json("--config", str(config), "failover", "--yes")
    assert status == 0
    lab.lab.fail("primary")
    assert main(["--config", str(config), "failback", "--yes", "--deadline", "2"]) == 4
    assert "Failback needs both clusters" in capsys.readouterr().err

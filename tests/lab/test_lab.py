"""The lab itself: real brokers, real MirrorMaker 2, real processes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from drctl.cli.app import main
from drctl.errors import LabError
from drctl.kafka.records import Record, read_all
from drctl.lab.lab import Lab
from drctl.lab.workload import WorkloadSpec, create_topics, run_workload
from tests.conftest import RunningLab
from tests.json_schemas import validate_output
from tests.lab.support import run_json, wait_offsets_stored

pytestmark = pytest.mark.lab


def wait_for_records(running: RunningLab, topic: str, count: int,
                     deadline_s: float = 60) -> list[Record]:
    end = time.monotonic() + deadline_s
    records: list[Record] = []
    while time.monotonic() < end:
        records = read_all(running.secondary, topic)
        if len(records) >= count:
            return records
        time.sleep(0.5)
    raise AssertionError(f"{topic}: {len(records)} of {count} records replicated in time")


def test_read_all_waits_out_leader_elections_of_a_new_topic(lab: RunningLab, ns: str) -> None:
    """Right after creation a partition may answer NOT_LEADER: reading must ride that out."""
    topics = tuple(f"{ns}-fresh-{i}" for i in range(4))
    create_topics(lab.primary, topics, 16)
    for topic in topics:  # at once: no waiting for leaders in between
        assert read_all(lab.primary, topic, timeout_s=30) == []
    producer = lab.primary.producer()
    for p in range(16):
        producer.produce(topics[-1], value=b"%d" % p, partition=p)
    assert producer.flush(30) == 0
    assert [r.value for r in read_all(lab.primary, topics[-1])] == [b"%d" % p for p in range(16)]


def test_records_arrive_identical_on_secondary(any_lab: RunningLab, ns: str) -> None:
    topic = f"{ns}-fidelity"
    create_topics(any_lab.primary, (topic,), 3)
    producer = any_lab.primary.producer()
    # Recent CreateTimes, one an hour older than the rest and out of order: a record older
    # than the topic's retention (7 days) may be deleted by the broker before it is copied.
    now = int(time.time() * 1000) - 60_000
    sent = [
        (2, b"k1", b"v1", [("h1", b"x"), ("h2", None)], now + 123),
        (0, None, b"no key", [], now + 456),
        (1, b"tomb", None, [("h", b"")], now - 3_600_000),
        (1, b"", b"", [], now + 999),
    ]
    for partition, key, value, headers, ts in sent:
        producer.produce(topic, key=key, value=value, partition=partition, headers=headers,
                         timestamp=ts)
    assert producer.flush(30) == 0
    target = any_lab.mirror(topic)
    got = wait_for_records(any_lab, target, len(sent))
    assert sorted((r.partition, r.key, r.value, r.headers, r.timestamp_ms) for r in got) == \
        sorted((p, k, v, tuple(h), ts) for p, k, v, h, ts in sent)
    assert all(r.timestamp_type == 1 for r in got)  # CreateTime kept


def test_workload_is_deterministic_and_replicated(lab: RunningLab, ns: str) -> None:
    spec = WorkloadSpec(topics=(f"{ns}-a", f"{ns}-b"), partitions=2, records=300, seed=11,
                        burst_every=100, burst_size=30, groups=("g-mid=50%",))
    result = run_workload(lab.primary, spec)
    kinds = {r.kind for r in result.records}
    assert {"keyed", "unkeyed", "tombstone", "burst", "duplicate", "txn-committed",
            "txn-aborted"} <= kinds
    bursts = [r for r in result.records if r.kind == "burst"]
    assert len({r.timestamp_ms for r in bursts}) <= 6  # whole bursts share one timestamp
    # Same seed, same contents (per topic), whatever the timing.
    again = run_workload(lab.primary, WorkloadSpec(**{**spec.__dict__,
                                                      "topics": (f"{ns}-c",), "groups": ()}))
    def contents(recs: list, topic: str) -> list:
        return [(r.key, r.value, r.headers, r.kind) for r in recs if r.topic == topic]
    a = contents(result.records, f"{ns}-a")
    c = [(k, v.replace(f"{ns}-c:".encode(), f"{ns}-a:".encode()) if v else v, h, kind)
         for k, v, h, kind in contents(again.records, f"{ns}-c")]
    assert sorted(a, key=repr) == sorted(c, key=repr)
    visible = result.visible(f"{ns}-a")
    replicated = wait_for_records(lab, lab.mirror(f"{ns}-a"), len(visible))
    assert len(replicated) == len(visible)  # aborted records are not copied
    committed = result.groups["g-mid"][f"{ns}-a"]
    consumer = lab.primary.consumer(**{"group.id": "g-mid"})
    try:
        got = consumer.committed([TopicPartition(f"{ns}-a", p) for p in committed], timeout=10)
    finally:
        consumer.close()
    assert {tp.partition: tp.offset for tp in got} == committed


def test_load_from_the_command_line(lab: RunningLab, ns: str) -> None:
    status, document = run_json("lab", "load", "--dir", str(lab.lab.dir), "--topic",
                                f"{ns}-cli", "--partitions", "1", "--records", "20",
                                "--transactions", "0", "--commit", f"{ns}-g=end")
    assert status == 0
    assert sum(document["topics"][f"{ns}-cli"].values()) >= 20
    end = document["groups"][f"{ns}-g"][f"{ns}-cli"]["0"]
    assert end == len(read_all(lab.primary, f"{ns}-cli")) > 0


def test_status_json_reports_processes_connectors_and_lag(lab: RunningLab,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    assert main(["lab", "status", "--dir", str(lab.lab.dir), "--output", "json"]) == 0
    status = json.loads(capsys.readouterr().out)
    validate_output(["lab", "status"], status)
    assert [p["name"] for p in status["processes"] if p["running"]] == \
        ["primary", "secondary", "connect"]
    assert {c["state"] for c in status["connectors"]} == {"RUNNING"}
    assert status["total_rss_bytes"] > 100 * 2**20
    assert isinstance(status["replication_lag"], list)
    # `drctl status` reads MirrorMaker 2's settings over Connect: the lab's test speeds.
    assert main(["--config", str(lab.config_file), "--output", "json", "status"]) in (0, 3)
    document = json.loads(capsys.readouterr().out)
    validate_output(["status"], document)
    costs = document["replication"]["translation_costs"]
    assert (costs["checkpoint_interval_s"], costs["group_refresh_s"]) == (1, 2), costs
    assert "Checkpoints every 1 s" in costs["lines"][0]


def test_up_again_is_idempotent(lab: RunningLab) -> None:
    pids = {c: lab.lab.process(c).pid() for c in ("primary", "secondary", "connect")}
    ports = lab.state.ports
    status, document = run_json(
        "lab", "up", "--dir", str(lab.lab.dir),
        "--topic-naming", "kept" if lab.names_kept else "prefixed",
        "--primary-port", str(ports.primary), "--secondary-port", str(ports.secondary),
        "--connect-port", str(ports.connect), "--spark-port", str(ports.spark_master))
    assert status == 0
    assert {p["name"]: p["pid"] for p in document["processes"]} == pids
    assert {c: lab.lab.process(c).pid() for c in pids} == pids


def test_ports_in_use_is_a_clear_error(lab: RunningLab, tmp_path: Path) -> None:
    other = Lab(tmp_path / "other")
    with pytest.raises(LabError) as info:
        other.up(ports=lab.state.ports)
    assert f"Port {lab.state.ports.primary}" in info.value.message
    assert "in use" in info.value.message
    assert not any(other.process(c).is_running() for c in ("primary", "secondary", "connect"))


def test_fail_and_heal_primary(lab: RunningLab, ns: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    topic = f"{ns}-heal"
    create_topics(lab.primary, (topic,), 1)
    producer = lab.primary.producer()
    producer.produce(topic, value=b"before")
    assert producer.flush(30) == 0
    try:
        assert run_json("lab", "fail", "primary", "--dir", str(lab.lab.dir)) == \
            (0, {"killed": "primary", "exit_status": 0})
        assert not lab.lab.process("primary").is_running()
        assert main(["--config", str(lab.config_file), "config", "check",
                     "--deadline", "2"]) == 4
        assert "did not answer" in capsys.readouterr().err
    finally:
        assert run_json("lab", "heal", "primary", "--dir", str(lab.lab.dir)) == \
            (0, {"healed": "primary", "exit_status": 0})
    assert lab.lab.process("primary").is_running()
    producer = lab.primary.producer()
    producer.produce(topic, value=b"after")
    assert producer.flush(30) == 0
    assert [r.value for r in read_all(lab.primary, topic)] == [b"before", b"after"]
    # MirrorMaker 2 reconnects by itself and copies both.
    assert [r.value for r in wait_for_records(lab, lab.mirror(topic), 2)] == [b"before", b"after"]


def test_fail_and_heal_replication(lab: RunningLab, ns: str) -> None:
    topic = f"{ns}-repl"
    create_topics(lab.primary, (topic,), 1)
    producer = lab.primary.producer()
    producer.produce(topic, value=b"one")
    producer.flush(30)
    wait_for_records(lab, lab.mirror(topic), 1)
    # MM2 is at-least-once: a kill before Connect flushes its source offsets (every second in
    # the lab) copies "one" again after the restart. Let the flush happen first.
    wait_offsets_stored(lab, topic)
    lab.lab.fail("replication")
    try:
        producer.produce(topic, value=b"two")
        producer.flush(30)
        time.sleep(3)
        assert len(read_all(lab.secondary, lab.mirror(topic))) == 1  # nothing copies now
    finally:
        lab.lab.heal("replication")
    assert [r.value for r in wait_for_records(lab, lab.mirror(topic), 2)] == [b"one", b"two"]

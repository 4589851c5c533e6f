"""dump-consumer-timestamps against the real lab: hand-made `__consumer_timestamps` records in
every supported layout plus garbage, and MirrorMaker 2's own checkpoints, offset syncs and
heartbeats."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import typer
from confluent_kafka import TopicPartition
from typer.testing import CliRunner

from drctl.cli import dump_cmd
from drctl.cli.state import CURRENT
from drctl.codecs import ConsumerTimestamp, encode_consumer_timestamp
from drctl.kafka.checkpoints import read_checkpoints, read_offset_syncs
from drctl.lab.workload import commit_offsets, create_topics
from tests.conftest import RunningLab
from tests.lab.support import run_json

pytestmark = pytest.mark.lab

TS = 1_714_564_800_000


def invoke(lab: RunningLab, *args: str) -> Any:
    """The command in-process, mounted on a small app as drctl mounts it."""
    app = typer.Typer()
    app.command("dump-consumer-timestamps")(dump_cmd.dump_consumer_timestamps)

    @app.callback()
    def root() -> None:
        """drctl's root stand-in."""

    CURRENT.reset()
    CURRENT.config_option = str(lab.config_file)
    # Wide enough that Rich does not wrap table cells.
    result = CliRunner(env={"COLUMNS": "400"}).invoke(app, ["dump-consumer-timestamps", *args])
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


def run_dump(lab: RunningLab, *args: str) -> tuple[list[dict[str, Any]], str]:
    result = invoke(lab, *args)
    return [json.loads(line) for line in result.stdout.splitlines() if line], result.stderr


def produce(lab: RunningLab, topic: str,
            records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]],
            ) -> list[tuple[int, int]]:
    """Produce (partition, key, value, headers); return their (partition, offset)."""
    producer = lab.primary.producer()
    placed: list[tuple[int, int]] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        placed.append((msg.partition(), msg.offset()))

    for partition, key, value, headers in records:
        producer.produce(topic, key=key, value=value, partition=partition,
                         headers=headers or None, on_delivery=delivered)
        producer.flush(30)  # one at a time: `placed` keeps the order of `records`
    return placed


def test_consumer_timestamps_every_layout_and_garbage(lab: RunningLab, ns: str) -> None:
    topic = "__consumer_timestamps"
    create_topics(lab.primary, (topic,), 3)
    since = int(time.time() * 1000) - 1000
    good = [
        ConsumerTimestamp(f"{ns}-a", "orders", 0, TS, None, "gtp", "ts"),
        ConsumerTimestamp(f"{ns}-a", "orders", 1, TS + 1, 25, "gtp", "ts+delta"),
        ConsumerTimestamp(f"{ns}-b", "payments", 2, TS + 2, None, "v+gtp", "v+ts", 0, 1),
        ConsumerTimestamp(f"{ns}-b", "payments", 3, TS + 3, -4, "v+gtp", "v+ts+delta", 1, 0),
        ConsumerTimestamp(f"{ns}-c", "orders", 0, TS + 4, None, "gtp", "v+ts", None, 2),
    ]
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
    for i, ct in enumerate(good):
        key, value = encode_consumer_timestamp(ct)
        headers = [("__replicator_id", b"\x00\x06dc-one" + TS.to_bytes(8, "big"))] \
            if i == 0 else []
        records.append((i % 3, key, value, headers))
    garbage = [
        (0, b"\x00\x03abc", b"\x00" * 8, "key matches no known layout"),
        (1, encode_consumer_timestamp(good[0])[0], b"\x01" * 12, "12 bytes"),
        (2, encode_consumer_timestamp(good[0])[0], None, "tombstone"),
        (0, None, TS.to_bytes(8, "big"), "null key"),
    ]
    records += [(p, k, v, []) for p, k, v, _ in garbage]
    placed = produce(lab, topic, records)

    lines, stderr = run_dump(lab, "--format", "jsonl", "--since", str(since))
    assert "inferred" in stderr
    by_place = {(line["record_partition"], line["record_offset"]): line
                for line in lines if line["type"] != "summary"}
    for ct, where in zip(good, placed[:len(good)], strict=True):
        line = by_place[where]
        assert line["type"] == "consumer-timestamp"
        assert (line["group"], line["topic"], line["partition"], line["timestamp_ms"],
                line["delta"]) == (ct.group, ct.topic, ct.partition, ct.timestamp_ms, ct.delta)
        assert (line["key_layout"], line["value_layout"], line["key_version"],
                line["value_version"]) == (ct.key_layout, ct.value_layout, ct.key_version,
                                           ct.value_version)
    first = by_place[placed[0]]
    assert first["provenance"]["strings"] == ["dc-one"]
    assert first["provenance"]["timestamps_ms"] == [TS]
    for (_, key, value, reason), where in zip(garbage, placed[len(good):], strict=True):
        line = by_place[where]
        assert line["type"] == "undecodable"
        assert reason in line["reason"]
        assert line["key_hex"] == (None if key is None else key.hex())
        assert line["value_hex"] == (None if value is None else value.hex())
    summary = lines[-1]
    assert summary["type"] == "summary"
    assert (summary["decoded"], summary["undecodable"]) == (len(good), len(garbage))
    assert summary["partitions"] == 3

    # A newer commit of group a on orders[0]: --latest keeps it and drops the older one.
    newer = ConsumerTimestamp(f"{ns}-a", "orders", 0, TS + 99, None, "gtp", "ts")
    key, value = encode_consumer_timestamp(newer)
    produce(lab, topic, [(0, key, value, [])])
    lines, _ = run_dump(lab, "--format", "jsonl", "--since", str(since), "--latest",
                        "--groups", f"{ns}-a", "--topics", "orders")
    rows = [line for line in lines if line["type"] == "consumer-timestamp"]
    assert [(r["partition"], r["timestamp_ms"]) for r in rows] == [(0, TS + 99), (1, TS + 1)]
    assert lines[-1]["matched"] == 3 and lines[-1]["emitted"] == 2

    # Before the window: nothing decoded, garbage included.
    lines, _ = run_dump(lab, "--format", "jsonl", "--until", str(since))
    assert (lines[-1]["decoded"], lines[-1]["undecodable"]) == (0, 0)
    assert lines[-1]["outside_window"] == len(good) + len(garbage) + 1

    # The table for people, on stdout (messages on stderr): rows, then the undecodable records.
    table = invoke(lab, "--since", str(since), "--show-undecodable", "2")
    assert f"{ns}-b" in table.stdout and "v+gtp/v+ts+delta" in table.stdout
    assert "Undecodable records (first 2 of 4)" in table.stdout

    # CSV: a header, then one line per matching record; --limit stops early.
    csv_lines = invoke(lab, "--format", "csv", "--since", str(since), "--groups", f"{ns}-.*",
                       "--limit", "2").stdout.splitlines()
    assert csv_lines[0].startswith("group,topic,partition,timestamp_ms,timestamp,delta")
    assert len(csv_lines) == 3 and csv_lines[1].startswith(f"{ns}-a,orders,0,{TS},")


def _wait(what: str, probe: Any, deadline_s: float = 90.0) -> Any:
    deadline = time.monotonic() + deadline_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(1)


def test_mm2_checkpoints_offset_syncs_and_heartbeats(lab: RunningLab, ns: str) -> None:
    topic, group = f"{ns}-orders", f"{ns}-g"
    mirror = lab.mirror(topic)
    create_topics(lab.primary, (topic,), 1)
    produce(lab, topic, [(0, f"k{i}".encode(), f"v{i}".encode(), []) for i in range(10)])

    def replicated() -> bool:
        consumer = lab.secondary.consumer()
        try:
            md = consumer.list_topics(mirror, timeout=5).topics.get(mirror)
            if md is None or md.error is not None:
                return False
            return consumer.get_watermark_offsets(TopicPartition(mirror, 0), timeout=5)[1] >= 10
        finally:
            consumer.close()

    _wait("replication of the topic", replicated)
    commit_offsets(lab.primary, group, [TopicPartition(topic, 0, 7)])
    checkpoints_topic = "primary.checkpoints.internal"
    cp = _wait("a checkpoint at upstream offset 7", lambda: (
        (c := read_checkpoints(lab.secondary, checkpoints_topic).get((group, mirror, 0)))
        and c.upstream_offset == 7 and c))

    syncs = read_offset_syncs(lab.primary, "mm2-offset-syncs.secondary.internal")[(topic, 0)]
    assert syncs[0].upstream_offset == 0 and syncs[0].downstream_offset == 0
    assert [s.upstream_offset for s in syncs] == sorted(s.upstream_offset for s in syncs)
    # MM2's rule: the newest sync at or before the group's offset; +1 unless it is exact.
    base = [s for s in syncs if s.upstream_offset <= 7][-1]
    expected = base.downstream_offset + (0 if base.upstream_offset == 7 else 1)
    assert cp.downstream_offset == expected

    lines, _ = run_dump(lab, "--kind", "checkpoints", "--latest", "--format", "jsonl",
                        "--groups", group)
    rows = [line for line in lines if line["type"] == "checkpoint"]
    assert [(r["group"], r["topic"], r["partition"], r["upstream_offset"],
             r["downstream_offset"]) for r in rows] == [(group, mirror, 0, 7, expected)]
    assert lines[-1]["undecodable"] == 0 and lines[-1]["topic"] == checkpoints_topic
    assert lines[-1]["cluster"] == "secondary"

    lines, _ = run_dump(lab, "--kind", "offset-syncs", "--format", "jsonl", "--topics", topic)
    rows = [line for line in lines if line["type"] == "offset-sync"]
    assert [(r["upstream_offset"], r["downstream_offset"]) for r in rows] == \
        [(s.upstream_offset, s.downstream_offset) for s in syncs]
    assert lines[-1]["cluster"] == "primary" and lines[-1]["undecodable"] == 0

    now = int(time.time() * 1000)
    # --output json: one document (checked against its schema), the rows in it.
    status, doc = run_json("--config", str(lab.config_file), "dump-consumer-timestamps",
                           "--kind", "heartbeats", "--latest")
    beats = {(r["source_alias"], r["target_alias"]): r for r in doc["rows"]}
    assert status == 0 and doc["summary"]["undecodable"] == 0
    assert now - 60_000 < beats[("primary", "secondary")]["timestamp_ms"] <= now + 5_000

"""Which open transactions are hanging — by how long drctl saw them open, never by a record's
time — and the commands that abort them."""

from __future__ import annotations

import json
from pathlib import Path

from drctl.kafka.transactions import OpenTransaction, PinnedSightings, hanging

NOW = 10_000_000


def test_only_transactions_seen_open_for_the_limit_hang() -> None:
    young = OpenTransaction("orders", 0, 10, 20, 1, seen_since_ms=NOW - 5_000, seen_at_ms=NOW)
    old = OpenTransaction("orders", 1, 30, 40, 2, seen_since_ms=NOW - 1_000_000, seen_at_ms=NOW)
    exactly = OpenTransaction("orders", 2, 50, 60, 3, seen_since_ms=NOW - 900_000,
                              seen_at_ms=NOW)
    assert hanging([young, old, exactly], max_age_s=900) == [old, exactly]
    assert old.open_s == 1000.0 and young.held_back == 10


def test_a_pinned_partition_is_aged_from_when_drctl_first_saw_it_at_that_offset(
        tmp_path: Path) -> None:
    path = tmp_path / "state" / "open-transactions.json"
    seen = PinnedSightings(path)
    a, b = ("orders", 0), ("orders", 1)
    assert seen.record("b:9092", [a, b], {a: 100}, NOW) == {a: NOW}
    # A later run: still pinned at 100 (its first sighting holds), b pinned now.
    assert seen.record("b:9092", [a, b], {a: 100, b: 7}, NOW + 60_000) == {
        a: NOW, b: NOW + 60_000}
    # Pinned at another offset: another transaction, its age starts again; b is free.
    assert seen.record("b:9092", [a, b], {a: 120}, NOW + 120_000) == {a: NOW + 120_000}
    assert json.loads(path.read_text()) == {"b:9092": {"orders:0": [120, NOW + 120_000]}}
    # Partitions not looked at keep their sightings; other clusters are kept apart.
    assert seen.record("other:9092", [a], {a: 120}, NOW + 180_000) == {a: NOW + 180_000}
    assert seen.record("b:9092", [b], {}, NOW + 240_000) == {}
    assert seen.record("b:9092", [a], {a: 120}, NOW + 300_000) == {a: NOW + 120_000}
    # Without a file nothing is kept between runs.
    assert PinnedSightings(None).record("b:9092", [a], {a: 1}, NOW) == {a: NOW}


def test_the_abort_names_the_partition_and_the_transactions_first_offset() -> None:
    t = OpenTransaction("orders", 1, 30, 40, 2, NOW, NOW)
    assert t.abort_commands("b:9092") == (
        "kafka-transactions.sh --bootstrap-server b:9092 find-hanging --broker-id 2; "
        "kafka-transactions.sh --bootstrap-server b:9092 abort --topic orders --partition 1 "
        "--start-offset 30")
    assert t.describe() == "orders-1 (last stable offset 30, end 40: 10 offset(s) held back)"

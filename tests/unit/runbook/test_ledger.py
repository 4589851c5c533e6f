"""The drill's ledger without Kafka: reservations across runs, the topics a side holds, and
the counting of lost, twice and re-delivered records."""

from __future__ import annotations

from pathlib import Path

from drctl.config import parse_config
from drctl.runbook.ledger import Entry, Ledger, count_found, count_groups, side_topics, write_topic


def _rep(rename: str) -> object:
    return parse_config({
        "clusters": {"primary": {"bootstrap.servers": "a:9092"},
                     "secondary": {"bootstrap.servers": "b:9092"}},
        "replication": {"kind": "mirrormaker2", "source": "primary", "target": "secondary",
                        "rename": rename, "source_alias": "primary",
                        "target_alias": "secondary"},
    }).require_replication()


def test_numbers_are_never_used_twice_and_a_torn_line_is_left_out(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, "run1")
    assert ledger.reserve(3) == range(0, 3)
    # A run killed after its reservation: the next run writes new numbers.
    assert Ledger(tmp_path, "run1").reserve(2) == range(3, 5)
    ledger.record_acked([Entry(0, "primary", "t", 1, 10)])
    with open(ledger.dir / "acked.jsonl", "a") as fh:
        fh.write('{"seq": 1, "clus')  # a crash mid-write
    assert ledger.acked() == {0: Entry(0, "primary", "t", 1, 10)}
    assert ledger.sent() == set(range(5))
    assert ledger.seq_of(ledger.key(4)) == 4
    assert ledger.seq_of(b"run2:4") is None and ledger.seq_of(None) is None


def test_what_each_side_holds_follows_the_topic_naming() -> None:
    kept, prefixed = _rep("{topic}"), _rep("primary.{topic}")
    assert write_topic(kept, "secondary", "l") == "l"
    assert write_topic(prefixed, "secondary", "l") == "l"
    assert write_topic(prefixed, "primary", "l") == "l"
    assert side_topics(kept, "primary", "l") == ["l"]
    assert side_topics(kept, "secondary", "l") == ["l"]
    assert side_topics(prefixed, "primary", "l") == ["l", "secondary.l"]
    assert side_topics(prefixed, "secondary", "l") == ["primary.l", "l"]


def test_lost_twice_and_unacknowledged_copies_are_counted_per_partition() -> None:
    acked = {s: Entry(s, "primary", "l", s % 2, s) for s in range(6)}
    # 0 missing, 1 twice, 7 sent but never acknowledged (there once: allowed), 8 twice.
    found = [(2, 0), (3, 1), (4, 0), (5, 1), (1, 1), (1, 1), (7, 1), (8, 0), (8, 0)]
    rows = {r.partition: r for r in count_found(acked, found, "secondary", ["l"])}
    assert (rows[0].acked, rows[0].found, rows[0].lost, rows[0].twice) == (3, 2, 1, 1)
    assert (rows[1].acked, rows[1].found, rows[1].lost, rows[1].twice) == (3, 4, 0, 1)
    assert (rows[0].unacked_present, rows[1].unacked_present) == (1, 1)
    assert not rows[0].ok and not rows[1].ok


def test_a_group_must_read_every_record_and_its_reads_again_are_counted(
        tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, "run1")
    acked = {s: Entry(s, "primary", "l", s % 2, s) for s in range(4)}
    ledger.record_reads("g", [Entry(0, "primary", "l", 0, 0), Entry(1, "primary", "l", 1, 1),
                              Entry(1, "secondary", "l", 1, 7), Entry(2, "secondary", "l", 0, 2)])
    ledger.record_reads("h", [Entry(s, "primary", "l", s % 2, s) for s in range(4)])
    rows = {(r.group, r.partition): r for r in count_groups(ledger, acked)}
    assert (rows[("g", 0)].lost, rows[("g", 0)].redelivered) == (0, 0)
    assert (rows[("g", 1)].lost, rows[("g", 1)].redelivered) == (1, 1)
    assert all(rows[("h", p)].lost == 0 == rows[("h", p)].redelivered for p in (0, 1))

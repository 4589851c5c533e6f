"""The drill's ledger without Kafka: reservations across runs, the topics a side holds, a
group's reads (a lost position read from the end), and the counting of lost, twice and
re-delivered records against what drctl stated."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from drctl.config import parse_config
from drctl.errors import UsageError
from drctl.kafka.topics import TP
from drctl.runbook import ledger as ledger_module
from drctl.runbook.ledger import (
    Entry,
    GroupCount,
    Ledger,
    SideCount,
    Tally,
    consume,
    count_found,
    count_groups,
    fold_recopies,
    redelivery_allowance,
    side_topics,
    write_topic,
)


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


class _Cluster:
    """One cluster's partitions (each a list of keys) and its groups' commits, in place of the
    Kafka reads and commits `consume` makes (patched into drctl/runbook/ledger.py)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str = "primary") -> None:
        self.clients = SimpleNamespace(name=name, admin=lambda: None)
        self.logs: dict[TP, list[bytes]] = {}
        self.commits: dict[str, dict[TP, int]] = {}
        for attr, fake in (("cluster_metadata", self._metadata), ("watermarks", self._marks),
                           ("committed_offsets", self._committed), ("alter_offsets", self._alter),
                           ("stream_ranges", self._stream)):
            monkeypatch.setattr(ledger_module, attr, fake)

    def _metadata(self, _clients: Any) -> Any:
        topics: dict[str, Any] = {}
        for t, p in self.logs:
            topics.setdefault(t, SimpleNamespace(partitions={}))
            topics[t].partitions[p] = None
        return SimpleNamespace(topics=topics)

    def _marks(self, _admin: Any, tps: list[TP]) -> dict[TP, tuple[int, int]]:
        return {tp: (0, len(self.logs[tp])) for tp in tps}

    def _committed(self, _clients: Any, groups: list[str]) -> dict[str, dict[TP, int]]:
        return {g: dict(self.commits.get(g, {})) for g in groups}

    def _alter(self, _clients: Any, group: str, offsets: Mapping[TP, int]) -> None:
        self.commits.setdefault(group, {}).update(offsets)

    def _stream(self, _clients: Any, ranges: Mapping[TP, tuple[int, int]]) -> Iterator[Any]:
        for (t, p), (start, end) in ranges.items():
            for offset in range(start, end):
                yield SimpleNamespace(topic=t, partition=p, offset=offset,
                                      key=self.logs[(t, p)][offset])


def test_a_group_that_lost_its_position_reads_from_the_end_so_what_lay_between_is_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 58, finding 9: a group with no commit where it had one read everything again
    from the start, and the round passed "0 lost". Kafka's default (auto.offset.reset=latest)
    starts it at the end: the records between are never read."""
    ledger = Ledger(tmp_path, "run1")
    cluster = _Cluster(monkeypatch)
    cluster.logs[("l", 0)] = [ledger.key(s) for s in range(6)]
    acked = {s: Entry(s, "primary", "l", 0, s) for s in range(8)}
    first = consume(ledger, cluster.clients, "g", ["l"], share=0.5)  # type: ignore[arg-type]
    assert first["read"] == 3 and cluster.commits["g"] == {("l", 0): 3}
    # Its position is lost (offsets expired, the group deleted), then two more records.
    cluster.commits.clear()
    cluster.logs[("l", 0)] += [ledger.key(6), ledger.key(7)]
    # A partition it never read is new to it: read from the start, as a new group reads.
    cluster.logs[("l", 1)] = [ledger.key(8)]
    acked[8] = Entry(8, "primary", "l", 1, 0)
    again = consume(ledger, cluster.clients, "g", ["l"])  # type: ignore[arg-type]
    assert again["positions_lost"] == ["l[0]"] and again["read"] == 1
    # Standing at the end now, it reads on from there.
    assert cluster.commits["g"] == {("l", 0): 8, ("l", 1): 1}
    rows = {r.partition: r for r in count_groups(ledger, acked)}
    assert (rows[0].lost, rows[0].redelivered) == (5, 0)
    assert (rows[1].lost, rows[1].redelivered) == (0, 0)


def _tally(redelivered: Mapping[str, int], allowed: dict[str, int | None],
           acked: int = 10) -> Tally:
    return Tally("run1", acked, acked, [SideCount("primary", ["l"], 0, acked, acked)],
                 [GroupCount(g, 0, acked, acked + n, 0, n) for g, n in redelivered.items()],
                 0.0, allowed)


def test_reads_again_beyond_what_drctl_stated_fail_the_tally() -> None:
    """Re-deliveries were counted and never judged: a group that lost its position and read
    everything again passed. Each group is held to what failover and failback stated."""
    within = _tally({"a": 3, "b": 0}, {"a": 3, "b": 0})
    assert within.ok and within.as_dict()["verdict"] == "ok"
    over = _tally({"a": 5, "b": 2, "c": 9}, {"a": 3, "b": 0, "c": None})
    assert not over.ok and over.over_allowance() == {"a": 2, "b": 2}
    data = over.as_dict()
    assert data["redelivered_over"] == 4 and not data["ok"]
    assert data["verdict"] == ("group a read 5 record(s) again, 3 stated by drctl; "
                               "group b read 2 record(s) again, 0 stated by drctl")
    # None: drctl stated no bound for c, so its re-deliveries are counted, not judged.
    assert {"group": "c", "redelivered": 9, "allowed": None, "over": 0} in data["redelivery"]


def test_a_tally_with_nothing_acknowledged_does_not_pass() -> None:
    empty = Tally("run1", 0, 5)
    assert not empty.ok
    assert empty.as_dict()["verdict"] == ("nothing acknowledged in ledger run1 (5 record(s) "
                                          "sent): nothing was verified")


def test_the_allowance_is_a_number_a_mapping_or_their_sum() -> None:
    groups = ["a", "b", "c"]
    assert redelivery_allowance(0, groups) == {"a": 0, "b": 0, "c": 0}
    assert redelivery_allowance(2, groups) == {"a": 2, "b": 2, "c": 2}
    # Failover's bounds and failback's switch-back, added up; a group neither names: 0.
    assert redelivery_allowance([{"a": 3, "b": None}, {"a": 50}], groups) == \
        {"a": 53, "b": None, "c": 0}
    with pytest.raises(UsageError, match="not a count of records"):
        redelivery_allowance({"a": "many"}, groups)
    with pytest.raises(UsageError, match="not a count of records"):
        redelivery_allowance(-1, groups)


def test_a_pairs_extra_copies_in_one_copy_topic_are_mirrormakers_not_twice(
        tmp_path: Path) -> None:
    """Found by the active-active drill: a broker killed under MirrorMaker 2's task, which
    re-copied what it had copied since its last committed offset into the copy topic: 30
    records "twice" and an aggregate group "re-delivering" them beyond what drctl stated.
    drctl copies nothing between the regions: such copies, and their reads at their own
    offsets, are counted apart. Twice across topics, or one offset read twice, still count."""
    found = [(1, 0, "secondary.l", 9), (1, 0, "secondary.l", 7), (2, 0, "l", 3),
             (2, 0, "l", 4), (3, 1, "secondary.l", 5), (3, 1, "l", 5), (4, 1, "secondary.l", 6)]
    once, recopied, extra = fold_recopies(found, ["secondary.l"])
    assert sorted(once) == [(1, 0), (2, 0), (2, 0), (3, 1), (3, 1), (4, 1)]
    assert recopied == {0: 1}
    assert extra == {("secondary.l", 0, 9)}  # the first copy (7) is the record's
    ledger = Ledger(tmp_path, "run1")
    acked = {s: Entry(s, "secondary", "l", 0, s, "secondary") for s in (1, 2)}
    ledger.record_reads("agg", [Entry(1, "primary", "secondary.l", 0, 7),
                                Entry(1, "primary", "secondary.l", 0, 9),
                                Entry(2, "primary", "secondary.l", 0, 8),
                                Entry(2, "primary", "secondary.l", 0, 8)])
    places = {("primary", t, p, o) for t, p, o in extra}
    [row] = count_groups(ledger, acked, places)
    assert (row.read, row.recopied, row.redelivered, row.lost) == (3, 1, 1, 0)
    # Without the pair's extra copies (one flow): both count as re-delivered.
    [row] = count_groups(ledger, acked)
    assert (row.recopied, row.redelivered) == (0, 2)


def test_a_re_copy_read_after_failback_is_mirrormakers_not_a_re_delivery(
        tmp_path: Path) -> None:
    """Found by a suite run: the primary stopped during an active-active failback, and
    MirrorMaker 2 (secondary -> primary) re-copied what it had copied since its last
    committed offset. The aggregate group had read those records on the secondary; failback
    placed it on the primary's copy topic right after the first copies, and it read the
    re-copies that came after: 180 reads "again, 0 stated by drctl". Reads of the first copy
    (a position too early) and a re-copy read twice still count."""
    acked = {s: Entry(s, "secondary", "l", 0, s, "secondary") for s in (75, 76, 77)}
    found = [(s, 0, "secondary.l", s) for s in (75, 76, 77)] \
        + [(s, 0, "secondary.l", s + 75) for s in (75, 76, 77)]
    _, _, extra = fold_recopies(found, ["secondary.l"])
    places = {("primary", t, p, o) for t, p, o in extra}
    ledger = Ledger(tmp_path, "run1")
    ledger.record_reads("agg", [Entry(s, "secondary", "l", 0, s) for s in (75, 76, 77)])
    ledger.record_reads("agg", [
        Entry(75, "primary", "secondary.l", 0, 150),  # a re-copy: MirrorMaker 2's
        Entry(76, "primary", "secondary.l", 0, 76),  # the first copy: a position's
        Entry(77, "primary", "secondary.l", 0, 152),  # a re-copy read twice
        Entry(77, "primary", "secondary.l", 0, 152)])
    [row] = count_groups(ledger, acked, places)
    assert (row.expected, row.lost, row.recopied, row.redelivered) == (3, 0, 2, 2)
    ledger.record_reads("late", [Entry(75, "primary", "secondary.l", 0, 150)])
    rows = {r.group: r for r in count_groups(ledger, acked, places)}
    # Only a re-copy read: the record was read once, nothing re-copied counted.
    assert (rows["late"].read, rows["late"].recopied, rows["late"].lost) == (1, 0, 2)


def test_a_pairs_local_only_group_is_held_to_its_regions_records(tmp_path: Path) -> None:
    from drctl.runbook.ledger import GroupKind

    ledger = Ledger(tmp_path, "run1")
    acked = {0: Entry(0, "primary", "l", 0, 0, "primary"),
             1: Entry(1, "secondary", "l", 0, 0, "secondary")}
    ledger.record_kind("local", GroupKind("primary", local_only=True))
    ledger.record_reads("local", [Entry(0, "primary", "l", 0, 0),
                                  Entry(1, "secondary", "l", 0, 0)])
    ledger.record_reads("agg", [Entry(0, "primary", "l", 0, 0)])
    rows = {r.group: r for r in count_groups(ledger, acked)}
    assert (rows["local"].expected, rows["local"].lost, rows["local"].other_region) == (1, 0, 1)
    assert (rows["agg"].expected, rows["agg"].lost) == (2, 1)
    # A group named as left behind: what it never read is named, not lost.
    named = Tally("run1", 2, 2, [SideCount("primary", ["l"], 0, 2, 2)],
                  list(rows.values()), 0.0, {}, ["agg"])
    assert named.ok and named.groups_lost == 0 and named.left_behind_unread == 1
    assert not Tally("run1", 2, 2, [SideCount("primary", ["l"], 0, 2, 2)],
                     list(rows.values()), 0.0, {}).ok


def test_a_pairs_ledger_writes_and_reads_where_each_regions_applications_run() -> None:
    from drctl.ops.active_active.pair import Pair
    from drctl.runbook.ledger import GroupKind, pair_reads, pair_topics, region_write_topic

    pair = Pair(parse_config({
        "clusters": {"primary": {"bootstrap.servers": "a:9092"},
                     "secondary": {"bootstrap.servers": "b:9092"}},
        "topology": {"kind": "active-active", "flows": [
            {"kind": "mirrormaker2", "source": s, "target": t, "rename": f"{s}_{{topic}}",
             "source_alias": s, "target_alias": t}
            for s, t in (("primary", "secondary"), ("secondary", "primary"))]}}))
    assert region_write_topic(pair, "primary", "primary", "l") == "l"
    assert region_write_topic(pair, "primary", "secondary", "l") == "l"
    assert pair_topics(pair, "primary", "l") == ["l", "secondary_l"]
    local = GroupKind("primary", local_only=True)
    assert pair_reads(pair, "primary", "l", local) == ["l"]
    assert pair_reads(pair, "secondary", "l", local) == ["l", "primary_l"]
    assert pair_reads(pair, "secondary", "l", local, alone=True) == ["l"]
    assert pair_reads(pair, "secondary", "l", GroupKind("primary")) == ["l", "primary_l"]

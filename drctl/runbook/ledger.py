"""The drill's verifier: numbered records with every acknowledgement kept, consumer groups
that read through the whole cycle, and at the end the count of what was lost, what is there
twice and what was delivered again — per side, per group, per partition.

A ledger is a directory (`<state.dir>/ledgers/<name>`, one per drill run) of append-only JSON
Lines files, fsynced, so a step killed mid-way and run again (the runbook's resume) goes on
from what is on disk:

- `sent.jsonl`: the record numbers reserved before each produce (a record sent and never
  acknowledged may be on a cluster once, never twice);
- `acked.jsonl`: each acknowledged record, where it was written (cluster, topic, partition,
  offset);
- `reads-<group>.jsonl`: each record a group read, where, before its position was committed
  (a read whose commit a crash lost is read again: delivered twice, as to a real consumer);
- `positions-<group>.jsonl`: each position a group committed, once Kafka acknowledged it (a
  group with no commit where it had one lost its position: it starts at the end, as Kafka's
  default `auto.offset.reset=latest` starts a consumer, and what lay between is lost).

Records carry their number in the key (`<ledger>:<number>`, unique: every gap record is safe
to copy), written to the topic a producer of the flow writes to on that cluster — the source
topic, or on the target its failover topic. A side is what a consumer of that cluster reads
for the topic: on the source the topic and the reverse copies (`secondary.orders` with
prefixed names), on the target the mirror and the failover topic.

On an active-active pair (docs/operations.md, "The active-active drill") each region has its
producers and its groups. A region's producer writes the local topic of the region its
applications run in (its own; after its failover the other region's), and each record
acknowledged is kept with that region. A side is a region's aggregate view: its local topic
and the copy of the other region's (`pair_topics`). An aggregate group reads that view where
its applications run and must read every record of both producers; a local-only group reads
its local topic at home, and failed over the view it was placed on — it must read every
record of its own region's producer (the other region's it reads there are counted apart).
A group failover named as left behind (`tally`'s `left_behind`) is run nowhere until its
region is back: what it never read is counted apart (`left_behind_unread`: named, not lost).
drctl copies no record between the regions — MirrorMaker 2 does, at least once: a record's
extra copies in one copy topic (a task restarted by a fault re-copies from its last committed
offset), and a group's reads of them at their own offsets, are counted apart (`recopied`).

At the end (`tally`): on each side every acknowledged record is there exactly once (lost:
none of it; twice: more than one); every group read every acknowledged record at least once
(lost: never read), and what it read more than once is counted (re-delivered) against what
drctl said it would deliver again (`redelivery_allowed`: the bounds failover and failback
state per group). A tally with nothing acknowledged verified nothing: it does not pass.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drctl.config import Config, ReplicationSettings
from drctl.errors import Unreachable, UsageError
from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.groups import alter_offsets, committed_offsets
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import read_all, stream_ranges
from drctl.kafka.topics import TP, ensure_topics
from drctl.ops.active_active.pair import Pair
from drctl.progress import Notify

DEFAULT_TOPIC = "drill-ledger"
PARTITIONS = 3


@dataclass(frozen=True)
class Entry:
    seq: int
    cluster: str
    topic: str
    partition: int
    offset: int
    region: str | None = None  # an active-active pair: whose producer wrote it

    def as_dict(self) -> dict[str, Any]:
        out = {"seq": self.seq, "cluster": self.cluster, "topic": self.topic,
               "partition": self.partition, "offset": self.offset}
        return out if self.region is None else {**out, "region": self.region}


@dataclass(frozen=True)
class GroupKind:
    """An active-active pair's group: its applications' region, and whether it reads only
    its region's records (local-only) or both regions' (aggregate)."""

    region: str
    local_only: bool = False


class Ledger:
    """One drill run's ledger on disk."""

    def __init__(self, state_dir: Path, name: str) -> None:
        self.name = name
        self.dir = state_dir / "ledgers" / name

    def key(self, seq: int) -> bytes:
        return f"{self.name}:{seq}".encode()

    def seq_of(self, key: bytes | None) -> int | None:
        """The record number a key of this ledger carries (None: another ledger's)."""
        if key is None:
            return None
        name, _, seq = key.decode(errors="replace").rpartition(":")
        return int(seq) if name == self.name and seq.isdigit() else None

    def _append(self, file: str, rows: Iterable[Mapping[str, Any]]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(dict(r), separators=(",", ":")) + "\n" for r in rows)
        if not text:
            return
        with open(self.dir / file, "a", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    def _rows(self, file: str) -> list[dict[str, Any]]:
        try:
            lines = (self.dir / file).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        rows = []
        for line in lines:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # the last line a crash cut short
        return rows

    def reserve(self, count: int) -> range:
        """`count` record numbers no earlier produce used, recorded before any is sent."""
        start = max((r["from"] + r["count"] for r in self._rows("sent.jsonl")), default=0)
        self._append("sent.jsonl", [{"from": start, "count": count}])
        return range(start, start + count)

    def sent(self) -> set[int]:
        return {s for r in self._rows("sent.jsonl") for s in range(r["from"],
                                                                   r["from"] + r["count"])}

    def acked(self) -> dict[int, Entry]:
        return {r["seq"]: Entry(**r) for r in self._rows("acked.jsonl")}

    def record_acked(self, entries: Sequence[Entry]) -> None:
        self._append("acked.jsonl", (e.as_dict() for e in entries))

    def groups(self) -> list[str]:
        return sorted(p.name.removeprefix("reads-").removesuffix(".jsonl")
                      for p in self.dir.glob("reads-*.jsonl"))

    def reads(self, group: str) -> list[Entry]:
        return [Entry(**r) for r in self._rows(f"reads-{group}.jsonl")]

    def record_reads(self, group: str, entries: Sequence[Entry]) -> None:
        self._append(f"reads-{group}.jsonl", (e.as_dict() for e in entries))

    def record_kind(self, group: str, kind: GroupKind) -> None:
        if self.kinds().get(group) != kind:
            self._append("kinds.jsonl", [{"group": group, "region": kind.region,
                                          "local_only": kind.local_only}])

    def kinds(self) -> dict[str, GroupKind]:
        """The pair's groups by kind (the last recorded); a one-way flow's: none."""
        return {r["group"]: GroupKind(r["region"], r["local_only"])
                for r in self._rows("kinds.jsonl")}

    def had_positions(self, group: str) -> set[tuple[str, str, int]]:
        """(cluster, topic, partition) where `group` committed a position before."""
        return {(r["cluster"], r["topic"], r["partition"])
                for r in self._rows(f"positions-{group}.jsonl")}

    def record_positions(self, group: str, cluster: str, positions: Mapping[TP, int]) -> None:
        self._append(f"positions-{group}.jsonl",
                     ({"cluster": cluster, "topic": t, "partition": p, "offset": o}
                      for (t, p), o in sorted(positions.items())))


def ledger_of(config: Config, name: str) -> Ledger:
    return Ledger(config.state.dir, name)


def _role(rep: ReplicationSettings, cluster: str) -> str:
    if cluster not in (rep.source, rep.target):
        raise ValueError(f"'{cluster}' is neither the flow's source ({rep.source}) nor its "
                         f"target ({rep.target})")
    return "source" if cluster == rep.source else "target"


def write_topic(rep: ReplicationSettings, cluster: str, topic: str) -> str:
    """Where a producer of the flow writes `topic`'s records on `cluster`."""
    return topic if _role(rep, cluster) == "source" else rep.failover_topic(topic)


def side_topics(rep: ReplicationSettings, cluster: str, topic: str) -> list[str]:
    """What a consumer of `topic` reads on `cluster`: on the source the topic and the reverse
    copies of its post-failover writes; on the target its mirror and its failover topic."""
    if _role(rep, cluster) == "source":
        names = [topic, rep.reverse_topic(rep.failover_topic(topic))]
    else:
        names = [rep.mirror_topic(topic), rep.failover_topic(topic)]
    return list(dict.fromkeys(names))


def region_write_topic(pair: Pair, region: str, cluster: str, topic: str) -> str:
    """Where `region`'s producer writes `topic`'s records on `cluster`: its local topic at
    home; failed over, the one its failover named on the other region."""
    return topic if cluster == pair.region(region) else \
        pair.flow_from(region).failover_topic(topic)


def pair_topics(pair: Pair, cluster: str, topic: str) -> list[str]:
    """A region's aggregate view of `topic`: its local topic and the other region's copy."""
    return [topic, pair.copy_name(pair.other(pair.region(cluster)), topic)]


def pair_reads(pair: Pair, cluster: str, topic: str, kind: GroupKind,
               alone: bool = False) -> list[str]:
    """What a group of `kind` reads on `cluster`: an aggregate group the view
    (`pair_topics`); a local-only group its local topic at home, and failed over the view it
    was placed on (its records' copies, and where its producer writes now) — or, `alone`,
    that region's local topic alone (what failback asks of it before the flows resume)."""
    if alone or (kind.local_only and cluster == kind.region):
        return [topic]
    return pair_topics(pair, cluster, topic)


def clusters_of(config: Config) -> tuple[str, str]:
    """The ledger's two clusters: the flow's source and target, or the pair's regions."""
    if config.topology is not None:
        return config.topology.regions
    rep = config.require_replication()
    return rep.source, rep.target


def sides_of(config: Config, topic: str) -> dict[str, list[str]]:
    """Per cluster, the topics that must hold every acknowledged record once."""
    if config.topology is not None:
        pair = Pair(config)
        return {region: pair_topics(pair, region, topic) for region in pair.regions}
    rep = config.require_replication()
    return {c: side_topics(rep, c, topic) for c in clusters_of(config)}


def copies_of(config: Config, topic: str) -> dict[str, list[str]]:
    """Per cluster, the copy topics only MirrorMaker 2 writes: a pair's (drctl copies no
    record there); none for one flow, whose failback copies records itself."""
    if config.topology is None:
        return {}
    pair = Pair(config)
    return {region: [pair.copy_name(pair.other(region), topic)] for region in pair.regions}


def _existing(clients: ClusterClients, topics: Sequence[str]) -> list[str]:
    there = cluster_metadata(clients).topics
    return [t for t in topics if t in there]


def produce(ledger: Ledger, clients: ClusterClients, topic: str, count: int, *,
            region: str | None = None, deadline_s: float = 60.0,
            notify: Notify = lambda _: None) -> dict[str, Any]:
    """Write `count` numbered records to `topic` on `clients`' cluster and keep every
    acknowledgement (with `region`, the pair's region whose producer wrote it). Unreachable
    when some were not acknowledged within `deadline_s` (those are in the ledger as sent: a
    run again writes new numbers)."""
    ensure_topics(clients, {topic: PARTITIONS})
    partitions = len(cluster_metadata(clients).topics[topic].partitions)
    numbers = ledger.reserve(count)
    producer = clients.producer(**{"acks": "all"})
    acked: list[Entry] = []
    failed: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
            return
        seq = ledger.seq_of(msg.key())
        assert seq is not None
        acked.append(Entry(seq, clients.name, msg.topic(), msg.partition(), msg.offset(),
                           region))

    for seq in numbers:
        key = ledger.key(seq)
        value = json.dumps({"ledger": ledger.name, "seq": seq, "to": clients.name}).encode()
        while True:
            try:
                producer.produce(topic, key=key, value=value,
                                 partition=zlib.crc32(key) % partitions,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
    left = producer.flush(deadline_s)
    ledger.record_acked(acked)
    notify(f"Ledger {ledger.name}: {len(acked)} of {count} record(s) acknowledged by "
           f"{clients.name} ({topic})")
    if left or len(acked) < count:
        raise Unreachable(f"{clients.name} acknowledged {len(acked)} of {count} ledger "
                          f"record(s) within {deadline_s:g} s"
                          + (f": {failed[0]}" if failed else ""),
                          "Run the step again: it writes new numbers; the ones not "
                          "acknowledged may be there once, never twice.")
    return {"acked": len(acked), "topic": topic, "cluster": clients.name, "region": region,
            "first": numbers.start, "last": numbers.stop - 1}


def start_of(tp: TP, committed: Mapping[TP, int], had: set[TP], low: int, end: int) -> int:
    """Where a group reads partition `tp` from: its committed position; where it has none,
    the start if it never had one there (its first read: a new group reads everything), or
    the end if it had one (the position was lost: Kafka's default, auto.offset.reset=latest,
    starts the consumer there, and the records between are never read)."""
    if tp in committed:
        return max(committed[tp], low)
    return end if tp in had else low


def consume(ledger: Ledger, clients: ClusterClients, group: str, topics: Sequence[str], *,
            share: float = 1.0, kind: GroupKind | None = None,
            notify: Notify = lambda _: None) -> dict[str, Any]:
    """`group` reads `topics` on `clients`' cluster from its committed positions (`start_of`):
    `share` of what each partition holds past its position (1: all), each read kept in the
    ledger, then its new positions committed. `kind`: a pair's group, recorded for the
    tally."""
    if kind is not None:
        ledger.record_kind(group, kind)
    names = _existing(clients, topics)
    partitions: list[TP] = []
    topics_there = cluster_metadata(clients).topics
    for topic in names:
        partitions += [(topic, p) for p in sorted(topics_there[topic].partitions)]
    marks = watermarks(clients.admin(), partitions)
    committed = committed_offsets(clients, [group]).get(group, {})
    had = {(t, p) for c, t, p in ledger.had_positions(group) if c == clients.name}
    lost = [tp for tp in partitions if tp not in committed and tp in had]
    ranges: dict[TP, tuple[int, int]] = {}
    for tp in partitions:
        low, end = marks[tp]
        start = start_of(tp, committed, had, low, end)
        take = max(0, end - start)
        if share < 1:
            take = int(take * share)
        ranges[tp] = (start, start + take)
    reads: list[Entry] = []
    positions: dict[TP, int] = {}
    for rec in stream_ranges(clients, ranges):
        positions[(rec.topic, rec.partition)] = rec.offset + 1
        seq = ledger.seq_of(rec.key)
        if seq is not None:
            reads.append(Entry(seq, clients.name, rec.topic, rec.partition, rec.offset))
    ledger.record_reads(group, reads)
    # Committed where the read ended: its range's end (transaction markers included); a lost
    # position at the end, where the consumer now stands.
    new = {tp: end for tp, (start, end) in ranges.items() if end > start or tp in lost}
    if new:
        alter_offsets(clients, group, new)
        ledger.record_positions(group, clients.name, new)
    if lost:
        notify(f"Ledger {ledger.name}: {group} had no position on {clients.name} where it had "
               f"one ({', '.join(f'{t}[{p}]' for t, p in lost)}): read from the end, as "
               "Kafka's default auto.offset.reset=latest would")
    notify(f"Ledger {ledger.name}: {group} read {len(reads)} record(s) on {clients.name} "
           f"({', '.join(names) or 'no topic yet'})")
    return {"read": len(reads), "group": group, "cluster": clients.name, "topics": names,
            "positions": {f"{t}[{p}]": o for (t, p), o in sorted(new.items())},
            "positions_lost": [f"{t}[{p}]" for t, p in lost]}


@dataclass
class SideCount:
    cluster: str
    topics: list[str]
    partition: int
    acked: int = 0
    found: int = 0
    lost: int = 0
    twice: int = 0
    unacked_present: int = 0
    # Extra copies of a record in one copy topic: MirrorMaker 2 copies at least once (a
    # task restarted re-copies from its last committed offset) — named, never "twice".
    recopied: int = 0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.twice)


@dataclass
class GroupCount:
    group: str
    partition: int
    expected: int = 0
    read: int = 0
    lost: int = 0
    redelivered: int = 0
    # A local-only group's reads of the other region's records (on the shared local topic
    # while failed over): counted apart, never lost nor re-delivered.
    other_region: int = 0
    # Reads of a record's extra copies in a copy topic (`SideCount.recopied`): MirrorMaker
    # 2's doing, not a position's.
    recopied: int = 0


def redelivery_allowance(value: Any, groups: Iterable[str]) -> dict[str, int | None]:
    """What each of `groups` may read again, from `redelivery_allowed` as a runbook gives it:
    a number (every group), a mapping group -> number (a group not named: 0; None: drctl
    stated no bound, so its re-deliveries are not judged), or a list of those, added up (what
    failover and failback each stated)."""
    parts = value if isinstance(value, (list, tuple)) else [value]
    allowed: dict[str, int | None] = dict.fromkeys(groups, 0)
    for part in parts:
        for group, sofar in allowed.items():
            extra = part.get(group, 0) if isinstance(part, Mapping) else part
            if extra is not None and (isinstance(extra, bool) or not isinstance(extra, int)
                                      or extra < 0):
                raise UsageError(f"redelivery_allowed: {extra!r} for group {group} is not a "
                                 "count of records",
                                 "Give a number, a mapping of group to number (or null: no "
                                 "bound stated), or a list of those.")
            allowed[group] = None if sofar is None or extra is None else sofar + extra
    return allowed


@dataclass
class Tally:
    ledger: str
    acked: int
    sent: int
    sides: list[SideCount] = field(default_factory=list)
    groups: list[GroupCount] = field(default_factory=list)
    waited_s: float = 0.0
    # Per group, the re-deliveries drctl stated (None: no bound stated, not judged).
    allowed: dict[str, int | None] = field(default_factory=dict)
    # Groups failover named as left behind: run nowhere until their region came back.
    left_behind: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return sum(s.lost for s in self.sides)

    @property
    def twice(self) -> int:
        return sum(s.twice for s in self.sides)

    @property
    def recopied(self) -> int:
        return sum(s.recopied for s in self.sides)

    @property
    def groups_lost(self) -> int:
        return sum(g.lost for g in self.groups if g.group not in self.left_behind)

    @property
    def left_behind_unread(self) -> int:
        """What the groups failover named as left behind never read: named, not lost (a
        local-only one, back home, never reads what its producers wrote on the other
        region meanwhile)."""
        return sum(g.lost for g in self.groups if g.group in self.left_behind)

    @property
    def redelivered(self) -> int:
        return sum(g.redelivered for g in self.groups)

    def redelivered_by_group(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.groups:
            out[g.group] = out.get(g.group, 0) + g.redelivered
        return out

    def over_allowance(self) -> dict[str, int]:
        """Per group, the records read again beyond what drctl stated."""
        return {group: n - allowed for group, n in self.redelivered_by_group().items()
                if (allowed := self.allowed.get(group, 0)) is not None and n > allowed}

    @property
    def redelivered_over(self) -> int:
        return sum(self.over_allowance().values())

    def problems(self) -> list[str]:
        """Why the tally does not pass, one sentence each (none: it passes)."""
        out = []
        if not self.acked:
            out.append(f"nothing acknowledged in ledger {self.ledger} ({self.sent} record(s) "
                       "sent): nothing was verified")
        if self.lost:
            out.append(f"{self.lost} acknowledged record(s) missing on a cluster")
        if self.twice:
            out.append(f"{self.twice} record(s) on a cluster more than once")
        if self.groups_lost:
            out.append(f"{self.groups_lost} acknowledged record(s) never read by a group")
        out += [f"group {group} read {self.redelivered_by_group()[group]} record(s) again, "
                f"{self.allowed.get(group, 0)} stated by drctl"
                for group in sorted(self.over_allowance())]
        return out

    @property
    def ok(self) -> bool:
        return not self.problems()

    def as_dict(self) -> dict[str, Any]:
        again = self.redelivered_by_group()
        over = self.over_allowance()
        return {"ledger": self.ledger, "acked": self.acked, "sent": self.sent,
                "lost": self.lost, "twice": self.twice, "groups_lost": self.groups_lost,
                "redelivered": self.redelivered, "redelivered_over": self.redelivered_over,
                "ok": self.ok, "verdict": "; ".join(self.problems()) or "ok",
                "redelivery": [{"group": g, "redelivered": n,
                                "allowed": self.allowed.get(g, 0), "over": over.get(g, 0)}
                               for g, n in sorted(again.items())],
                "recopied": self.recopied,
                "recopied_read": sum(g.recopied for g in self.groups),
                "left_behind": sorted(self.left_behind),
                "left_behind_unread": self.left_behind_unread,
                "waited_s": round(self.waited_s, 1),
                "sides": [{**s.__dict__, "topics": ", ".join(s.topics)} for s in self.sides],
                "groups": [dict(g.__dict__) for g in self.groups]}


# Where a group may read a record: (cluster, topic, partition, offset).
Place = tuple[str, str, int, int]


def count_side(ledger: Ledger, acked: Mapping[int, Entry], clients: ClusterClients,
               topics: Sequence[str], copies: Sequence[str] = ()
               ) -> tuple[list[SideCount], set[Place]]:
    """Per partition: the acknowledged records `topics` on this cluster hold once, not at
    all, or more than once; and the numbers sent but never acknowledged found there. A
    record's extra copies in one of `copies` (a pair's copy topic) are `recopied`; where
    they sit is returned beside the rows (`count_groups` counts their reads apart)."""
    names = _existing(clients, topics)
    found: list[tuple[int, int, str, int]] = []
    for topic in names:
        for rec in read_all(clients, topic):
            seq = ledger.seq_of(rec.key)
            if seq is not None:
                found.append((seq, rec.partition, topic, rec.offset))
    once, recopied, extra = fold_recopies(found, copies)
    rows = count_found(acked, once, clients.name, names)
    for row in rows:
        row.recopied = recopied.get(row.partition, 0)
    return rows, {(clients.name, topic, partition, offset)
                  for topic, partition, offset in extra}


def fold_recopies(found: Iterable[tuple[int, int, str, int]], copies: Sequence[str]
                  ) -> tuple[list[tuple[int, int]], Counter[int], set[tuple[str, int, int]]]:
    """(record number, partition) of every copy found (record number, partition, topic,
    offset), a record whose every copy is in one of `copies` counted once there; per
    partition the extra copies so folded; and where each extra copy sits (topic, partition,
    offset): every copy but the first, MirrorMaker 2 writing a re-copy after the first."""
    where: dict[int, list[tuple[int, str, int]]] = {}
    for seq, partition, topic, offset in found:
        where.setdefault(seq, []).append((partition, topic, offset))
    once: list[tuple[int, int]] = []
    recopied: Counter[int] = Counter()
    extra: set[tuple[str, int, int]] = set()
    for seq, places in where.items():
        partition, topic = places[0][0], places[0][1]
        if len(places) > 1 and len({p[:2] for p in places}) == 1 and topic in copies:
            once.append((seq, partition))
            recopied[partition] += len(places) - 1
            extra |= {(topic, partition, offset) for offset in sorted(p[2] for p in places)[1:]}
        else:
            once += [(seq, p) for p, _, _ in places]
    return once, recopied, extra


def count_found(acked: Mapping[int, Entry], found: Iterable[tuple[int, int]], cluster: str,
                topics: Sequence[str]) -> list[SideCount]:
    """`count_side` on what was read: (record number, partition) of every copy found."""
    copies: Counter[int] = Counter()
    where: dict[int, int] = {}
    for seq, partition in found:
        copies[seq] += 1
        where[seq] = partition
    rows: dict[int, SideCount] = {}

    def row(partition: int) -> SideCount:
        return rows.setdefault(partition, SideCount(cluster, list(topics), partition))

    for seq, entry in acked.items():
        one = row(entry.partition)
        one.acked += 1
        n = copies.get(seq, 0)
        one.found += n
        one.lost += n == 0
        one.twice += n > 1
    for seq, n in copies.items():
        if seq not in acked:
            # Sent, never acknowledged: there once is allowed; twice is not.
            one = row(where[seq])
            one.unacked_present += 1
            one.twice += n > 1
    return [rows[p] for p in sorted(rows)]


def count_groups(ledger: Ledger, acked: Mapping[int, Entry],
                 extra_copies: Iterable[Place] = ()) -> list[GroupCount]:
    """Per group and partition: acknowledged records it never read, and reads again. A
    pair's local-only group is held to its region's records only; a read of a record's
    extra copy in a copy topic (`extra_copies`, from `count_side`) is `recopied`, not
    re-delivered — whether the group read the first copy there too, or the record on the
    other cluster before its applications moved (a fault during failback has MirrorMaker 2
    re-copy what it had copied; failback places the group after the first copies, and the
    re-copies come after it). The same copy read twice is re-delivered."""
    rows: list[GroupCount] = []
    kinds = ledger.kinds()
    extra = set(extra_copies)
    for group in ledger.groups():
        reads: dict[int, list[Entry]] = {}
        for e in ledger.reads(group):
            reads.setdefault(e.seq, []).append(e)
        kind = kinds.get(group)
        per: dict[int, GroupCount] = {}
        for seq, entry in acked.items():
            row = per.setdefault(entry.partition, GroupCount(group, entry.partition))
            got = reads.get(seq, [])
            if kind is not None and kind.local_only and entry.region != kind.region:
                row.other_region += len(got)
                continue
            places = [(e.cluster, e.topic, e.partition, e.offset) for e in got]
            recopies = [place for place in places if place in extra]
            # Each re-copy read once is MirrorMaker 2's; one read twice is a position's.
            recopied = len(set(recopies))
            n = len(got) - recopied
            if n == 0 and recopied:  # only re-copies read: the record was read, once
                n, recopied = 1, recopied - 1
            row.recopied += recopied
            row.expected += 1
            row.read += n
            row.lost += n == 0
            row.redelivered += max(0, n - 1)
        rows += [per[p] for p in sorted(per)]
    return rows


def tally(ledger: Ledger, config: Config, topic: str, *, redelivery_allowed: Any = 0,
          left_behind: Sequence[str] = (), deadline_s: float = 120.0,
          notify: Notify = lambda _: None, clock: Any = time.monotonic,
          sleep: Any = time.sleep) -> Tally:
    """The verdict on both sides and every group, its re-deliveries held to
    `redelivery_allowed` (`redelivery_allowance`), the groups failover left behind named.
    Replication may still be copying the last writes: the sides are counted again until each
    holds every acknowledged record once, or `deadline_s` has passed (then the last count
    stands)."""
    allowed = redelivery_allowance(redelivery_allowed, ledger.groups())
    acked = ledger.acked()
    sides_topics, copies = sides_of(config, topic), copies_of(config, topic)
    clients = {c: ClusterClients.for_cluster(config, c) for c in sides_topics}
    started = clock()
    while True:
        counted = [count_side(ledger, acked, c, sides_topics[cluster], copies.get(cluster, ()))
                   for cluster, c in clients.items()]
        sides = [row for rows, _ in counted for row in rows]
        extra = {place for _, places in counted for place in places}
        if all(s.ok for s in sides) or clock() - started > deadline_s:
            break
        behind = sum(s.lost for s in sides)
        notify(f"Ledger {ledger.name}: {behind} acknowledged record(s) not on both sides "
               "yet; counting again")
        sleep(2.0)
    result = Tally(ledger.name, len(acked), len(ledger.sent()), sides,
                   count_groups(ledger, acked, extra),
                   clock() - started, allowed,
                   sorted(set(left_behind)))
    notify(f"Ledger {ledger.name}: {result.acked} acknowledged; lost {result.lost}, twice "
           f"{result.twice} on the sides; groups: lost {result.groups_lost}, re-delivered "
           f"{result.redelivered} ({result.redelivered_over} beyond what drctl stated)")
    if result.recopied:
        notify(f"Ledger {ledger.name}: {result.recopied} extra copy(ies) MirrorMaker 2 wrote "
               "into a copy topic (it copies at least once), counted apart")
    if result.left_behind:
        notify(f"Ledger {ledger.name}: left behind by failover (named, run nowhere until "
               f"their region was back): {', '.join(result.left_behind)}")
    for problem in result.problems():
        notify(f"Ledger {ledger.name}: {problem}")
    ledger.dir.mkdir(parents=True, exist_ok=True)  # a plan's count, before any record
    (ledger.dir / "tally.json").write_text(json.dumps(result.as_dict(), indent=2))
    return result

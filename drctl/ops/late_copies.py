"""Late copies: what a replicator copied into the target after the failover point F, while its
stop was not confirmed (docs/design.md §6, the pending-stop hazard).

Known by content, not by a header (MirrorMaker 2 can add none without corrupting client
headers): a record at or after F on the mirror topic is a late copy when its fingerprint
(partition, key, value, headers, timestamp) matches a source record of the proven tail — the
source records from just before where replication had stopped at F (gap/alignment.py) to the
source's end. Matching is a multiset: of `n` identical records after F, at most as many as the
source holds are copies, the earliest first (a replicator copies in order). That covers both
the records the target lacked at F and re-copies of records it already had (a replicator
resuming from an older committed position). A replicator that marks its copies
(`provenance_header`, Replicator's `__replicator_id`) is also taken at its word.

Late copies are never post-failover writes: failback keeps them out of the order check, of
reconcile and of reverse replication. With names kept they sit in the failover topic between
post-failover writes; a late copy that landed after a post-failover write of its key let
consumers read a stale value after a new one — those keys are named.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from drctl.context import OpsContext
from drctl.fingerprint import is_reconciled
from drctl.gap.alignment import DEFAULT_MARGIN, prove_tails
from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import offset_runs, watermarks
from drctl.kafka.records import Record, read_ranges, stream_ranges
from drctl.kafka.topics import TP
from drctl.ops.copies import copy_fingerprint, timestamps_kept
from drctl.state import FailoverMarker
from drctl.translate.locate import timestamp_offsets

STALE_KEYS_SHOWN = 100


@dataclass
class PartitionLateCopies:
    after_f: int = 0  # records on the mirror topic at or after F
    late: int = 0  # of them, copies made by the replicator
    of_gap: int = 0  # of those, records the target lacked at F
    runs: list[list[int]] = field(default_factory=list)  # late copies' offsets, [start, end)
    stale_keys: list[str] = field(default_factory=list)  # late after a newer write (kept)

    @property
    def last(self) -> int | None:
        """The offset of the last late copy."""
        return self.runs[-1][1] - 1 if self.runs else None

    def offsets(self) -> set[int]:
        return {o for start, end in self.runs for o in range(start, end)}


@dataclass
class LateCopies:
    """Per mirror topic and partition; plain data for the failover marker."""

    checked_at_ms: int = 0
    partitions: dict[str, dict[int, PartitionLateCopies]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(p.late for parts in self.partitions.values() for p in parts.values())

    def by_tp(self) -> dict[TP, set[int]]:
        return {(t, p): part.offsets() for t, parts in self.partitions.items()
                for p, part in parts.items() if part.runs}

    def last_offsets(self) -> dict[str, dict[int, int]]:
        return {t: {p: part.last for p, part in parts.items() if part.last is not None}
                for t, parts in self.partitions.items()}

    def stale_keys(self) -> list[str]:
        return sorted({k for parts in self.partitions.values() for part in parts.values()
                       for k in part.stale_keys})

    def as_dict(self) -> dict[str, Any]:
        return {"checked_at_ms": self.checked_at_ms, "total": self.total,
                "stale_keys": self.stale_keys()[:STALE_KEYS_SHOWN],
                "partitions": {t: {str(p): asdict(part) for p, part in parts.items()}
                               for t, parts in self.partitions.items()},
                "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> LateCopies:
        if not raw:
            return cls()
        return cls(checked_at_ms=int(raw.get("checked_at_ms", 0)),
                   partitions={t: {int(p): PartitionLateCopies(**part)
                                   for p, part in parts.items()}
                               for t, parts in raw.get("partitions", {}).items()},
                   notes=list(raw.get("notes", [])))


def find_late_copies(ctx: OpsContext, marker: FailoverMarker, *,
                     margin: int = DEFAULT_MARGIN) -> LateCopies:
    """Look at every mirror topic partition past F (see the module docstring). Needs both
    clusters."""
    rep, src, dst, kind = ctx.rep, ctx.source, ctx.target, ctx.require_kind()
    src_admin, dst_admin = src.admin(), dst.admin()
    found = LateCopies(checked_at_ms=int(time.time() * 1000))
    ctx.notify("Looking for records the replicator copied after the failover point")
    source_ranges: dict[TP, tuple[int, int]] = {}
    before_ranges: dict[TP, tuple[int, int]] = {}
    after_ranges: dict[TP, tuple[int, int]] = {}
    for source_topic, mirror in sorted(marker.topics.items()):
        f_point = marker.failover_point.get(mirror, {})
        parts = sorted(f_point)
        t_marks = {p: m for (_, p), m in watermarks(dst_admin,
                                                    [(mirror, p) for p in parts]).items()}
        s_marks = {p: m for (_, p), m in watermarks(src_admin,
                                                    [(source_topic, p) for p in parts]).items()}
        moved = [p for p in parts if t_marks[p][1] > f_point[p]]
        found.partitions[mirror] = {p: PartitionLateCopies() for p in parts}
        if not moved:
            continue
        tails = prove_tails(src, dst, src_admin, dst_admin, source_topic, mirror, moved,
                            source_marks=s_marks, target_marks=t_marks,
                            f_point={p: f_point[p] for p in moved}, margin=margin)
        floors = recopy_floors(src, src_admin, source_topic,
                               {p: tails[p].source_aligned for p in moved})
        for p in moved:
            start = min(tails[p].source_start, floors.get(p, tails[p].source_start))
            source_ranges[(source_topic, p)] = (start, s_marks[p][1])
            before_ranges[(mirror, p)] = (tails[p].target_start, f_point[p])
            after_ranges[(mirror, p)] = (f_point[p], t_marks[p][1])
            if tails[p].reason:
                found.notes.append(f"{mirror}[{p}]: compared from the source's start "
                                   f"({tails[p].reason}).")
    if not after_ranges:
        return found
    keep = timestamps_kept(ctx, marker)
    source_fps = _fingerprints(src, source_ranges, keep)
    before_fps = _fingerprints(dst, before_ranges, keep)
    after = _records(dst, after_ranges)
    mirror_of = {s: m for s, m in marker.topics.items()}
    names_kept = rep.names_kept
    for (mirror, p), recs in after.items():
        source_topic = next(s for s, m in mirror_of.items() if m == mirror)
        part = found.partitions[mirror][p]
        part.after_f = len(recs)
        available = source_fps.get((source_topic, p), defaultdict(int)).copy()
        lacked = defaultdict(int, {fp: max(0, n - before_fps.get((mirror, p), {}).get(fp, 0))
                                   for fp, n in available.items()})
        late: list[int] = []
        newest_write: dict[bytes | None, int] = {}
        for rec in recs:
            if is_reconciled(rec.headers):
                continue  # drctl's own copy of a gap record (an earlier failback run)
            fp = copy_fingerprint(rec, keep)
            marked = kind.provenance_header is not None and any(
                k == kind.provenance_header for k, _ in rec.headers)
            if available.get(fp, 0) > 0 or marked:
                if available.get(fp, 0) > 0:
                    available[fp] -= 1
                if lacked.get(fp, 0) > 0:
                    lacked[fp] -= 1
                    part.of_gap += 1
                late.append(rec.offset)
                if names_kept and rec.key is not None and rec.key in newest_write:
                    part.stale_keys.append(_show_key(rec.key))
            elif rec.key is not None:
                newest_write[rec.key] = rec.offset
        part.late = len(late)
        part.runs = offset_runs(late)
        part.stale_keys = sorted(set(part.stale_keys))
    return found


# How far back in time a returning replicator can start copying again: Kafka Connect resumes a
# source connector from the offsets it last flushed (offset.flush.interval.ms, 60 s by
# default), before the worker died — and it died no earlier than it copied the last record
# the target holds before F. Plus a minute for clocks.
RECOPY_WINDOW_MS = 120_000


def recopy_floors(src: ClusterClients, admin: Any, topic: str,
                  aligned: Mapping[int, int | None]) -> dict[int, int]:
    """Per partition, the earliest source offset a returning replicator may copy again: the
    first record created within RECOPY_WINDOW_MS before the last one it had copied (the tail
    proof). At a high rate that reaches back further than the proof's margin."""
    proven = {p: o for p, o in aligned.items() if o is not None}
    if not proven:
        return {}
    consumer = src.consumer(**{"enable.partition.eof": "true"})
    try:
        last = {rec.partition: rec.timestamp_ms
                for rec in read_ranges(consumer, {(topic, p): (o, o + 1)
                                                  for p, o in proven.items()})}
    finally:
        consumer.close()
    asks = [((topic, p), ts - RECOPY_WINDOW_MS) for p, ts in last.items()]
    offsets = timestamp_offsets(admin, asks) if asks else []
    return {p: o for ((_, p), _), o in zip(asks, offsets, strict=True) if o >= 0}


def _fingerprints(clients: ClusterClients, ranges: Mapping[TP, tuple[int, int]],
                  keep: bool) -> dict[TP, dict[bytes, int]]:
    out: dict[TP, dict[bytes, int]] = {tp: defaultdict(int) for tp in ranges}
    for rec in stream_ranges(clients, ranges):
        out[(rec.topic, rec.partition)][copy_fingerprint(rec, keep)] += 1
    return out


def _records(clients: ClusterClients, ranges: Mapping[TP, tuple[int, int]]
             ) -> dict[TP, list[Record]]:
    out: dict[TP, list[Record]] = {tp: [] for tp in ranges}
    for rec in stream_ranges(clients, ranges):
        out[(rec.topic, rec.partition)].append(rec)
    return out


def _show_key(key: bytes) -> str:
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + key.hex()
    return text if text.isprintable() else "0x" + key.hex()


def check_late_copies(ctx: OpsContext, marker: FailoverMarker, source_reachable: bool,
                      ) -> dict[str, Any]:
    """Once a pending stop is confirmed: find what came through, record it in the marker
    (the caller saves it) and say it. Without the source nothing can be matched: noted."""
    if not source_reachable:
        marker.late_copies = {"total": None, "notes": [
            f"Not checked: '{marker.source}' is unreachable; failback checks again."]}
        return marker.late_copies
    found = find_late_copies(ctx, marker)
    marker.late_copies = found.as_dict()
    marker.record("late-copies", {"total": found.total, "stale_keys": len(found.stale_keys())})
    for line in describe(found):
        ctx.notify(line)
    return marker.late_copies


def describe(found: LateCopies) -> list[str]:
    """What the operator must know, in words (empty when nothing came through)."""
    if not found.total:
        return []
    parts = ", ".join(f"{t}[{p}]: {part.late}" for t, ps in sorted(found.partitions.items())
                      for p, part in sorted(ps.items()) if part.late)
    lines = [f"The replicator copied {found.total} record(s) into the target after the "
             f"failover point while its stop was unconfirmed ({parts}). Failback keeps them out "
             "of reconcile and reverse replication."]
    stale = found.stale_keys()
    if stale:
        shown = ", ".join(stale[:10]) + (f" (+{len(stale) - 10} more)" if len(stale) > 10
                                         else "")
        lines.append(f"{len(stale)} key(s) got an old value after a post-failover write — "
                     f"consumers of the target may have read stale data: {shown}.")
    return lines

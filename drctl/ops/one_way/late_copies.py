"""Late copies: what a replicator copied into the target after the failover point F, while its
stop was not confirmed (docs/design.md §6, the pending-stop hazard).

Known by content, not by a header (MirrorMaker 2 can add none without corrupting client
headers): a record at or after F on the mirror topic is a late copy when its fingerprint
(partition, key, value, headers, timestamp) matches a source record of the range the
replicator could copy — from just before where replication had stopped at F (gap/alignment.py)
to the source's end. Matching is a multiset: of `n` identical records after F, at most as many
as the source holds are copies, the earliest first (a replicator copies in order). That covers
both the records the target lacked at F and re-copies of records it already had.

How far back a returning worker re-copies is its last flushed source offset, which can lie any
number of records — and any span of record time — before where it stopped: a worker that was
catching up, or producers that set event times, make the re-copied records hours older than the
last one copied. So the range is not bounded by record time: it is widened backwards, a window
at a time, for as long as the window holds records whose copies came after F and are not yet
matched (`RecopyWalk`). A worker copies a contiguous run of source offsets in order, so the
first window below where it started holds none of them. A replicator that marks its copies
(`provenance_header`, Replicator's `__replicator_id`) is also taken at its word.

Late copies are never post-failover writes: failback keeps them out of the order check, of
reconcile and of reverse replication. With names kept they sit in the failover topic between
post-failover writes; a late copy that landed after a post-failover write of its key let
consumers read a stale value after a new one — those keys are named.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from drctl.context import OpsContext
from drctl.fingerprint import is_reconciled
from drctl.gap.alignment import DEFAULT_MARGIN, prove_tails
from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import offset_runs, watermarks
from drctl.kafka.records import Record, stream_ranges
from drctl.kafka.topics import TP
from drctl.ops.one_way.copies import copy_fingerprint, timestamps_kept
from drctl.state import FailoverMarker

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
    source_low: dict[TP, int] = {}
    target_low: dict[TP, int] = {}
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
        for p in moved:
            source_ranges[(source_topic, p)] = (tails[p].source_start, s_marks[p][1])
            source_low[(source_topic, p)] = s_marks[p][0]
            before_ranges[(mirror, p)] = (tails[p].target_start, f_point[p])
            target_low[(mirror, p)] = t_marks[p][0]
            after_ranges[(mirror, p)] = (f_point[p], t_marks[p][1])
            if tails[p].reason:
                found.notes.append(f"{mirror}[{p}]: compared from the source's start "
                                   f"({tails[p].reason}).")
    if not after_ranges:
        return found
    keep = timestamps_kept(ctx, marker)
    after = _records(dst, after_ranges)
    source_fps = _fingerprints(src, source_ranges, keep)
    mirror_of = {s: m for s, m in marker.topics.items()}
    # Widen each source range back to where the returning worker started copying again.
    walks = {tp: RecopyWalk(start, source_low[tp], Counter(
        copy_fingerprint(r, keep) for r in after[(mirror_of[tp[0]], tp[1])]
        if not is_reconciled(r.headers)) - Counter(source_fps[tp]))
        for tp, (start, _) in source_ranges.items()}
    while windows := {tp: w for tp, walk in walks.items() if (w := walk.window())}:
        read: dict[TP, list[bytes]] = {tp: [] for tp in windows}
        for rec in stream_ranges(src, windows):
            read[(rec.topic, rec.partition)].append(copy_fingerprint(rec, keep))
        for tp, fps in read.items():
            if walks[tp].feed(windows[tp][0], fps):
                for fp in fps:
                    source_fps[tp][fp] += 1
    for (source_topic, p), walk in walks.items():
        start, end = source_ranges[(source_topic, p)]
        if walk.start < start:
            mirror = mirror_of[source_topic]
            source_ranges[(source_topic, p)] = (walk.start, end)
            # The target side of the comparison widens as far (twice, for re-copies).
            t_start, f_at = before_ranges[(mirror, p)]
            before_ranges[(mirror, p)] = (max(target_low[(mirror, p)],
                                              t_start - 2 * (start - walk.start)), f_at)
            found.notes.append(f"{mirror}[{p}]: records copied after the failover point reach "
                               f"back to source offset {walk.start} ({start - walk.start} "
                               "record(s) before the compared tail): compared from there.")
    before_fps = _fingerprints(dst, before_ranges, keep)
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


# Records in the first window a re-copy walk reads below the compared range (it doubles).
RECOPY_STEP = 1_000


@dataclass
class RecopyWalk:
    """Where a returning replicator started copying again, found backwards from `start` (the
    compared source range's first offset) by content: a window of source records below it is
    taken in when it holds records whose copies came after F and are still unmatched
    (`unexplained`, a multiset of fingerprints); the first window holding none ends the walk.
    Pure: the caller reads the windows."""

    start: int
    low: int  # the source partition's first offset
    unexplained: Counter[bytes]
    step: int = RECOPY_STEP
    done: bool = False

    def window(self) -> tuple[int, int] | None:
        """The next source offsets to read, [from, to); None when the walk is over."""
        if self.done or self.start <= self.low or not any(
                n > 0 for n in self.unexplained.values()):
            return None
        return max(self.low, self.start - self.step), self.start

    def feed(self, window_start: int, fingerprints: Iterable[bytes]) -> bool:
        """The fingerprints of the window that starts at `window_start`; True when it holds
        re-copied records (the range now starts there)."""
        hits = 0
        for fp in fingerprints:
            if self.unexplained[fp] > 0:
                self.unexplained[fp] -= 1
                hits += 1
        if not hits:
            self.done = True
            return False
        self.start = window_start
        self.step *= 2
        return True


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

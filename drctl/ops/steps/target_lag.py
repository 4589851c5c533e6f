"""What the target lacks, measured against the target: the evidence behind the RPO of
`drctl status`, `drctl check` and guard's metrics.

The replicator's stored position (MirrorMaker 2's Connect source offsets) is only a claim: an
operator can move it past records that were never copied, retention can delete records before
they are copied, the target can lose records. Per source partition of the flow:

1. For every partition, cheaply: the source's log start, last stable offset and end, the
   mirror's, the stored position S and the copy points the replicator wrote lately
   (MirrorMaker 2's offset syncs). After a copy point (u, d) the replicator copies offset for
   offset until it writes the next one, which it does whenever it skips a source offset; so
   with the mirror ending at E its copies reach at least source offset u + (E - d). That is
   the claim (S only without a copy point, or capping it when the replicator writes
   transactions); a claim at the source's end proves the tail without a read.
2. Only for partitions that lag (or whose newest copy point lies past the mirror's end: the
   target lost records): the target's last record and its original on the source, found by
   content as translation finds records. The copies reach just past it. If S is beyond it,
   the records in between were passed over: the replicator will never copy them.
3. Consecutive copy points that skip more source offsets than target offsets: the skipped
   source offsets must hold no visible record (only transaction markers, aborted or
   compacted-away records). A visible record there, confirmed by counting the records between
   the two copy points against the target offsets between their copies, was never copied.
4. A range that starts below the source's log start: retention deleted those offsets before
   they were copied — a loss, named.

What cannot be proven is said ("unknown", with why), never counted as 0. Below where the
flow's last return to protection restarted forward copying, an earlier incident settled every
record: nothing there is counted.

Cost follows the lag: step 1 is three ListOffsets per cluster, one read of Connect's offsets and
the offset syncs written in the last SYNC_WINDOW_S (at most RECENT_SYNCS_MAX); steps 2 and 3
read records only for partitions that lag or skip (step 3 at most SKIP_READ_BUDGET offsets a
run; a partition beyond it is marked not verified).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import OffsetSpec

from drctl.context import OpsContext
from drctl.errors import DrctlError
from drctl.kafka.clients import cluster_metadata
from drctl.kafka.lag import first_records
from drctl.kafka.offsets import list_offsets
from drctl.kafka.records import Record
from drctl.kafka.topics import TP
from drctl.ops.steps.failover_point import settled_by_last_return
from drctl.translate.inventory import source_topics_in_scope
from drctl.translate.locate import MatchQuery, Side, last_records, match_records
from drctl.translate.reader import BatchReader, RangeRequest

# How far back the copy points are read each run (and at most RECENT_SYNCS_MAX of them).
SYNC_WINDOW_S = 24 * 3600
# At most this many source offsets are read per run to tell a skip between copy points from
# records never copied.
SKIP_READ_BUDGET = 200_000


@dataclass(frozen=True)
class Marks:
    low: int  # the log start
    stable: int  # the last stable offset
    end: int  # the high watermark


@dataclass(frozen=True)
class PartitionFacts:
    """What step 1 reads of one source partition: everything the cheap verdict needs."""

    tp: TP
    mirror: TP
    source: Marks
    target: Marks | None  # None: the mirror topic does not exist
    stored: int | None = None  # the replicator's stored position (next offset it copies)
    points: tuple[tuple[int, int], ...] = ()  # copy points, in the order written
    settled: int = 0  # an earlier incident settled every source offset below this
    # The replicator's copies take one target offset each (False: it writes transactions,
    # whose markers take target offsets too).
    points_one_for_one: bool = True


@dataclass(frozen=True)
class Skip:
    """Consecutive copy points (u1, d1), (u2, d2) that skip source offsets: the replicator
    copied u1 + 1 … one for one into d1 + 1 … d2 - 1, then skipped [start, u2). `slots` copies
    lie between the two; `count_from` is where the records they should hold begin."""

    start: int
    end: int
    count_from: int
    slots: int
    truncated: bool = False  # the target lost the copies at and after d2 (d2 <= d1)


@dataclass
class PartitionLag:
    """One partition's verdict."""

    tp: TP
    start: int | None = None  # the first source offset of the lacking tail (None: unknown)
    behind: int = 0  # offsets the target lacks: the tail and the records passed over
    oldest_ms: int | None = None  # the timestamp of the first record the target lacks
    missing: int = 0  # records the replicator passed without copying (it never will)
    missing_from: int | None = None
    deleted: int = 0  # offsets retention deleted before they were copied (at most)
    unknown: str | None = None  # why this partition's copy cannot be measured
    unverified: str | None = None  # what was not verified (a note, not a count)
    how: str = ""  # what proved it

    @property
    def lost(self) -> bool:
        """Records the target lacks that no waiting brings: passed over or deleted."""
        return self.missing > 0 or self.deleted > 0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"partition": self.tp[1], "behind": self.behind,
                               "oldest_unreplicated_ms": self.oldest_ms, "how": self.how}
        if self.missing:
            out.update(missing=self.missing, missing_from=self.missing_from)
        if self.deleted:
            out["deleted"] = self.deleted
        if self.unknown:
            out["unknown"] = self.unknown
        if self.unverified:
            out["unverified"] = self.unverified
        return out


def claimed_next(f: PartitionFacts) -> tuple[int | None, bool]:
    """The cheap claim: the next source offset the target's copies reach at most, and whether
    the newest copy point contradicts the target (it lies past the mirror's end: the target
    lost copies since). From the newest copy point: past it, copies take one target offset
    per source offset, unless source offsets were skipped (markers) — then the copies reach
    further, never less. The stored position trails the copies (Connect flushes it now and
    then) unless moved by hand: it only counts without a copy point, or when the target
    holds markers of the replicator's own transactions (exactly-once), which make the copy
    point's arithmetic overshoot."""
    suspect = False
    from_point = None
    if f.points and f.target is not None:
        u, d = f.points[-1]
        if d < f.target.end:
            from_point = u + f.target.end - d
        else:
            suspect = True
    if from_point is None or (not f.points_one_for_one and f.stored is not None):
        claims = [c for c in (from_point, f.stored) if c is not None]
        return (min(claims) if claims else None), suspect
    return from_point, suspect


def needs_content(f: PartitionFacts) -> bool:
    """Whether the claim leaves the tail unproven: step 2 reads it."""
    if f.target is None or f.target.end == 0:
        return False  # nothing on the target: it lacks all the source holds
    claim, suspect = claimed_next(f)
    return suspect or claim is None or claim < f.source.end


def skips(f: PartitionFacts) -> list[Skip]:
    """Step 3's candidates: consecutive copy points that skip more source offsets than target
    offsets, where the source still holds (and no incident settled) what they skip."""
    floor = max(f.source.low, f.settled)
    out = []
    for (u1, d1), (u2, d2) in zip(f.points, f.points[1:], strict=False):
        if u2 <= u1:
            continue  # the replicator went back: copies twice, never loses
        if d2 <= d1:
            # Copied at d2 although d1 held a copy: the target was truncated, losing the
            # copies from d2 on, the last (d1 - d2) before u1 (one for one) among them.
            start = max(floor, u1 - (d1 - d2))
            if start < u2:
                out.append(Skip(start, u2, start, 0, truncated=True))
            continue
        if u2 - u1 <= d2 - d1 or u1 + 1 < floor:
            continue
        out.append(Skip(u1 + d2 - d1, u2, u1 + 1, d2 - d1 - 1))
    return out


def tail_start(f: PartitionFacts, copied_next: int | None) -> tuple[int | None, str]:
    """Where the lacking tail starts, before the log-start clamp, and how it was proven:
    the content's answer, else the claim; None when neither exists."""
    if f.target is None:
        return f.source.low, "no mirror topic on the target"
    if f.target.end == 0:
        return f.source.low, "the mirror is empty"
    claim, suspect = claimed_next(f)
    if copied_next is not None:
        return max(copied_next, f.settled), "the target's last record found on the source"
    if not needs_content(f):
        return max(claim or 0, f.settled), ("the newest copy point and the mirror's end"
                                            if f.points else "the stored position")
    if suspect or claim is None:
        return None, ""
    return max(claim, f.settled), "stored position (the target's last record is not on the source)"


def judge(f: PartitionFacts, copied_next: int | None, first: Record | None,
          skipped: Sequence[tuple[Skip, list[Record] | None]] = ()) -> PartitionLag:
    """One partition's verdict from what steps 1-3 read: `copied_next` (step 2: the source
    offset after the target's last record's original; None: not looked for or not found),
    `first` (the first record at or after the tail's start on the source, None without one)
    and per skip the visible records it counted (None: over the read budget)."""
    lag = PartitionLag(f.tp)
    start, how = tail_start(f, copied_next)
    lag.how = how
    if start is None:
        if f.target is not None and f.target.stable <= f.target.low:
            lag.unknown = (f"the mirror {f.mirror[0]}-{f.mirror[1]} holds no record to find on "
                           "the source and the replicator's position "
                           + ("contradicts it" if claimed_next(f)[1] else "is unknown"))
        else:
            lag.unknown = (f"the last record of {f.mirror[0]}-{f.mirror[1]} is not on the "
                           "source and the replicator's position "
                           + ("lies past the target's end" if claimed_next(f)[1]
                              else "is unknown"))
        return lag
    floor = max(f.source.low, f.settled)
    if start < f.source.low and f.target is not None and f.target.end > 0:
        lag.deleted = f.source.low - start
    start = max(start, floor)
    lag.start = start
    # Where the target's copies end is proven by content, or by a target that holds none.
    proven = copied_next is not None or f.target is None or f.target.end == 0
    if first is not None and first.offset < f.source.end:
        lag.behind = f.source.end - first.offset
        lag.oldest_ms = first.timestamp_ms
        if proven and f.stored is not None and first.offset < f.stored:
            # The replicator resumes at its stored position: what lies before it is never
            # copied.
            lag.missing = min(f.stored, f.source.end) - first.offset
            lag.missing_from = first.offset
    unverified = 0
    for skip, records in skipped:
        if records is None:
            unverified += 1
            continue
        extra = len(records) - skip.slots
        if extra <= 0:
            continue
        missed = records[skip.slots]
        lag.missing += extra
        lag.behind += extra
        if lag.missing_from is None or missed.offset < lag.missing_from:
            lag.missing_from = missed.offset
        if lag.oldest_ms is None or missed.timestamp_ms < lag.oldest_ms:
            lag.oldest_ms = missed.timestamp_ms
    if unverified:
        lag.unverified = (f"{unverified} skip(s) between copy points not read (over the "
                          f"{SKIP_READ_BUDGET:,}-offset budget of a run)")
    return lag


@dataclass
class TargetLag:
    """Every partition's verdict, and what the copy points covered."""

    partitions: list[PartitionLag] = field(default_factory=list)
    ends: dict[TP, int] = field(default_factory=dict)
    points_since_ms: int | None = None  # copy points complete from (None: none read)

    def rows(self) -> list[dict[str, Any]]:
        """Per source topic, in the shape the RPO, status and the metrics read: `behind`,
        `oldest_unreplicated_ms`, and under `by_partition` each partition that lacks records,
        lost some or cannot be measured."""
        per_topic: dict[str, dict[str, Any]] = defaultdict(lambda: {
            "partitions": 0, "behind": 0, "end": 0, "oldest_unreplicated_ms": None,
            "missing": 0, "deleted": 0, "by_partition": []})
        for tp, end in self.ends.items():
            row = per_topic[tp[0]]
            row["partitions"] += 1
            row["end"] += end
        for lag in self.partitions:
            row = per_topic[lag.tp[0]]
            row["behind"] += lag.behind
            row["missing"] += lag.missing
            row["deleted"] += lag.deleted
            if lag.oldest_ms is not None and (row["oldest_unreplicated_ms"] is None
                                              or lag.oldest_ms < row["oldest_unreplicated_ms"]):
                row["oldest_unreplicated_ms"] = lag.oldest_ms
            if lag.behind or lag.lost or lag.unknown or lag.unverified:
                row["by_partition"].append(lag.as_dict())
        return [{"topic": t, **v, "copy_points_since_ms": self.points_since_ms}
                for t, v in sorted(per_topic.items())]


def target_lag(ctx: OpsContext, topics: Mapping[str, int] | None = None, *,
               now_ms: int | None = None) -> list[dict[str, Any]] | None:
    """The flow's lag measured against the target (the module docstring), as lag rows per
    source topic; None when the kind's lag is not measured. `topics` (source topic ->
    partitions): the flow's topics in scope unless given."""
    kind = ctx.require_kind()
    if not kind.lag_measured:
        return None
    return measure(ctx, topics, now_ms=now_ms).rows()


def measure(ctx: OpsContext, topics: Mapping[str, int] | None = None, *,
            now_ms: int | None = None) -> TargetLag:
    rep, kind = ctx.rep, ctx.require_kind()
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    stored = kind.replicated_upto(ctx) or {}  # the replicator's claim (None: unreadable)
    if topics is None:
        topics = source_topics_in_scope(ctx.config, ctx.source)
    tps = sorted((t, p) for t, n in topics.items() for p in range(n))
    if not tps:
        return TargetLag()
    source_marks = _marks(ctx.source.admin(), tps)
    target_meta = cluster_metadata(ctx.target).topics
    mirrored = [(rep.mirror_topic(t), p) for t, p in tps
                if rep.mirror_topic(t) in target_meta
                and p in target_meta[rep.mirror_topic(t)].partitions]
    target_marks = _marks(ctx.target.admin(), mirrored)
    points = kind.copy_points(ctx, now_ms - SYNC_WINDOW_S * 1000)
    settled = _settled(ctx)
    facts = [PartitionFacts(tp, (rep.mirror_topic(tp[0]), tp[1]), source_marks[tp],
                            target_marks.get((rep.mirror_topic(tp[0]), tp[1])),
                            stored.get(tp),
                            tuple(points.pairs.get(tp, ())) if points is not None else (),
                            settled.get(tp, 0),
                            points.one_for_one if points is not None else True)
             for tp in tps]
    copied = _copied_next(ctx, [f for f in facts if needs_content(f)])
    starts: dict[TP, int] = {}
    for f in facts:
        start, _ = tail_start(f, copied.get(f.tp))
        if start is not None and max(start, f.source.low, f.settled) < f.source.end:
            starts[f.tp] = max(start, f.source.low, f.settled)
    firsts = first_records(ctx.source, {tp: (s, source_marks[tp].end)
                                        for tp, s in starts.items()})
    counted = _count_skips(ctx, {f.tp: skips(f) for f in facts})
    return TargetLag([judge(f, copied.get(f.tp), firsts.get(f.tp), counted.get(f.tp, []))
                      for f in facts],
                     {tp: m.end for tp, m in source_marks.items()},
                     None if points is None else points.since_ms)


def _marks(admin: Any, tps: Sequence[TP]) -> dict[TP, Marks]:
    if not tps:
        return {}
    lows = list_offsets(admin, {tp: OffsetSpec.earliest() for tp in tps})
    ends = list_offsets(admin, {tp: OffsetSpec.latest() for tp in tps}, read_committed=False)
    stable = list_offsets(admin, {tp: OffsetSpec.latest() for tp in tps})
    return {tp: Marks(lows[tp], min(stable[tp], ends[tp]), ends[tp]) for tp in tps}


def _settled(ctx: OpsContext) -> dict[TP, int]:
    """Per source partition, where the flow's last return to protection restarted forward
    copying (nothing below it is this flow's lag); empty when unknown."""
    rep = ctx.rep
    try:
        starts = settled_by_last_return(ctx.store, rep.source, rep.target).get("source", {})
    except DrctlError:
        return {}
    return {(t, int(p)): int(o) for t, parts in starts.items() for p, o in parts.items()}


def _copied_next(ctx: OpsContext, facts: Sequence[PartitionFacts]) -> dict[TP, int]:
    """Step 2: per source partition, the offset after the original of the target's last
    record (partitions whose last record is not found on the source are left out)."""
    facts = [f for f in facts if f.target is not None and f.target.stable > f.target.low]
    if not facts:
        return {}
    src, dst = ctx.source, ctx.target
    # Read committed on both sides: up to the last stable offsets, never past them.
    target_side = Side.of(dst, dst.admin(), {f.mirror: (f.target.low, f.target.stable)
                                             for f in facts if f.target is not None})
    source_side = Side.of(src, src.admin(), {f.tp: (f.source.low, f.source.stable)
                                             for f in facts})
    tails = last_records(target_side, [(f.mirror, target_side.marks[f.mirror][1])
                                       for f in facts])
    queries, order = [], []
    for f, (last, _) in zip(facts, tails, strict=True):
        if last is not None:
            queries.append(MatchQuery(last, f.tp))
            order.append(f.tp)
    found = match_records(target_side, source_side, queries)
    return {tp: m.offset + 1 for tp, m in zip(order, found, strict=True)
            if m.offset is not None}


def _count_skips(ctx: OpsContext, candidates: Mapping[TP, list[Skip]]
                 ) -> dict[TP, list[tuple[Skip, list[Record] | None]]]:
    """Step 3: for each skip, the visible records from its `count_from` to its end — read
    only where the skipped offsets hold a visible record, within SKIP_READ_BUDGET."""
    todo = [(tp, s) for tp, found in candidates.items() for s in found]
    if not todo:
        return {}
    reader = BatchReader(ctx.source)
    budget = SKIP_READ_BUDGET
    out: dict[TP, list[tuple[Skip, list[Record] | None]]] = defaultdict(list)

    def affordable(skips: list[tuple[TP, Skip]], cost: Callable[[Skip], int],
                   order: Callable[[Skip], int]) -> list[tuple[TP, Skip]]:
        """The skips whose read fits what is left of the budget, in `order`; the others
        are left uncounted (None: unknown)."""
        nonlocal budget
        kept = []
        for tp, s in sorted(skips, key=lambda x: order(x[1])):
            if cost(s) > budget:
                out[tp].append((s, None))
                continue
            budget -= cost(s)
            kept.append((tp, s))
        return kept

    def skipped_span(s: Skip) -> int:
        return s.end - s.start

    checked = affordable(todo, skipped_span, skipped_span)
    skipped = reader.read([RangeRequest(tp, s.start, s.end) for tp, s in checked])
    suspicious = [(tp, s) for (tp, s), recs in zip(checked, skipped, strict=True) if recs]
    counts = affordable(suspicious, lambda s: s.start - s.count_from,
                        lambda s: s.end - s.count_from)
    for (tp, s), recs in zip(counts, reader.read([RangeRequest(tp, s.count_from, s.end)
                                                  for tp, s in counts]), strict=True):
        out[tp].append((s, recs))
    return out

"""Switch-back positions: where each consumer group resumes on the source at failback, so
that it receives every record at least once (docs/design.md §6, failback step 5).

On the source the gap's records sit *before* the reverse copies of the post-failover writes;
on the target their reconciled copies sit *after* those writes. A group that read
post-failover writes on the target but not the copies would, translated exactly, resume on the
source past gap records it never read. The rule: a group's position on the source is never
past a record it has not read — quarantined records excepted (delivered to no group by
design; each group's report lists the ones it misses). Per group and source partition:

    unread   = gap records at or after the group's position on the source before the outage
               (it read the earlier ones there) whose reconciled copy on the target lies at
               or after its position there, plus gap records left uncopied (`--reconcile
               none`)
    position = min(exact translation, first unread)

What the group reads again between that position and the exact translation is counted, per
group and partition, as re-delivered; the end state is read back after the commit and a
group that would still skip a record fails the step.

Why rewind, not drain (measured in the lab, issue 15's note): a group drained on the target
(its position past the reconciled copies) needs no rewind and re-reads nothing, and this
module then moves it exactly. A group still consuming on the target is never moved: failback
reports it, keeps the incident open and moves it on the next run, once its consumers are
stopped — by then it has drained. Waiting inside failback for consumers that drctl cannot
stop gains nothing over that.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from drctl.context import OpsContext
from drctl.errors import ExitStatus
from drctl.fingerprint import RECONCILED_HEADER
from drctl.kafka.clients import cluster_metadata
from drctl.kafka.groups import committed_offsets, group_states
from drctl.kafka.offsets import offset_runs, watermarks
from drctl.kafka.records import read_ranges
from drctl.kafka.topics import TP
from drctl.ops.one_way.reverse import failover_starts
from drctl.state import FailoverMarker
from drctl.translate.engine import TranslateRequest, apply_positions, translate_offsets
from drctl.translate.model import Confidence, PartitionResult, TranslateMethod, TranslationReport

# Offsets of gap records per source topic and partition, as [start, end) runs (marker data).
OffsetRuns = dict[str, dict[str, list[list[int]]]]


@dataclass(frozen=True)
class GapPlacement:
    """Where the gap of one source partition went (source offsets throughout)."""

    copy_topic: str = ""  # the target topic holding the reconciled copies
    copies: tuple[tuple[int, int], ...] = ()  # (offset of the copy on the target, source offset)
    quarantined: tuple[int, ...] = ()
    left: tuple[int, ...] = ()  # neither copied nor quarantined: still only on the source


@dataclass(frozen=True)
class Resume:
    """Where one group resumes on one source partition, and why."""

    position: int
    rewound: bool  # before the exact translation
    unread: tuple[int, ...]  # gap records it had not read anywhere (all >= position)
    quarantined_missed: tuple[int, ...]  # quarantined, before position: it never reads them
    quarantined_read: tuple[int, ...]  # quarantined, at or after position: read on the source
    # Gap records at or after the position whose copy it read on the target: it reads them
    # again on the source (where they are not one run right at the translated position).
    copies_read_again: tuple[int, ...] = ()


def resume_position(translated: int, before: int | None, read_to: int | None,
                    placement: GapPlacement) -> Resume:
    """The rule of the module docstring for one group and source partition.

    `translated`: the exact translation of its position on the target; `before`: its
    committed position on the source (what it read there before the outage); `read_to`: its
    position on the target topic holding the copies (None: it never read that topic)."""
    floor = before if before is not None else 0
    unread = sorted({s for t, s in placement.copies if s >= floor
                     and (read_to is None or t >= read_to)}
                    | {s for s in placement.left if s >= floor})
    position = min([translated, *unread[:1]])
    read = {s for t, s in placement.copies if read_to is not None and t < read_to}
    if position == translated:
        # Prefixed names: the gap lies in the source topic right past the mirror's end while
        # the group read its copies in the failover topic. Step over the run of records it
        # read that way (and quarantined ones, delivered to no group) — never over another.
        skippable = read | set(placement.quarantined)
        while position >= floor and position in skippable:
            position += 1
    quarantined = sorted(q for q in placement.quarantined if q >= floor)
    return Resume(position, position < translated, tuple(unread),
                  tuple(q for q in quarantined if q < position),
                  tuple(q for q in quarantined if q >= position),
                  tuple(sorted(s for s in read if s >= max(floor, position))))


def redelivered(offsets_read_again: Iterable[int], resume: Resume) -> int:
    """Of the source records from the resume position to the exact translation, the ones the
    group already read (not the unread gap records, not the quarantined ones)."""
    new = set(resume.unread) | set(resume.quarantined_read)
    return sum(1 for o in offsets_read_again if o not in new)


def not_delivered(unread: Sequence[int], committed: int | None) -> int:
    """Unread gap records before a committed position: records the group will never get."""
    if committed is None:
        return 0
    return bisect_left(sorted(unread), committed)


@dataclass
class PartitionSwitchBack:
    topic: str  # on the source
    partition: int
    before: int | None  # committed on the source when failback began
    translated: int | None  # the exact translation of its position on the target
    after: int | None  # where it resumes (committed, when applied)
    confidence: str
    redelivered: int = 0  # records it already read that it reads again
    unread_gap: int = 0  # gap records it had not read, delivered from `after` on
    not_delivered: int = 0  # unread gap records before `after` (measured; 0 by the rule)
    quarantined_missed: list[list[int]] = field(default_factory=list)  # offset runs
    quarantined_read: int = 0  # quarantined records it will read on the source
    proof: dict[str, Any] | None = None
    note: str | None = None


@dataclass
class GroupSwitchBack:
    group: str
    state: str
    applied: bool
    skipped: str | None
    partitions: list[PartitionSwitchBack] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        return {"redelivered": sum(p.redelivered for p in self.partitions),
                "not_delivered": sum(p.not_delivered for p in self.partitions),
                "quarantined_missed": sum(e - s for p in self.partitions
                                          for s, e in p.quarantined_missed)}


@dataclass
class SwitchBack:
    """Every group's switch-back, as plain data (failback JSON `switch_back`, the report)."""

    groups: list[GroupSwitchBack] = field(default_factory=list)
    applied: bool = False
    translation: TranslationReport | None = None

    @property
    def waiting(self) -> list[GroupSwitchBack]:
        """Groups not moved because consumers are still active on the target."""
        return [g for g in self.groups if g.skipped]

    @property
    def skipping(self) -> list[GroupSwitchBack]:
        return [g for g in self.groups if g.totals()["not_delivered"]]

    @property
    def unplaced(self) -> list[tuple[str, PartitionSwitchBack]]:
        """Positions no translation could prove: the group stays where it was there."""
        return [(g.group, p) for g in self.groups for p in g.partitions
                if p.confidence == Confidence.UNPROVEN]

    @property
    def exit_status(self) -> ExitStatus:
        return ExitStatus.CHECK_FAILED if self.waiting or self.skipping or self.unplaced \
            else ExitStatus.SUCCESS

    def redelivered_by_group(self) -> dict[str, int]:
        """What each group moved reads again: what drctl states the switch-back re-delivers."""
        return {g.group: g.totals()["redelivered"] for g in self.groups if not g.skipped}

    def summary(self) -> dict[str, Any]:
        totals = [g.totals() for g in self.groups]
        return {"groups": len(self.groups),
                "applied": sum(g.applied for g in self.groups),
                "waiting": [g.group for g in self.waiting],
                "unplaced": [f"{g} {p.topic}[{p.partition}]" for g, p in self.unplaced],
                "rewound": sum(p.confidence == Confidence.REWOUND for g in self.groups
                               for p in g.partitions),
                "redelivered": sum(t["redelivered"] for t in totals),
                "not_delivered": sum(t["not_delivered"] for t in totals),
                "quarantined_missed": sum(t["quarantined_missed"] for t in totals)}

    def as_dict(self) -> dict[str, Any]:
        return {"applied": self.applied, "summary": self.summary(),
                "groups": [{**asdict(g), "totals": g.totals()} for g in self.groups]}


def _expand(runs: OffsetRuns | None) -> dict[TP, tuple[int, ...]]:
    return {(t, int(p)): tuple(o for s, e in rs for o in range(s, e))
            for t, parts in (runs or {}).items() for p, rs in parts.items()}


def gap_placements(ctx: OpsContext, marker: FailoverMarker,
                   not_copied: Mapping[str, Any]) -> dict[TP, GapPlacement]:
    """Per source partition: the reconciled copies of this incident on the target (read from
    their tags: the tag names the source offset), and what was quarantined or left."""
    rep, target = ctx.rep, ctx.target
    starts = failover_starts(rep, marker)
    tps = [(t, p) for t, parts in starts.items() for p in parts]
    existing = cluster_metadata(target).topics
    tps = [tp for tp in tps if tp[0] in existing]
    copies: dict[TP, list[tuple[int, int]]] = {}
    copy_topic: dict[TP, str] = {}
    prefix = f"{marker.incident}:".encode()
    if tps:
        ends = watermarks(target.admin(), tps)
        ranges = {tp: (starts[tp[0]][tp[1]], ends[tp][1]) for tp in tps
                  if ends[tp][1] > starts[tp[0]][tp[1]]}
        consumer = target.consumer(**{"enable.partition.eof": "true"})
        try:
            for rec in read_ranges(consumer, ranges):
                tag = next((v for k, v in rec.headers if k == RECONCILED_HEADER and v), None)
                if tag is None or not tag.startswith(prefix):
                    continue
                # incident:topic:partition:offset — topic names never contain ':'.
                _, topic, part, offset = tag.decode().rsplit(":", 3)
                tp = (topic, int(part))
                copies.setdefault(tp, []).append((rec.offset, int(offset)))
                copy_topic[tp] = rec.topic
        finally:
            consumer.close()
    quarantined = _expand(not_copied.get("quarantined"))
    left = _expand(not_copied.get("left"))
    out = {}
    for tp in set(copies) | set(quarantined) | set(left):
        out[tp] = GapPlacement(copy_topic.get(tp, rep.failover_topic(tp[0])),
                               tuple(copies.get(tp, ())), quarantined.get(tp, ()),
                               left.get(tp, ()))
    return out


def switch_back(ctx: OpsContext, marker: FailoverMarker, not_copied: Mapping[str, Any], *,
                groups: str = ".*", apply: bool = False,
                done_groups: frozenset[str] = frozenset()) -> SwitchBack:
    """Translate every group back to the source, rewind where the rule demands it, commit
    (unless a dry run), and read the committed positions back to measure what each group
    will receive."""
    rep = ctx.rep
    report = translate_offsets(ctx, TranslateRequest(
        rep.target, rep.source, groups=groups, method=TranslateMethod.EXACT, apply=False,
        own_copy_header=RECONCILED_HEADER, source_deadline_s=ctx.reach_deadline_s))
    report.groups = [g for g in report.groups if g.group not in done_groups]
    report.apply = apply
    placements = gap_placements(ctx, marker, not_copied)
    on_target = {(g.group, p.topic, p.partition): p.source_offset
                 for g in report.groups for p in g.partitions}
    decided: list[tuple[PartitionResult, Resume, int]] = []
    for g in report.groups:
        for p in g.partitions:
            placement = placements.get((p.target_topic, p.partition))
            if placement is None or p.target_offset is None:
                continue
            translated = p.target_offset
            resume = resume_position(translated, p.current_target_offset,
                                     on_target.get((g.group, placement.copy_topic,
                                                    p.partition)), placement)
            if resume.rewound:
                p.target_offset = resume.position
                p.confidence = Confidence.REWOUND
                p.note = (f"rewound from {translated}: gap record {resume.position} was not "
                          "read on the target")
            elif resume.position > translated:
                p.target_offset = resume.position
                p.note = (f"moved on from {translated} past {resume.position - translated} gap "
                          "record(s) read as copies on the target or quarantined")
            decided.append((p, resume, translated))
    again = _read_again(ctx, [(p, r, t) for p, r, t in decided if r.rewound])
    # A group still consuming on the target moves on there: a commit now would put it
    # behind or ahead of what it reads next. It waits for the next run.
    on_target_states = group_states(ctx.target, [g.group for g in report.groups])
    waiting = set()
    for g in report.groups:
        st = on_target_states.get(g.group)
        if st is not None and st.active:
            g.skipped = (f"consumers still active on {rep.target} ({st.members} member(s), "
                         f"{st.state}); stop them and run failback again")
            waiting.add(g.group)
    if apply:
        source = ctx.source
        apply_positions(source, report, skip_groups=frozenset(waiting))
        committed = committed_offsets(source, [g.group for g in report.groups])
    else:
        committed = {}
    result = SwitchBack(applied=apply, translation=report)
    by_partition: dict[int, tuple[Resume | None, int | None]] = {
        id(p): (r, t) for p, r, t in decided}
    for g in report.groups:
        gs = GroupSwitchBack(g.group, g.state, g.applied, g.skipped)
        for p in g.partitions:
            decision, was = by_partition.get(id(p), (None, p.target_offset))
            after = committed.get(g.group, {}).get((p.target_topic, p.partition)) \
                if g.applied else p.target_offset
            ps = PartitionSwitchBack(
                p.target_topic, p.partition, p.current_target_offset, was, after,
                p.confidence, redelivered=p.redelivered or 0, note=p.note,
                proof=None if p.proof is None else {
                    "last_read": {"topic": p.topic, "offset": p.proof.get("last_read")},
                    "copy": {"topic": p.target_topic, "offset": p.proof.get("copy")}})
            if decision is not None:
                ps.unread_gap = len(decision.unread)
                ps.quarantined_missed = offset_runs(decision.quarantined_missed)
                ps.quarantined_read = len(decision.quarantined_read)
                if decision.rewound:
                    ps.redelivered += redelivered(again.get(id(p), ()), decision)
                ps.redelivered += len(decision.copies_read_again)
                # Measured on the committed position (or, not applied, the planned one).
                where = after if g.applied or not apply else p.current_target_offset
                ps.not_delivered = not_delivered(decision.unread, where)
            gs.partitions.append(ps)
        result.groups.append(gs)
    return result


def _read_again(ctx: OpsContext, rewound: Sequence[tuple[PartitionResult, Resume, int]]
                ) -> dict[int, list[int]]:
    """The offsets of the source records between each rewound position and its exact
    translation (read, so transaction markers and compacted offsets are not counted)."""
    if not rewound:
        return {}
    source = ctx.source
    wanted: dict[TP, tuple[int, int]] = {}
    for p, resume, translated in rewound:
        tp = (p.target_topic, p.partition)
        low, high = wanted.get(tp, (resume.position, translated))
        wanted[tp] = (min(low, resume.position), max(high, translated))
    offsets: dict[TP, list[int]] = {}
    consumer = source.consumer(**{"enable.partition.eof": "true"})
    try:
        for rec in read_ranges(consumer, wanted):
            offsets.setdefault((rec.topic, rec.partition), []).append(rec.offset)
    finally:
        consumer.close()
    return {id(p): [o for o in offsets.get((p.target_topic, p.partition), [])
                    if resume.position <= o < translated]
            for p, resume, translated in rewound}

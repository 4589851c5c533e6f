"""The audit of a failover's group positions, once the source answers again (docs/design.md
§6): for every position failover applied, where the group really was — its last commit on
the source, translated exactly onto the target — and the difference: records the group
re-reads (applied before that) or skips (applied after it).

It must run before failback moves the groups back (switch-back commits on the source replace
the commits it reads). A group whose consumers kept committing on the source after the
failover is measured against that later commit: the re-delivery is then over-counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from drctl.context import OpsContext
from drctl.errors import UsageError
from drctl.kafka.clients import describe_with_retry
from drctl.kafka.groups import committed_offsets
from drctl.kafka.topics import TP
from drctl.ops.steps.scope import the_open_incident
from drctl.state import FailoverMarker
from drctl.translate.engine import TranslateRequest, translate_offsets
from drctl.translate.model import Confidence, TranslateMethod


@dataclass
class PositionAudit:
    group: str
    topic: str  # on the target
    partition: int
    applied: int  # what failover committed
    confidence: str  # how failover found it (snapshot, checkpoint, exact, ...)
    exact: int | None  # where the group really was, translated exactly
    redelivered: int = 0
    skipped: int = 0
    max_redelivered: int | None = None  # the bound failover stated, if any
    note: str | None = None
    placed: bool = True  # False: a commit on the source, and no position from failover


@dataclass
class FailoverAudit:
    positions: list[PositionAudit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        return {"positions": len(self.positions),
                "audited": sum(p.exact is not None for p in self.positions),
                "redelivered": sum(p.redelivered for p in self.positions),
                "skipped": sum(p.skipped for p in self.positions),
                "over_bound": sum(1 for p in self.positions if p.max_redelivered is not None
                                  and p.redelivered > p.max_redelivered),
                "not_placed": sum(not p.placed for p in self.positions)}

    def as_dict(self) -> dict[str, Any]:
        return {"totals": self.totals(), "notes": self.notes,
                "positions": [asdict(p) for p in self.positions]}


def audit_by_group(audit: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per group of an audit (as the marker keeps it): positions audited, records
    re-delivered and skipped, and the bound failover stated (summed over its partitions;
    None when a partition had none) — the table a drill report shows."""
    rows: dict[str, dict[str, Any]] = {}
    for p in audit.get("positions", []):
        row = rows.setdefault(p["group"], {"group": p["group"], "positions": 0,
                                           "audited": 0, "redelivered": 0, "skipped": 0,
                                           "stated_bound": 0,
                                           "from": set()})
        row["positions"] += 1
        row["audited"] += p.get("exact") is not None
        row["redelivered"] += p.get("redelivered") or 0
        row["skipped"] += p.get("skipped") or 0
        bound = p.get("max_redelivered")
        row["stated_bound"] = None if bound is None or row["stated_bound"] is None \
            else row["stated_bound"] + bound
        row["from"].add(p.get("confidence") or "?")
    return [{**row, "from": ", ".join(sorted(row["from"]))}
            for _, row in sorted(rows.items())]


def stated_redelivery(marker: FailoverMarker) -> dict[str, int | None]:
    """Per group, the most records failover said its positions re-deliver (as the marker
    keeps them): each position's bound (`max_redelivered`), none for one placed exactly (or
    at the start, or clamped to the target's end); None when a position came with no bound
    (a checkpoint's or a timestamp's, say) — drctl promised no number there."""
    out: dict[str, int | None] = {}
    for (group, _, _), pos in sorted(applied_positions(marker).items()):
        bound = pos.get("max_redelivered")
        if bound is None and str(pos.get("confidence")) in (
                Confidence.EXACT, Confidence.START, Confidence.CLAMPED):
            bound = 0
        sofar = out.get(group, 0)
        out[group] = None if sofar is None or bound is None else sofar + int(bound)
    return out


def applied_positions(marker: FailoverMarker) -> dict[tuple[str, str, int], dict[str, Any]]:
    """(group, target topic, partition) -> what failover applied there (marker data)."""
    return {(group, topic, int(p)): pos
            for group, info in marker.groups.items()
            for topic, parts in (info.get("positions") or {}).items()
            for p, pos in parts.items()}


def audit_failover(ctx: OpsContext, marker: FailoverMarker,
                   deadline_s: float = 30.0) -> FailoverAudit:
    rep = ctx.rep
    applied = applied_positions(marker)
    audit = FailoverAudit()
    if not applied:
        audit.notes.append("No group positions were recorded at failover (none applied, or a "
                           "marker written by an older drctl): nothing to audit.")
        return audit
    ctx.notify(f"Auditing {len(applied)} group position(s) applied at failover")
    source = ctx.source
    # A position on a mirror came from its source topic; one on a failover topic (prefixed
    # names) from that topic's reverse copies of an earlier incident.
    source_topic_of = {t: (rep.source_topic_of(t) or rep.reverse_topic(t)) for _, t, _ in applied}
    commits = committed_offsets(source, sorted({g for g, _, _ in applied}))
    positions: dict[str, dict[TP, int]] = {}
    for group, topic, partition in applied:
        offset = commits.get(group, {}).get((source_topic_of[topic], partition))
        if offset is not None:
            positions.setdefault(group, {})[(source_topic_of[topic], partition)] = offset
    # A measurement, never applied: where the group was, even behind where it reads now on
    # the target (the rewind rule would call that position `kept` and leave it unaudited).
    report = translate_offsets(ctx, TranslateRequest(
        rep.source, rep.target, method=TranslateMethod.EXACT, positions=positions,
        target_ends=marker.ends_at_failover or None, allow_rewind=True,
        source_deadline_s=deadline_s))
    found = {(g.group, p.target_topic, p.partition): p for g in report.groups
             for p in g.partitions}
    for (group, topic, partition), pos in sorted(applied.items()):
        row = PositionAudit(group, topic, partition, int(pos["offset"]), pos["confidence"],
                            None, max_redelivered=pos.get("max_redelivered"))
        exact = found.get((group, topic, partition))
        if exact is None or exact.target_offset is None:
            row.note = "no commit on the source to compare with"
        elif exact.confidence == Confidence.CLAMPED:
            # It had read records that never reached the target (the gap): the best
            # position was the target's end at failover.
            row.exact = int(marker.failover_point.get(topic, {}).get(partition,
                                                                     exact.target_offset))
            row.note = "the group had read records the target lacked (the gap)"
        elif exact.confidence in (Confidence.EXACT, Confidence.START):
            row.exact = exact.target_offset
        else:
            row.note = f"not exact now ({exact.confidence}): {exact.note or ''}".strip()
        if row.exact is not None:
            row.redelivered = max(0, row.exact - row.applied)
            row.skipped = max(0, row.applied - row.exact)
        audit.positions.append(row)
    audit.positions += _not_placed(marker, commits, applied)
    return audit


def _not_placed(marker: FailoverMarker, commits: Mapping[str, Mapping[TP, int]],
                applied: Mapping[tuple[str, str, int], Any]) -> list[PositionAudit]:
    """Partitions a moved group had a commit for on the source that failover gave no
    position (no checkpoint or snapshot there, with the source gone): its consumers started
    at auto.offset.reset — a re-read of everything, or a skip of everything unread."""
    out = []
    moved = {g for g, info in marker.groups.items() if info.get("applied")}
    for group in sorted(moved):
        for (topic, partition), offset in sorted(commits.get(group, {}).items()):
            mirror = marker.topics.get(topic)
            if mirror is None or (group, mirror, partition) in applied:
                continue
            out.append(PositionAudit(
                group, mirror, partition, -1, "not placed", None, placed=False,
                note=f"committed at {offset} on {marker.source}, but failover placed no "
                     "position here: its consumers started at auto.offset.reset"))
    return out


def audit_incident(ctx: OpsContext, incident: str | None, deadline_s: float = 30.0
                   ) -> tuple[FailoverMarker, dict[str, Any]]:
    """`drctl audit`: the audit failback recorded, or — while the incident is open and the
    source answers — a new one, recorded in the marker (failback then reuses it). Each
    cluster it needs is retried for `deadline_s` before it is unreachable (exit 4)."""
    marker = the_open_incident(ctx, incident, "audit")
    if "failback:audit" in marker.steps:
        return marker, marker.steps["failback:audit"].result
    if marker.status != "open":
        raise UsageError(f"Incident {marker.incident} was closed without an audit, and the "
                         "groups' commits on the source have been replaced since.")
    # The groups' commits are read there.
    describe_with_retry(ctx.source, ctx.config.retry.with_deadline(deadline_s),
                        notify=ctx.notify)
    found = audit_failover(ctx, marker, deadline_s).as_dict()
    marker.record("failback:audit", found)
    ctx.store.save(marker)
    return marker, found

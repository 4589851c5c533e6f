"""What MirrorMaker 2's own checkpoints would have given each moved group, measured against
the exact positions (drctl's exact translation, or failback's audit with the region back).

MirrorMaker 2 checkpoints a group only on a topic its flow copies into the target: a
region's local topic seen as its copy on the other region. A group's position on a copy it
read (`secondary.orders` on primary) has no offset syncs the other way and so no checkpoint
at all (KAFKA-12635; KIP-1098's reverse checkpoints are not in Kafka): its consumers would
start at `auto.offset.reset` — `earliest` re-reads the partition from its start, `latest`
skips what is unread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drctl.context import OpsContext
from drctl.kafka.checkpoints import read_checkpoints
from drctl.kafka.topics import TP
from drctl.translate.model import Confidence, TranslationReport

# (group, target topic, partition)
Position = tuple[str, str, int]


def checkpoint_positions(ctx: OpsContext, report: TranslationReport
                         ) -> dict[str, dict[str, dict[str, int | None]]]:
    """Per group, target topic and partition of `report`: the downstream offset of
    MirrorMaker 2's latest checkpoint on the target of `ctx`'s flow, None where it has none.
    Read once, when the positions are placed (the marker keeps them)."""
    topic = ctx.require_kind().checkpoints_topic(ctx.rep)
    try:
        found = read_checkpoints(ctx.target, topic) if topic else {}
    except Exception as exc:  # noqa: BLE001 - a comparison only: unknown, and said so
        ctx.notify(f"MirrorMaker 2's checkpoints in {topic} not read: {exc}")
        found = {}
    out: dict[str, dict[str, dict[str, int | None]]] = {}
    for g in report.groups:
        for p in g.partitions:
            if p.source_offset < 0:  # placed at the failover point: no position to compare
                continue
            cp = found.get((g.group, p.target_topic, p.partition))
            out.setdefault(g.group, {}).setdefault(p.target_topic, {})[str(p.partition)] = (
                None if cp is None else cp.downstream_offset)
    return out


def target_marks(ctx: OpsContext, report: TranslationReport,
                 ends: Mapping[str, Mapping[int, int]] | None = None
                 ) -> dict[TP, tuple[int, int]]:
    """The target's (low, end) of every partition `report` placed, each end no later than
    `ends` (the failover point) says."""
    from drctl.kafka.offsets import watermarks

    tps = sorted({(p.target_topic, p.partition) for p in report.partitions
                  if p.target_offset is not None})
    marks = watermarks(ctx.target.admin(), tps) if tps else {}
    return {(t, p): (low, min(end, (ends or {}).get(t, {}).get(p, end)))
            for (t, p), (low, end) in marks.items()}


def exact_positions(report: TranslationReport) -> dict[Position, int]:
    """The positions of `report` that are exact (the truth to compare with)."""
    return {(p.group, p.target_topic, p.partition): p.target_offset for p in report.partitions
            if p.target_offset is not None and p.confidence in (Confidence.EXACT,
                                                                 Confidence.START)}


def compare(truth: Mapping[Position, int],
            checkpoints: Mapping[str, Mapping[str, Mapping[str, int | None]]],
            marks: Mapping[TP, tuple[int, int]]) -> dict[str, Any]:
    """Per group: the records MirrorMaker 2's checkpoints would have re-delivered and
    skipped against `truth`, and the partitions it has no checkpoint for with what each
    `auto.offset.reset` does there (`marks`: the target's (low, end) then)."""
    groups: dict[str, dict[str, Any]] = {}
    for (group, topic, partition), exact in sorted(truth.items()):
        cp = checkpoints.get(group, {}).get(topic, {}).get(str(partition), -2)
        if cp == -2:
            continue  # not a position the checkpoints were read for
        row = groups.setdefault(group, {"redelivered": 0, "skipped": 0, "positions": 0,
                                        "no_checkpoint": [], "earliest_redelivers": 0,
                                        "latest_skips": 0})
        row["positions"] += 1
        if cp is None:
            low, end = marks.get((topic, partition), (0, exact))
            row["no_checkpoint"].append(f"{topic}[{partition}]")
            row["earliest_redelivers"] += max(0, exact - low)
            row["latest_skips"] += max(0, end - exact)
            continue
        row["redelivered"] += max(0, exact - int(cp))
        row["skipped"] += max(0, int(cp) - exact)
    totals = {k: sum(r[k] for r in groups.values())
              for k in ("redelivered", "skipped", "earliest_redelivers", "latest_skips")}
    totals["no_checkpoint"] = sum(len(r["no_checkpoint"]) for r in groups.values())
    return {"groups": groups, "totals": totals}


def compare_with_checkpoints(report: TranslationReport,
                             checkpoints: Mapping[str, Mapping[str, Mapping[str, int | None]]],
                             marks: Mapping[TP, tuple[int, int]] | None = None
                             ) -> dict[str, Any] | None:
    """`compare` against the report's exact positions; None when none is exact (the region
    was down: failback measures it against the audit)."""
    truth = exact_positions(report)
    if not truth:
        return None
    return compare(truth, checkpoints, marks or {})

"""Reconcile the gap: copy `safe` records into the failover topics (never twice), quarantine
`conflict` records to a topic and a file.

A mode is a `ReconcileMode`; `reconcile(mode, ...)` is the one entry point, so a new mode is a
new member and a new branch here (plus its block in the failback report templates).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from drctl.context import OpsContext
from drctl.fingerprint import RECONCILED_HEADER
from drctl.gap.quarantine import produce_to_quarantine
from drctl.kafka.copy import CopiedRecord, RerunTag, copy_records
from drctl.kafka.offsets import offset_runs, watermarks
from drctl.kafka.records import Record, header_values
from drctl.ops.one_way.gap_step import GapOutcome
from drctl.ops.one_way.reverse import start_points
from drctl.state import FailoverMarker

QUARANTINE_SUFFIX = ".drctl-quarantine"


class ReconcileMode(StrEnum):
    """What failback does with the gap's records."""

    COPY_SAFE = "copy-safe"
    QUARANTINE = "quarantine"
    NONE = "none"

    @property
    def meaning(self) -> str:
        """One line for `--help`."""
        return _MODE_MEANINGS[self]


_MODE_MEANINGS = {
    ReconcileMode.COPY_SAFE: "copy safe records to the failover topics and quarantine the rest",
    ReconcileMode.QUARANTINE: "quarantine every gap record",
    ReconcileMode.NONE: "leave the gap alone",
}


@dataclass(frozen=True)
class ReconcileOutcome:
    mode: ReconcileMode
    copy_safe: dict[str, int] | None = None  # {"copied", "skipped"}
    quarantine: dict[str, Any] | None = None  # {"file", "topics", "count"}
    # Source offsets of the gap records not copied ({"quarantined"|"left": runs}): where
    # switch-back (ops/one_way/switchback.py) knows they are.
    not_copied: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """As the marker records it and the failback report reads it: a key per part done."""
        data: dict[str, Any] = {"mode": self.mode.value}
        if self.copy_safe is not None:
            data["copy_safe"] = self.copy_safe
        if self.quarantine is not None:
            data["quarantine"] = self.quarantine
        data["not_copied"] = self.not_copied
        return data


def reconcile(mode: ReconcileMode, ctx: OpsContext, marker: FailoverMarker, gap: GapOutcome,
              out_dir: Path) -> ReconcileOutcome:
    """Apply `mode` to the gap; a re-run of the same incident copies nothing twice."""
    if mode == ReconcileMode.COPY_SAFE:
        copied = copy_safe_records(ctx, marker, gap.safe)
        held = gap.conflict + gap.unkeyed + gap.unclassified  # copied only when proven safe
        return ReconcileOutcome(mode, copy_safe=copied, quarantine=quarantine_records(
            ctx, marker, held, out_dir), not_copied={"quarantined": not_copied_offsets(held)})
    everything = gap.safe + gap.conflict + gap.unkeyed + gap.unclassified
    if mode == ReconcileMode.QUARANTINE:
        return ReconcileOutcome(mode, quarantine=quarantine_records(
            ctx, marker, everything, out_dir),
            not_copied={"quarantined": not_copied_offsets(everything)})
    return ReconcileOutcome(mode, not_copied={"left": not_copied_offsets(everything)})


def not_copied_offsets(records: Iterable[Record]) -> dict[str, dict[str, list[list[int]]]]:
    """Source offsets of gap records as runs per topic and partition (for the marker)."""
    by_tp: dict[str, dict[str, list[int]]] = {}
    for rec in records:
        by_tp.setdefault(rec.topic, {}).setdefault(str(rec.partition), []).append(rec.offset)
    return {t: {p: offset_runs(offs) for p, offs in parts.items()}
            for t, parts in by_tp.items()}


def reconcile_tag(marker: FailoverMarker, rec: CopiedRecord) -> bytes:
    """What a copied record carries: which incident copied which source record."""
    return f"{marker.incident}:{rec.topic}:{rec.partition}:{rec.offset}".encode()


def copy_safe_records(ctx: OpsContext, marker: FailoverMarker,
                      records: Sequence[Record]) -> dict[str, int]:
    """Copy records (source topic/partition/offset) into their failover topics, preserving
    partition, key, value, headers and timestamp; records already copied by an earlier run of
    this incident are skipped."""
    rep, target = ctx.rep, ctx.target
    starts = start_points(rep, marker)
    tps = sorted({(rep.failover_topic(r.topic), r.partition) for r in records})
    if not tps:
        return {"copied": 0, "skipped": 0}
    ends = watermarks(target.admin(), tps)
    done = header_values(target, {tp: (starts.get(tp[0], {}).get(tp[1], 0), ends[tp][1])
                                  for tp in tps}, RECONCILED_HEADER)
    tag = RerunTag(RECONCILED_HEADER, lambda rec: reconcile_tag(marker, rec))
    sent = copy_records(target, records, lambda rec: (rep.failover_topic(rec.topic),
                                                      rec.partition),
                        topics=sorted({t for t, _ in tps}), tag=tag, done=done,
                        what="gap records",
                        rerun_hint="Run failback again: copied records are not copied twice.")
    copied = sum(sent.values())
    return {"copied": copied, "skipped": len(records) - copied}


def quarantine_records(ctx: OpsContext, marker: FailoverMarker, records: Sequence[Record],
                       out_dir: Path) -> dict[str, Any]:
    """Conflicting records go to `<topic>.drctl-quarantine` (partition 0) on the target and to
    a JSON Lines file; neither is read by applications. Tagged like copies, so a re-run
    quarantines nothing twice."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{marker.incident}-quarantine.jsonl"
    with path.open("w") as fh:
        for rec in records:
            fh.write(json.dumps({
                "topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
                "timestamp_ms": rec.timestamp_ms,
                "key": None if rec.key is None else base64.b64encode(rec.key).decode(),
                "value": None if rec.value is None else base64.b64encode(rec.value).decode(),
                "headers": [[k, None if v is None else base64.b64encode(v).decode()]
                            for k, v in rec.headers],
            }) + "\n")
    if not records:
        return {"file": str(path), "topics": [], "count": 0}
    topics = sorted({rec.topic + QUARANTINE_SUFFIX for rec in records})
    # One partition per quarantine topic: the JSON Lines file keeps each record's origin.
    produce_to_quarantine(ctx.target, records,
                          lambda rec: (rec.topic + QUARANTINE_SUFFIX, 0),
                          dict.fromkeys(topics, 1),
                          tag=RerunTag(RECONCILED_HEADER, lambda rec: reconcile_tag(marker, rec)))
    return {"file": str(path), "topics": topics, "count": len(records)}

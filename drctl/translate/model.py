"""What a translation run decides, as plain data (the JSON schema of `translate-offsets`).

JSON schema (stable; fields are only ever added):
    {
      "from": str, "to": str, "method": str (requested), "apply": bool,
      "source_reachable": bool, "notes": [str],
      "groups": [{
        "group": str, "state": str (target group state), "active": bool,
        "applied": bool, "skipped": str | null (why nothing was committed),
        "partitions": [{
          "topic": str, "partition": int, "target_topic": str,
          "source_offset": int, "method": str, "target_offset": int | null,
          "current_target_offset": int | null, "confidence": str,
          "redelivered": int | null, "missing": int | null,
          "applied": bool, "note": str | null,
          "proof": {"last_read": int, "copy": int, "fingerprint": str}
                   | {"last_read": int | null, "copy": int | null, "first_unread": int | null,
                      "first_unread_copy": int | null} (placed between surviving copies)
                   | null,
          "age_s": float | null, "max_redelivered": int | null
        }]
      }],
      "summary": {"groups": int, "applied": int, "skipped": int, "partitions": int,
                  "exact": int, "redelivered": int, "missing": int,
                  "unplaced": int (positions with no target_offset)}
    }
confidence: one of `Confidence` (below), some with a count (`ambiguous:N`, `checkpoint-lag:N`,
`walked-back:N`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any


class Confidence(StrEnum):
    """How sure a translated position is (the `confidence` of a partition's result). Some
    carry a count: `Confidence.AMBIGUOUS.of(3)` is "ambiguous:3"."""

    EXACT = "exact"  # the copy of the last record read was found: nothing skipped or twice
    START = "start"  # nothing consumed that still exists: the target's start
    AMBIGUOUS = "ambiguous"  # :N target records share the boundary timestamp
    CHECKPOINT = "checkpoint"  # MirrorMaker 2's checkpoint, not measured
    CHECKPOINT_LAG = "checkpoint-lag"  # :N records re-delivered, measured against exact
    CLAMPED = "clamped"  # ahead of replication: the target's end, `missing` counted
    UNVERIFIED = "unverified"  # matched, but the next target record was already consumed
    SCAN_BOUND = "scan-bound"  # no match within the scan: positioned early, no skip
    # :N the last record read is not on the target as it was; placed before N target records
    # that may be copies of read ones (at most N re-delivered)
    WALKED_BACK = "walked-back"
    UNPROVEN = "unproven"  # not placed: no position between surviving copies proven
    SNAPSHOT = "snapshot"  # drctl guard's exact position, `age_s` old
    NO_SNAPSHOT = "no-snapshot"
    NO_CHECKPOINT = "no-checkpoint"
    MISSING_TOPIC = "missing-topic"
    KEPT = "kept"  # the group already stood further on: not moved back
    REWOUND = "rewound"  # switch-back: moved back to a gap record it had not read

    def of(self, count: int) -> str:
        return f"{self.value}:{count}"


class TranslateMethod(StrEnum):
    """How positions are translated; `auto` picks one by replication kind and reachability."""

    AUTO = "auto"
    EXACT = "exact"
    TIMESTAMP = "timestamp"
    CHECKPOINT = "checkpoint"
    IDENTITY = "identity"
    SNAPSHOT = "snapshot"


@dataclass
class PartitionResult:
    group: str
    topic: str
    partition: int
    target_topic: str
    source_offset: int
    method: str
    target_offset: int | None
    confidence: str
    redelivered: int | None = None
    missing: int | None = None
    current_target_offset: int | None = None
    applied: bool = False
    note: str | None = None
    # Exact matches: the last record the group read (offset on the cluster it leaves) and
    # that record's copy (offset on the cluster it moves to).
    proof: dict[str, Any] | None = None  # + "fingerprint": hex digest of that record
    # snapshot method: seconds since guard saw the position; the most records it can re-read
    age_s: float | None = None
    max_redelivered: int | None = None

    def as_dict(self) -> dict[str, Any]:
        # A shallow copy: asdict() deep-copies every value, seconds at 160,000 positions.
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "group"}
        if self.proof is not None:
            data["proof"] = dict(self.proof)
        return data


@dataclass
class GroupResult:
    group: str
    state: str = "UNKNOWN"
    active: bool = False
    applied: bool = False
    skipped: str | None = None
    partitions: list[PartitionResult] = field(default_factory=list)


@dataclass
class TranslationReport:
    source: str
    target: str
    method: str
    apply: bool
    source_reachable: bool
    groups: list[GroupResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def partitions(self) -> list[PartitionResult]:
        return [p for g in self.groups for p in g.partitions]

    def unplaced(self) -> list[PartitionResult]:
        """Positions given no target offset: their groups stay where they were there."""
        return [p for p in self.partitions if p.target_offset is None]

    def summary(self) -> dict[str, int]:
        parts = self.partitions
        return {
            "groups": len(self.groups),
            "applied": sum(g.applied for g in self.groups),
            "skipped": sum(g.skipped is not None for g in self.groups),
            "partitions": len(parts),
            "exact": sum(p.confidence == Confidence.EXACT for p in parts),
            "redelivered": sum(p.redelivered or 0 for p in parts),
            "missing": sum(p.missing or 0 for p in parts),
            "unplaced": sum(p.target_offset is None for p in parts),
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "target": self.target, "method": self.method,
            "dry_run": not self.apply,
            "source_reachable": self.source_reachable, "notes": self.notes,
            "groups": [{"group": g.group, "state": g.state, "active": g.active,
                        "applied": g.applied, "skipped": g.skipped,
                        "partitions": [p.as_dict() for p in g.partitions]}
                       for g in self.groups],
            "summary": self.summary(),
        }

    def runbook_summary(self) -> dict[str, Any]:
        """The result of the `translate-offsets` runbook action: the JSON plus the groups an
        --yes run skipped and the positions no method placed ("group topic[partition]")."""
        data = self.as_dict()
        data["not_applied"] = [g.group for g in self.groups if self.apply and g.skipped]
        data["unplaced"] = [f"{p.group} {p.target_topic}[{p.partition}]"
                            for p in self.unplaced()]
        return data

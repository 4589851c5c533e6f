"""What `drctl check` finds: one finding per object that would make a failover go wrong,
with the difference seen, the risk in one line, and the fix."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from drctl.errors import ExitStatus


class Severity(StrEnum):
    RISK = "risk"  # a failover would go wrong or lose data: exit 3
    NOTE = "note"  # what a setting costs, nothing to fix to be ready: exit 0
    BLIND = "blind"  # drctl could not look (a cluster or Connect did not answer): exit 4


class Area(StrEnum):
    """The checks, in the order they are shown."""

    SCOPE = "scope"  # an application's edge: groups reading topics on both sides
    TOPICS = "topics"
    SCHEMAS = "schemas"  # schema ids in the records: the same schema on both registries
    ACLS = "acls"
    POSITIONS = "positions"
    TRANSACTIONS = "transactions"
    REPLICATION = "replication"
    GUARD = "guard"
    RPO = "rpo"


@dataclass(frozen=True)
class Finding:
    area: Area
    object: str  # e.g. "topic orders", "User:app WRITE on topic orders"
    difference: str  # what was seen, e.g. "min.insync.replicas 2 on primary, 1 on secondary"
    risk: str  # what goes wrong in a failover, in one line
    fix: str  # what to do, in one line (a command or a setting)
    severity: Severity = Severity.RISK

    def as_dict(self) -> dict[str, Any]:
        # Every field is text or an enum of text: no deep copy (dataclasses.asdict) needed,
        # and a check of 10,000 groups has as many findings.
        return {f.name: str(getattr(self, f.name)) for f in fields(self)}


@dataclass
class Readiness:
    """One flow's readiness: every finding, the RPO now, and what each area looked at."""

    source: str
    target: str
    findings: list[Finding] = field(default_factory=list)
    # Per area, what was looked at (e.g. {"topics": 12}): a check of nothing is visible.
    checked: dict[str, int] = field(default_factory=dict)
    rpo: dict[str, Any] | None = None
    # The replicator's lag per source topic as the kind reads it (None: not read), for metrics.
    lag: list[dict[str, Any]] | None = None
    seconds: float = 0.0
    # With --app: what the application resolves to (topics, groups, what they read beyond).
    scope: dict[str, Any] | None = None
    # Schema-id parity (registry/parity.py `Parity.as_dict`); None: no registry configured.
    schemas: dict[str, Any] | None = None

    def add(self, *findings: Finding) -> None:
        self.findings.extend(findings)

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def by_area(self) -> dict[str, int]:
        """Findings that need action (risks and blind spots) per area, every area listed."""
        counts = {a.value: 0 for a in Area}
        for f in self.findings:
            if f.severity != Severity.NOTE:
                counts[f.area.value] += 1
        return counts

    @property
    def exit_status(self) -> ExitStatus:
        """4 when drctl could not look somewhere, else 3 with a risk, else 0."""
        if self.count(Severity.BLIND):
            return ExitStatus.UNREACHABLE
        if self.count(Severity.RISK):
            return ExitStatus.CHECK_FAILED
        return ExitStatus.SUCCESS

    @property
    def verdict(self) -> str:
        return {ExitStatus.SUCCESS: "ready", ExitStatus.CHECK_FAILED: "not ready",
                ExitStatus.UNREACHABLE: "unknown"}[self.exit_status]

    def as_dict(self) -> dict[str, Any]:
        order = list(Area)
        ordered = sorted(self.findings, key=lambda f: (order.index(f.area), f.severity != "risk",
                                                       f.object))
        return {"source": self.source, "target": self.target, "verdict": self.verdict,
                **({"scope": self.scope} if self.scope is not None else {}),
                **({"schemas": self.schemas} if self.schemas is not None else {}),
                "exit_status": int(self.exit_status), "seconds": round(self.seconds, 2),
                "checked": self.checked, "findings_by_area": self.by_area(),
                "risks": self.count(Severity.RISK), "blind": self.count(Severity.BLIND),
                "notes": self.count(Severity.NOTE), "rpo": self.rpo,
                "findings": [f.as_dict() for f in ordered]}

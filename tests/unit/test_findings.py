"""The readiness verdict (drctl/findings.py): blind beats risk beats ready."""

from __future__ import annotations

from drctl.errors import ExitStatus
from drctl.findings import Area, Finding, Readiness, Severity


def finding(severity: Severity, area: Area = Area.TOPICS) -> Finding:
    return Finding(area, "o", "d", "r", "f", severity)


def test_verdicts_and_counts_by_area() -> None:
    r = Readiness("primary", "secondary")
    r.add(finding(Severity.NOTE))
    assert (r.exit_status, r.verdict) == (ExitStatus.SUCCESS, "ready")
    r.add(finding(Severity.RISK, Area.ACLS))
    assert (r.exit_status, r.verdict) == (ExitStatus.CHECK_FAILED, "not ready")
    r.add(finding(Severity.BLIND))
    assert (r.exit_status, r.verdict) == (ExitStatus.UNREACHABLE, "unknown")
    data = r.as_dict()
    assert data["findings_by_area"]["acls"] == 1 and data["findings_by_area"]["topics"] == 1
    assert (data["risks"], data["blind"], data["notes"]) == (1, 1, 1)
    assert [f["area"] for f in data["findings"]] == ["topics", "topics", "acls"]

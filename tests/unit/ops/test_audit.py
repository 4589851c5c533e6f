"""The audit of a failback, per group (drctl/ops/steps/audit.py)."""

from __future__ import annotations

from typing import Any

from drctl.ops.one_way.failback import FailbackResult
from tests.unit.ops.support import _marker_with_groups


def test_the_audit_per_group_sums_its_partitions_and_a_missing_bound_is_none() -> None:
    from drctl.ops.steps.audit import audit_by_group

    def pos(group: str, partition: int, confidence: str, exact: int | None, redelivered: int,
            skipped: int, bound: int | None) -> dict[str, Any]:
        return {"group": group, "topic": "t", "partition": partition, "applied": 10,
                "confidence": confidence, "exact": exact, "redelivered": redelivered,
                "skipped": skipped, "max_redelivered": bound, "note": None}

    audit = {"totals": {}, "positions": [
        pos("b", 0, "snapshot", 12, 2, 0, 5), pos("b", 1, "checkpoint", 40, 30, 0, 90),
        pos("a", 0, "checkpoint", None, 0, 0, None), pos("a", 1, "snapshot", 9, 0, 1, 3)]}
    assert audit_by_group(audit) == [
        {"group": "a", "positions": 2, "audited": 1, "redelivered": 0, "skipped": 1,
         "stated_bound": None, "from": "checkpoint, snapshot"},
        {"group": "b", "positions": 2, "audited": 2, "redelivered": 32, "skipped": 0,
         "stated_bound": 95, "from": "checkpoint, snapshot"}]
    assert audit_by_group({}) == []
    result = FailbackResult(_marker_with_groups(), resumed=False)
    result.audit = audit
    assert result.runbook_summary()["audit_groups"] == audit_by_group(audit)

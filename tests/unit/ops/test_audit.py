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


def test_what_failover_and_failback_state_they_re_deliver_per_group() -> None:
    """What a drill's ledger.verify holds each group to (issue 58, finding 9): failover's
    bound per position (none for an exact one; None where it stated none), and failback's
    switch-back, every run's from the marker."""
    from drctl.ops.one_way.failover import FailoverResult
    from drctl.ops.one_way.switchback import GroupSwitchBack, PartitionSwitchBack, SwitchBack
    from drctl.ops.steps.audit import stated_redelivery

    marker = _marker_with_groups()

    def at(confidence: str, bound: int | None) -> dict[str, Any]:
        return {"offset": 5, "confidence": confidence, "max_redelivered": bound}

    marker.groups["g1"]["positions"] = {"t": {"0": at("snapshot", 4), "1": at("exact", None)}}
    marker.groups["g2"]["positions"] = {"t": {"0": at("snapshot", 2),
                                              "1": at("checkpoint", None)}}
    assert stated_redelivery(marker) == {"g1": 4, "g2": None}
    assert FailoverResult(marker, dry_run=False).runbook_summary()["redelivery_bound"] == \
        {"g1": 4, "g2": None}

    def moved(group: str, redelivered: int) -> GroupSwitchBack:
        return GroupSwitchBack(group, "Empty", True, None, [PartitionSwitchBack(
            "t", 0, 10, 12, 10, "rewound", redelivered=redelivered)])
    waiting = GroupSwitchBack("g3", "Stable", False, "consumers still active", [])
    result = FailbackResult(marker, resumed=False)
    result.switch_back = SwitchBack([moved("g1", 7), waiting], applied=True)
    assert result.runbook_summary()["redelivery_bound"] == {"g1": 7}  # a dry run's own
    # A run that moved g2 only (g1 moved by an earlier run): the marker keeps both.
    marker.record("failback:translate-offsets",
                  {"redelivered_by_group": {"g1": 7, "g2": 3}, "moved_groups": ["g1", "g2"]})
    result.switch_back = SwitchBack([moved("g2", 3)], applied=True)
    assert result.runbook_summary()["redelivery_bound"] == {"g1": 7, "g2": 3}

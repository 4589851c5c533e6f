"""`drctl status` for an active-active pair: each flow as `drctl status` reads one (lag in
records and seconds, the RPO now, protection, its connectors), the open region failovers,
and where each region's applications run now."""

from __future__ import annotations

from typing import Any

from drctl.errors import ExitStatus
from drctl.ops.active_active.failover import REGION_STEP
from drctl.ops.active_active.pair import Pair
from drctl.ops.steps.flow_status import collect_status, status_verdict
from drctl.progress import Notify

# The worse verdict first.
_ORDER = (ExitStatus.UNREACHABLE, ExitStatus.USAGE, ExitStatus.CHECK_FAILED,
          ExitStatus.SUCCESS)


def collect_pair_status(pair: Pair, notify: Notify, deadline_s: float) -> dict[str, Any]:
    """Both flows read as one flow's status is (drctl/ops/steps/flow_status.py), side by side."""
    flows: list[dict[str, Any]] = []
    unknown: dict[str, str] = {}  # region -> why its incidents cannot be read
    seen: dict[str, dict[str, Any]] = {}
    first: dict[str, Any] = {}
    verdicts: list[tuple[ExitStatus, str | None]] = []
    for region in pair.regions:
        with pair.context(region, notify, deadline_s) as ctx:
            one = collect_status(ctx, deadline_s)
        # The other flow's copies on a region are live, not a retired reverse flow's.
        one["replication"].pop("reverse_copies", None)
        verdicts.append(status_verdict(one))
        flows.append(one["replication"])
        if one["replication"].get("markers_unreadable"):
            # A region's failover is recorded on the other region, its flow's target.
            unknown[region] = one["replication"]["markers_unreadable"]
        for m in one["open_failovers"]:
            seen.setdefault(m["incident"], m)
        first = first or one
    regions: dict[str, Any] = {}
    for region in pair.regions:
        other = pair.other(region)
        incident = next((m for m in seen.values() if m["source"] == region
                         and m["target"] == other and REGION_STEP in m.get("steps", ())),
                        None)
        if incident:
            regions[region] = {"applications_on": other, "incident": incident["incident"],
                               "phase": incident["phase"],
                               "next_command": f"drctl failback --region {region}"}
        elif region in unknown:
            regions[region] = {"applications_on": "unknown", "incident": None,
                               "why": unknown[region]}
        else:
            regions[region] = {"applications_on": region, "incident": None}
    verdict, why = min(verdicts, key=lambda v: _ORDER.index(v[0]))
    return {"topology": "active-active", "clusters": first.get("clusters", {}),
            "flows": flows, "regions": regions, "open_failovers": list(seen.values()),
            "markers_from": first.get("markers_from", ""), "groups": first.get("groups", {}),
            "verdict": {"exit_status": int(verdict), "why": why}}

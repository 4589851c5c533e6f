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


def region_next_command(region: str, phase: str) -> str:
    """What to run next for a region's incident in `phase`: a failover not finished is run
    again, one done is failed back (never the one-way `failback --incident`)."""
    if phase == "failing-over":
        return f"drctl failover --region {region}"
    return f"drctl failback --region {region}"


def collect_pair_status(pair: Pair, notify: Notify, deadline_s: float) -> dict[str, Any]:
    """Both flows read as one flow's status is (drctl/ops/steps/flow_status.py), side by side.
    A region's incident is recorded on the other region: with the failed region down, the
    flow into it cannot be read, yet the incident is known — and with it where both regions'
    applications run (they cannot run on each other)."""
    flows: list[dict[str, Any]] = []
    unknown: dict[str, str] = {}  # region -> why its incidents cannot be read
    seen: dict[str, dict[str, Any]] = {}
    first: dict[str, Any] = {}
    readings: dict[str, dict[str, Any]] = {}
    for region in pair.regions:
        with pair.context(region, notify, deadline_s) as ctx:
            one = collect_status(ctx, deadline_s)
        # The other flow's copies on a region are live, not a retired reverse flow's.
        one["replication"].pop("reverse_copies", None)
        readings[region] = one
        flows.append(one["replication"])
        if one["replication"].get("markers_unreadable"):
            # A region's failover is recorded on the other region, its flow's target.
            unknown[region] = one["replication"]["markers_unreadable"]
        for m in one["open_failovers"]:
            if REGION_STEP in m.get("steps", ()):
                m["next_command"] = region_next_command(m["source"], m["phase"])
            seen.setdefault(m["incident"], m)
        first = first or one
    regions: dict[str, Any] = {}
    failed_over = {m["source"] for m in seen.values() if REGION_STEP in m.get("steps", ())}
    for region in pair.regions:
        other = pair.other(region)
        incident = next((m for m in seen.values() if m["source"] == region
                         and m["target"] == other and REGION_STEP in m.get("steps", ())),
                        None)
        if incident:
            regions[region] = {"applications_on": other, "incident": incident["incident"],
                               "phase": incident["phase"],
                               "next_command": incident["next_command"]}
        elif region in unknown and other not in failed_over:
            regions[region] = {"applications_on": "unknown", "incident": None,
                               "why": unknown[region]}
        else:
            # Read, or known: the other region runs here, so this one runs at home.
            regions[region] = {"applications_on": region, "incident": None}
    verdicts = []
    for region, one in readings.items():
        if region in unknown and pair.other(region) in failed_over:
            # The flow into a failed region: its incidents are known from the other side.
            one = {**one, "replication": {**one["replication"], "markers_unreadable": None}}
        verdicts.append(status_verdict(one))
    verdict, why = min(verdicts, key=lambda v: _ORDER.index(v[0]))
    if verdict != ExitStatus.UNREACHABLE and seen:
        nexts = "; ".join(f"{m['incident']} ({m['phase']}): `{m['next_command']}`"
                          for m in seen.values())
        verdict, why = ExitStatus.CHECK_FAILED, f"{len(seen)} open incident(s): {nexts}."
    return {"topology": "active-active", "clusters": first.get("clusters", {}),
            "flows": flows, "regions": regions, "open_failovers": list(seen.values()),
            "markers_from": first.get("markers_from", ""), "groups": first.get("groups", {}),
            "verdict": {"exit_status": int(verdict), "why": why}}

"""`drctl check` for an active-active pair: readiness/check.py on each flow (would a failover
of that flow's source region work now), with each region's aggregate subscriptions checked
beside (ops/active_active/subscriptions.py), and each group whose position on a copy it
reads guard never kept (a failover of its region with it down would leave it behind). The
other flow's copies on a region are live copies, not a retired reverse flow's: no note about
them."""

from __future__ import annotations

from drctl.errors import DrctlError
from drctl.findings import Area, Finding, Readiness, Severity
from drctl.ops.active_active.pair import Pair
from drctl.ops.active_active.subscriptions import subscription_findings
from drctl.progress import Notify
from drctl.readiness.check import CheckOptions, run_check
from drctl.translate.snapshots import read_snapshots


def check_pair(pair: Pair, opts: CheckOptions, notify: Notify) -> list[Readiness]:
    """One readiness per flow (its source region first), the region's subscriptions in it."""
    results = []
    for region in pair.regions:
        with pair.context(region, notify, opts.deadline_s) as ctx:
            result = run_check(ctx, opts)
            result.findings = [f for f in result.findings
                               if not f.difference.startswith("reverse copies of")]
            try:
                # Guard's snapshots of the region's groups live on the other region.
                kept = read_snapshots(ctx.target, ctx.config.state.snapshots_topic)
                found, looked = subscription_findings(pair, region, ctx.source, opts.groups,
                                                      snapshots=kept.keys())
                result.add(*found)
                result.checked["subscriptions"] = looked
            except DrctlError as exc:
                result.add(Finding(Area.POSITIONS, f"groups on {region}",
                                   f"not read: {exc.message}",
                                   "aggregate subscriptions unknown",
                                   exc.hint or "check the cluster", Severity.BLIND))
        results.append(result)
    return results

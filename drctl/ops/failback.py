"""`drctl failback`: preflight, gap analysis with order check, reconcile, reverse replication
from the failover point, group offsets back, close the marker.

Like failover, each step records itself in the marker; a re-run continues the incident and
never applies a step twice (reconcile copies are tagged, so even a crash in the middle of
copying copies nothing twice).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drctl.config import Config
from drctl.errors import CheckFailed, Unreachable, UsageError
from drctl.faults import crash_point
from drctl.kafka.clients import describe_with_retry
from drctl.kafka.records import Record
from drctl.ops.context import OpsContext
from drctl.ops.reconcile import copy_safe_records, quarantine_records
from drctl.ops.reverse import start_reverse_replication, wait_reverse_caught_up
from drctl.progress import Notify
from drctl.state import FailoverMarker
from drctl.translate.engine import TranslateRequest, translate_offsets
from drctl.translate.model import TranslationReport

RECONCILE_MODES = ("copy-safe", "quarantine", "none")


@dataclass
class GapOutcome:
    """What the gap analysis found, classified (DESIGN section 5)."""

    safe: list[Record] = field(default_factory=list)
    conflict: list[Record] = field(default_factory=list)
    unkeyed: list[Record] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.safe) + len(self.conflict) + len(self.unkeyed)


GapFinder = Callable[[Config, FailoverMarker, Notify], GapOutcome]


@dataclass(frozen=True)
class FailbackOptions:
    reconcile: str = "copy-safe"
    check_order: bool = True
    incident: str | None = None
    groups: str = ".*"
    dry_run: bool = False
    deadline_s: float = 30.0
    catch_up_deadline_s: float = 300.0


@dataclass
class FailbackResult:
    marker: FailoverMarker
    resumed: bool
    gap: dict[str, Any] = field(default_factory=dict)
    reconcile: dict[str, Any] = field(default_factory=dict)
    reverse: dict[str, Any] = field(default_factory=dict)
    translation: dict[str, Any] | None = None
    translation_report: TranslationReport | None = None
    plan: list[dict[str, Any]] = field(default_factory=list)


def _open_marker(ctx: OpsContext, incident: str | None) -> FailoverMarker:
    config = ctx.config
    rep = config.require_replication()
    store = ctx.markers(rep.target)
    if incident:
        marker = store.get(incident)
        if marker.status != "open":
            raise UsageError(f"Incident {incident} is already closed.")
        return marker
    opened = store.open_markers(rep.source, rep.target)
    if not opened:
        raise UsageError(
            f"No open failover marker for {rep.source} -> {rep.target} (looked in "
            f"{config.state.dir} and topic {config.state.topic} on {rep.target}).",
            "Failback needs the failover point a failover recorded; pass --incident, or run "
            "gap-analysis with explicit bounds instead.")
    return opened[-1]


def preflight(ctx: OpsContext, marker: FailoverMarker, opts: FailbackOptions) -> None:
    config = ctx.config
    rep = config.require_replication()
    for name in (rep.target, rep.source):
        clients = ctx.clients(name)
        try:
            describe_with_retry(clients, config.retry.with_deadline(opts.deadline_s))
        except Unreachable as exc:
            raise Unreachable(f"{exc.message} Failback needs both clusters.",
                              f"Bring '{name}' back first; the marker {marker.incident} waits.") \
                from None
    stopped = ctx.require_kind().forward_stopped(rep, frozenset(marker.stopped_connectors))
    if stopped is False:
        raise CheckFailed(
            f"Forward replication {rep.source} -> {rep.target} is running again: it would copy "
            "stale source data behind the post-failover writes.",
            "Stop its connectors (drctl marked the stop as "
            f"'{marker.replication_stop}'), then run failback again.")
    if stopped is None and marker.replication_stop == "pending":
        raise CheckFailed("Forward replication was never confirmed stopped (pending) and "
                          "Kafka Connect cannot be asked now.",
                          "Confirm the replicator is stopped, fix replication.connect, "
                          "and run again.")


def run_failback(config: Config, opts: FailbackOptions, gap_finder: GapFinder, *,
                 notify: Notify = lambda _: None) -> FailbackResult:
    if opts.reconcile not in RECONCILE_MODES:
        raise UsageError(f"Unknown reconcile mode '{opts.reconcile}'.",
                         f"Use one of {', '.join(RECONCILE_MODES)}.")
    ctx = OpsContext.from_config(config)
    rep = config.require_replication()
    kind = ctx.require_kind()
    marker = _open_marker(ctx, opts.incident)
    store = ctx.markers(rep.target)
    result = FailbackResult(marker, resumed=any(k.startswith("failback:") for k in marker.steps))
    notify(f"Failback of incident {marker.incident}")
    preflight(ctx, marker, opts)
    out_dir = config.state.dir / "failback"

    gap: GapOutcome | None = None
    if not marker.done("failback:reconcile"):
        gap = gap_finder(config, marker, notify)
        result.gap = {**gap.summary, "safe": len(gap.safe), "conflict": len(gap.conflict),
                      "unkeyed": len(gap.unkeyed)}
        result.plan.append({"step": "reconcile", "mode": opts.reconcile, **result.gap})
        if not opts.dry_run:
            marker.record("failback:gap", result.gap)
            store.save(marker)
            done: dict[str, Any] = {"mode": opts.reconcile}
            if opts.reconcile == "copy-safe":
                done["copy_safe"] = copy_safe_records(config, marker, gap.safe)
                done["quarantine"] = quarantine_records(config, marker,
                                                        gap.conflict + gap.unkeyed, out_dir)
            elif opts.reconcile == "quarantine":
                done["quarantine"] = quarantine_records(
                    config, marker, gap.safe + gap.conflict + gap.unkeyed, out_dir)
            result.reconcile = done
            marker.record("failback:reconcile", done)
            store.save(marker)
            crash_point("failback:reconcile")
    else:
        result.gap = marker.steps["failback:gap"].result
        result.reconcile = marker.steps["failback:reconcile"].result

    if not marker.done("failback:reverse-replication"):
        result.plan.append({"step": "reverse-replication", "kind": rep.kind})
        if not opts.dry_run:
            result.reverse = start_reverse_replication(config, kind, marker, out_dir, notify)
            marker.record("failback:reverse-replication", result.reverse)
            store.save(marker)
            crash_point("failback:reverse-replication")
    else:
        result.reverse = marker.steps["failback:reverse-replication"].result

    if not opts.dry_run and not marker.done("failback:caught-up"):
        wait_reverse_caught_up(config, kind, marker, deadline_s=opts.catch_up_deadline_s,
                               notify=notify)
        marker.record("failback:caught-up")
        store.save(marker)

    if not marker.done("failback:translate-offsets"):
        report = translate_offsets(config, TranslateRequest(
            rep.target, rep.source, groups=opts.groups, method="exact",
            apply=not opts.dry_run), notify=notify)
        result.translation = report.as_dict()
        result.translation_report = report
        result.plan.append({"step": "translate-offsets", "summary": report.summary()})
        if not opts.dry_run:
            marker.record("failback:translate-offsets", report.summary())
            store.save(marker)
            crash_point("failback:translate-offsets")

    if not opts.dry_run:
        marker.status = "closed"
        marker.record("failback", {"reconcile": opts.reconcile})
        store.save(marker)
    return result


def write_failback_report(config: Config, result: FailbackResult, directory: Path) -> list[Path]:
    from dataclasses import asdict

    from drctl.reports import write_report

    context = {"marker": asdict(result.marker), "gap": result.gap,
               "reconcile": result.reconcile, "reverse": result.reverse,
               "translation": (result.translation or {}).get("summary")}
    return write_report(directory, f"{result.marker.incident}-failback", context,
                        "failback-report", config.redactor)

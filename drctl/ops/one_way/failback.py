"""`drctl failback`: preflight, gap analysis with order check, reconcile, reverse replication
from the failover point, group offsets back, close the marker.

Like failover, each step records itself in the marker; a re-run continues the incident and
never applies a step twice (reconcile copies are tagged, so even a crash in the middle of
copying copies nothing twice). Each run's phases are timed from its start and kept in the
marker (ops/one_way/phases.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from drctl.context import OpsContext
from drctl.errors import CheckFailed, ExitStatus, Unreachable, UsageError
from drctl.faults import crash_point
from drctl.gap.remote import sessions_kept
from drctl.kafka.clients import cluster_metadata, describe_with_retry
from drctl.kafka.topics import ensure_topics, grow_topics
from drctl.ops.one_way.gap_step import GapFinder, GapOutcome
from drctl.ops.one_way.late_copies import check_late_copies
from drctl.ops.one_way.phases import PhaseClock, command_timing
from drctl.ops.one_way.quiet import Ends, Writes
from drctl.ops.one_way.reconcile import ReconcileMode, reconcile
from drctl.ops.one_way.reverse import copy_back, start_reverse_replication, wait_reverse_caught_up
from drctl.ops.one_way.scorecard import operation_scorecard
from drctl.ops.one_way.switchback import SwitchBack, switch_back
from drctl.ops.one_way.verify import reverse_source_start, verify_end_state
from drctl.ops.steps.audit import audit_by_group, audit_failover
from drctl.ops.steps.fence import FENCED, lift_fence_after_stop, stop_behind_fence
from drctl.ops.steps.schemas import failback_parity, refuse_unless_forced
from drctl.ops.steps.scope import flow_part, the_open_incident
from drctl.ops.steps.side_by_side import flow_locked, recorded_edits
from drctl.replication.base import FlowPart, FlowState
from drctl.reports import write_report
from drctl.rerun import rerun_while_dropped
from drctl.state import FailoverMarker
from drctl.timeparse import format_duration
from drctl.translate.inventory import source_topics_in_scope
from drctl.translate.model import TranslationReport


@dataclass(frozen=True)
class FailbackOptions:
    reconcile: ReconcileMode = ReconcileMode.COPY_SAFE
    check_order: bool = True
    incident: str | None = None
    groups: str = ".*"
    dry_run: bool = False
    deadline_s: float = 30.0
    catch_up_deadline_s: float = 1800.0  # --timeout of the reverse catch-up
    # The target's failover topics must take no write for this long before the gap is
    # classified (and none while it is): the order check reads the post-failover writes once.
    settle_s: float = 3.0
    force: bool = False  # go on while they take writes, and say so

    def __post_init__(self) -> None:
        # Checked when the options are made, before any cluster is asked or anyone confirms.
        if not self.check_order and self.reconcile == ReconcileMode.COPY_SAFE:
            raise UsageError(
                "--no-check-order cannot go with --reconcile copy-safe: without the order "
                "check nothing says which gap records are safe to copy.",
                "Use --reconcile quarantine (every gap record to a quarantine topic) or "
                "--reconcile none, or keep the order check.")


@dataclass
class FailbackResult:
    marker: FailoverMarker
    resumed: bool
    gap: dict[str, Any] = field(default_factory=dict)
    reconcile: dict[str, Any] = field(default_factory=dict)
    reverse: dict[str, Any] = field(default_factory=dict)
    translation: dict[str, Any] | None = None
    translation_report: TranslationReport | None = None
    verification: dict[str, Any] = field(default_factory=dict)
    plan: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False
    switch_back: SwitchBack | None = None
    # ops/steps/audit.py, as the marker keeps it
    audit: dict[str, Any] = field(default_factory=dict)
    switch_back_summary: dict[str, Any] = field(default_factory=dict)  # from an earlier run
    clock: PhaseClock | None = None  # this run's phases (None: a result not from a run)

    @property
    def exit_status(self) -> ExitStatus:
        """Not success while a group is left unmoved or would skip a record, or when the
        audit found records the failover made a group skip."""
        if self.switch_back and self.switch_back.exit_status:
            return self.switch_back.exit_status
        totals = self.audit.get("totals", {})
        if totals.get("skipped") or totals.get("not_placed"):
            return ExitStatus.CHECK_FAILED
        if self.gap.get("lost"):
            # Deleted by retention before they were replicated: gone, and named.
            return ExitStatus.CHECK_FAILED
        taken = self.marker.steps.get("failback:unmirrored")
        handled = set(taken.result.get("topics", {})) if taken else set()
        if any(t["topic"] not in handled for t in self.marker.left_behind.get("topics", [])):
            # Never mirrored and not taken in (a dry run, or failback stopped before):
            # its records are on the source only, neither compared nor reconciled.
            return ExitStatus.CHECK_FAILED
        return ExitStatus.SUCCESS

    @property
    def next_command(self) -> str:
        """The exact command the operator runs next (empty when nothing is left)."""
        nxt = self.marker.phase.next_command
        return f"{nxt} --incident {self.marker.incident}" if nxt else ""

    def from_marker(self) -> FailbackResult:
        """This result filled from what an earlier run recorded in the marker."""
        steps = self.marker.steps
        for attr, step in (("gap", "failback:gap"), ("reconcile", "failback:reconcile"),
                           ("reverse", "failback:reverse-replication"),
                           ("verification", "failback:verify"),
                           ("audit", "failback:audit"),
                           ("switch_back_summary", "failback:translate-offsets")):
            if step in steps:
                setattr(self, attr, steps[step].result)
        self.resumed = True
        return self

    def stated_redelivery(self) -> dict[str, int]:
        """Per group, the records the switch-back said it re-delivers: every run's, as the
        marker keeps them (this run's own, when it recorded none: a dry run)."""
        recorded = self.marker.steps.get("failback:translate-offsets")
        if recorded is not None and "redelivered_by_group" in recorded.result:
            return dict(recorded.result["redelivered_by_group"])
        return self.switch_back.redelivered_by_group() if self.switch_back else {}

    def scorecard(self) -> dict[str, Any]:
        """This run's phases and the incident's earlier failback runs (ops/one_way/phases.py)."""
        this = None if self.clock is None else self.clock.as_run()
        return operation_scorecard("failback", self.marker.incident,
                                   command_timing(self.marker.timings, "failback", this))

    def switch_back_data(self) -> dict[str, Any] | None:
        if self.switch_back is not None:
            return self.switch_back.as_dict()
        return {"summary": self.switch_back_summary} if self.switch_back_summary else None

    def write_reports(self, ctx: OpsContext, directory: Path | None = None) -> list[Path]:
        """The failback report (default: STATE_DIR/reports); a dry run changed nothing and
        writes none."""
        if self.dry_run:
            return []
        config = ctx.config
        context = {"marker": self.marker.as_data(), "gap": self.gap,
                   "reconcile": self.reconcile, "reverse": self.reverse,
                   "verification": self.verification,
                   "translation": (self.translation or {}).get("summary"),
                   "switch_back": self.switch_back_data(), "audit": self.audit,
                   "next_command": self.next_command, "phase": self.marker.phase.value,
                   "scorecard": self.scorecard()}
        return write_report(directory or (config.state.dir / "reports"),
                            f"{self.marker.incident}-failback", context, "failback-report",
                            config.redactor)

    def as_dict(self, reports: Sequence[Path] = ()) -> dict[str, Any]:
        """The JSON of `drctl failback`."""
        return {"incident": self.marker.incident, "dry_run": self.dry_run,
                "resumed": self.resumed, "plan": self.plan, "gap": self.gap,
                "reconcile": self.reconcile, "reverse": self.reverse,
                "verification": self.verification, "translation": self.translation,
                "switch_back": self.switch_back_data(), "audit": self.audit,
                "marker": None if self.dry_run else self.marker.as_data(),
                "phase": self.marker.phase.value, "next_command": self.next_command,
                "timing": self.scorecard()["timing"], "scorecard": self.scorecard(),
                "reports": [str(p) for p in reports]}

    def runbook_summary(self, reports: Sequence[Path] = ()) -> dict[str, Any]:
        """The result of the `failback` runbook action, which step outputs read."""
        translation = self.translation or {}
        summary = translation.get("summary", {})
        return {"incident": self.marker.incident, "status": self.marker.status,
                "phase": self.marker.phase.value, "next_command": self.next_command,
                "gap": self.gap, "copied": self.reconcile.get("copy_safe", {}).get("copied", 0),
                "gap_total": sum(self.gap.get(k, 0) for k in ("safe", "conflict", "unkeyed")),
                "quarantined": self.reconcile.get("quarantine", {}).get("count", 0),
                "reverse": self.reverse, "verification": self.verification,
                "positions": summary.get("partitions", 0),
                "positions_exact": summary.get("exact", 0),
                # Kept: the group already stood further on (it had consumed that far before
                # the outage), so moving it back would only re-deliver.
                "positions_kept": sum(1 for g in translation.get("groups", [])
                                      for p in g["partitions"] if p["confidence"] == "kept"),
                "groups_not_applied": [g["group"] for g in translation.get("groups", [])
                                       if g["skipped"]],
                "positions_rewound": sum(1 for g in translation.get("groups", [])
                                         for p in g["partitions"]
                                         if p["confidence"] == "rewound"),
                "never_delivered": (self.switch_back_data() or {}).get(
                    "summary", {}).get("not_delivered", 0),
                "switch_back": (self.switch_back_data() or {}).get("summary", {}),
                # Per group, what the switch-back re-delivers, as failback stated it (a drill's
                # ledger.verify holds the group to it; every run's, from the marker).
                "redelivery_bound": self.stated_redelivery(),
                "audit": self.audit.get("totals", {}),
                "audit_groups": audit_by_group(self.audit),
                "phases_s": {} if self.clock is None else self.clock.phases_s,
                "scorecard": self.scorecard(),
                "reports": [str(p) for p in reports]}


def _offsets(raw: Any) -> dict[str, dict[int, int]]:
    """Offsets read back from a marker step (JSON made the partitions strings)."""
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in (raw or {}).items()}


def _carried_if_writes_allowed(marker: FailoverMarker) -> dict[str, Any] | None:
    step = marker.steps.get("failback:caught-up")
    if step is None or not step.result.get("writes_allowed"):
        return None
    return dict(step.result.get("carried") or {})


def _verified_from(gap: dict[str, Any]) -> dict[tuple[str, int], int]:
    """Per source partition, the first offset the gap analysis compared."""
    return {(v["topic"], int(v["partition"])): int(v["verified_from"])
            for v in gap.get("verified", []) if v.get("verified_from") is not None}


def take_in_unmirrored(ctx: OpsContext, marker: FailoverMarker, *, dry_run: bool) -> dict[str, str]:
    """Source topics the flow's filter covers that the failover never had (the replicator had
    not mirrored them: a topic younger than its topic refresh, or one left behind): with both
    clusters up they are handled like any other gap — every record of theirs is unreplicated
    (failover point 0), their mirror and failover topics are created where missing, and the
    marker takes them in (recorded as `failback:unmirrored`). Returns them (topic -> mirror)."""
    if marker.done("failback:unmirrored"):
        return dict(marker.steps["failback:unmirrored"].result.get("topics", {}))
    config = ctx.config
    rep = ctx.rep
    in_scope = {t: n for t, n in source_topics_in_scope(config, ctx.source).items()
                if ctx.scope.covers_topic(t)}
    missing = {t: n for t, n in sorted(in_scope.items()) if t not in marker.topics}
    if not missing:
        return {}
    taken = {t: rep.mirror_topic(t) for t in missing}
    ctx.notify(f"Never mirrored to {rep.target}, compared in full: {', '.join(taken)}")
    if dry_run:
        return taken
    wanted = {rep.mirror_topic(t): n for t, n in missing.items()}
    wanted.update({rep.failover_topic(t): n for t, n in missing.items()})
    created = ensure_topics(ctx.clients(rep.target), wanted)
    for topic, n in missing.items():
        mirror = taken[topic]
        marker.topics[topic] = mirror
        # Nothing of it was replicated: whatever its mirror holds came after the failover.
        marker.failover_point[mirror] = dict.fromkeys(range(n), 0)
        if not rep.names_kept:
            marker.failover_topics_end[rep.failover_topic(topic)] = dict.fromkeys(range(n), 0)
    marker.record("failback:unmirrored", {"topics": taken, "created": created})
    ctx.markers(rep.target).save(marker)
    return taken


def align_partitions(ctx: OpsContext, marker: FailoverMarker, *, dry_run: bool) -> dict[str, Any]:
    """Topics that grew during the outage. A source topic given partitions the mirror never
    got: every record of them is a gap record, and reconcile must be able to copy it; a
    failover topic given partitions on the target: their records are post-failover writes
    the reverse flow must carry back. So each source, mirror and failover topic gets the
    largest count of the three, and the marker the new partitions (failover point 0: nothing
    was replicated there). Recorded as `failback:partitions`."""
    if marker.done("failback:partitions"):
        return dict(marker.steps["failback:partitions"].result)
    rep = ctx.rep
    src, dst = ctx.clients(rep.source), ctx.clients(rep.target)
    src_meta = cluster_metadata(src).topics
    dst_meta = cluster_metadata(dst).topics

    def count(meta: Any, topic: str) -> int:
        return len(meta[topic].partitions) if topic in meta else 0

    want: dict[str, int] = {}
    for topic, mirror in marker.topics.items():
        failover = rep.failover_topic(topic)
        want[topic] = max(count(src_meta, topic), count(dst_meta, mirror),
                          count(dst_meta, failover))
    growing = {t: n for t, n in want.items()
               if n > min(count(src_meta, t), count(dst_meta, marker.topics[t]),
                          count(dst_meta, rep.failover_topic(t)))}
    if not growing:
        return {}
    ctx.notify("Partitions added during the outage: "
           + ", ".join(f"{t} to {n}" for t, n in sorted(growing.items())))
    if dry_run:
        return {"grown": growing}
    source_grown = grow_topics(src, growing)
    target_grown = grow_topics(dst, {**{marker.topics[t]: n for t, n in growing.items()},
                                     **{rep.failover_topic(t): n for t, n in growing.items()}})
    for topic, n in growing.items():
        mirror, failover = marker.topics[topic], rep.failover_topic(topic)
        for p in range(n):
            marker.failover_point.setdefault(mirror, {}).setdefault(p, 0)
            if not rep.names_kept:
                marker.failover_topics_end.setdefault(failover, {}).setdefault(p, 0)
    out = {"grown": growing, "source": source_grown, "target": target_grown}
    marker.record("failback:partitions", out)
    ctx.markers(rep.target).save(marker)
    return out


def _target_quiet(ctx: OpsContext, marker: FailoverMarker, since: Ends, opts: FailbackOptions,
                  when: str) -> Ends:
    """Refuse (exit 3) when the target's failover topics took writes since `since` — waiting
    first until `settle_s` has passed — unless `--force`, which says what it lets pass."""
    wait = opts.settle_s - (time.monotonic() - since.at)
    if wait > 0:
        ctx.notify(f"Checking that the target's failover topics stay quiet {when} "
               f"({format_duration(opts.settle_s)})")
        time.sleep(wait)
    now = Ends.read(ctx, marker)
    writes = Writes.between(since, now)
    if not writes:
        return now
    rep = ctx.rep
    what = (f"Producers write to {rep.target}'s failover topics {when}: "
            f"{writes.describe()} in {format_duration(writes.seconds)}")
    if not opts.force:
        raise CheckFailed(
            f"{what}. The order check classifies the gap against the post-failover writes it "
            "reads once: a later write to a key it calls safe would land before that key's "
            "copy, and failback's end-state check would count records still in flight.",
            f"Stop the producers on {rep.target} for the failback (they move to "
            f"{rep.source} after it), then run failback again; --force goes on and says so.")
    ctx.notify(f"Warning (--force): {what}; writes after the order check are not classified")
    return now


def _marker_to_fail_back(ctx: OpsContext, incident: str | None) -> FailoverMarker:
    """The open marker of `incident`, or the flow's one open marker; a usage error when none
    is, or when several are and none was named."""
    marker = the_open_incident(ctx, incident, "fail back")
    if marker.status != "open":
        raise UsageError(f"Incident {marker.incident} is already closed.")
    return marker


# Sees the plan before anything changes; raises (Aborted) to refuse.
Approve = Callable[[dict[str, Any]], None]


def preflight(ctx: OpsContext, marker: FailoverMarker, opts: FailbackOptions,
              approve: Approve | None = None) -> FlowState:
    """Both clusters answer; then `approve` (not in a dry run) sees the preview, before
    anything changes (a forward stop issued again included), and raises to refuse."""
    config = ctx.config
    rep = ctx.rep
    for name in (rep.target, rep.source):
        clients = ctx.clients(name)
        try:
            describe_with_retry(clients, config.retry.with_deadline(opts.deadline_s),
                                notify=ctx.notify)
        except Unreachable as exc:
            raise Unreachable(f"{exc.message} Failback needs both clusters.",
                              f"Bring '{name}' back first; the marker {marker.incident} waits."
                              ).measured_as(exc) from None
    if not marker.done("failback:reverse-replication"):
        # Before reconcile or the reverse flow copies a record to where another registry
        # decodes it.
        parity = failback_parity(ctx, marker)
        refuse_unless_forced(parity, force=opts.force, operation="fail back", ctx=ctx,
                             unknown_refuses=True)
        if parity and not opts.dry_run:
            marker.schemas["failback"] = [p.as_dict() for p in parity]
    if approve is not None and not opts.dry_run:
        approve(preview(ctx, marker, opts))
    return _forward_not_copying(ctx, marker, opts)


def preview(ctx: OpsContext, marker: FailoverMarker, opts: FailbackOptions) -> dict[str, Any]:
    """What failback is about to do, from its preflight: what the operator approves."""
    rep = ctx.rep
    return {"source": rep.source, "target": rep.target, "incident": marker.incident,
            "phase": marker.phase.value,
            "done": [s for s in marker.steps if s.startswith("failback:")],
            "topics": len(marker.topics), "check_order": opts.check_order,
            "reconcile": str(opts.reconcile), "groups": opts.groups,
            "groups_moved_at_failover": len(marker.groups), "force": opts.force}


def _forward_not_copying(ctx: OpsContext, marker: FailoverMarker,
                         opts: FailbackOptions) -> FlowState:
    """Refuse while forward replication copies. A component that copies nothing but is not
    confirmed stopped gets its stop again; if that does not confirm it, failback says what
    is wrong and goes on (no task can copy), recording the state in the marker."""
    rep = ctx.rep
    kind = ctx.require_kind()
    part = flow_part(marker)
    if part is not None:
        return _part_not_copied(ctx, marker, part, opts)
    forward = kind.forward_state(rep)
    if forward.copying and set(forward.copying) <= set(forward.stopping) and not opts.dry_run:
        # Stopped, its tasks still shutting down: waited for (the stop asked again) before
        # anything counts it as copying.
        ctx.notify(f"Forward replication is stopping ({forward.describe(forward.stopping)}); "
                   "waiting for its tasks to shut down")
        forward = kind.restop_forward(rep, forward.stopping)
    if forward.unconfirmed and not forward.copying and not opts.dry_run:
        ctx.notify("Forward replication is not confirmed stopped "
               f"({forward.describe(forward.unconfirmed)}); issuing the stop again")
        forward = kind.restop_forward(rep, forward.unconfirmed)
    if forward.copying and stop_behind_fence(ctx, marker, dry_run=opts.dry_run):
        # Held by the fence, so nothing it sent landed; stopped now that Connect answers.
        if opts.dry_run:
            return forward  # a dry run assumes that stop
        forward = kind.forward_state(rep)
    if forward.copying:
        raise CheckFailed(
            f"Forward replication {rep.source} -> {rep.target} is running again "
            f"({forward.describe(forward.copying)}): it would copy stale source data behind "
            "the post-failover writes.",
            "Run `drctl failover` again: it stops those connectors and counts what they "
            "copied after the failover point; then run failback.")
    if not forward.readable and marker.replication_stop == "pending":
        raise CheckFailed("Forward replication was never confirmed stopped (pending) and "
                          "Kafka Connect cannot be asked now.",
                          "Confirm the replicator is stopped, fix replication.connect, "
                          "and run again.")
    if forward.unconfirmed:
        again = ("although drctl issued its stop again" if forward.restopped
                 else "(a dry run does not issue its stop again)")
        ctx.notify(f"Warning: {forward.describe(forward.unconfirmed)} {again}: it copies nothing "
               "now, but it is not confirmed stopped. "
               f"{forward.unconfirmed_remedy}. Failback continues because no task can copy.")
    confirmed_now = forward.confirmed and marker.replication_stop == "pending"
    if confirmed_now and not opts.dry_run:
        marker.replication_stop = "stopped"  # Connect answers now and reports it stopped
    if (forward.restopped or confirmed_now) and not opts.dry_run:
        marker.record("failback:preflight", {"forward": forward.as_dict()})
        ctx.markers(rep.target).save(marker)
    return forward


def _part_not_copied(ctx: OpsContext, marker: FailoverMarker, part: FlowPart,
                     opts: FailbackOptions) -> FlowState:
    """An application's incident: the rest of the flow copies, and must; its part must stay
    left out. Taken back in (someone edited the connectors), it is refused like a forward
    flow running again; with Connect silent, a stop left pending is refused."""
    rep, kind = ctx.rep, ctx.require_kind()
    left_out = kind.edits_hold(rep, recorded_edits(ctx, marker), part)
    forward = kind.forward_state(rep)
    if left_out is False:
        raise CheckFailed(
            f"Forward replication {rep.source} -> {rep.target} copies {part.name}'s topics "
            f"again ({', '.join(part.topics[:5])}): it would copy stale source data behind the "
            "post-failover writes.",
            f"Run `drctl failover --app {part.name}` again: it leaves them out again and "
            "counts what was copied after the failover point; then run failback.")
    if left_out is None and marker.replication_stop == "pending":
        raise CheckFailed(f"Replication of {part.name} was never confirmed stopped (pending) "
                          "and Kafka Connect cannot be asked now.",
                          "Confirm it is left out, fix replication.connect, and run again.")
    if left_out and marker.replication_stop == "pending" and not opts.dry_run:
        marker.replication_stop = "stopped"
        marker.record("failback:preflight", {"forward": forward.as_dict(),
                                             "part_left_out": True})
        ctx.markers(rep.target).save(marker)
    return FlowState(forward.readable, forward.components)


def run_failback(ctx: OpsContext, opts: FailbackOptions, gap_finder: GapFinder, *,
                 approve: Approve | None = None) -> FailbackResult:
    """Failback (module docstring); a cluster that drops once it is under way is waited
    for within `--deadline`, then failback runs again from the last step recorded
    (drctl/rerun.py); one that stays silent ends it (exit 4). `approve` (not in a dry run)
    sees the plan once the preflight passed, before anything changes."""
    rep = ctx.rep
    under_way = [False]
    clock = PhaseClock("failback")  # one run, however often a dropped cluster restarts it

    def once() -> FailbackResult:
        # Asked once: a run again after a dropped cluster continues what was approved.
        return _failback_once(ctx, opts, gap_finder, under_way, clock,
                              None if under_way[0] else approve)

    # Its gap jobs (one, and one more each time it runs again) share a Spark Connect
    # session, closed as failback ends.
    with sessions_kept():
        return rerun_while_dropped(once, ctx, (rep.source, rep.target), opts.deadline_s,
                                   "failback", started=lambda: under_way[0])


def _failback_once(ctx: OpsContext, opts: FailbackOptions, gap_finder: GapFinder,
                   under_way: list[bool], clock: PhaseClock,
                   approve: Approve | None = None) -> FailbackResult:
    clock.phase("preflight")
    config = ctx.config
    if opts.reconcile not in set(ReconcileMode):  # library callers may pass plain text
        raise UsageError(f"Unknown reconcile mode '{opts.reconcile}'.",
                         f"Use one of {', '.join(ReconcileMode)}.")
    mode = ReconcileMode(opts.reconcile)
    rep = ctx.rep
    kind = ctx.require_kind()
    marker = _marker_to_fail_back(ctx, opts.incident)
    store = ctx.markers(rep.target)
    result = FailbackResult(marker, resumed=any(k.startswith("failback:") for k in marker.steps),
                            dry_run=opts.dry_run, clock=clock)
    if marker.done("failback"):
        # Done before: nothing is applied again; the result is what the marker recorded.
        ctx.notify(f"Failback of incident {marker.incident} is done ({marker.phase}); next: "
               f"`{result.next_command}`")
        clock.stop()
        return result.from_marker()
    if not opts.dry_run:
        clock.keep_in(marker.timings)  # a marker read again after a drop keeps it once
    ctx.notify(f"Failback of incident {marker.incident}")
    forward = preflight(ctx, marker, opts, approve)
    under_way[0] = True
    quiet_from = Ends.read(ctx, marker) if not marker.done("failback:reconcile") else None
    # Only now, with forward replication confirmed stopped, may the fence come off.
    if forward.unconfirmed and marker.fence.get("state") == FENCED:
        ctx.notify(f"The replication fence stays: {forward.describe(forward.unconfirmed)} is not "
               "confirmed stopped. Run failback again once it is (restart the Connect worker).")
    else:
        lifted = lift_fence_after_stop(ctx, marker, dry_run=opts.dry_run)
        if lifted is not None:
            result.plan.append(lifted)
    if not opts.dry_run and not marker.done("failback:audit") and marker.groups:
        # Before anything commits on the source: the groups' commits there are the truth.
        clock.phase("audit")
        marker.record("failback:audit",
                      audit_failover(ctx, marker, ctx.reach_deadline_s).as_dict())
        store.save(marker)
    if "failback:audit" in marker.steps:
        result.audit = marker.steps["failback:audit"].result
    out_dir = config.state.dir / "failback"
    if marker.stop_unconfirmed and not marker.done("failback:reconcile") and not opts.dry_run:
        # The stop is confirmed now (preflight): nothing more can come through.
        check_late_copies(ctx, marker, True)
        store.save(marker)

    if not marker.done("failback:reconcile"):
        clock.phase("gap")
        taken = take_in_unmirrored(ctx, marker, dry_run=opts.dry_run)
        if taken:
            result.plan.append({"step": "unmirrored", "topics": taken})
        grown = align_partitions(ctx, marker, dry_run=opts.dry_run)
        if grown:
            result.plan.append({"step": "partitions", **grown})

    gap: GapOutcome | None = None
    if not marker.done("failback:reconcile"):
        assert quiet_from is not None
        settled = _target_quiet(ctx, marker, quiet_from, opts, "before the gap "
                                "analysis")
        gap = gap_finder(ctx, marker, opts.check_order)
        # A write during the analysis: the order check did not see it.
        _target_quiet(ctx, marker, settled, replace(opts, settle_s=0),
                      "during the gap analysis")
        result.gap = {**gap.summary, "check_order": opts.check_order, "safe": len(gap.safe),
                      "conflict": len(gap.conflict), "unkeyed": len(gap.unkeyed),
                      "unclassified": len(gap.unclassified)}
        result.plan.append({"step": "reconcile", "mode": mode.value, **result.gap})
        if not opts.dry_run:
            marker.record("failback:gap", result.gap)
            store.save(marker)
            clock.phase("reconcile")
            result.reconcile = reconcile(mode, ctx, marker, gap, out_dir).as_dict()
            marker.record("failback:reconcile", result.reconcile)
            store.save(marker)
            crash_point("failback:reconcile")
    else:
        result.gap = marker.steps["failback:gap"].result
        result.reconcile = marker.steps["failback:reconcile"].result

    if not marker.done("failback:reverse-replication"):
        clock.phase("reverse")
        result.plan.append({"step": "reverse-replication", "kind": rep.kind})
        if not opts.dry_run:
            # Where the appends begin on the source: copy-back is idempotent from there and
            # the end-state check counts from there.
            if not marker.done("failback:reverse-source-start"):
                marker.record("failback:reverse-source-start",
                              {"offsets": reverse_source_start(ctx, marker)})
                store.save(marker)
            source_start = _offsets(
                marker.steps["failback:reverse-source-start"].result["offsets"])
            copied_back = copy_back(ctx, marker, source_start)
            with flow_locked(ctx, f"drctl failback, incident {marker.incident}"):
                result.reverse = start_reverse_replication(ctx, marker, out_dir)
            result.reverse["source_start"] = source_start
            result.reverse["copied_back"] = copied_back
            marker.record("failback:reverse-replication", result.reverse)
            store.save(marker)
            crash_point("failback:reverse-replication")
    else:
        result.reverse = marker.steps["failback:reverse-replication"].result

    if not opts.dry_run and not marker.done("failback:caught-up"):
        clock.phase("reverse")
        carried = {}
        if kind.reverse_started_by_drctl:  # else the operator deploys it after failback
            carried = wait_reverse_caught_up(ctx, marker,
                                             deadline_s=opts.catch_up_deadline_s)
        # With --force producers may still write: the end-state check then compares up to
        # what was carried when the reverse flow caught up. Otherwise every record counts.
        marker.record("failback:caught-up", {"carried": carried, "writes_allowed": opts.force})
        store.save(marker)
        crash_point("failback:caught-up")

    if not kind.reverse_started_by_drctl:
        # The operator starts reverse replication from the rendered steps: drctl cannot
        # wait for it, so it cannot count its result either.
        result.verification = {"ok": None, "notes": [
            "Not checked: reverse replication is started by hand for this replication kind; "
            "compare the source with the failover topics once it has caught up."]}
    elif not opts.dry_run and not marker.done("failback:verify"):
        clock.phase("verify")
        ctx.notify("Checking what the source now holds against what it should hold")
        state = verify_end_state(ctx, marker, _offsets(result.reverse.get("source_start")),
                                 originals_from=_verified_from(result.gap),
                                 carried=_carried_if_writes_allowed(marker))
        result.verification = state.as_dict()
        marker.record("failback:verify", result.verification,
                      status="done" if state.ok else "failed")
        store.save(marker)
        if not state.ok:
            raise state.failure()
    elif marker.done("failback:verify"):
        result.verification = marker.steps["failback:verify"].result

    if not marker.done("failback:translate-offsets"):
        clock.phase("switch-back")
        # Groups an earlier run moved keep their position: their consumers may already
        # read on the source again.
        earlier = marker.steps.get("failback:translate-offsets")
        moved = frozenset(earlier.result.get("moved_groups", [])) if earlier else frozenset()
        not_copied = marker.steps["failback:reconcile"].result.get("not_copied", {}) \
            if "failback:reconcile" in marker.steps else {}
        sb = switch_back(ctx, marker, not_copied, groups=opts.groups,
                         apply=not opts.dry_run, done_groups=moved)
        result.switch_back = sb
        if sb.translation is not None:
            result.translation = sb.translation.as_dict()
            result.translation_report = sb.translation
        result.plan.append({"step": "switch-back", **sb.summary()})
        if not opts.dry_run:
            moved |= {g.group for g in sb.groups if not g.skipped}
            # The groups an earlier run moved were not moved again: what it stated for them
            # stands.
            stated = {**(earlier.result.get("redelivered_by_group") or {} if earlier else {}),
                      **sb.redelivered_by_group()}
            marker.record("failback:translate-offsets",
                          {**sb.summary(), "redelivered_by_group": stated,
                           "moved_groups": sorted(moved)},
                          status="done" if sb.exit_status == ExitStatus.SUCCESS else "failed")
            store.save(marker)
            crash_point("failback:translate-offsets")
        if sb.exit_status != ExitStatus.SUCCESS:
            # The incident stays open: a re-run moves the groups left (its consumers stopped).
            clock.stop()
            if not opts.dry_run:
                store.save(marker)
            return result
    elif marker.steps["failback:translate-offsets"].result:
        result.switch_back_summary = marker.steps["failback:translate-offsets"].result

    clock.stop(finished=not opts.dry_run)
    if not opts.dry_run:
        # The incident stays open: the pair is exposed (forward stopped, reverse running)
        # until the return to protection (ops/one_way/reprotect.py) closes it.
        marker.record("failback", {"reconcile": mode.value})
        store.save(marker)
    return result


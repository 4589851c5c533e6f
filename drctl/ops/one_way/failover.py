"""`drctl failover`: preflight, stop replication, failover marker, group offsets, report.

Each step records itself in the failover marker before the next starts; a re-run of the same
incident skips what is done, so a crash at any point is finished by running it again. Each
run's phases are timed from its start (ops/one_way/phases.py) and kept in the marker; the
report phase measures the RPO at the failover point (ops/steps/rpo.py) and scores both against
the config's objectives (ops/one_way/scorecard.py). The preflight, the catch-up wait, the ends
at F and what is left behind are the steps every failover shares
(ops/steps/failover_point.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from drctl.config import Objectives
from drctl.context import OpsContext
from drctl.errors import CheckFailed, ExitStatus
from drctl.faults import crash_point
from drctl.kafka.lag import oldest_records, split_at_stable
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import count_records
from drctl.kafka.topics import (
    TP,
)
from drctl.kafka.transactions import hanging_on
from drctl.ops.one_way.late_copies import check_late_copies
from drctl.ops.one_way.phases import PhaseClock, command_timing
from drctl.ops.one_way.scorecard import failover_scorecard
from drctl.ops.steps.audit import stated_redelivery
from drctl.ops.steps.failover_point import (
    FailoverOptions,
    describe_left_behind,
    ensure_failover_topics,
    left_behind,
    marker_positions,
    preflight,
    read_ends,
    settled_by_last_return,
    wait_quiet_and_caught_up,
)
from drctl.ops.steps.fence import FENCED, UNFENCED, fence_topics, fence_unconfirmed_stop, open_risks
from drctl.ops.steps.incident import incident_to_continue
from drctl.ops.steps.rpo import (
    Rpo,
    RpoMethod,
    heartbeats_topic,
    newest_copied_heartbeat,
    rpo_from_heartbeat,
    rpo_from_records,
)
from drctl.ops.steps.schemas import flow_parity, refuse_unless_forced
from drctl.ops.steps.side_by_side import (
    copying,
    flow_locked,
    leave_out,
    recorded_edits,
    scope_among_open,
)
from drctl.replication.base import Confirm, FlowPart
from drctl.reports import write_report
from drctl.rerun import rerun_while_dropped
from drctl.state import FailoverMarker
from drctl.translate.engine import TranslateRequest, translate_offsets
from drctl.translate.inventory import keep_inventory
from drctl.translate.locate import MatchQuery, Side, last_records, match_records
from drctl.translate.model import TranslationReport
from drctl.translate.reader import RangeRequest


@dataclass
class FailoverResult:
    marker: FailoverMarker
    dry_run: bool
    plan: list[dict[str, Any]] = field(default_factory=list)
    preflight: dict[str, Any] = field(default_factory=dict)
    translation: dict[str, Any] | None = None
    translation_report: TranslationReport | None = None
    resumed: bool = False
    clock: PhaseClock | None = None  # this run's phases (None: a result not from a run)
    # Per source partition, the records the target lacked at F (estimate_unreplicated);
    # None when the source could not be read.
    unreplicated: list[dict[str, Any]] | None = None
    objectives: Objectives = Objectives()  # the config's, scored in the scorecard

    @property
    def exit_status(self) -> ExitStatus:
        """A topic or group failover could not take along is a check that did not hold."""
        return ExitStatus.CHECK_FAILED if self.marker.left_behind else ExitStatus.SUCCESS

    def timing(self) -> dict[str, Any]:
        """This run's phases and the incident's earlier failover runs (ops/one_way/phases.py)."""
        this = None if self.clock is None else self.clock.as_run()
        return command_timing(self.marker.timings, "failover", this)

    def scorecard(self) -> dict[str, Any]:
        """RTO by phase and the RPO measured, against the config's objectives."""
        return failover_scorecard(self.marker.incident, self.objectives, self.timing(),
                                  self.marker.rpo or None)

    def write_reports(self, ctx: OpsContext, directory: Path | None = None) -> list[Path]:
        """The failover report (default: STATE_DIR/reports); a dry run changed nothing and
        writes none."""
        if self.dry_run:
            return []
        config = ctx.config
        return write_report(directory or (config.state.dir / "reports"), self.marker.incident,
                            report_context(ctx, self.marker, self.unreplicated,
                                           self.scorecard()),
                            "failover-report", config.redactor)

    def as_dict(self, reports: Sequence[Path] = ()) -> dict[str, Any]:
        """The JSON of `drctl failover`."""
        scorecard = self.scorecard()
        return {"incident": self.marker.incident, "dry_run": self.dry_run,
                "resumed": self.resumed, "preflight": self.preflight, "plan": self.plan,
                "marker": None if self.dry_run else self.marker.as_data(),
                "open_risks": [] if self.dry_run else open_risks(self.marker),
                "translation": self.translation, "rpo": scorecard["rpo"],
                "unreplicated": self.unreplicated, "timing": scorecard["timing"],
                "scorecard": scorecard, "reports": [str(p) for p in reports]}

    def runbook_summary(self, reports: Sequence[Path] = ()) -> dict[str, Any]:
        """The result of the `failover` runbook action, which step outputs read."""
        summary = (self.translation or {}).get("summary", {})
        moved = self.marker.groups
        scorecard = self.scorecard()
        rpo = scorecard["rpo"] or {}
        return {"incident": self.marker.incident, "marker": self.marker.as_data(),
                "replication_stop": self.marker.replication_stop,
                "late_copies": int(self.marker.late_copies.get("total") or 0),
                "groups_applied": summary.get("applied", 0),
                "groups_total": len(moved),
                "groups_not_exact": sorted(g for g, v in moved.items()
                                           if v.get("confidence") != ["exact"]),
                "left_behind": describe_left_behind(self.marker),
                # Per group, what its positions may re-deliver, as failover stated it (a
                # drill's ledger.verify holds the group to it).
                "redelivery_bound": stated_redelivery(self.marker),
                "rpo_s": rpo.get("seconds"), "rpo": rpo.get("text", "RPO unknown"),
                "rto_s": scorecard["timing"]["elapsed_s"],
                "phases_s": {} if self.clock is None else self.clock.phases_s,
                "scorecard": scorecard, "reports": [str(p) for p in reports]}


def refuse_hanging_transactions(ctx: OpsContext, opts: FailoverOptions,
                                pre: dict[str, Any]) -> list[dict[str, Any]]:
    """A failover point is not taken behind a hanging transaction: its last stable offset
    caps F and every read_committed read after it. Refused (exit 3) with the abort commands,
    unless --force; what --force goes past is returned for the report."""
    rep = ctx.rep
    sides = {rep.target: sorted({*pre["topics"].values(),
                                 *(rep.failover_topic(t) for t in pre["topics"])})}
    if pre["source_reachable"]:
        sides[rep.source] = sorted(pre["topics"])
    found: list[dict[str, Any]] = []
    for name, topics in sides.items():
        clients = ctx.clients(name)
        for t in hanging_on(clients, topics, opts.transaction_age_s, ctx.pinned_sightings)[0]:
            found.append({"cluster": name, "topic": t.topic, "partition": t.partition,
                          "last_stable_offset": t.stable, "end": t.end,
                          "open_s": t.open_s,
                          "abort": t.abort_commands(clients.bootstrap)})
    if found and not opts.force:
        lines = "; ".join(f"{f['topic']}-{f['partition']} on {f['cluster']} (stable "
                          f"{f['last_stable_offset']}, end {f['end']})" for f in found)
        raise CheckFailed(
            f"Preflight failed: a hanging transaction holds {len(found)} partition(s): "
            f"{lines}. A failover point taken now stops there for read_committed consumers.",
            "Abort it: " + " | ".join(f["abort"] for f in found[:3])
            + " — or run again with --force to fail over without its records.")
    for f in found:
        ctx.notify(f"--force: failing over past a hanging transaction on {f['topic']}-"
                   f"{f['partition']} ({f['cluster']})")
    return found


def preview(ctx: OpsContext, opts: FailoverOptions, marker: FailoverMarker, resumed: bool,
            superseded: list[FailoverMarker], pre: dict[str, Any]) -> dict[str, Any]:
    """What the failover is about to do, from the preflight: what the operator approves."""
    rep = ctx.rep
    return {"source": rep.source, "target": rep.target,
            "mode": "planned" if opts.planned else "unplanned",
            "incident": marker.incident, "continuing": resumed,
            "done": list(marker.steps), "supersedes": [m.incident for m in superseded],
            "source_reachable": pre["source_reachable"], "topics": len(pre["topics"]),
            "unmirrored": pre.get("unmirrored", []), "scope": ctx.scope.describe(),
            "active_groups_on_target": pre["active_groups_on_target"], "groups": opts.groups}


@dataclass
class _Run:
    """What a run again after a dropped cluster keeps from the runs before it: one phase
    clock, whether the failover got going, whether it continued an earlier command's
    incident, and its incident once recorded — a run again continues that one, never opens
    another (with --new-incident it would supersede it)."""

    clock: PhaseClock = field(default_factory=lambda: PhaseClock("failover"))
    under_way: bool = False
    resumed: bool | None = None
    incident: str | None = None


def run_failover(ctx: OpsContext, opts: FailoverOptions, *,
                 confirm: Confirm | None = None,
                 approve: Callable[[dict[str, Any]], None] | None = None) -> FailoverResult:
    """Fail over. `approve` (not in a dry run) sees the preview once the preflight passed,
    before anything changes, and raises to refuse. A cluster that drops once the failover
    is under way — the target, or the source of a planned one (an outage's failover goes on
    without it) — is waited for within `--deadline`, then the failover runs again from the
    last step recorded (drctl/rerun.py), as failback does; one that stays silent ends it
    (exit 4) naming it."""
    rep = ctx.rep
    run = _Run()

    def once() -> FailoverResult:
        again = opts if run.incident is None else replace(opts, incident=run.incident,
                                                          new_incident=False)
        # Asked once: a run again continues what was approved.
        return _failover_once(ctx, again, confirm, None if run.under_way else approve, run)

    needed = (rep.target, rep.source) if opts.planned else (rep.target,)
    return rerun_while_dropped(once, ctx, needed, opts.source_deadline_s, "failover",
                               started=lambda: run.under_way)


def _failover_once(ctx: OpsContext, opts: FailoverOptions, confirm: Confirm | None,
                   approve: Callable[[dict[str, Any]], None] | None,
                   run: _Run) -> FailoverResult:
    clock = run.clock
    clock.phase("preflight")
    config = ctx.config
    rep = ctx.rep
    kind = ctx.require_kind()
    store = ctx.markers(rep.target)
    marker, superseded = incident_to_continue(store, rep, opts, ctx.scope)
    ctx.scope = marker.covers  # a continued incident keeps its own
    if run.resumed is None:  # a run again continues this command's own steps
        run.resumed = bool(marker.steps)
    resumed = run.resumed
    if not opts.dry_run:
        clock.keep_in(marker.timings)  # saved with the marker's next step, not before
    pre = preflight(ctx, opts)
    if not marker.done("failover-point"):
        pre["hanging_transactions"] = refuse_hanging_transactions(ctx, opts, pre)
        parity = flow_parity(ctx, pre["topics"], source_up=pre["source_reachable"])
        if parity is not None:
            refuse_unless_forced([parity], force=opts.force, operation="fail over", ctx=ctx,
                                 unknown_refuses=False)
            pre["schemas"] = parity.as_dict()
            if not opts.dry_run:
                marker.schemas["failover"] = [pre["schemas"]]  # saved with the next step
    if approve is not None and not opts.dry_run:
        clock.phase("approval")
        approve(preview(ctx, opts, marker, resumed, superseded, pre))
    run.under_way = True
    if pre["source_reachable"] and not opts.dry_run:
        # Should this failover stop half-way and the source die, the next run still knows
        # every topic and group it had.
        clock.phase("inventory")
        inventory = keep_inventory(config, ctx.source, ctx.target)
        ctx.notify(inventory.describe())
        pre["inventory"] = inventory.as_dict()
    if not opts.dry_run and not marker.topics:
        with flow_locked(ctx, f"drctl failover, incident {marker.incident}"):
            claim(ctx, marker, superseded, pre["topics"])
    if not opts.dry_run:
        run.incident = marker.incident  # recorded: a run again continues it
    result = FailoverResult(marker, opts.dry_run, resumed=resumed, clock=clock,
                            objectives=config.objectives)
    if result.resumed:
        ctx.notify(f"Continuing incident {marker.incident} (done: {', '.join(marker.steps)})")
    result.preflight = pre
    topics: dict[str, str] = marker.topics or pre["topics"]
    plan = result.plan

    # 1. Planned: wait for a quiet, fully replicated source.
    if opts.planned and not marker.done("catch-up"):
        clock.phase("catch-up")
        plan.append({"step": "catch-up", "action": "wait for quiet source and zero lag"})
        if not opts.dry_run:
            caught = wait_quiet_and_caught_up(ctx, topics, opts)
            marker.record("catch-up", {"source_end": caught})
            store.save(marker)
            crash_point("catch-up")

    # 2. Stop replication into the target.
    # A stop left pending (Connect was unreachable) is tried again on every re-run.
    if not marker.done("stop-replication") or marker.replication_stop == "pending":
        clock.phase("stop-replication")
        plan.append({"step": "stop-replication", "connectors": list(rep.connect.connectors)})
        if not opts.dry_run:
            ctx.notify("Stopping replication into the target")
            for warning in kind.ownership_warnings(rep):
                ctx.notify(warning)
            part = _part(ctx, topics, pre)
            with flow_locked(ctx, f"drctl failover, incident {marker.incident}") as hold:
                if part is None:
                    outcome = kind.stop_forward(rep, confirm=confirm,
                                                reach_deadline_s=opts.source_deadline_s)
                else:
                    with hold.pausing(copying(ctx)):
                        outcome = leave_out(ctx, marker, part,
                                            store.open_markers(rep.source, rep.target),
                                            confirm)
                marker.replication_stop = outcome.state
                marker.stopped_connectors = outcome.connectors
                if outcome.state == "pending":
                    marker.stop_unconfirmed = True
                marker.record("stop-replication", {"state": outcome.state,
                                                   "detail": outcome.detail})
                store.save(marker)
            crash_point("stop-replication")
    elif marker.replication_stop == "stopped" and marker.stopped_connectors:
        clock.phase("stop-replication")
        reissued = _stop_still_holds(ctx, marker, opts.dry_run, _part(ctx, topics, pre))
        if reissued:
            plan.append({"step": "stop-replication", "reissue": reissued})

    # 2b. Fence what the stop could not confirm, before the failover point is taken.
    if opts.dry_run:
        if marker.replication_stop == "pending" or not marker.done("stop-replication"):
            plan.append({"step": "fence-replication",
                         "when": "the stop is not confirmed (Connect unreachable)",
                         "principal": rep.principal, "topics": fence_topics(rep, topics)})
    else:
        fence_unconfirmed_stop(ctx, marker, topics)
        if marker.fence.get("state") in (FENCED, UNFENCED):  # a fence was needed
            marker.record("fence-replication", marker.fence)
            store.save(marker)

    # 3. The failover point.
    if not marker.done("failover-point"):
        clock.phase("failover-point")
        dst = ctx.clients(rep.target)
        failover_point = read_ends(dst, sorted(topics.values()))
        created = ensure_failover_topics(ctx, topics, opts.dry_run)
        plan.append({"step": "failover-point", "failover_point": failover_point,
                     "create_failover_topics": created})
        if not opts.dry_run:
            marker.topics = topics
            marker.failover_point = failover_point
            marker.settled = settled_by_last_return(store, marker.source, marker.target)
            marker.failover_time_ms = int(time.time() * 1000)
            if not rep.names_kept:
                marker.failover_topics_end = read_ends(dst, [rep.failover_topic(t) for t in topics])
            held_back: dict[str, dict[str, int]] = {}  # as JSON keeps it
            if pre["source_reachable"]:
                try:
                    src = ctx.clients(rep.source)
                    marker.source_end = read_ends(src, sorted(topics))
                    # Ends past the last stable offsets: records an open transaction holds
                    # back, which the replicator never copied (the RPO counts them).
                    held_back = {t: {str(p): end for p, end in parts.items()
                                     if end > marker.source_end[t][p]}
                                 for t, parts in read_ends(src, sorted(topics),
                                                          read_committed=False).items()}
                    held_back = {t: parts for t, parts in held_back.items() if parts}
                except Exception:  # noqa: BLE001 - best effort: the source may be dying
                    marker.source_end = None
            marker.record("failover-point", {"created_failover_topics": created,
                                             "source_held_back": held_back})
            store.save(marker)
            crash_point("failover-point")

    # 3b. A stop that was pending is confirmed now: what came through meanwhile?
    if (marker.stop_unconfirmed and marker.replication_stop == "stopped"
            and marker.failover_point and not opts.dry_run):
        check_late_copies(ctx, marker, pre["source_reachable"])
        store.save(marker)

    # 4. Group offsets.
    if not marker.done("translate-offsets"):
        clock.phase("translate-offsets")
        ctx.notify("Translating consumer-group offsets")
        report = translate_offsets(ctx, TranslateRequest(
            rep.source, rep.target, groups=opts.groups, method=opts.method,
            apply=not opts.dry_run, source_deadline_s=opts.source_deadline_s,
            source_reachable=pre["source_reachable"],
            # No group read past F: records after it are post-failover writes (a re-run
            # after a crash finds some). With prefixed names a group reading an earlier
            # incident's reverse copies goes to the failover topic, capped at its end.
            target_ends=marker.ends_at_failover or None))
        result.translation = report.as_dict()
        result.translation_report = report
        plan.append({"step": "translate-offsets", "summary": report.summary()})
        if not opts.dry_run:
            # The positions applied, per target topic and partition: what the audit at
            # failback (ops/steps/audit.py) compares with where each group really was.
            marker.groups = {g.group: {"applied": g.applied, "skipped": g.skipped,
                                       "confidence": sorted({p.confidence
                                                             for p in g.partitions}),
                                       "positions": marker_positions(g)}
                             for g in report.groups}
            marker.left_behind = left_behind(ctx, report, pre["source_reachable"], topics,
                                             opts.groups, pre.get("unmirrored", ()),
                                             marker.failover_point)
            marker.record("translate-offsets", report.summary())
            store.save(marker)
            crash_point("translate-offsets")

    # 5. The report: the RPO at the failover point, the unreplicated records per partition.
    if opts.dry_run:
        clock.stop()
        return result
    clock.phase("report")
    ranges = unreplicated_ranges(ctx, marker)
    result.unreplicated = estimate_unreplicated(ctx, marker, ranges)
    if not marker.rpo or marker.rpo.get("method") == RpoMethod.unknown:
        # Measured once; an unknown one is measured again (the source may answer now).
        rpo = measure_rpo(ctx, marker, ranges)
        marker.rpo = rpo.as_dict()
        ctx.notify(f"RPO: {rpo.sentence()}")
    if not marker.done("failover"):
        marker.record("failover", {"planned": opts.planned})
    clock.stop(finished=True)
    store.save(marker)
    return result


def claim(ctx: OpsContext, marker: FailoverMarker, superseded: Sequence[FailoverMarker],
          topics: Mapping[str, str]) -> None:
    """Under the flow's lock, before anything stops: the open incidents read again (one
    opened since this failover began may overlap it now: refused, both named; for the whole
    flow, its topics are left out), then this incident recorded with its topics — the next
    failover sees them — and those it supersedes closed (the connector entries they wrote
    become its own, taken out at its return)."""
    store, rep = ctx.store, ctx.rep
    gone = {old.incident for old in superseded}
    others = [m for m in store.open_markers(rep.source, rep.target)
              if m.incident != marker.incident and m.incident not in gone]
    scope, _ = scope_among_open(marker.covers, others)
    if scope != marker.covers:
        marker.scope = scope.as_dict()
        ctx.scope = scope
    marker.topics = {t: m for t, m in sorted(topics.items()) if scope.covers_topic(t)}
    for old in superseded:
        ctx.notify(f"Incident {old.incident} ({old.phase}) is superseded by "
                   f"{marker.incident} and closed without finishing")
        old.record("superseded", {"by": marker.incident, "phase": old.phase.value})
        old.status = "closed"
        marker.edits += [e for e in old.edits if e not in marker.edits]
        store.save(old)
    store.save(marker)


def _part(ctx: OpsContext, topics: Mapping[str, str], pre: Mapping[str, Any]
          ) -> FlowPart | None:
    """What an application's failover stops: its topics, and its groups when it names
    them; None for the whole flow."""
    if ctx.scope.whole:
        return None
    return FlowPart(ctx.scope.name, tuple(sorted(topics)), tuple(pre.get("scope_groups", ())))


def _stop_still_holds(ctx: OpsContext, marker: FailoverMarker, dry_run: bool,
                      part: FlowPart | None = None) -> list[str]:
    """A stop recorded as done can come undone (a restart of the Kafka cluster holding the
    Connect worker's topics leaves connectors UNASSIGNED; a restored worker runs them): read
    the connectors again and re-issue the stop where it no longer holds. Returns those. An
    application's stop holds while its part is left out of the connectors."""
    rep = ctx.rep
    kind = ctx.require_kind()
    if part is not None:
        if kind.edits_hold(rep, recorded_edits(ctx, marker), part) is not False:
            return []
        ctx.notify(f"{part.name} is no longer left out of forward replication; "
                   + ("a run would leave it out again" if dry_run else "leaving it out again"))
        if not dry_run:
            marker.stop_unconfirmed = True  # count what it copied meanwhile as late copies
            with flow_locked(ctx, f"drctl failover, incident {marker.incident}") as hold, \
                    hold.pausing(copying(ctx)):
                leave_out(ctx, marker, part, ctx.store.open_markers(rep.source, rep.target))
        return list(marker.stopped_connectors)
    found = kind.forward_state(rep)
    loose = [*found.copying, *found.unconfirmed]
    if not found.readable or not loose:
        return []
    if dry_run:
        ctx.notify(f"The recorded stop no longer holds ({found.describe(loose)}); a run would "
               "issue it again")
        return loose
    ctx.notify(f"The recorded stop no longer holds ({found.describe(loose)}); issuing it again")
    if found.copying:
        ctx.notify(f"Warning: {found.describe(found.copying)}: it may have copied source records "
               "into the target after the failover point.")
        marker.stop_unconfirmed = True  # count its late copies once the stop holds again
    now = kind.restop_forward(rep, loose)
    if now.copying:
        raise CheckFailed(f"Replication did not stop again: {now.describe(now.copying)}.",
                          "Check the Connect worker's log, stop the connectors, and run "
                          "failover again.")
    if now.unconfirmed:
        ctx.notify(f"Warning: {now.describe(now.unconfirmed)} after the stop was issued again: it "
               f"copies nothing now, but it is not confirmed stopped. {now.unconfirmed_remedy}.")
    marker.record("stop-replication", {**marker.steps["stop-replication"].result,
                                       "reissued": {"found": found.components,
                                                    "now": now.as_dict()}})
    ctx.markers(rep.target).save(marker)
    return loose


def unreplicated_ranges(ctx: OpsContext, marker: FailoverMarker
                        ) -> dict[TP, tuple[int, int]] | None:
    """Per source partition, the offsets the target lacked at the failover point: from the
    one after the source's copy of the target's last record at F (or the source's low
    watermark) to the source's end at F. None when the source is gone or cannot be read."""
    if not marker.source_end:
        return None
    src, dst = ctx.source, ctx.target
    try:
        src_admin, dst_admin = src.admin(), dst.admin()
        src_tps = [(t, p) for t, parts in marker.source_end.items() for p in parts]
        src_marks = watermarks(src_admin, src_tps)
        a = Side.of(src, src_admin, src_marks)
        dst_marks = {(marker.topics[t], p): (0, marker.failover_point[marker.topics[t]][p])
                     for t, p in src_tps}
        b = Side.of(dst, dst_admin, dst_marks)
        tails = last_records(b, [((marker.topics[t], p), dst_marks[(marker.topics[t], p)][1])
                                 for t, p in src_tps])
        queries, order = [], []
        for tp, (tail, _) in zip(src_tps, tails, strict=True):
            if tail is not None:
                queries.append(MatchQuery(tail, tp))
                order.append(tp)
        found = dict(zip(order, match_records(b, a, queries), strict=True))
    except Exception:  # noqa: BLE001 - the report's measures must never fail the failover
        return None
    point = marker.steps.get("failover-point")
    held_back = (point.result.get("source_held_back") or {}) if point is not None else {}
    ranges = {}
    for t, p in src_tps:
        m = found.get((t, p))
        start = (m.offset + 1) if m is not None and m.offset is not None else 0
        # Up to the source's end at F, past the LSO where an open transaction held records
        # back: the replicator copied none of them.
        end = max(marker.source_end[t][p], int((held_back.get(t) or {}).get(str(p), 0)))
        ranges[(t, p)] = (max(start, src_marks[(t, p)][0]), end)
    return ranges


def estimate_unreplicated(ctx: OpsContext, marker: FailoverMarker,
                          ranges: Mapping[TP, tuple[int, int]] | None
                          ) -> list[dict[str, Any]] | None:
    """Per partition of `ranges` (unreplicated_ranges): the visible source records the target
    lacked at F (capped at a million per partition); None when the source is gone."""
    if ranges is None or not marker.source_end:
        return None
    src = ctx.source
    try:
        src_tps = list(ranges)
        capped = {tp: (max(start, end - 1_000_000), end) for tp, (start, end) in ranges.items()}
        below, held = split_at_stable(src, capped)
        a = Side.of(src, src.admin(), watermarks(src.admin(), src_tps))
        # Count visible records: transaction markers and aborted records take offsets too.
        counts = dict(zip(below, (len(r) for r in a.reader.read(
            [RangeRequest(tp, start, end) for tp, (start, end) in below.items()])),
            strict=True))
        # Behind an open transaction every record counts: none of them was copied.
        held_counts = count_records(src, held, isolation="read_uncommitted")
    except Exception:  # noqa: BLE001 - an estimate must never fail the failover report
        return None
    return [{"topic": t, "partition": p, "source_end": marker.source_end[t][p],
             "target_end": marker.failover_point[marker.topics[t]][p],
             "estimate": counts.get((t, p), 0) + held_counts.get((t, p), 0)}
            for t, p in src_tps]


def measure_rpo(ctx: OpsContext, marker: FailoverMarker,
                ranges: Mapping[TP, tuple[int, int]] | None) -> Rpo:
    """The RPO at the failover point (ops/steps/rpo.py): from the oldest source record the target
    lacked at F when the source answers (`ranges`: unreplicated_ranges), else from the newest
    heartbeat the target holds that was copied from the source, else unknown."""
    at_ms = marker.failover_time_ms or int(time.time() * 1000)
    if ranges is not None:
        try:
            lacking = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
            return rpo_from_records(oldest_records(ctx.source, lacking), at_ms)
        except Exception:  # noqa: BLE001 - the source may be dying: try the heartbeats
            pass
    rep = ctx.rep
    topic = heartbeats_topic(rep.source_alias)
    return rpo_from_heartbeat(newest_copied_heartbeat(ctx.target, rep.source_alias,
                                                      until_ms=at_ms), at_ms, topic)


def report_context(ctx: OpsContext, marker: FailoverMarker,
                   unreplicated: list[dict[str, Any]] | None = None,
                   scorecard: Mapping[str, Any] | None = None) -> dict[str, Any]:
    from datetime import UTC, datetime

    config, rep = ctx.config, ctx.rep
    when = (datetime.fromtimestamp(marker.failover_time_ms / 1000, UTC).isoformat(
        timespec="seconds") if marker.failover_time_ms else "not yet")
    return {
        "marker": marker.as_data(),
        "failover_time": when,
        "open_risks": open_risks(marker),
        "left_behind": describe_left_behind(marker),
        "unreplicated": unreplicated,
        "scorecard": dict(scorecard) if scorecard else None,
        "source_bootstrap": config.cluster(rep.source)["bootstrap.servers"],
        "target_bootstrap": config.cluster(rep.target)["bootstrap.servers"],
        "failover_topics": {t: rep.failover_topic(t) for t in marker.topics},
    }

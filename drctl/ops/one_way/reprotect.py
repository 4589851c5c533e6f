"""`drctl reprotect`: the return to protection, where an incident ends (docs/design.md §6).

After failback the reverse flow (target -> source) runs and forward replication is stopped:
the pair is exposed, and a second loss of the source would lose everything written since.
Resuming the forward flow as it was would copy, from the positions it stored before the
outage, the gap records (already reconciled onto the target) and the reverse copies of the
post-failover writes (which came from the target) a second time. So, each step recorded in
the marker before the next:

1. quiet — the producers are back on the source: no transaction is open on the target's
   failover topics (waited for within `--timeout`), they take no writes for a settle period,
   and the reverse flow has caught up (`--force` goes on and says so);
2. reverse-retired — the reverse flow is stopped and deleted, its last positions recorded;
3. cut-over (ops/one_way/cut_over.py) — the failover topics' ends E are read, every post-failover
   write below E the source lacks is copied there, then per source partition: where forward
   copying starts, right after the source's copies of the post-failover writes (names kept)
   or where failback's comparison ended (prefixed names). A record written natively on the
   source before that point (a producer that moved back early) would never be copied: drctl
   copies it to the target;
4. forward-start — the forward flow's stored positions set to the cut-over (MirrorMaker 2:
   Connect's offsets API; Replicator: its consumer group);
5. forward-resumed — forward replication started, after checking that no reverse flow copies
   (with names kept the two would form a cycle) and that nobody wrote to the failover topics
   since E (else the cut-over is taken again after the producers moved: exit 3; `--force`
   goes on and names those writes, which stay on the target only);
6. verified — every source record written after the cut-over reaches the target, once, and
   nothing was written to the target alone; then the incident is closed.

A re-run continues after the last recorded step; `--dry-run` prints the positions it would set.
Each run's phases (the steps above) are timed from its start and kept in the marker
(ops/one_way/phases.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from drctl.context import OpsContext
from drctl.errors import CheckFailed, UsageError
from drctl.faults import crash_point
from drctl.fingerprint import is_reconciled
from drctl.flow_lock import Hold
from drctl.kafka.clients import ClusterClients, describe_with_retry
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import stream_ranges
from drctl.kafka.topics import TP, log_append_time_topics
from drctl.ops.one_way.copies import copy_fingerprint, timestamps_kept
from drctl.ops.one_way.cut_over import (
    CUT_OVER_STEP,
    carry_post_failover_writes,
    copy_strays,
    failover_topic_ends,
    plan_cut_over,
    tp_offsets,
    writes_since,
)
from drctl.ops.one_way.phases import PhaseClock, command_timing
from drctl.ops.one_way.quiet import Ends, Writes, wait_transactions_closed
from drctl.ops.one_way.reverse import failover_starts, wait_reverse_caught_up
from drctl.ops.one_way.scorecard import operation_scorecard
from drctl.ops.steps.scope import flow_part, the_open_incident
from drctl.ops.steps.side_by_side import (
    RESUMED_STEP,
    WAITING,
    copying,
    flow_locked,
    forward_holder,
    recorded_edits,
    resume_when_free,
    take_back,
    waiting_for,
)
from drctl.progress import Ticker
from drctl.replication.base import Confirm, ReturnRequest
from drctl.reports import write_report
from drctl.rerun import rerun_while_dropped
from drctl.retry import WaitTimedOut, wait_for
from drctl.state import FailoverMarker, IncidentPhase, Offsets
from drctl.timeparse import format_duration
from drctl.translate.locate import MatchQuery, Side, last_records, match_records


@dataclass(frozen=True)
class ReprotectOptions:
    incident: str | None = None
    dry_run: bool = False
    force: bool = False  # go on while the target's failover topics still take writes
    settle_s: float = 10.0  # the failover topics must take no write for this long
    deadline_s: float = 30.0  # reaching each cluster
    timeout_s: float = 900.0  # the reverse catch-up and the forward verification


@dataclass
class ReprotectResult:
    marker: FailoverMarker
    dry_run: bool = False
    resumed: bool = False
    plan: list[dict[str, Any]] = field(default_factory=list)
    forced: list[str] = field(default_factory=list)  # what --force went past, in words
    # The open incident holding the forward flow stopped, which this return waits for.
    waiting_for: str | None = None
    finished: list[dict[str, Any]] = field(default_factory=list)  # returns that waited
    clock: PhaseClock | None = None  # this run's phases (None: a result not from a run)

    @property
    def phases_s(self) -> dict[str, float]:
        """How long each phase of this run took."""
        return {} if self.clock is None else self.clock.phases_s

    def scorecard(self) -> dict[str, Any]:
        """This run's phases and the incident's earlier reprotect runs (ops/one_way/phases.py)."""
        this = None if self.clock is None else self.clock.as_run()
        return operation_scorecard("reprotect", self.marker.incident,
                                   command_timing(self.marker.timings, "reprotect", this))

    def step(self, name: str) -> dict[str, Any]:
        rec = self.marker.steps.get(f"reprotect:{name}")
        return rec.result if rec is not None else {}

    @property
    def forward_starts(self) -> dict[str, dict[str, int]]:
        return self.step("cut-over").get("forward_starts", {})

    def summary(self) -> dict[str, Any]:
        verified = self.step("verified")
        return {"incident": self.marker.incident, "phase": self.marker.phase.value,
                "status": self.marker.status, "dry_run": self.dry_run,
                "reverse_retired": self.step("reverse-retired").get("state"),
                "carried_to_source": self.step("cut-over").get("carried", {}).get(
                    "copied", 0),
                "strays_copied": sum(self.step("cut-over").get("strays", {}).values()),
                "forward_copied": verified.get("copied", 0),
                "verified_ok": verified.get("ok"),
                "forced": self.forced or self.step("quiet").get("forced", []),
                "waiting_for": self.waiting_for, "finished": self.finished}

    def as_dict(self, reports: Sequence[Path] = ()) -> dict[str, Any]:
        """The JSON of `drctl reprotect`."""
        steps = {k.removeprefix("reprotect:"): v.result for k, v in self.marker.steps.items()
                 if k.startswith("reprotect:")}
        return {**self.summary(), "resumed": self.resumed, "plan": self.plan, "steps": steps,
                "phases_s": self.phases_s, "timing": self.scorecard()["timing"],
                "scorecard": self.scorecard(),
                "marker": None if self.dry_run else self.marker.as_data(),
                "reports": [str(p) for p in reports]}

    def runbook_summary(self, reports: Sequence[Path] = ()) -> dict[str, Any]:
        """The result of the `reprotect` runbook action, which step outputs read."""
        return {**self.summary(), "forward_starts": self.forward_starts,
                "phases_s": self.phases_s, "scorecard": self.scorecard(),
                "reports": [str(p) for p in reports]}

    def write_reports(self, ctx: OpsContext, directory: Path | None = None) -> list[Path]:
        """The reprotect report (default: STATE_DIR/reports); a dry run writes none."""
        if self.dry_run:
            return []
        config = ctx.config
        context = {"marker": self.marker.as_data(), "summary": self.summary(),
                   "steps": {k.removeprefix("reprotect:"): v.result
                             for k, v in self.marker.steps.items()
                             if k.startswith("reprotect:")},
                   "phases_s": self.phases_s, "scorecard": self.scorecard()}
        return write_report(directory or (config.state.dir / "reports"),
                            f"{self.marker.incident}-reprotect", context, "reprotect-report",
                            config.redactor)


def marker_to_reprotect(ctx: OpsContext, incident: str | None) -> FailoverMarker:
    """The incident whose failback is done (or whose return began) — or, with none of the
    command's scope open, the scope's incident a return closed last: run again, a return
    that finished (or that the whole flow's return finished) says so. A usage error naming
    what to run instead otherwise."""
    last = None if incident else last_returned(ctx)
    if last is not None:
        ctx.scope = last.covers
        return last
    marker = the_open_incident(ctx, incident, "return from")
    if marker.phase not in (IncidentPhase.FAILED_BACK, IncidentPhase.REPROTECTING,
                            IncidentPhase.CLOSED):
        raise UsageError(f"Incident {marker.incident} is {marker.phase}: its failback is not "
                         "done, so the reverse flow is not what the source needs yet.",
                         f"Run `{marker.phase.next_command}` first.")
    return marker


def last_returned(ctx: OpsContext) -> FailoverMarker | None:
    """The last incident of the command's scope a return closed, when none of it is open."""
    rep, scope = ctx.rep, ctx.scope
    store = ctx.markers(rep.target)
    if any(scope.whole or m.covers.name == scope.name
           for m in store.open_markers(rep.source, rep.target)):
        return None
    mine = [m for m in store.returned(rep.source, rep.target) if m.covers.name == scope.name]
    return mine[-1] if mine else None


def preview(ctx: OpsContext, marker: FailoverMarker, opts: ReprotectOptions
            ) -> dict[str, Any]:
    """What the return to protection is about to do, once both clusters answered: what the
    operator approves."""
    rep = ctx.rep
    return {"source": rep.source, "target": rep.target, "incident": marker.incident,
            "phase": marker.phase.value,
            "done": [s for s in marker.steps if s.startswith("reprotect:")],
            "reverse_topics": sorted(failover_starts(rep, marker)),
            "connectors": list(rep.connect.connectors), "settle_s": opts.settle_s,
            "force": opts.force}


def run_reprotect(ctx: OpsContext, opts: ReprotectOptions, *,
                  confirm: Confirm | None = None,
                  approve: Callable[[dict[str, Any]], None] | None = None) -> ReprotectResult:
    """The return to protection (module docstring); a cluster that drops once it is under
    way is waited for within `--deadline`, then it runs again from the last step recorded
    (drctl/rerun.py); one that stays silent ends it (exit 4). `approve` (not in a dry run)
    sees the plan once both clusters answered, before anything changes, and raises to
    refuse."""
    rep = ctx.rep
    under_way = [False]
    clock = PhaseClock("reprotect")  # one run, however often a dropped cluster restarts it

    def once() -> ReprotectResult:
        # Asked once: a run again after a dropped cluster continues what was approved.
        return _reprotect_once(ctx, opts, confirm, under_way, clock,
                               None if under_way[0] else approve)

    return rerun_while_dropped(once, ctx, (rep.source, rep.target), opts.deadline_s,
                               "the return to protection", started=lambda: under_way[0])


def _reprotect_once(ctx: OpsContext, opts: ReprotectOptions, confirm: Confirm | None,
                    under_way: list[bool], clock: PhaseClock,
                    approve: Callable[[dict[str, Any]], None] | None = None
                    ) -> ReprotectResult:
    clock.phase("preflight")
    config, notify = ctx.config, ctx.notify
    rep = ctx.rep
    kind = ctx.require_kind()
    marker = marker_to_reprotect(ctx, opts.incident)
    store = ctx.markers(rep.target)
    result = ReprotectResult(marker, opts.dry_run,
                             resumed=any(k.startswith("reprotect:") for k in marker.steps),
                             clock=clock)
    if marker.status == "closed":
        notify(f"Incident {marker.incident} is closed: the pair was returned to protection "
               "already")
        clock.stop()
        if not opts.dry_run:
            result.finished = finish_waiting(ctx, marker, opts, confirm)
        return result
    if not opts.dry_run:
        clock.keep_in(marker.timings)  # a marker read again after a drop keeps it once
    notify(f"Return to protection, incident {marker.incident}: {rep.source} -> {rep.target}")
    for name in (rep.source, rep.target):
        describe_with_retry(ctx.clients(name), config.retry.with_deadline(opts.deadline_s),
                            notify=notify)
    if approve is not None and not opts.dry_run:
        approve(preview(ctx, marker, opts))
    under_way[0] = True
    request = ReturnRequest(marker.incident, sorted(failover_starts(rep, marker)), {},
                            config.state.dir / "reprotect", flow_part(marker),
                            tuple(recorded_edits(ctx, marker)))

    # 1. The producers are back on the source; the reverse flow has carried their writes.
    if not marker.done("reprotect:quiet"):
        clock.phase("quiet")
        quiet = quiet_and_caught_up(ctx, marker, opts)
        result.forced += quiet.get("forced", [])
        result.plan.append({"step": "quiet", **quiet})
        if not opts.dry_run:
            marker.record("reprotect:quiet", quiet)
            store.save(marker)
            crash_point("reprotect:quiet")

    # 2. Retire the reverse flow.
    if not marker.done("reprotect:reverse-retired"):
        clock.phase("reverse-retired")
        result.plan.append({"step": "reverse-retired", "topics": request.reverse_topics})
        if not opts.dry_run:
            retired = kind.retire_reverse(ctx, request, notify, confirm)
            marker.record("reprotect:reverse-retired", retired)
            store.save(marker)
            crash_point("reprotect:reverse-retired")

    # 3. Every post-failover write on the source, then where forward copying starts.
    if not marker.done(CUT_OVER_STEP):
        clock.phase("cut-over")
        cut = take_cut_over(ctx, marker, opts, result)
        result.plan.append({"step": "cut-over", "forward_starts": cut["forward_starts"],
                            "strays": cut["strays"]})
        if opts.dry_run:
            request = replace(request, forward_starts=_offsets(cut["forward_starts"]))
    if not opts.dry_run:
        request = replace(request, forward_starts=_offsets(result.forward_starts))

    # 4. and 5., under the flow's lock: they edit and resume connectors other incidents share.
    if opts.dry_run:
        if not marker.done("reprotect:forward-start"):
            result.plan.append({"step": "forward-start", **kind.set_forward_start(
                ctx, request, notify, confirm, dry_run=True)})
        if not marker.done(RESUMED_STEP):
            result.plan.append({"step": "forward-resumed",
                                "connectors": list(rep.connect.connectors)})
    elif not marker.done(RESUMED_STEP):
        with flow_locked(ctx, f"drctl reprotect, incident {marker.incident}") as hold:
            holder = _forward_steps(ctx, marker, opts, request, result, hold, confirm)
        if holder is not None:
            # Held stopped by a whole-flow incident: its return resumes the forward flow
            # and finishes this one (the rest of this return waits for it).
            result.waiting_for = holder.incident
            notify(f"{marker.covers.describe_first()} is taken back into forward "
                   f"replication from its cut-over, which stays stopped while incident "
                   f"{holder.incident} ({holder.covers.describe()}, {holder.phase}) is open: "
                   f"its return (`drctl reprotect --incident {holder.incident}`) resumes it "
                   "and finishes this incident")
            clock.stop()
            return result

    # 6. Measured, not assumed: what the source received since the cut-over is on the target.
    if not opts.dry_run and not marker.done("reprotect:verified"):
        clock.phase("verified")
        check = verify_forward(ctx, marker, opts.timeout_s, forced=opts.force)
        marker.record("reprotect:verified", check,
                      status="done" if check["ok"] else "failed")
        store.save(marker)
        if not check["ok"]:
            raise CheckFailed(
                f"Forward replication resumed, but the target does not hold what the source "
                f"received since the cut-over: {check['missing']:,} record(s) missing, "
                f"{check['extra']:,} there twice"
                + (f", {check['target_only']:,} written to {rep.target} only"
                   if check["target_only"] else "")
                + f" ({_bad_partitions(check)}).",
                (f"Records written to {rep.target} after the cut-over stay there only: move "
                 f"those producers to {rep.source}; `drctl reprotect --incident "
                 f"{marker.incident} --force` then closes the incident naming them."
                 if check["target_only"] and not (check["missing"] or check["extra"]) else
                 f"The incident stays open. Inspect those partitions, then run `drctl "
                 f"reprotect --incident {marker.incident}` again."))
        if check["target_only"]:
            result.forced.append(f"{check['target_only']:,} record(s) written to {rep.target} "
                                 "after the cut-over stay there only")
        crash_point("reprotect:verified")

    clock.stop(finished=not opts.dry_run)
    if not opts.dry_run:
        marker.status = "closed"
        marker.record("reprotect", {"phases_s": result.phases_s})
        store.save(marker)
        result.finished = finish_waiting(ctx, marker, opts, confirm)
    return result


def _forward_steps(ctx: OpsContext, marker: FailoverMarker, opts: ReprotectOptions,
                   request: ReturnRequest, result: ReprotectResult, hold: Hold,
                   confirm: Confirm | None) -> FailoverMarker | None:
    """4. The forward flow's start set, then 5. the flow resumed — never while this
    incident's reverse flow copies with names kept, never over writes the cut-over did not
    carry, never while another open incident holds it stopped (that one is returned, and
    this incident waits for it). A shared connector stopped for a moment is resumed before
    any check can refuse."""
    rep, kind, notify, store = ctx.rep, ctx.require_kind(), ctx.notify, ctx.store
    clock = result.clock
    if not marker.done("reprotect:forward-start"):
        if clock is not None:
            clock.phase("forward-start")
        with hold.pausing(copying(ctx)):
            applied = kind.set_forward_start(ctx, request, notify, confirm)
        result.plan.append({"step": "forward-start", **applied})
        marker.record("reprotect:forward-start", applied)
        store.save(marker)
        crash_point("reprotect:forward-start")
    if clock is not None:
        clock.phase("forward-resumed")
    result.plan.append({"step": "forward-resumed", "connectors": list(rep.connect.connectors)})
    reverse = kind.reverse_state(ctx, request.part)
    if rep.names_kept and reverse.copying:
        raise CheckFailed(
            f"The reverse flow still copies ({reverse.describe(reverse.copying)}): "
            f"resuming {', '.join(rep.connect.connectors) or 'forward replication'} "
            "now would, with topic names kept, form a cycle.",
            "Stop the reverse connector, then run reprotect again.")
    opened = store.open_markers(rep.source, rep.target)
    late: dict[str, Any] = {}
    if not copies_already(ctx, marker, opened):
        late = no_writes_since_cut(ctx, marker, opts, result)
        if forward_holder(opened, but=marker) is None:
            waiting_checked(ctx, marker, opened, opts, result)
    with hold.pausing(copying(ctx)):
        taken = take_back(ctx, marker, opened)
    resumed = resume_when_free(ctx, marker, opened, confirm)
    if isinstance(resumed, FailoverMarker):
        marker.record(RESUMED_STEP, {"held_by": resumed.incident, "taken_back": taken},
                      status=WAITING)
        store.save(marker)
        return resumed
    marker.record(RESUMED_STEP, {"components": resumed.components,
                                 "at_ms": int(time.time() * 1000), "taken_back": taken,
                                 **late})
    store.save(marker)
    crash_point(RESUMED_STEP)
    return None


def finish_waiting(ctx: OpsContext, marker: FailoverMarker, opts: ReprotectOptions,
                   confirm: Confirm | None) -> list[dict[str, Any]]:
    """The returns that waited for the forward flow `marker` held stopped, finished now
    that it runs (and any whose holder was closed otherwise): each resumed, verified and
    closed; their summaries."""
    scope, out, tried = ctx.scope, [], set()
    try:
        while True:  # read again each time: a finished return may have finished others
            opened = ctx.store.open_markers(ctx.rep.source, ctx.rep.target)
            if forward_holder(opened) is not None:
                break  # another whole-flow incident holds the flow stopped: they wait for it
            todo = [m for m in opened if waiting_for(m) and m.incident not in tried]
            if not todo:
                break
            m = todo[0]
            tried.add(m.incident)
            ctx.notify(f"Finishing the return of incident {m.incident} "
                       f"({m.covers.describe()}), which waited for {marker.incident}")
            done = _reprotect_once(ctx, replace(opts, incident=m.incident), confirm, [True],
                                   PhaseClock("reprotect"))
            out.append(done.summary())
    finally:
        ctx.scope = scope
    return out


def take_cut_over(ctx: OpsContext, marker: FailoverMarker, opts: ReprotectOptions,
                  result: ReprotectResult) -> dict[str, Any]:
    """Carry every post-failover write below the failover topics' ends now to the source, take the
    cut (ops/one_way/cut_over.py) and copy the strays. The plan is recorded before the strays are
    copied: a run killed while copying finds it and copies none twice. A dry run carries and copies
    nothing."""
    store = ctx.markers(ctx.rep.target)
    pending = marker.steps.get(CUT_OVER_STEP)
    if pending is not None and pending.status == "copying" and not opts.dry_run:
        cut = dict(pending.result)  # taken by a run that stopped while copying: keep it
    else:
        ends = failover_topic_ends(ctx, marker)
        if not opts.dry_run:
            carried = carry_post_failover_writes(ctx, marker, ends)
        cut = plan_cut_over(ctx, marker, ends)
        if not opts.dry_run:
            cut["carried"] = carried
        _refuse_what_cannot_be_cut(ctx, marker, cut, opts, result)
        if opts.dry_run:
            return cut
        marker.record(CUT_OVER_STEP, cut, status="copying")
        store.save(marker)
        crash_point("reprotect:cut-over-planned")
    cut["strays_copied"] = copy_strays(ctx, marker, cut)
    crash_point("reprotect:strays-copied")  # copied, not recorded: a re-run finds the tags
    marker.record(CUT_OVER_STEP, cut)
    store.save(marker)
    crash_point(CUT_OVER_STEP)
    return cut


def _refuse_what_cannot_be_cut(ctx: OpsContext, marker: FailoverMarker, cut: dict[str, Any],
                               opts: ReprotectOptions, result: ReprotectResult) -> None:
    """Post-failover writes the source still lacks after they were carried, and records
    retention may have removed from both clusters, stop the return (exit 3) — the latter
    goes on under --force, named."""
    rep = ctx.rep
    missing = cut.get("missing") or {}
    if missing and not opts.dry_run:
        raise CheckFailed(
            f"{sum(missing.values()):,} post-failover write(s) are not on {rep.source} although "
            f"drctl carried what it lacked ({', '.join(f'{k}: {v}' for k, v in missing.items())})"
            ".", "Run reprotect again: the cut-over carries what the source lacks first.")
    lost = cut["retention"]["lost"]
    if lost:
        what = ", ".join(f"{k}: up to {v}" for k, v in sorted(lost.items()))
        if not opts.force and not opts.dry_run:
            raise CheckFailed(
                f"Retention removed records before the return could carry them: {what} "
                "record(s) may now exist on neither cluster.",
                "Nothing brings them back. Run reprotect again with --force to return to "
                "protection without them (they are named in the report).")
        result.forced.append(f"records removed by retention before the return: {what}")
    carried = (cut.get("carried") or {}).get("retention") or {}
    for side, cluster in (("source", rep.source), ("target", rep.target)):
        took = {**cut["retention"][side], **carried.get(side, {})}
        if took:
            ctx.notify(f"Retention on {cluster} removed offsets before the cut-over read them "
                       f"(read from the log start): "
                       + ", ".join(f"{k} {v}" for k, v in sorted(took.items())))


def copies_already(ctx: OpsContext, marker: FailoverMarker,
                   opened: Sequence[FailoverMarker]) -> bool:
    """The forward flow copies this incident's part already: the whole flow's return resumed
    it for an application's return that waited, or a run stopped after resuming it. With
    names kept its copies then land in the failover topics, so a write there since the
    cut-over is no longer a producer's: the verification tells the two apart (a record no
    source record matches is written to the target alone)."""
    if not ctx.require_kind().forward_state(ctx.rep).copying:
        return False
    if marker.covers.whole:
        return True  # it held every forward connector stopped until its own resume
    return forward_holder(opened, but=marker) is None and ctx.require_kind().edits_hold(
        ctx.rep, recorded_edits(ctx, marker)) is False


def waiting_checked(ctx: OpsContext, marker: FailoverMarker, opened: Sequence[FailoverMarker],
                    opts: ReprotectOptions, result: ReprotectResult) -> None:
    """Before `marker`'s return resumes the forward flow: the returns that waited for it
    (their entries are out, so it copies their topics too) hold no write since their
    cut-overs either, and each still has its start set (a refusal here drops it)."""
    for other in opened:
        if other.incident == marker.incident or not waiting_for(other):
            continue
        if not other.done("reprotect:forward-start"):
            raise CheckFailed(
                f"Incident {other.incident} ({other.covers.describe()}) waits for the forward "
                "flow to resume, but its cut-over is to be taken again (producers wrote to "
                f"{ctx.rep.target} after it).",
                f"Move its producers to {ctx.rep.source}, run `drctl reprotect --incident "
                f"{other.incident}`, then this command again.")
        no_writes_since_cut(ctx, other, opts, result, waiting=True)


def no_writes_since_cut(ctx: OpsContext, marker: FailoverMarker, opts: ReprotectOptions,
                        result: ReprotectResult, *, waiting: bool = False) -> dict[str, Any]:
    """Right before forward replication resumes: nobody wrote to the failover topics since
    the cut-over's ends. Otherwise the cut-over is taken again (its record and the forward
    start dropped) after producers move — refused, exit 3 — or, under --force, those writes
    are named as staying on the target only. `waiting`: the marker is a return that waits
    for the flow to resume; the step that resumes it checks it, as its own."""
    rep, store = ctx.rep, ctx.markers(ctx.rep.target)
    ends = tp_offsets(marker.steps[CUT_OVER_STEP].result.get("failover_ends", {}))
    late = writes_since(ctx, ends)
    if not late:
        return {}
    said = ", ".join(f"{t}[{p}] +{n}" for (t, p), n in sorted(late.items()))
    whose = (f" of incident {marker.incident} ({marker.covers.describe()}, whose return "
             "waits for the forward flow to resume)" if waiting else "")
    if not opts.force:
        for step in (CUT_OVER_STEP, "reprotect:forward-start"):
            marker.steps.pop(step, None)
        store.save(marker)
        raise CheckFailed(
            f"Producers wrote to {rep.target} after the cut-over{whose} was taken ({said}): "
            f"resuming forward replication now would leave those writes on {rep.target} "
            "only.",
            (f"Move the producers to {rep.source}, run `drctl reprotect --incident "
             f"{marker.incident}` (it carries them and takes its cut-over again), then this "
             "command again." if waiting else
             f"Move the producers to {rep.source}, then run reprotect again: it carries them "
             "and takes the cut-over again.") + " --force goes on and names them.")
    result.forced.append(f"records written to {rep.target} after the cut-over{whose} stay "
                         f"there only: {said}")
    return {"target_only": {f"{t}[{p}]": n for (t, p), n in sorted(late.items())}}


def _offsets(raw: Mapping[str, Mapping[Any, Any]]) -> Offsets:
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}


def _bad_partitions(check: Mapping[str, Any]) -> str:
    bad = [p for p in check["partitions"] if p["missing"] or p["extra"] or p.get("target_only")]
    return "; ".join(f"{p['topic']}[{p['partition']}]: {p['missing']} missing, "
                     f"{p['extra']} twice, {p.get('target_only', 0)} target only"
                     for p in bad[:10])


def quiet_and_caught_up(ctx: OpsContext, marker: FailoverMarker,
                        opts: ReprotectOptions) -> dict[str, Any]:
    """The target's failover topics took no write for `settle_s` after the reverse flow
    caught up with them, and hold no open transaction (its records would land after the
    return: waited for within `timeout_s`). A dry run only looks once."""
    rep, notify = ctx.rep, ctx.notify
    before = Ends.read(ctx, marker)
    if opts.dry_run:
        return {"target_ends": before.by_topic(), "settle_s": 0, "note": "dry run: not waited"}
    out: dict[str, Any] = {"settle_s": opts.settle_s}
    still_open = wait_transactions_closed(ctx, marker, opts.timeout_s)
    if still_open:
        said = "; ".join(f"{t.topic}[{t.partition}] stable at {t.stable}, end {t.end} (abort: "
                         f"{t.abort_commands(ctx.target.bootstrap)})" for t in still_open)
        if not opts.force:
            raise CheckFailed(
                f"A transaction is still open on {rep.target}'s failover topics after "
                f"{format_duration(opts.timeout_s)}: {said}. Its records would land after the "
                f"return and never reach {rep.source}.",
                "Let its producer commit or abort it (or abort it with the command shown), "
                "then run reprotect again; --force goes on and names it.")
        out["forced"] = [f"open transaction on {rep.target}: {said}"]
    wait_reverse_caught_up(ctx, marker, deadline_s=opts.timeout_s)
    caught_up = Ends.read(ctx, marker)
    notify(f"Checking that {rep.target}'s failover topics stay quiet for "
           f"{format_duration(opts.settle_s)} (producers moved back to {rep.source})")
    time.sleep(opts.settle_s)
    after = Ends.read(ctx, marker)
    writes = Writes.between(caught_up, after)
    out["target_ends"] = after.by_topic()
    if writes:
        if not opts.force:
            raise CheckFailed(
                f"Producers still write to {rep.target}: {writes.describe()} in the last "
                f"{format_duration(writes.seconds)}. Writes made there after the reverse flow "
                f"is retired would never reach {rep.source}.",
                f"Move the producers to {rep.source}, then run reprotect again; --force goes "
                "on (drctl carries what the target holds when it takes the cut-over and names "
                "what is written there later: it stays on the target only).")
        out["forced"] = out.get("forced", []) + [
            f"producers still writing to {rep.target}: {writes.describe()}"]
        out["writes_during_settle"] = writes.as_dict()
    return out


def verify_forward(ctx: OpsContext, marker: FailoverMarker, timeout_s: float, *,
                   forced: bool = False) -> dict[str, Any]:
    """Wait until the target holds the copy of the last record each source partition had
    when this check began, then compare what the source received since the cut-over with
    what the target received since, as multisets of fingerprints: nothing missing, nothing
    twice, and nothing written to the target alone (a record no source record matches, or
    with prefixed names a write to a failover topic since the cut-over) — the last allowed
    under `forced`, and counted."""
    rep, src, dst, notify = ctx.rep, ctx.source, ctx.target, ctx.notify
    cut = marker.steps["reprotect:cut-over"].result
    starts = _offsets(cut["forward_starts"])
    since = _offsets(cut["target_ends"])
    src_admin, dst_admin = src.admin(), dst.admin()
    source_tps = [(t, p) for t, parts in sorted(starts.items()) for p in sorted(parts)]
    src_marks = watermarks(src_admin, source_tps)
    a = Side.of(src, src_admin, src_marks)
    moved = [tp for tp in source_tps if src_marks[tp][1] > starts[tp[0]][tp[1]]]
    tails = dict(zip(moved, last_records(a, [(tp, src_marks[tp][1]) for tp in moved]),
                     strict=True))
    queries = {tp: MatchQuery(last, (marker.topics[tp[0]], tp[1]))
               for tp, (last, _) in tails.items()
               if last is not None and last.offset >= starts[tp[0]][tp[1]]}
    found: dict[TP, int] = {}
    dst_append = log_append_time_topics(dst_admin, {q.tp_b[0] for q in queries.values()})
    if queries:
        notify(f"Waiting for forward replication to copy what {len(queries)} partition(s) "
               "received since the cut-over")

    def arrived() -> bool | None:
        todo = [tp for tp in queries if tp not in found]
        mirrors = [queries[tp].tp_b for tp in todo]
        b = Side.of(dst, dst_admin, watermarks(dst_admin, mirrors), dst_append)
        for tp, match in zip(todo, match_records(a, b, [queries[tp] for tp in todo]),
                             strict=True):
            if match.offset is not None and match.offset >= since.get(
                    queries[tp].tp_b[0], {}).get(tp[1], 0):
                found[tp] = match.offset
        return True if len(found) == len(queries) else None

    ticker = Ticker()
    try:
        wait_for(arrived, deadline_s=timeout_s, interval_s=1.0,
                 on_wait=lambda: ticker.due() and notify(
                     f"Forward catch-up: {len(queries) - len(found)} partition(s) still "
                     f"without their newest record on {rep.target}"))
    except WaitTimedOut:
        pass  # what did not arrive is counted missing below
    source_ranges = {tp: (starts[tp[0]][tp[1]], src_marks[tp][1]) for tp in source_tps}
    target_ranges = {(marker.topics[tp[0]], tp[1]):
                     (since.get(marker.topics[tp[0]], {}).get(tp[1], 0), found[tp] + 1)
                     for tp in found}
    keep = timestamps_kept(ctx, marker)
    got = _fingerprints(src, source_ranges, keep)
    copied = _fingerprints(dst, target_ranges, keep)
    # Prefixed names: producers still on the target write to the failover topics, which
    # forward replication never touches.
    failover_ends = tp_offsets(cut.get("failover_ends", {}))
    elsewhere = {} if rep.names_kept else writes_since(ctx, failover_ends)
    partitions: list[dict[str, Any]] = []
    for tp in source_tps:
        mirror = (marker.topics[tp[0]], tp[1])
        want, have = got.get(tp, Counter()), copied.get(mirror, Counter())
        surplus = have - want
        twice = sum(n for fp, n in surplus.items() if fp in want)
        partitions.append({"topic": tp[0], "partition": tp[1],
                           "from": starts[tp[0]][tp[1]], "to": src_marks[tp][1],
                           "copied": have.total(), "missing": (want - have).total(),
                           "extra": twice,
                           "target_only": surplus.total() - twice + elsewhere.get(
                               (rep.failover_topic(tp[0]), tp[1]), 0),
                           "proof": ("no record since the cut-over" if tp not in queries
                                     else f"{mirror[0]}@{found[tp]}" if tp in found
                                     else "not arrived")})
    missing = sum(p["missing"] for p in partitions)
    extra = sum(p["extra"] for p in partitions)
    target_only = sum(p["target_only"] for p in partitions)
    return {"ok": not missing and not extra and (forced or not target_only),
            "copied": sum(p["copied"] for p in partitions), "missing": missing,
            "extra": extra, "target_only": target_only, "partitions": partitions}


def _fingerprints(clients: ClusterClients, ranges: Mapping[TP, tuple[int, int]], keep: bool
                  ) -> dict[TP, Counter[bytes]]:
    out: dict[TP, Counter[bytes]] = {}
    for rec in stream_ranges(clients, ranges):
        if is_reconciled(rec.headers):
            continue  # drctl's own copies (strays) are not forward replication's
        out.setdefault((rec.topic, rec.partition), Counter())[copy_fingerprint(rec, keep)] += 1
    return out

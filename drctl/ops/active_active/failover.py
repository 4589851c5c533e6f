"""A region's failover in an active-active pair (docs/design.md §6, "Active-active").

The failed region R's producers move to the surviving region S's local topics (`orders` on
S); R's groups move with a position on every topic they read on R, placed on the topic that
holds the same records on S: R's local topic (`orders` on R) on its copy (`R.orders` on S),
the copy of S's local topic (`S.orders` on R) on its original (`orders` on S). Both are one
translation of the flow R -> S (its `_topic_mapper` maps a copy back to its original), so
every method of translate/ serves: exact with R up, guard's snapshots and MirrorMaker 2's
checkpoints with R down, each position's bound stated.

A group that read R's local topic but not S's copy of it (a local-only group) is given a
position on S's local topic at the failover point: its producers write there from now on.
The flow out of R is stopped (the other one runs on: its copies are what R's groups read
when they return): what R held that S never got stays on R until failback resumes the flow,
when R's groups are stopped on S — so a group that had read some of it on R never reads its
late copy on S (it stands further on at R, and keeps that position there). Failback names it
as late arrivals. A group of R that has commits on S of its own (a group of S of the same
name) or whose consumers are active on S is never committed to: it is named, exit 3.

What a group read is decided from its commits on R (with R down: drctl's inventory of R, and
the positions guard and MirrorMaker 2 kept), never from what the translation found: a group
that read a copy of S's topic on R and has no position for it — MirrorMaker 2 never
checkpoints a copy back (KAFKA-12635) and guard may not have seen it — is left behind (exit
3), never placed at the failover point of the original, which would skip what it had not
read there. A group nothing tells apart (local-only, or an aggregate one whose copy position
nobody kept) is left behind too.

The safeguards of a one-way failover hold for a region: an open incident is continued only
while young (`--continue-within`) or named (`--incident`), `--new-incident` closes a stuck one
as superseded; the incident is claimed under the locks of both flows (two operators, or
both regions failed over at once, cannot both go through); the positions it is about to
commit are recorded before it commits them (a run again knows its own commits); and a
cluster that drops mid-way is waited for within `--deadline`, then the failover runs again
from the last step recorded (drctl/rerun.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from drctl.config import Objectives
from drctl.context import OpsContext
from drctl.errors import CheckFailed, ExitStatus, UsageError
from drctl.faults import crash_point
from drctl.kafka.checkpoints import read_checkpoints
from drctl.kafka.groups import committed_offsets
from drctl.ops.active_active.checkpoints import (
    checkpoint_positions,
    compare_with_checkpoints,
    target_marks,
)
from drctl.ops.active_active.pair import Pair
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
    wait_quiet_and_caught_up,
)
from drctl.ops.steps.incident import incident_to_continue
from drctl.ops.steps.side_by_side import flow_locked
from drctl.replication.base import Confirm
from drctl.reports import write_report
from drctl.rerun import rerun_while_dropped
from drctl.state import FailoverMarker, MarkerStore
from drctl.translate.engine import TranslateRequest, apply_positions, translate_offsets
from drctl.translate.model import PartitionResult, TranslationReport
from drctl.translate.snapshots import read_snapshot_topic

# The marker step that makes an incident a region's failover of an active-active pair.
REGION_STEP = "region"
# Where a local-only group starts on the surviving region's local topic.
FAILOVER_POINT = "failover-point"


def region_of(marker: FailoverMarker) -> dict[str, Any] | None:
    """The region step of an active-active incident ({"region", "to"}), None otherwise."""
    step = marker.steps.get(REGION_STEP)
    return None if step is None else step.result


def groups_regex(pair: Pair, region: str, groups: str = ".*") -> str:
    """One regex (whole group ids) for `groups` within the groups `region` owns."""
    owned = pair.region_groups(region)
    include = "|".join(f"(?:{p})" for p in owned.include) or ".*"
    exclude = "|".join(f"(?:{p})" for p in owned.exclude)
    return (f"(?=(?:{groups})$)" + (f"(?!(?:{exclude})$)" if exclude else "")
            + f"(?:{include})")


@dataclass
class RegionFailoverResult:
    region: str
    to: str
    marker: FailoverMarker
    dry_run: bool
    preflight: dict[str, Any] = field(default_factory=dict)
    translation: TranslationReport | None = None
    resumed: bool = False
    # Per group: what MirrorMaker 2's checkpoints would have placed it at, measured against
    # drctl's positions (checkpoints.py).
    checkpoints: dict[str, Any] | None = None
    # Where the region's producers write now: local topic on the region -> topic on `to`.
    producers: dict[str, str] = field(default_factory=dict)
    # What this run could not see (said on stderr, in the JSON and the runbook's outputs).
    warnings: list[str] = field(default_factory=list)
    clock: PhaseClock | None = None  # this run's phases (None: a result not from a run)
    objectives: Objectives = Objectives()  # the config's, scored in the scorecard

    @property
    def refused(self) -> list[str]:
        """Groups not committed to, with why: this run's translation's, or — a run again
        after the groups were done — the marker's (which keeps every group's verdict)."""
        if self.translation is not None:
            return [f"{g.group}: {g.skipped}" for g in self.translation.groups if g.skipped]
        return [f"{group}: {info['skipped']}" for group, info in sorted(self.marker.groups.items())
                if info.get("skipped")]

    @property
    def exit_status(self) -> ExitStatus:
        if self.marker.left_behind or self.refused:
            return ExitStatus.CHECK_FAILED
        return ExitStatus.SUCCESS

    def scorecard(self) -> dict[str, Any]:
        """RTO by phase (this run's and the incident's failover runs'), against the config's
        objective; no RPO is measured for a region (its late arrivals are, at failback)."""
        this = None if self.clock is None else self.clock.as_run()
        return failover_scorecard(self.marker.incident, self.objectives,
                                  command_timing(self.marker.timings, "failover", this), None)

    def as_dict(self, reports: Sequence[Path] = ()) -> dict[str, Any]:
        """The JSON of `drctl failover --region`."""
        return {"incident": self.marker.incident, "topology": "active-active",
                "region": self.region, "to": self.to, "dry_run": self.dry_run,
                "resumed": self.resumed, "preflight": self.preflight,
                "producers": self.producers,
                "translation": None if self.translation is None
                else self.translation.as_dict(),
                "refused": self.refused,
                "left_behind": describe_left_behind(self.marker),
                "warnings": self.warnings,
                "mm2_checkpoints": self.checkpoints, "scorecard": self.scorecard(),
                "marker": None if self.dry_run else self.marker.as_data(),
                "reports": [str(p) for p in reports]}

    def runbook_summary(self, reports: Sequence[Path] = ()) -> dict[str, Any]:
        """The result of the `failover` runbook action with a region, which step outputs (a
        drill's ledger) read."""
        summary = self.translation.summary() if self.translation is not None else {}
        return {"incident": self.marker.incident, "region": self.region, "to": self.to,
                "replication_stop": self.marker.replication_stop,
                "groups_applied": summary.get("applied", 0),
                "groups_moved": sorted(g for g, v in self.marker.groups.items()
                                       if v.get("applied")),
                "producers": self.producers, "refused": self.refused,
                # The groups not moved, by name: a drill runs them nowhere until failback.
                "left_behind_groups": sorted({line.partition(":")[0]
                                              for line in self.refused}),
                "left_behind": describe_left_behind(self.marker),
                # Per group, what its positions may re-deliver (ledger.verify holds it to it).
                "redelivery_bound": stated_redelivery(self.marker),
                "warnings": self.warnings, "scorecard": self.scorecard(),
                "mm2_checkpoints": self.checkpoints, "reports": [str(p) for p in reports]}

    def write_reports(self, ctx: OpsContext, directory: Path | None = None) -> list[Path]:
        if self.dry_run:
            return []
        return write_report(directory or (ctx.config.state.dir / "reports"),
                            self.marker.incident, self.as_dict(), "region-failover-report",
                            ctx.config.redactor, extensions=("md", "json"))


def open_region_incident(store: MarkerStore, region: str, to: str) -> FailoverMarker | None:
    """The pair's open incident of `region`'s failover (its marker lives on `to`)."""
    found = [m for m in store.open_markers(region, to) if region_of(m) is not None]
    return found[-1] if found else None


@dataclass
class _Run:
    """What a run again after a dropped cluster keeps: one phase clock, whether the failover
    got going, whether it continued an earlier command's incident, and its incident once
    claimed (a run again continues that one, never opens another)."""

    clock: PhaseClock = field(default_factory=lambda: PhaseClock("failover"))
    under_way: bool = False
    resumed: bool | None = None
    incident: str | None = None


def run_region_failover(pair: Pair, ctx: OpsContext, region: str, opts: FailoverOptions, *,
                        approve: Callable[[dict[str, Any]], None] | None = None,
                        confirm: Confirm | None = None) -> RegionFailoverResult:
    """Fail `region` over to the other one. `ctx` is the flow out of `region`
    (`Pair.context`). `approve` (not in a dry run) sees the plan before anything changes. A
    cluster that drops once the failover is under way — the surviving region, or the region
    too for a planned one — is waited for within `--deadline`, then the failover runs again
    from the last step recorded."""
    to = pair.other(region)
    problem = pair.naming_problem() or pair.live_naming_problem(ctx.notify)
    if problem:
        raise CheckFailed(f"Refused: {problem}.",
                          "Give both flows MirrorMaker 2's DefaultReplicationPolicy (prefixed "
                          "names) before failing a region over; `drctl config check` says the "
                          "same.")
    run = _Run()

    def once() -> RegionFailoverResult:
        again = opts if run.incident is None else replace(opts, incident=run.incident,
                                                          new_incident=False)
        # Asked once: a run again continues what was approved.
        return _failover_once(pair, ctx, region, again, None if run.under_way else approve,
                              confirm, run)

    needed = (to, region) if opts.planned else (to,)
    return rerun_while_dropped(once, ctx, needed, opts.source_deadline_s, "failover",
                               started=lambda: run.under_way)


def _failover_once(pair: Pair, ctx: OpsContext, region: str, opts: FailoverOptions,
                   approve: Callable[[dict[str, Any]], None] | None, confirm: Confirm | None,
                   run: _Run) -> RegionFailoverResult:
    to = pair.other(region)
    rep = ctx.rep
    store = ctx.store  # on `to`: the cluster that survives
    clock = run.clock
    clock.phase("preflight")
    # An open incident only while young or named; --new-incident closes a stuck one (a
    # failback that cannot finish with the region down) as superseded.
    marker, superseded = incident_to_continue(store, rep, opts)
    if marker.steps and REGION_STEP not in marker.steps:
        raise UsageError(f"Incident {marker.incident} is not a region's failover.",
                         "Pass --incident with a region incident, or --new-incident.")
    if run.resumed is None:
        run.resumed = bool(marker.steps)
    resumed = run.resumed
    if not opts.dry_run:
        clock.keep_in(marker.timings)  # saved with the marker's next step, not before
    pre = preflight(ctx, opts)
    if pre["source_reachable"]:
        _refuse_if_other_failed_over(pair, ctx, region)
    topics: dict[str, str] = marker.topics or pre["topics"]
    producers = {t: rep.failover_topic(t) for t in topics}
    result = RegionFailoverResult(region, to, marker, opts.dry_run, pre, resumed=resumed,
                                  producers=producers, clock=clock,
                                  objectives=ctx.config.objectives)
    regex = groups_regex(pair, region, opts.groups)
    if approve is not None and not opts.dry_run:
        clock.phase("approval")
        approve({"region": region, "to": to, "incident": marker.incident,
                 "mode": "planned" if opts.planned else "unplanned", "continuing": resumed,
                 "superseding": [m.incident for m in superseded],
                 "region_reachable": pre["source_reachable"], "topics": len(topics),
                 "active_groups_on_target": pre["active_groups_on_target"],
                 "groups": regex})
    run.under_way = True
    what = f"drctl failover --region {region}, incident {marker.incident}"
    if not opts.dry_run and REGION_STEP not in marker.steps:
        with _pair_locked(pair, ctx, region, pre["source_reachable"], what):
            _claim(pair, ctx, region, marker, superseded, topics, pre["source_reachable"])
    if not opts.dry_run:
        run.incident = marker.incident
    if resumed:
        ctx.notify(f"Continuing incident {marker.incident} (done: {', '.join(marker.steps)})")

    # 1. Planned: the region's producers are stopped; wait until its flow copied all.
    if opts.planned and not marker.done("catch-up") and not opts.dry_run:
        clock.phase("catch-up")
        caught = wait_quiet_and_caught_up(ctx, topics, opts)
        marker.record("catch-up", {"source_end": caught})
        store.save(marker)
        crash_point("catch-up")

    # 2. The flow out of the region stops (a stop Connect cannot confirm stays pending, is
    # tried again by a re-run, and named).
    if not opts.dry_run and (not marker.done("stop-replication")
                             or marker.replication_stop == "pending"):
        clock.phase("stop-replication")
        for warning in ctx.require_kind().ownership_warnings(rep):
            ctx.notify(warning)
        with _pair_locked(pair, ctx, region, pre["source_reachable"], what):
            outcome = ctx.require_kind().stop_forward(rep, confirm=confirm,
                                                      reach_deadline_s=opts.source_deadline_s)
        marker.replication_stop = outcome.state
        marker.stopped_connectors = outcome.connectors
        marker.record("stop-replication", {"state": outcome.state, "detail": outcome.detail})
        store.save(marker)
        if outcome.state == "pending":
            ctx.notify(f"The flow {rep.source} -> {rep.target} could not be stopped "
                       f"({outcome.detail}): once {region} returns it copies what {region} "
                       "held while its groups still read on " f"{to}: stop it.")
        crash_point("stop-replication")

    # 3. The failover point: the copies' ends (what came from the region before the failover)
    # and the surviving region's local topics' ends (where the region's producers start).
    if not marker.done("failover-point"):
        clock.phase("failover-point")
        failover_point = read_ends(ctx.target, sorted(topics.values()))
        created = ensure_failover_topics(ctx, topics, opts.dry_run)
        if not opts.dry_run:
            marker.topics = topics
            marker.failover_point = failover_point
            marker.failover_time_ms = int(time.time() * 1000)
            marker.failover_topics_end = read_ends(ctx.target, sorted(producers.values()))
            if pre["source_reachable"]:
                marker.source_end = read_ends(ctx.source, sorted(topics))
            marker.record("failover-point", {"created_failover_topics": created})
            store.save(marker)
            crash_point("failover-point")

    # 4. The groups: both kinds of topic in one translation, local-only groups placed at
    # the failover point, nothing committed to a group that is not only the region's, and
    # nothing to a group whose position on a copy it read is unknown.
    if not marker.done("translate-offsets"):
        clock.phase("translate-offsets")
        ctx.notify(f"Translating {region}'s consumer groups onto {to}")
        report = translate_offsets(ctx, TranslateRequest(
            region, to, groups=regex, method=opts.method, apply=False,
            source_deadline_s=opts.source_deadline_s,
            source_reachable=pre["source_reachable"],
            target_ends=marker.ends_at_failover or None))
        reads = _reads_on_region(ctx, report, pre["source_reachable"])
        if not pre["source_reachable"]:
            result.warnings += _unseen_groups(ctx, region)
        local_only = _place_local_only(pair, region, report, marker, reads)
        refused = _refuse_groups_of_target(ctx, report, marker)
        result.translation = report
        cps = checkpoint_positions(ctx, report)
        marks = target_marks(ctx, report, marker.ends_at_failover)
        result.checkpoints = compare_with_checkpoints(report, cps, marks)
        for g in report.groups:
            if g.group in refused:
                g.skipped = refused[g.group]
        if not opts.dry_run:
            # The plan first: a run again after a crash between here and the record below
            # knows these commits as its own (never "a group of the other region").
            marker.record(PLAN_STEP, {"positions": _planned(report)})
            store.save(marker)
            crash_point(PLAN_STEP)
            apply_positions(ctx.target, report,
                            skip_groups=frozenset(g.group for g in report.groups if g.skipped))
            crash_point("translate-offsets:committed")  # drills: committed, not yet recorded
            marker.groups = {g.group: {"applied": g.applied, "skipped": g.skipped,
                                       "confidence": sorted({p.confidence
                                                             for p in g.partitions}),
                                       "positions": marker_positions(g),
                                       "local_only": local_only.get(g.group, [])}
                             for g in report.groups}
            marker.left_behind = left_behind(ctx, report, pre["source_reachable"], topics,
                                             regex, pre.get("unmirrored", ()),
                                             marker.failover_point)
            marker.record("mm2-checkpoints", {"positions": cps, "compared": result.checkpoints,
                                              "marks": {
                t: {str(p): list(m) for (tt, p), m in marks.items() if tt == t}
                for t in {t for t, _ in marks}}})
            marker.record("translate-offsets", report.summary())
            store.save(marker)
            crash_point("translate-offsets")
    if opts.dry_run:
        clock.stop()
        return result
    clock.stop(finished=True)
    if not marker.done("failover"):
        marker.record("failover", {"planned": opts.planned, "region": region})
    store.save(marker)  # this run's timing with it
    return result


# The marker step that records the positions a region failover is about to commit.
PLAN_STEP = "translate-plan"


def _planned(report: TranslationReport) -> dict[str, dict[str, list[int]]]:
    """Per group, the partitions (target topic -> partitions) about to be committed."""
    out: dict[str, dict[str, list[int]]] = {}
    for g in report.groups:
        if g.skipped:
            continue
        for p in g.partitions:
            if p.target_offset is not None:
                out.setdefault(g.group, {}).setdefault(p.target_topic, []).append(p.partition)
    return out


def _refuse_if_other_failed_over(pair: Pair, ctx: OpsContext, region: str) -> None:
    """The other region's own failover is recorded on this region (its flow's target): both
    regions cannot run on each other. A region that is down has none to read."""
    to = pair.other(region)
    with pair.context(to, ctx.notify, ctx.deadline_s) as other:
        theirs = open_region_incident(other.store, to, region)
    if theirs is not None:
        raise UsageError(f"{to} is failed over to {region} (incident {theirs.incident}): "
                         "both regions cannot run on each other.",
                         f"Fail {to} back first: `drctl failback --region {to}`.")


@contextmanager
def _pair_locked(pair: Pair, ctx: OpsContext, region: str, region_up: bool,
                 what: str) -> Iterator[None]:
    """The locks of both flows (each beside its markers, on its target), taken in the
    regions' order so two failovers never wait on each other: the flow out of `region` (on
    the surviving region) and, while `region` answers, the flow into it (on `region`)."""
    with ExitStack() as stack:
        for name in sorted(pair.regions):
            if name == region:
                stack.enter_context(flow_locked(ctx, what))
            elif region_up:
                other = stack.enter_context(pair.context(name, ctx.notify, ctx.deadline_s))
                stack.enter_context(flow_locked(other, what))
        yield


def _claim(pair: Pair, ctx: OpsContext, region: str, marker: FailoverMarker,
           superseded: Sequence[FailoverMarker], topics: Mapping[str, str],
           region_up: bool) -> None:
    """Under both flows' locks, before anything stops: the incidents read again (another
    operator's failover of either region may have been claimed meanwhile: refused, named),
    then this one recorded and those it supersedes closed."""
    store = ctx.store
    gone = {old.incident for old in superseded}
    others = [m for m in store.open_markers(region, pair.other(region))
              if m.incident != marker.incident and m.incident not in gone]
    if others:
        raise UsageError(f"Incident {others[0].incident} of {region} was opened meanwhile.",
                         f"Continue it: `drctl failover --region {region} --incident "
                         f"{others[0].incident}`.")
    if region_up:
        _refuse_if_other_failed_over(pair, ctx, region)
    marker.record(REGION_STEP, {"topology": "active-active", "region": region,
                                "to": pair.other(region)})
    marker.topics = dict(topics)
    for old in superseded:
        ctx.notify(f"Incident {old.incident} ({old.phase}) is superseded by "
                   f"{marker.incident} and closed without finishing")
        old.record("superseded", {"by": marker.incident, "phase": old.phase.value})
        old.status = "closed"
        store.save(old)
    store.save(marker)


def _unseen_groups(ctx: OpsContext, region: str) -> list[str]:
    """With the region down and no inventory of it (guard never ran against it), the groups
    failed over are those guard's snapshots or MirrorMaker 2's checkpoints know: a group
    neither ever saw is neither moved nor named, and drctl cannot tell whether there is one."""
    if read_snapshot_topic(ctx.target, ctx.config.state.snapshots_topic).inventory is not None:
        return []
    line = (f"drctl has no inventory of {region}'s groups (drctl guard never ran against it): "
            "the groups moved are those guard's snapshots or MirrorMaker 2's checkpoints "
            f"know; a group of {region} neither saw (new, or idle since MirrorMaker 2 "
            "started) was not moved and is not named. Run drctl guard to keep one.")
    return [line]


def _reads_on_region(ctx: OpsContext, report: TranslationReport,
                     region_up: bool) -> dict[str, set[str] | None]:
    """Per group of `report`, the topics it committed on the failed region: asked of it
    while it answers; with it down, drctl's inventory of it (guard keeps it every round)
    and the positions guard and MirrorMaker 2 kept. None: nothing says what it read."""
    groups = [g.group for g in report.groups]
    if region_up:
        commits = committed_offsets(ctx.source, groups)
        return {g: {t for t, _ in commits.get(g, {})} for g in groups}
    inventory = read_snapshot_topic(ctx.target, ctx.config.state.snapshots_topic).inventory
    known = inventory.groups if inventory is not None else {}
    out: dict[str, set[str] | None] = {}
    for g in report.groups:
        kept = {p.topic for p in g.partitions if p.target_offset is not None}
        out[g.group] = set(known[g.group]) | kept if g.group in known else None
    return out


def _place_local_only(pair: Pair, region: str, report: TranslationReport,
                      marker: FailoverMarker, reads: Mapping[str, set[str] | None]
                      ) -> dict[str, list[str]]:
    """A group that read a local topic of `region` and no copy of the other region's topics
    there (a local-only group, known from `reads`: what it committed on the region) reads
    that topic on the surviving region from the failover point on (the region's producers
    write there now); its positions join the group's one commit. A group that read a copy
    and has no position for it, or one nothing tells apart, is left behind (`skipped`):
    placed at the failover point it would skip every record of the original it had not
    read."""
    out: dict[str, list[str]] = {}
    ends = marker.failover_topics_end
    for g in report.groups:
        if g.skipped:
            continue
        read = reads.get(g.group)
        placed = {(p.topic, p.partition) for p in g.partitions if p.target_offset is not None}
        copies = ({t for t in read if pair.copy_origin(region, t)} if read is not None
                  else {p.topic for p in g.partitions if pair.copy_origin(region, p.topic)})
        if read is None and not copies:
            g.skipped = (f"{region} is down and nothing tells what it read there (drctl's "
                         "inventory of it has not seen the group, no position of it on a "
                         f"copy was kept): a local-only group or an aggregate one, it is not "
                         "committed — `drctl guard` keeps what each group reads")
            continue
        unplaced = sorted(t for t in copies
                          if not any(topic == t for topic, _ in placed)
                          or any(p.topic == t and p.target_offset is None
                                 for p in g.partitions))
        if unplaced:
            g.skipped = (f"it read {', '.join(unplaced)} on {region} and no exact or bounded "
                         "position for it was kept (MirrorMaker 2 never checkpoints a copy "
                         "back, KAFKA-12635; guard's snapshots had none): not committed "
                         "anywhere — at the failover point it would skip what it had not "
                         "read of " + ", ".join(sorted({pair.copy_origin(region, t) or t
                                                         for t in unplaced}))
                         + f" on {pair.other(region)}")
            continue
        if copies:
            continue  # an aggregate group: every position came from the translation
        targets = {p.target_topic for p in g.partitions}
        local = sorted(t for t in (read or {p.topic for p in g.partitions})
                       if pair.is_local(region, t))
        for topic in local:
            failover_topic = topic  # prefixed names: the same name, on the other region
            if failover_topic in targets or failover_topic not in ends:
                continue
            out.setdefault(g.group, []).append(failover_topic)
            copy = pair.copy_name(pair.other(region), failover_topic)
            for partition, end in sorted(ends[failover_topic].items()):
                g.partitions.append(PartitionResult(
                    g.group, copy, partition, failover_topic, -1, FAILOVER_POINT, end,
                    FAILOVER_POINT, note=f"reads {failover_topic} from the failover point: "
                    f"{region}'s producers write there now (and {pair.other(region)}'s)",
                    # Records written after the failover point, none of which it read
                    # before: a bound stated, so its re-deliveries are judged.
                    max_redelivered=0))
    return out


def _refuse_groups_of_target(ctx: OpsContext, report: TranslationReport,
                             marker: FailoverMarker) -> dict[str, str]:
    """Groups with commits on the target this incident did not make (its plan and its
    positions, a run again included): a group of the other region with the same id.
    Committing would merge two applications' positions. A commit on one of the region's
    copies is MirrorMaker 2's own only where its group-offset sync wrote it — at the
    downstream offset of its checkpoint; any other is the other region's group's."""
    rep = ctx.rep
    groups = [g.group for g in report.groups]
    if not groups:
        return {}
    theirs = committed_offsets(ctx.target, groups)
    ours: dict[str, set[tuple[str, int]]] = {
        g: {(t, int(p)) for t, parts in info.get("positions", {}).items() for p in parts}
        for g, info in marker.groups.items()}
    plan = marker.steps.get(PLAN_STEP)
    for g, parts in (plan.result.get("positions", {}) if plan else {}).items():
        ours.setdefault(g, set()).update((t, int(p)) for t, ps in parts.items() for p in ps)
    synced = _synced_by_mirrormaker(ctx, theirs)
    refused: dict[str, str] = {}
    for g in report.groups:
        foreign = sorted(f"{t}[{p}]" for (t, p), offset in theirs.get(g.group, {}).items()
                         if (t, p) not in ours.get(g.group, set())
                         and not (rep.source_topic_of(t) is not None
                                  and synced.get((g.group, t, p)) == offset))
        if foreign:
            refused[g.group] = (f"it has commits on {rep.target} already "
                                f"({', '.join(foreign[:4])}{' ...' if len(foreign) > 4 else ''}"
                                f"): a group of {rep.target} with the same id? Name each "
                                "region's groups apart (topology.regions)")
    return refused


def _synced_by_mirrormaker(ctx: OpsContext, commits: Mapping[str, Mapping[tuple[str, int], int]]
                           ) -> dict[tuple[str, str, int], int]:
    """(group, copy, partition) -> the downstream offset of MirrorMaker 2's checkpoint there:
    where its group-offset sync (sync.group.offsets.enabled) commits. Unknown (not read):
    none, so that no commit on a copy is taken for MirrorMaker 2's unproven."""
    topic = ctx.require_kind().checkpoints_topic(ctx.rep)
    if not topic or not any(ctx.rep.source_topic_of(t) is not None
                            for offs in commits.values() for t, _ in offs):
        return {}
    try:
        found = read_checkpoints(ctx.target, topic)
    except Exception as exc:  # noqa: BLE001 - unknown: every commit on a copy is foreign
        ctx.notify(f"MirrorMaker 2's checkpoints in {topic} not read: {exc}")
        return {}
    return {key: cp.downstream_offset for key, cp in found.items()}

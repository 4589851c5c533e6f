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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drctl.context import OpsContext
from drctl.errors import CheckFailed, ExitStatus, UsageError
from drctl.faults import crash_point
from drctl.kafka.groups import committed_offsets
from drctl.ops.active_active.checkpoints import (
    checkpoint_positions,
    compare_with_checkpoints,
    target_marks,
)
from drctl.ops.active_active.pair import Pair
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
from drctl.replication.base import Confirm
from drctl.reports import write_report
from drctl.state import FailoverMarker, MarkerStore
from drctl.translate.engine import TranslateRequest, apply_positions, translate_offsets
from drctl.translate.model import PartitionResult, TranslationReport

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

    @property
    def refused(self) -> list[str]:
        """Groups not committed to, with why."""
        if self.translation is None:
            return []
        return [f"{g.group}: {g.skipped}" for g in self.translation.groups if g.skipped]

    @property
    def exit_status(self) -> ExitStatus:
        if self.marker.left_behind or self.refused:
            return ExitStatus.CHECK_FAILED
        return ExitStatus.SUCCESS

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
                "mm2_checkpoints": self.checkpoints,
                "marker": None if self.dry_run else self.marker.as_data(),
                "reports": [str(p) for p in reports]}

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


def run_region_failover(pair: Pair, ctx: OpsContext, region: str, opts: FailoverOptions, *,
                        approve: Callable[[dict[str, Any]], None] | None = None,
                        confirm: Confirm | None = None) -> RegionFailoverResult:
    """Fail `region` over to the other one. `ctx` is the flow out of `region`
    (`Pair.context`). `approve` (not in a dry run) sees the plan before anything changes."""
    to = pair.other(region)
    problem = pair.naming_problem() or pair.live_naming_problem(ctx.notify)
    if problem:
        raise CheckFailed(f"Refused: {problem}.",
                          "Give both flows MirrorMaker 2's DefaultReplicationPolicy (prefixed "
                          "names) before failing a region over; `drctl config check` says the "
                          "same.")
    rep = ctx.rep
    store = ctx.store  # on `to`: the cluster that survives
    marker = open_region_incident(store, region, to)
    resumed = marker is not None
    if marker is not None and marker.failback_started:
        raise UsageError(f"Incident {marker.incident} ({region} failed over to {to}) is "
                         f"{marker.phase}.", f"Finish it: `drctl failback --region {region}`.")
    pre = preflight(ctx, opts)
    # The other region's own failover is recorded on this region (its flow's target): a
    # region that is down has none to read.
    if pre["source_reachable"]:
        with pair.context(to, ctx.notify, ctx.deadline_s) as other:
            theirs = open_region_incident(other.store, to, region)
        if theirs is not None:
            raise UsageError(f"{to} is failed over to {region} (incident {theirs.incident}): "
                             "both regions cannot run on each other.",
                             f"Fail {to} back first: `drctl failback --region {to}`.")
    if marker is None:
        marker = FailoverMarker.new(region, to, rep.kind, opts.planned)
        marker.record(REGION_STEP, {"topology": "active-active", "region": region, "to": to})
    topics: dict[str, str] = marker.topics or pre["topics"]
    producers = {t: rep.failover_topic(t) for t in topics}
    result = RegionFailoverResult(region, to, marker, opts.dry_run, pre, resumed=resumed,
                                  producers=producers)
    regex = groups_regex(pair, region, opts.groups)
    if approve is not None and not opts.dry_run:
        approve({"region": region, "to": to, "incident": marker.incident,
                 "mode": "planned" if opts.planned else "unplanned", "continuing": resumed,
                 "region_reachable": pre["source_reachable"], "topics": len(topics),
                 "active_groups_on_target": pre["active_groups_on_target"],
                 "groups": regex})
    if resumed:
        ctx.notify(f"Continuing incident {marker.incident} (done: {', '.join(marker.steps)})")

    # 1. Planned: the region's producers are stopped; wait until its flow copied all.
    if opts.planned and not marker.done("catch-up") and not opts.dry_run:
        caught = wait_quiet_and_caught_up(ctx, topics, opts)
        marker.record("catch-up", {"source_end": caught})
        store.save(marker)
        crash_point("catch-up")

    # 2. The flow out of the region stops (a stop Connect cannot confirm stays pending, is
    # tried again by a re-run, and named).
    if not opts.dry_run and (not marker.done("stop-replication")
                             or marker.replication_stop == "pending"):
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
    # the failover point, nothing committed to a group that is not only the region's.
    if not marker.done("translate-offsets"):
        ctx.notify(f"Translating {region}'s consumer groups onto {to}")
        report = translate_offsets(ctx, TranslateRequest(
            region, to, groups=regex, method=opts.method, apply=False,
            source_deadline_s=opts.source_deadline_s,
            source_reachable=pre["source_reachable"],
            target_ends=marker.ends_at_failover or None))
        local_only = _place_local_only(pair, region, report, marker)
        refused = _refuse_groups_of_target(ctx, report, marker)
        result.translation = report
        cps = checkpoint_positions(ctx, report)
        marks = target_marks(ctx, report, marker.ends_at_failover)
        result.checkpoints = compare_with_checkpoints(report, cps, marks)
        if not opts.dry_run:
            apply_positions(ctx.target, report, skip_groups=frozenset(refused))
            for g in report.groups:
                if g.group in refused:
                    g.skipped = refused[g.group]
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
    if not opts.dry_run and not marker.done("failover"):
        marker.record("failover", {"planned": opts.planned, "region": region})
        store.save(marker)
    return result


def _place_local_only(pair: Pair, region: str, report: TranslationReport,
                      marker: FailoverMarker) -> dict[str, list[str]]:
    """A group that read a local topic of `region` but not the other region's copy of the
    other's same topic reads that topic on the surviving region from the failover point on
    (the region's producers write there now). Its positions join the group's one commit."""
    out: dict[str, list[str]] = {}
    ends = marker.failover_topics_end
    for g in report.groups:
        targets = {p.target_topic for p in g.partitions}
        for topic in sorted({p.topic for p in g.partitions if pair.is_local(region, p.topic)}):
            failover_topic = topic  # prefixed names: the same name, on the other region
            if failover_topic in targets or failover_topic not in ends:
                continue
            out.setdefault(g.group, []).append(failover_topic)
            copy = pair.copy_name(pair.other(region), failover_topic)
            for partition, end in sorted(ends[failover_topic].items()):
                g.partitions.append(PartitionResult(
                    g.group, copy, partition, failover_topic, -1, FAILOVER_POINT, end,
                    FAILOVER_POINT, note=f"reads {failover_topic} from the failover point: "
                    f"{region}'s producers write there now (and {pair.other(region)}'s)"))
    return out


def _refuse_groups_of_target(ctx: OpsContext, report: TranslationReport,
                             marker: FailoverMarker) -> dict[str, str]:
    """Groups with commits on the target this incident did not make: a group of the other
    region with the same id. Committing would merge two applications' positions. Commits on
    the region's copies are not another application's: MirrorMaker 2's group-offset sync
    writes the region's groups there (drctl's exact positions replace them)."""
    rep = ctx.rep
    groups = [g.group for g in report.groups]
    if not groups:
        return {}
    theirs = committed_offsets(ctx.target, groups)
    ours = {g: {(t, int(p)) for t, parts in info.get("positions", {}).items() for p in parts}
            for g, info in marker.groups.items()}
    refused: dict[str, str] = {}
    for g in report.groups:
        foreign = sorted(f"{t}[{p}]" for (t, p) in theirs.get(g.group, {})
                         if (t, p) not in ours.get(g.group, set())
                         and rep.source_topic_of(t) is None)
        if foreign:
            refused[g.group] = (f"it has commits on {rep.target} already "
                                f"({', '.join(foreign[:4])}{' ...' if len(foreign) > 4 else ''}"
                                f"): a group of {rep.target} with the same id? Name each "
                                "region's groups apart (topology.regions)")
    return refused

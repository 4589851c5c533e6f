"""A region's failback in an active-active pair (docs/design.md §6, "Active-active").

Nothing is copied by hand: both flows run (drctl resumes a connector that does not copy) and
carry what each side holds. Before it starts, the region's producers are stopped (they were
writing the other region's local topics; they start again on their own region afterwards)
and its consumers stopped on the other region. Then, for the returning region R and the
surviving region S:

1. the audit (R back after an outage): where each moved group really was on R, against the
   position failover gave it (ops/steps/audit.py) — the stated bounds measured, a skip is exit 3;
2. the late arrivals: the flow R -> S catches up with R, and the records R held that S never
   got before the outage — in `R.orders` on S past the failover point — are named per
   partition (how many, the time span);
3. each group back, exactly, on both kinds of topic — its position on `R.orders` (S) onto
   `orders` (R), on `orders` (S) onto `S.orders` (R) — once the flow S -> R has copied past
   it (until then that position is ahead of the copy: the group waits, and is named when
   `--timeout` runs out). A group still active on S is not moved; one active on R is never
   committed to; a local-only group moves once it has read S's local topic up to where R's
   producers left it (else what they wrote there would never reach it). A re-run moves the
   groups left; the incident closes when every group is back.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drctl.context import OpsContext
from drctl.errors import CheckFailed, DrctlError, ExitStatus, UsageError
from drctl.faults import crash_point
from drctl.kafka.clients import describe_with_retry
from drctl.kafka.groups import committed_offsets, group_states
from drctl.kafka.records import stream_ranges
from drctl.ops.active_active.checkpoints import (
    checkpoint_positions,
    compare,
    compare_with_checkpoints,
    target_marks,
)
from drctl.ops.active_active.failover import REGION_STEP, open_region_incident
from drctl.ops.active_active.pair import Pair
from drctl.ops.one_way.phases import PhaseClock, command_timing
from drctl.ops.one_way.scorecard import operation_scorecard
from drctl.ops.steps.audit import audit_failover
from drctl.ops.steps.failover_point import FailoverOptions, read_ends, wait_quiet_and_caught_up
from drctl.replication.base import FlowState, kind_for
from drctl.replication.connect import connect_client
from drctl.reports import write_report
from drctl.retry import WaitTimedOut, wait_for
from drctl.state import FailoverMarker
from drctl.translate.engine import TranslateRequest, apply_positions, translate_offsets
from drctl.translate.model import Confidence, TranslateMethod, TranslationReport

# A position placed by one of these has read nothing twice and skipped nothing (`kept`: the
# group already stood further on there).
_PLACED = (Confidence.EXACT, Confidence.START, Confidence.KEPT)


class FailbackWaits(CheckFailed):
    """Failback stopped before it resumed a flow: groups of the region must first stop on the
    other region, or read on there (exit 3). `waiting`: per group, why."""

    def __init__(self, incident: str, region: str, waiting: dict[str, str]) -> None:
        super().__init__(f"Failback of {incident} waits: "
                         + "; ".join(f"{g}: {why}" for g, why in sorted(waiting.items()))
                         + ".",
                         f"Nothing was resumed. Then run `drctl failback --region {region}` "
                         "again.")
        self.waiting = waiting


@dataclass(frozen=True)
class RegionFailbackOptions:
    region: str | None = None  # default: the pair's one region failed over
    dry_run: bool = False
    deadline_s: float = 30.0  # each cluster and Connect, before it is unreachable
    timeout_s: float = 600.0  # the flows' catch-up, each wait
    quiesce_s: float = 2.0  # the region's own topics must not move for this long


@dataclass
class RegionFailbackResult:
    region: str
    to: str  # the region its applications ran on
    marker: FailoverMarker
    dry_run: bool
    flows: dict[str, Any] = field(default_factory=dict)
    audit: dict[str, Any] | None = None
    late_arrivals: dict[str, Any] | None = None
    translation: TranslationReport | None = None
    not_moved: dict[str, str] = field(default_factory=dict)
    moved: list[str] = field(default_factory=list)
    # MirrorMaker 2's checkpoints against the exact positions: at the failover (planned:
    # measured then; after an outage: against the audit) and now, the way back.
    checkpoints_failover: dict[str, Any] | None = None
    checkpoints_failback: dict[str, Any] | None = None
    clock: PhaseClock | None = None  # this run's phases (None: a result not from a run)

    @property
    def skipped(self) -> int:
        return int((self.audit or {}).get("totals", {}).get("skipped", 0))

    @property
    def exit_status(self) -> ExitStatus:
        if self.not_moved or self.skipped:
            return ExitStatus.CHECK_FAILED
        return ExitStatus.SUCCESS

    @property
    def done(self) -> bool:
        return self.marker.done("failback")

    def scorecard(self) -> dict[str, Any]:
        """RTO by phase: this run's, and the incident's failback runs' (a first run that
        waited for the region's groups counts: the operator's wait is part of the return)."""
        this = None if self.clock is None else self.clock.as_run()
        return operation_scorecard("failback", self.marker.incident,
                                   command_timing(self.marker.timings, "failback", this))

    def as_dict(self, reports: Sequence[Path] = ()) -> dict[str, Any]:
        """The JSON of `drctl failback` on an active-active pair."""
        return {"incident": self.marker.incident, "topology": "active-active",
                "failback": True, "region": self.region, "to": self.to,
                "dry_run": self.dry_run, "done": self.done, "flows": self.flows,
                "audit": self.audit, "late_arrivals": self.late_arrivals,
                "translation": None if self.translation is None
                else self.translation.as_dict(),
                "moved": self.moved,
                "refused": [f"{g}: {why}" for g, why in sorted(self.not_moved.items())],
                "left_behind": [], "producers": {t: t for t in self.marker.topics},
                "mm2_checkpoints": self.checkpoints_failback,
                "mm2_checkpoints_at_failover": self.checkpoints_failover,
                "scorecard": self.scorecard(),
                "marker": None if self.dry_run else self.marker.as_data(),
                "reports": [str(p) for p in reports]}

    def runbook_summary(self, reports: Sequence[Path] = ()) -> dict[str, Any]:
        """The result of the `failback` runbook action with a region, which step outputs (a
        drill's ledger) read."""
        step = self.marker.steps.get("failback:groups")
        moved = sorted({*(step.result.get("moved", []) if step else []), *self.moved})
        late = self.late_arrivals or {}
        return {"incident": self.marker.incident, "region": self.region, "to": self.to,
                "done": self.done, "waiting": {}, "moved": moved,
                "not_moved": dict(self.not_moved),
                "late_arrivals": int(late.get("total") or 0),
                "late_arrivals_summary": late.get("summary", "not counted"),
                "audit": (self.audit or {}).get("totals"), "skipped": self.skipped,
                # Every group moved back exactly (or kept where it stood further on): it reads
                # nothing again because of failback.
                "redelivery_bound": dict.fromkeys(moved, 0),
                "mm2_checkpoints": self.checkpoints_failback, "scorecard": self.scorecard(),
                "reports": [str(p) for p in reports]}

    def write_reports(self, ctx: OpsContext, directory: Path | None = None) -> list[Path]:
        if self.dry_run:
            return []
        return write_report(directory or (ctx.config.state.dir / "reports"),
                            f"{self.marker.incident}-failback", self.as_dict(),
                            "region-failover-report", ctx.config.redactor,
                            extensions=("md", "json"))


def find_incident(pair: Pair, region: str | None, notify: Any, deadline_s: float,
                  incident: str | None = None) -> tuple[str, FailoverMarker]:
    """The open region failover to fail back: `region`'s, or the pair's one; with `incident`,
    that one (a usage error naming the open ones when it is not among them)."""
    found: list[tuple[str, FailoverMarker]] = []
    for name in [pair.region(region)] if region else list(pair.regions):
        with pair.context(name, notify, deadline_s) as ctx:
            marker = open_region_incident(ctx.store, name, pair.other(name))
        if marker is not None:
            found.append((name, marker))
    if incident is not None:
        chosen = [(r, m) for r, m in found if m.incident == incident]
        if not chosen:
            open_ones = ", ".join(f"{m.incident} ({r})" for r, m in found) or "none"
            raise UsageError(f"Incident {incident} is not an open region failover "
                             f"{'of ' + region if region else 'of the pair'} (open: "
                             f"{open_ones}).",
                             "`drctl status` lists the incidents on record.")
        return chosen[0]
    if not found:
        where = f"of {region}" if region else "of either region"
        raise UsageError(f"No open region failover {where} to fail back.",
                         "`drctl status` lists the incidents on record.")
    if len(found) > 1:
        raise UsageError("Both regions are failed over: "
                         + ", ".join(f"{r} ({m.incident})" for r, m in found) + ".",
                         "Pass --region to say which one returns.")
    return found[0]


def run_region_failback(pair: Pair, ctx: OpsContext, back: OpsContext,
                        marker: FailoverMarker, opts: RegionFailbackOptions
                        ) -> RegionFailbackResult:
    """Fail the region of `marker` back. `ctx` is the flow out of it (the region -> the other
    one, where the marker lives), `back` the other flow."""
    region, to = marker.source, marker.target
    assert REGION_STEP in marker.steps
    if marker.phase.value == "failing-over":
        raise UsageError(f"The failover of {region} ({marker.incident}) did not finish.",
                         f"Run `drctl failover --region {region}` again first.")
    clock = PhaseClock("failback")
    clock.phase("preflight")
    if not opts.dry_run:
        clock.keep_in(marker.timings)  # saved with the marker's next save
    policy = ctx.config.retry.with_deadline(opts.deadline_s)
    for name in (region, to):  # both regions: exit 4 naming the one that does not answer
        describe_with_retry(ctx.clients(name), policy, notify=ctx.notify)
    store = ctx.store
    result = RegionFailbackResult(region, to, marker, opts.dry_run, clock=clock)

    # The cut: where the region's producers left the other region's local topics.
    if not marker.done("failback:cut"):
        cut = read_ends(ctx.target, sorted(marker.failover_topics_end))
        if not opts.dry_run:
            marker.record("failback:cut", {"ends": cut})
            store.save(marker)
    cut = marker.steps["failback:cut"].result["ends"] if marker.done("failback:cut") else cut

    # Before the flows run again: the region's consumers stopped on the other region and
    # its local-only groups through what its producers wrote there. Once the flow out of the
    # region resumes, the records it held that the other never got arrive as copies: a group
    # still reading there would read them a second time (it read them at home).
    if not marker.done("failback:late-arrivals"):
        waiting = _consumers_not_stopped(ctx, marker, cut)
        if waiting:
            clock.stop()
            if not opts.dry_run:
                store.save(marker)  # this run's time counts in the return's
            raise FailbackWaits(marker.incident, region, waiting)
    clock.phase("flows")
    result.flows = _flows_running(ctx, back, opts)

    # 1. The audit, with the region back: where each group really was.
    if not marker.planned:
        clock.phase("audit")
        if marker.done("failback:audit"):
            result.audit = marker.steps["failback:audit"].result
        else:
            result.audit = audit_failover(ctx, marker, opts.deadline_s).as_dict()
            if not opts.dry_run:
                marker.record("failback:audit", result.audit)
                store.save(marker)
                crash_point("failback:audit")
    result.checkpoints_failover = _checkpoints_at_failover(marker, result.audit)

    # 2. The late arrivals: the region's flow caught up, what it copied after F named.
    clock.phase("late-arrivals")
    if marker.done("failback:late-arrivals"):
        result.late_arrivals = marker.steps["failback:late-arrivals"].result
    else:
        if not opts.dry_run:  # a dry run resumes nothing: what arrived so far
            ctx.notify(f"Waiting for {region} -> {to} to copy what {region} holds")
            wait_quiet_and_caught_up(ctx, marker.topics, FailoverOptions(
                quiesce_s=opts.quiesce_s, catch_up_deadline_s=opts.timeout_s), otherwise=(
                f"Stop {region}'s producers first (they write on {to} until failback ends), "
                f"then run failback --region {region} again.",
                f"Check the flow {region} -> {to} (its connectors on Kafka Connect); run "
                f"failback --region {region} again with a longer --timeout."))
        result.late_arrivals = late_arrivals(ctx, marker)
        if not opts.dry_run:
            marker.record("failback:late-arrivals", result.late_arrivals)
            store.save(marker)
            crash_point("failback:late-arrivals")

    # 3. The groups back, each once the flow feeding its positions has caught up.
    clock.phase("groups")
    _groups_back(ctx, back, marker, cut, opts, result)
    if opts.dry_run:
        clock.stop()
    else:
        step = marker.steps.get("failback:groups")
        earlier = step.result if step else {"moved": []}
        marker.record("failback:groups", {
            "moved": sorted({*earlier.get("moved", []), *result.moved}),
            "not_moved": result.not_moved, "mm2_checkpoints": result.checkpoints_failback})
        if not result.not_moved:
            marker.record("failback", {"region": region, "late_arrivals":
                                       (result.late_arrivals or {}).get("total", 0)})
            marker.status = "closed"
        clock.stop(finished=not result.not_moved)
        store.save(marker)
    return result


# How long a connector or task restarted by failback may stay FAILED before it is restarted
# again while failback waits for its flow to run.
_RESTART_EVERY_S = 10.0


def _flows_running(ctx: OpsContext, back: OpsContext, opts: RegionFailbackOptions
                   ) -> dict[str, Any]:
    """Both flows copy: a connector paused, stopped or failed is resumed, a failed one (or
    its failed tasks) restarted — e.g. the flow into the region, whose tasks gave up while
    it was down — then waited for (`opts.timeout_s`), resumed and restarted again every
    `_RESTART_EVERY_S` while it does not run."""
    out: dict[str, Any] = {}
    for flow_ctx in (ctx, back):
        rep = flow_ctx.rep
        client = connect_client(rep, opts.deadline_s, notify=ctx.notify)
        name = f"{rep.source} -> {rep.target}"
        if client is None:
            # No Connect worker drctl may write to: whoever owns the connectors resumes them
            # (a Strimzi resource), or nobody drctl can see.
            resumed = (kind_for(rep).resume_components(rep, rep.connect.connectors, ctx.notify)
                       if not opts.dry_run else FlowState(False))
            out[name] = ({"state": "copying", "components": resumed.components}
                         if resumed.readable else
                         {"state": "unknown", "why": "no replication.connect: drctl cannot "
                          "see it; make sure it copies"})
            continue
        touched: list[str] = []
        for connector in rep.connect.connectors:
            state, tasks = client.connector_state(connector)
            if opts.dry_run:
                continue
            # Every connector is resumed, whatever its status says (a no-op for one that
            # runs): REST shows the status, never the target state. A connector that failed
            # while stopped (MirrorMaker 2's checkpoint connector with its source region
            # down) reports FAILED over a target state of STOPPED: restarted alone it comes
            # back STOPPED. A worker killed while it applied the failover's stop reports the
            # connector RUNNING with no task over a target state of STOPPED, for good: left
            # alone, the flow never checkpoints again (seen in a fault round, Connect
            # SIGTERMed mid-failover).
            client.resume(connector)
            if state in ("PAUSED", "STOPPED", "FAILED"):
                touched.append(f"{connector}: resumed")
            if state == "FAILED" or "FAILED" in tasks:
                client.restart_failed(connector)
                touched.append(f"{connector}: restarted")

        restarted_at = {n: time.monotonic() for n in rep.connect.connectors}

        def running(c: Any = client, names: Sequence[str] = rep.connect.connectors,
                    touched: list[str] = touched, restarted_at: dict[str, float] = restarted_at
                    ) -> bool:
            ok = True
            for n in names:
                s, tasks = c.connector_state(n)
                if s == "RUNNING" and all(t == "RUNNING" for t in tasks):
                    continue
                ok = False
                if time.monotonic() - restarted_at[n] < _RESTART_EVERY_S:
                    continue
                # Restarted while its cluster was still coming up, a task fails again (its
                # consumer's first metadata timed out); a stop still in flight stops it
                # again: resumed and restarted again, never waited on till --timeout.
                if s in ("PAUSED", "STOPPED", "FAILED"):
                    c.resume(n)
                    touched.append(f"{n}: resumed again")
                if "FAILED" in (s, *tasks):
                    c.restart_failed(n)
                    touched.append(f"{n}: restarted again")
                restarted_at[n] = time.monotonic()
            return ok

        if not opts.dry_run:
            try:
                wait_for(lambda: True if running() else None, deadline_s=opts.timeout_s,
                         interval_s=1.0)
            except WaitTimedOut:
                raise DrctlError(f"The flow {name} does not run: "
                                 + ", ".join(f"{n} {client.connector_state(n)}"
                                             for n in rep.connect.connectors)
                                 + (f" (drctl: {'; '.join(touched)})" if touched else "")
                                 + ".",
                                 "Read the Connect worker's log; then run failback again.") \
                    from None
        out[name] = {"state": "copying", "touched": touched}
        for line in touched:
            ctx.notify(f"{name}: {line}")
    return out


def late_arrivals(ctx: OpsContext, marker: FailoverMarker) -> dict[str, Any]:
    """What the region's flow copied past the failover point (the flow caught up): the
    records the region held that the other never got before the outage, per partition —
    how many, their offsets, their time span. Copies stamped after the failover were
    written on the region after it (a producer that stayed): counted apart."""
    mirrors = sorted(marker.failover_point)
    ends = read_ends(ctx.target, mirrors)
    ranges = {(t, p): (f, ends[t][p]) for t, parts in marker.failover_point.items()
              for p, f in parts.items() if ends.get(t, {}).get(p, f) > f}
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    after = marker.failover_time_ms or 0
    for rec in stream_ranges(ctx.target, ranges):
        row = rows.setdefault((rec.topic, rec.partition), {
            "topic": rec.topic, "partition": rec.partition, "records": 0,
            "first_offset": rec.offset, "last_offset": rec.offset,
            "first_ms": rec.timestamp_ms, "last_ms": rec.timestamp_ms,
            "written_after_failover": 0})
        row["records"] += 1
        row["last_offset"] = rec.offset
        row["first_ms"] = min(row["first_ms"], rec.timestamp_ms)
        row["last_ms"] = max(row["last_ms"], rec.timestamp_ms)
        row["written_after_failover"] += rec.timestamp_ms >= after
    for row in rows.values():
        row["first_time"] = _when(row["first_ms"])
        row["last_time"] = _when(row["last_ms"])
    parts = [rows[k] for k in sorted(rows)]
    total = sum(r["records"] for r in parts)
    return {"total": total, "partitions": parts,
            "summary": (f"{total} record(s) {marker.source} held that {marker.target} never "
                        "got before the outage arrived late in "
                        + ", ".join(sorted({r['topic'] for r in parts}))
                        if total else "no late arrival")}


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + \
        f".{ms % 1000:03d} UTC"


def _groups_back(ctx: OpsContext, back: OpsContext, marker: FailoverMarker,
                 cut: dict[str, dict[Any, int]], opts: RegionFailbackOptions,
                 result: RegionFailbackResult) -> None:
    region, to = marker.source, marker.target
    moved_before = set((marker.steps.get("failback:groups") or _Empty).result.get("moved", []))
    groups = sorted(g for g, info in marker.groups.items()
                    if info.get("applied") and g not in moved_before)
    if not groups:
        return
    states = group_states(ctx.target, groups)
    for name in groups:
        st = states.get(name)
        if st is not None and st.active:
            result.not_moved[name] = (f"its consumers are still active on {to} ({st.state}): "
                                   "stop them, then run failback again")
    _local_only_drained(ctx, marker, cut, groups, result)
    todo = [name for name in groups if name not in result.not_moved]
    if not todo:
        return
    ctx.notify(f"Moving {len(todo)} group(s) back to {region} once {to} -> {region} has "
               "copied past their positions")
    state: dict[str, TranslationReport] = {}

    def caught_up() -> bool | None:
        report = translate_offsets(ctx, TranslateRequest(
            to, region, groups="|".join(_escaped(todo)), method=TranslateMethod.EXACT,
            apply=False, source_deadline_s=opts.deadline_s))
        state["report"] = report
        ahead = [p for p in report.partitions if p.confidence == Confidence.CLAMPED]
        return True if not ahead else None

    try:  # a dry run says where the groups stand now
        wait_for(caught_up, deadline_s=0 if opts.dry_run else opts.timeout_s, interval_s=1.0)
    except WaitTimedOut:
        pass  # what is still ahead is named below
    report = state["report"]
    for g in report.groups:
        # A local-only group read the other region's local topic only while failed over:
        # back home it reads its own topic alone, so no position goes onto that topic's copy.
        local_only = set(marker.groups.get(g.group, {}).get("local_only") or ())
        g.partitions = [p for p in g.partitions if p.topic not in local_only]
        behind = [f"{p.target_topic}[{p.partition}]" for p in g.partitions
                  if p.confidence == Confidence.CLAMPED]
        unsure = [f"{p.target_topic}[{p.partition}] ({p.confidence})" for p in g.partitions
                  if p.confidence not in (*_PLACED, Confidence.CLAMPED)]
        if behind:
            result.not_moved[g.group] = (f"{to} -> {region} has not copied past its position "
                                         f"on {', '.join(behind)} yet: run failback again "
                                         "once it has")
        elif unsure:
            result.not_moved[g.group] = f"no exact position on {', '.join(unsure)}"
    result.translation = report
    if not opts.dry_run:
        apply_positions(back.target, report, skip_groups=frozenset(result.not_moved))
    for g in report.groups:
        if g.skipped and g.group not in result.not_moved:
            result.not_moved[g.group] = g.skipped
    result.moved = sorted(g.group for g in report.groups if g.group not in result.not_moved)
    # MirrorMaker 2's way back: checkpoints of the flow into the region, on the region.
    cps = checkpoint_positions(back, report)
    result.checkpoints_failback = compare_with_checkpoints(report, cps,
                                                           target_marks(back, report))


class _Empty:
    result: dict[str, Any] = {}


def _escaped(names: Sequence[str]) -> list[str]:
    return [re.escape(n) for n in names]


def _consumers_not_stopped(ctx: OpsContext, marker: FailoverMarker,
                           cut: dict[str, dict[Any, int]]) -> dict[str, str]:
    """The region's groups not yet ready for the flows to run again, and why: consumers
    still active on the other region, local-only groups that have not read what the
    region's producers wrote there up to the cut."""
    groups = sorted(g for g, info in marker.groups.items() if info.get("applied"))
    if not groups:
        return {}
    waiting: dict[str, str] = {}
    states = group_states(ctx.target, groups)
    for name in groups:
        st = states.get(name)
        if st is not None and st.active:
            waiting[name] = (f"its consumers are still active on {marker.target} ({st.state}): "
                             "stop them")
    probe = RegionFailbackResult(marker.source, marker.target, marker, True)
    probe.not_moved = dict(waiting)
    _local_only_drained(ctx, marker, cut, groups, probe)
    return probe.not_moved


def _local_only_drained(ctx: OpsContext, marker: FailoverMarker,
                        cut: dict[str, dict[Any, int]], groups: Sequence[str],
                        result: RegionFailbackResult) -> None:
    """A local-only group reads the other region's local topic only while failed over: it
    goes back once it has read it up to the cut (where the region's producers left it)."""
    local = {g: marker.groups[g].get("local_only") or [] for g in groups}
    local = {g: ts for g, ts in local.items() if ts and g not in result.not_moved}
    if not local:
        return
    commits = committed_offsets(ctx.target, sorted(local))
    for g, topics in local.items():
        unread = 0
        for topic in topics:
            for p, end in cut.get(topic, {}).items():
                at = commits.get(g, {}).get((topic, int(p)))
                unread += max(0, end - (at if at is not None else 0))
        if unread:
            alone = "|".join(re.escape(t) for t in topics)
            result.not_moved[g] = (
                f"a local-only group that has not read {unread} record(s) of "
                f"{', '.join(topics)} on {marker.target} up to where {marker.source}'s "
                f"producers left it: let it read on {marker.target} subscribed to "
                f"^({alone})$ alone — not its copies of {marker.source}'s topics, where "
                f"records {marker.source} held arrive late, records it read at home — then "
                "stop it")


def _checkpoints_at_failover(marker: FailoverMarker, audit: dict[str, Any] | None
                             ) -> dict[str, Any] | None:
    """MirrorMaker 2's checkpoints at the failover against where each group really was: the
    comparison failover made (planned), or made now against the audit (an outage)."""
    step = marker.steps.get("mm2-checkpoints")
    if step is None:
        return None
    if marker.planned or audit is None:
        return step.result.get("compared")
    truth = {(p["group"], p["topic"], p["partition"]): p["exact"]
             for p in audit.get("positions", []) if p.get("exact") is not None}
    marks = {(t, int(p)): (m[0], m[1]) for t, parts in step.result.get("marks", {}).items()
             for p, m in parts.items()}
    return compare(truth, step.result.get("positions", {}), marks)

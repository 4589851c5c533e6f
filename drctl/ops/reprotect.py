"""`drctl reprotect`: the return to protection, where an incident ends (docs/design.md §6).

After failback the reverse flow (target -> source) runs and forward replication is stopped:
the pair is exposed, and a second loss of the source would lose everything written since.
Resuming the forward flow as it was would copy, from the positions it stored before the
outage, the gap records (already reconciled onto the target) and the reverse copies of the
post-failover writes (which came from the target) a second time. So, each step recorded in
the marker before the next:

1. quiet — the producers are back on the source: the target's failover topics take no writes
   for a settle period, and the reverse flow has caught up (`--force` goes on and says so);
2. reverse-retired — the reverse flow is stopped and deleted, its last positions recorded;
   what it had not carried yet, drctl copies to the source itself;
3. cut-over — per source partition, where forward copying starts: right after the source's
   copies of the target's post-failover writes (names kept), or where failback's comparison
   ended (prefixed names). A record written natively on the source before that point (a
   producer that moved back early) would never be copied: drctl copies it to the target;
4. forward-start — the forward flow's stored positions set to the cut-over (MirrorMaker 2:
   Connect's offsets API; Replicator: its consumer group);
5. forward-resumed — forward replication started, after checking that no reverse flow copies
   (with names kept the two would form a cycle);
6. verified — every source record written after the cut-over reaches the target, once;
   then the incident is closed.

A re-run continues after the last recorded step; `--dry-run` prints the positions it would set.
Each run's phases (the steps above) are timed from its start and kept in the marker
(ops/phases.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from drctl.context import OpsContext
from drctl.errors import CheckFailed, UsageError
from drctl.faults import crash_point
from drctl.fingerprint import RECONCILED_HEADER, is_reconciled
from drctl.kafka.clients import ClusterClients, describe_with_retry
from drctl.kafka.copy import RerunTag, copy_records
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import Record, header_values, stream_ranges
from drctl.kafka.topics import TP, log_append_time_topics
from drctl.ops.copies import copy_fingerprint, timestamps_kept
from drctl.ops.phases import PhaseClock, command_timing
from drctl.ops.quiet import Ends, Writes
from drctl.ops.rerun import rerun_while_dropped
from drctl.ops.reverse import (
    carry_to_source,
    failover_starts,
    late_copy_offsets,
    reverse_topic,
    wait_reverse_caught_up,
)
from drctl.ops.scorecard import operation_scorecard
from drctl.progress import Ticker
from drctl.replication.base import Confirm, ReturnRequest
from drctl.reports import write_report
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
    clock: PhaseClock | None = None  # this run's phases (None: a result not from a run)

    @property
    def phases_s(self) -> dict[str, float]:
        """How long each phase of this run took."""
        return {} if self.clock is None else self.clock.phases_s

    def scorecard(self) -> dict[str, Any]:
        """This run's phases and the incident's earlier reprotect runs (ops/phases.py)."""
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
                "carried_to_source": self.step("reverse-retired").get("carried", {}).get(
                    "copied", 0),
                "strays_copied": sum(self.step("cut-over").get("strays", {}).values()),
                "forward_copied": verified.get("copied", 0),
                "verified_ok": verified.get("ok"),
                "forced": self.forced or self.step("quiet").get("forced", [])}

    def as_dict(self, reports: Sequence[Path] = ()) -> dict[str, Any]:
        """The JSON of `drctl reprotect`."""
        steps = {k.removeprefix("reprotect:"): v.result for k, v in self.marker.steps.items()
                 if k.startswith("reprotect:")}
        return {**self.summary(), "resumed": self.resumed, "plan": self.plan, "steps": steps,
                "phases_s": self.phases_s, "timing": self.scorecard()["timing"],
                "scorecard": self.scorecard(),
                "marker": None if self.dry_run else asdict(self.marker),
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
        context = {"marker": asdict(self.marker), "summary": self.summary(),
                   "steps": {k.removeprefix("reprotect:"): v.result
                             for k, v in self.marker.steps.items()
                             if k.startswith("reprotect:")},
                   "phases_s": self.phases_s, "scorecard": self.scorecard()}
        return write_report(directory or (config.state.dir / "reports"),
                            f"{self.marker.incident}-reprotect", context, "reprotect-report",
                            config.redactor)


def marker_to_reprotect(ctx: OpsContext, incident: str | None) -> FailoverMarker:
    """The incident whose failback is done (or whose return began); a usage error naming
    what to run instead otherwise."""
    rep = ctx.rep
    marker = ctx.markers(rep.target).the_open_one(rep.source, rep.target, incident,
                                                  "return from")
    if marker.phase not in (IncidentPhase.FAILED_BACK, IncidentPhase.REPROTECTING,
                            IncidentPhase.CLOSED):
        raise UsageError(f"Incident {marker.incident} is {marker.phase}: its failback is not "
                         "done, so the reverse flow is not what the source needs yet.",
                         f"Run `{marker.phase.next_command}` first.")
    return marker


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
    (ops/rerun.py); one that stays silent ends it (exit 4). `approve` (not in a dry run)
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
                            config.state.dir / "reprotect")

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

    # 2. Retire the reverse flow; carry what it had not.
    if not marker.done("reprotect:reverse-retired"):
        clock.phase("reverse-retired")
        result.plan.append({"step": "reverse-retired", "topics": request.reverse_topics})
        if not opts.dry_run:
            retired = kind.retire_reverse(ctx, request, notify, confirm)
            retired["carried"] = carry_rest(ctx, marker)
            marker.record("reprotect:reverse-retired", retired)
            store.save(marker)
            crash_point("reprotect:reverse-retired")

    # 3. Where forward copying starts.
    if not marker.done("reprotect:cut-over"):
        clock.phase("cut-over")
        cut = cut_over(ctx, marker)
        result.plan.append({"step": "cut-over", "forward_starts": cut["forward_starts"],
                            "strays": cut["strays"]})
        if not opts.dry_run:
            cut["strays_copied"] = copy_strays(ctx, marker, cut)
            marker.record("reprotect:cut-over", cut)
            store.save(marker)
            crash_point("reprotect:cut-over")
        else:
            request = ReturnRequest(request.incident, request.reverse_topics,
                                    _offsets(cut["forward_starts"]), request.out_dir)
    if not opts.dry_run:
        request = ReturnRequest(request.incident, request.reverse_topics,
                                _offsets(result.forward_starts), request.out_dir)

    # 4. Set the forward flow's start.
    if not marker.done("reprotect:forward-start"):
        clock.phase("forward-start")
        applied = kind.set_forward_start(ctx, request, notify, confirm,
                                         dry_run=opts.dry_run)
        result.plan.append({"step": "forward-start", **applied})
        if not opts.dry_run:
            marker.record("reprotect:forward-start", applied)
            store.save(marker)
            crash_point("reprotect:forward-start")

    # 5. Resume it — never while a reverse flow copies with names kept.
    if not marker.done("reprotect:forward-resumed"):
        clock.phase("forward-resumed")
        result.plan.append({"step": "forward-resumed", "connectors": list(rep.connect.connectors)})
        if not opts.dry_run:
            reverse = kind.reverse_state(ctx)
            if rep.names_kept and reverse.copying:
                raise CheckFailed(
                    f"The reverse flow still copies ({reverse.describe(reverse.copying)}): "
                    f"resuming {', '.join(rep.connect.connectors) or 'forward replication'} "
                    "now would, with topic names kept, form a cycle.",
                    "Stop the reverse connector, then run reprotect again.")
            state = kind.resume_forward(rep, notify, confirm)
            marker.record("reprotect:forward-resumed",
                          {"components": state.components, "at_ms": int(time.time() * 1000)})
            store.save(marker)
            crash_point("reprotect:forward-resumed")

    # 6. Measured, not assumed: what the source received since the cut-over is on the target.
    if not opts.dry_run and not marker.done("reprotect:verified"):
        clock.phase("verified")
        check = verify_forward(ctx, marker, opts.timeout_s)
        marker.record("reprotect:verified", check,
                      status="done" if check["ok"] else "failed")
        store.save(marker)
        if not check["ok"]:
            raise CheckFailed(
                f"Forward replication resumed, but the target does not hold what the source "
                f"received since the cut-over: {check['missing']:,} record(s) missing, "
                f"{check['extra']:,} unexpected ({_bad_partitions(check)}).",
                f"The incident stays open. Inspect those partitions, then run `drctl "
                f"reprotect --incident {marker.incident}` again.")
        crash_point("reprotect:verified")

    clock.stop(finished=not opts.dry_run)
    if not opts.dry_run:
        marker.status = "closed"
        marker.record("reprotect", {"phases_s": result.phases_s})
        store.save(marker)
    return result


def _offsets(raw: Mapping[str, Mapping[Any, Any]]) -> Offsets:
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}


def _bad_partitions(check: Mapping[str, Any]) -> str:
    bad = [p for p in check["partitions"] if p["missing"] or p["extra"]]
    return "; ".join(f"{p['topic']}[{p['partition']}]: {p['missing']} missing, "
                     f"{p['extra']} unexpected" for p in bad[:10])


def quiet_and_caught_up(ctx: OpsContext, marker: FailoverMarker,
                        opts: ReprotectOptions) -> dict[str, Any]:
    """The target's failover topics took no write for `settle_s` after the reverse flow
    caught up with them. A dry run only looks once."""
    rep, notify = ctx.rep, ctx.notify
    before = Ends.read(ctx, marker)
    if opts.dry_run:
        return {"target_ends": before.by_topic(), "settle_s": 0, "note": "dry run: not waited"}
    wait_reverse_caught_up(ctx, marker, deadline_s=opts.timeout_s)
    caught_up = Ends.read(ctx, marker)
    notify(f"Checking that {rep.target}'s failover topics stay quiet for "
           f"{format_duration(opts.settle_s)} (producers moved back to {rep.source})")
    time.sleep(opts.settle_s)
    after = Ends.read(ctx, marker)
    writes = Writes.between(caught_up, after)
    out: dict[str, Any] = {"target_ends": after.by_topic(), "settle_s": opts.settle_s}
    if writes:
        if not opts.force:
            raise CheckFailed(
                f"Producers still write to {rep.target}: {writes.describe()} in the last "
                f"{format_duration(writes.seconds)}. Writes made there after the reverse flow "
                f"is retired would never reach {rep.source}.",
                f"Move the producers to {rep.source}, then run reprotect again; --force goes "
                "on (drctl carries what the target holds when it retires the reverse flow, "
                "later writes stay on the target only).")
        out["forced"] = [f"producers still writing to {rep.target}: {writes.describe()}"]
        out["writes_during_settle"] = writes.as_dict()
    return out


def _by_topic(ends: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p), end in sorted(ends.items()):
        out.setdefault(t, {})[str(p)] = end
    return out


def carry_rest(ctx: OpsContext, marker: FailoverMarker) -> dict[str, Any]:
    """With the reverse flow stopped: copy to the source every post-failover write it had
    not carried (none, when it had caught up). Idempotent."""
    rep = ctx.rep
    starts = failover_starts(rep, marker)
    admin = ctx.target.admin()
    ends = watermarks(admin, [(t, p) for t, parts in starts.items() for p in parts])
    ranges = {tp: (starts[tp[0]][tp[1]], end) for tp, (_, end) in ends.items()
              if end > starts[tp[0]][tp[1]]}
    source_start = _offsets(marker.steps["failback:reverse-source-start"].result["offsets"]) \
        if "failback:reverse-source-start" in marker.steps else {}
    if not ranges:
        return {"copied": 0, "skipped": 0}
    carried = carry_to_source(ctx, ranges, source_start, skip=late_copy_offsets(marker),
                              timestamps=timestamps_kept(ctx, marker))
    if carried["copied"]:
        ctx.notify(f"Copied {carried['copied']} post-failover write(s) the reverse flow had not "
               f"carried to {rep.source}")
    return carried


def compared_ends(marker: FailoverMarker) -> dict[TP, int]:
    """Per source partition, where failback's gap analysis stopped comparing: records up to
    there are on the target (replicated, reconciled) or deliberately held back (quarantined)."""
    gap = marker.steps["failback:gap"].result if "failback:gap" in marker.steps else {}
    return {(v["topic"], int(v["partition"])): int(v["source_end"])
            for v in gap.get("verified", []) if v.get("source_end") is not None}


def cut_over(ctx: OpsContext, marker: FailoverMarker) -> dict[str, Any]:
    """Per source topic partition: the first offset forward replication copies, and the
    target positions its copies will follow; with names kept also the records written on the
    source before that point that the target lacks (strays)."""
    rep = ctx.rep
    src, dst = ctx.clients(rep.source), ctx.clients(rep.target)
    compared = compared_ends(marker)
    src_admin, dst_admin = src.admin(), dst.admin()
    source_tps = [(t, p) for t, mirror in sorted(marker.topics.items())
                  for p in sorted(marker.failover_point.get(mirror, {}))]
    src_marks = watermarks(src_admin, source_tps)
    starts: dict[TP, int] = {}
    how: dict[str, str] = {}
    strays: dict[TP, list[int]] = {}
    missing_proof = [tp for tp in source_tps if tp not in compared]
    if missing_proof:
        raise UsageError(
            "The failback recorded no comparison end for "
            + ", ".join(f"{t}[{p}]" for t, p in missing_proof[:5])
            + ": drctl cannot prove where forward copying must start.",
            "Set the forward flow's positions by hand (the source's ends when producers "
            "moved back), or fail back with this drctl version.")
    if not rep.names_kept:
        # Reverse copies land in other topics (<target alias>.<topic>): everything the
        # source topic received after failback compared it is new to the target.
        for tp in source_tps:
            starts[tp] = compared[tp]
            how[f"{tp[0]}[{tp[1]}]"] = "where failback's comparison ended"
    else:
        keep = timestamps_kept(ctx, marker)
        expected = _expected_back(ctx, marker, keep)
        scan = {tp: (compared[tp], src_marks[tp][1]) for tp in source_tps
                if src_marks[tp][1] > compared[tp]}
        walked = walk_copies(stream_ranges(src, scan), expected, set(scan), keep)
        for tp in source_tps:
            last_copy, candidates, left = walked.get(tp, (None, [], 0))
            if left:
                raise CheckFailed(
                    f"{left} post-failover write(s) of {tp[0]}[{tp[1]}] are not on "
                    f"{rep.source} although the reverse flow was retired after catching up.",
                    "Run reprotect again: it carries them first.")
            starts[tp] = compared[tp] if last_copy is None else max(compared[tp],
                                                                     last_copy + 1)
            strays[tp] = [o for o in candidates if o < starts[tp]]
            how[f"{tp[0]}[{tp[1]}]"] = ("after the source's copy of the last post-failover "
                                        "write" if last_copy is not None else
                                        "where failback's comparison ended (no "
                                        "post-failover write)")
    mirrors = [(marker.topics[t], p) for t, p in source_tps]
    target_ends = {tp: end for tp, (_, end) in watermarks(dst_admin, mirrors).items()}
    if any(strays.values()):
        ctx.notify(f"{sum(len(v) for v in strays.values())} record(s) were written on "
               f"{rep.source} among the reverse copies (a producer moved back early): drctl "
               f"copies them to {rep.target}, forward replication would not")
    return {"forward_starts": _by_topic(starts), "how": how,
            "target_ends": _by_topic(target_ends),
            "strays": {f"{t}[{p}]": len(v) for (t, p), v in strays.items() if v},
            "stray_offsets": {f"{t}[{p}]": v for (t, p), v in strays.items() if v}}


def _expected_back(ctx: OpsContext, marker: FailoverMarker, keep: bool
                   ) -> dict[TP, Counter[bytes]]:
    """Per source (reverse) partition: the post-failover writes that belong there — the
    failover topics from their failover point, without drctl's reconciled copies and the
    replicator's late copies."""
    rep, dst = ctx.rep, ctx.target
    starts = failover_starts(rep, marker)
    late = late_copy_offsets(marker)
    ends = watermarks(dst.admin(), [(t, p) for t, parts in starts.items() for p in parts])
    ranges = {tp: (starts[tp[0]][tp[1]], end) for tp, (_, end) in ends.items()
              if end > starts[tp[0]][tp[1]]}
    out: dict[TP, Counter[bytes]] = {}
    for rec in stream_ranges(dst, ranges):
        if rec.offset in late.get((rec.topic, rec.partition), ()) or is_reconciled(rec.headers):
            continue
        out.setdefault((reverse_topic(rep, rec.topic), rec.partition), Counter())[
            copy_fingerprint(rec, keep)] += 1
    return out


def walk_copies(records: Iterable[Record], expected: Mapping[TP, Counter[bytes]],
                partitions: Collection[TP] = (), timestamps: bool = True
                ) -> dict[TP, tuple[int | None, list[int], int]]:
    """Per partition, records in offset order: which are the copies of post-failover writes
    (the offset of the last one), which are not (candidates for strays), and how many
    expected copies were never met. Copies are counted as a multiset: of identical
    records, the first ones met are the copies."""
    remaining = {tp: Counter(c) for tp, c in expected.items()}
    last: dict[TP, int | None] = {}
    others: dict[TP, list[int]] = {}
    for rec in records:
        tp = (rec.topic, rec.partition)
        fp = copy_fingerprint(rec, timestamps)
        left = remaining.get(tp)
        if left is not None and left[fp] > 0:
            left[fp] -= 1
            last[tp] = rec.offset
        else:
            others.setdefault(tp, []).append(rec.offset)
    return {tp: (last.get(tp), others.get(tp, []), remaining.get(tp, Counter()).total())
            for tp in set(partitions) | set(expected) | set(last) | set(others)}


def copy_strays(ctx: OpsContext, marker: FailoverMarker, cut: Mapping[str, Any]) -> int:
    """Copy the strays to their mirror topics, tagged like reconciled copies (a re-run
    copies none twice). Returns how many were copied in this run."""
    offsets = {_tp(k): set(v) for k, v in cut.get("stray_offsets", {}).items()}
    if not offsets:
        return 0
    rep = ctx.rep
    src, dst = ctx.clients(rep.source), ctx.clients(rep.target)
    records = sorted((r for r in stream_ranges(src, {tp: (min(v), max(v) + 1)
                                               for tp, v in offsets.items()})
                      if r.offset in offsets[(r.topic, r.partition)]),
                     key=lambda r: (r.topic, r.partition, r.offset))
    mirrors = sorted({marker.topics[t] for t, _ in offsets})
    ends = watermarks(dst.admin(), [(m, p) for m in mirrors
                                    for p in marker.failover_point.get(m, {})])
    since = _offsets(cut["target_ends"])
    done = header_values(dst, {tp: (since.get(tp[0], {}).get(tp[1], 0), end)
                               for tp, (_, end) in ends.items()}, RECONCILED_HEADER)
    tag = RerunTag(RECONCILED_HEADER,
                   lambda r: f"{marker.incident}:{r.topic}:{r.partition}:{r.offset}".encode())
    sent = copy_records(dst, records, lambda r: (marker.topics[r.topic], r.partition),
                        topics=mirrors, tag=tag, done=done, what="records written on the "
                        "source among the reverse copies")
    copied = sum(sent.values())
    if copied:
        ctx.notify(f"Copied {copied} record(s) written on {rep.source} before the cut-over to "
               f"{rep.target}")
    return copied


def _tp(text: str) -> TP:
    topic, _, part = text.rpartition("[")
    return topic, int(part.rstrip("]"))


def verify_forward(ctx: OpsContext, marker: FailoverMarker, timeout_s: float
                   ) -> dict[str, Any]:
    """Wait until the target holds the copy of the last record each source partition had
    when this check began, then compare what the source received since the cut-over with
    what the target received since, as multisets of fingerprints (nothing missing, nothing
    twice)."""
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
    partitions: list[dict[str, Any]] = []
    for tp in source_tps:
        mirror = (marker.topics[tp[0]], tp[1])
        want, have = got.get(tp, Counter()), copied.get(mirror, Counter())
        partitions.append({"topic": tp[0], "partition": tp[1],
                           "from": starts[tp[0]][tp[1]], "to": src_marks[tp][1],
                           "copied": have.total(), "missing": (want - have).total(),
                           "extra": (have - want).total(),
                           "proof": ("no record since the cut-over" if tp not in queries
                                     else f"{mirror[0]}@{found[tp]}" if tp in found
                                     else "not arrived")})
    missing = sum(p["missing"] for p in partitions)
    extra = sum(p["extra"] for p in partitions)
    return {"ok": not missing and not extra, "copied": sum(p["copied"] for p in partitions),
            "missing": missing, "extra": extra, "partitions": partitions}


def _fingerprints(clients: ClusterClients, ranges: Mapping[TP, tuple[int, int]], keep: bool
                  ) -> dict[TP, Counter[bytes]]:
    out: dict[TP, Counter[bytes]] = {}
    for rec in stream_ranges(clients, ranges):
        if is_reconciled(rec.headers):
            continue  # drctl's own copies (strays) are not forward replication's
        out.setdefault((rec.topic, rec.partition), Counter())[copy_fingerprint(rec, keep)] += 1
    return out

"""`drctl failback`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from drctl.cli.confirm import confirm_or_abort
from drctl.cli.durations import duration_option
from drctl.cli.options import (
    DEFAULT_DEADLINE_S,
    App,
    DryRun,
    Groups,
    Incident,
    OutputOption,
    ReportDir,
    RunDeadline,
    Yes,
)
from drctl.cli.state import CURRENT
from drctl.cli.views import (
    describe_failback_preview,
    render_audit,
    render_plan,
    render_translation,
)
from drctl.errors import ExitStatus
from drctl.gap.plan import GapScope
from drctl.ops.one_way.failback import FailbackOptions, run_failback
from drctl.ops.one_way.gap_step import gap_finder
from drctl.ops.one_way.reconcile import ReconcileMode
from drctl.ops.one_way.scorecard import describe as describe_scorecard
from drctl.ops.one_way.switchback import SwitchBack
from drctl.terminal import OutputFormat


def failback_command(
    check_order: Annotated[bool, typer.Option(
        "--check-order/--no-check-order",
        help="Classify every unreplicated record safe, conflict or unkeyed. Without it no "
             "record is known safe: --reconcile quarantine or none only.")] = True,
    reconcile: Annotated[ReconcileMode, typer.Option(
        help="; ".join(f"{mode}: {mode.meaning}" for mode in ReconcileMode) + ".")]
    = ReconcileMode.COPY_SAFE,
    incident: Incident = None,
    app: App = None,
    groups: Groups = ".*",
    dry_run: DryRun = False,
    yes: Yes = False,
    deadline: RunDeadline = DEFAULT_DEADLINE_S,
    scope: Annotated[GapScope, typer.Option(
        help="Gap analysis scope — " + "; ".join(f"{s}: {s.meaning}" for s in GapScope)
        + ".")] = GapScope.TAIL,
    lookback: Annotated[float | None, duration_option(
        "Also narrow the gap analysis to records from this long before the failover, "
        "e.g. 6h (default: no window; the report says what it left out).",
        default=None)] = None,
    timeout: Annotated[float, duration_option(
        "How long work that progresses may take: the Spark gap job and reverse "
        "replication's catch-up (exit 1 with what was left). A cluster that does not "
        "answer is --deadline's.", default="30m")]
    = 1800.0,
    settle: Annotated[float, duration_option(
        "How long the target's failover topics must take no write before the gap is "
        "classified (producers stopped there).", default="3s")] = 3.0,
    force: Annotated[bool, typer.Option(
        "--force", help="Go on while producers write to the target (writes after the order "
        "check are not classified), and with schema ids the other registry lacks, reads as "
        "another schema or cannot be asked about (said on stderr, named in the report).")] \
        = False,
    report_dir: ReportDir = None,
    region: Annotated[str | None, typer.Option(
        "--region", metavar="CLUSTER",
        help="Active-active: the region coming back (default: the one failed over). Its "
             "producers stopped and its consumers stopped on the other region first.")]
    = None,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Bring the original source back: gap, reconcile, reverse replication, offsets back;
    or (active-active) a region's applications back to it, once both flows caught up.

    Both clusters are checked first, then the plan is shown, then the question (unless
    --yes). Ends failed-back and prints the next command: `drctl reprotect`, the return
    to protection.

    \b
    Examples:
      drctl failback --dry-run
      drctl failback --yes                    # order check, copy-safe
      drctl failback --reconcile quarantine --yes
      drctl failback --region primary --yes   # active-active

    \b
    Exit status: 0 failed back; 1 a wait ran out (--timeout); 2 usage, config,
    or no incident to fail back; 3 order conflicts, lost records, writes on the
    target, schema ids the other registry lacks or reads otherwise, or an
    end-state check failed; 4 a cluster or a schema registry unreachable; 5 not
    confirmed."""
    config = CURRENT.config()
    term = CURRENT.terminal(output)
    if config.topology is not None or region is not None:
        region_failback(region, incident, dry_run=dry_run, yes=yes, deadline=deadline,
                        timeout=timeout, report_dir=report_dir, output=output)
        return
    rep = config.require_replication()
    opts = FailbackOptions(reconcile=reconcile, check_order=check_order, incident=incident,
                           groups=groups, dry_run=dry_run, deadline_s=deadline,
                           catch_up_deadline_s=timeout, settle_s=settle, force=force)

    def approve(preview: dict[str, Any]) -> None:
        # The plan first (both clusters answer), then the question.
        for line in describe_failback_preview(preview):
            term.info(line)
        confirm_or_abort(f"Fail back {rep.target} -> {rep.source} (reconcile: {reconcile})?",
                         yes=yes)

    finder = gap_finder(lookback, CURRENT.debug, scope, timeout_s=timeout)
    ctx = CURRENT.context(deadline, app=app)
    result = run_failback(ctx, opts, finder, approve=approve)
    paths = result.write_reports(ctx, report_dir)
    if term.json_mode:
        term.emit_json(result.as_dict(paths))
        if result.exit_status != ExitStatus.SUCCESS:
            raise typer.Exit(result.exit_status)
        return
    gap = result.gap
    if gap.get("unclassified"):
        term.info(f"Gap: {gap['unclassified']} record(s), not classified (--no-check-order).")
    else:
        term.info(f"Gap: {gap.get('safe', 0)} safe, {gap.get('conflict', 0)} conflict, "
                  f"{gap.get('unkeyed', 0)} unkeyed record(s).")
    if dry_run:
        render_plan(result.plan)
        return
    if result.audit:
        render_audit(result.audit)
    if result.switch_back is not None:
        render_switch_back(result.switch_back)
    elif result.translation_report is not None:
        render_translation(result.translation_report)
    for line in describe_scorecard(result.scorecard()):
        term.info(line)
    for p in paths:
        term.info(f"  report: {p}")
    if result.switch_back is not None and result.switch_back.exit_status:
        for g in result.switch_back.waiting:
            term.warn(f"Group {g.group} was not moved: {g.skipped}.")
        for g in result.switch_back.skipping:
            term.warn(f"Group {g.group} would skip {g.totals()['not_delivered']} gap "
                      "record(s) it never read.")
        for group, pos in result.switch_back.unplaced:
            term.warn(f"Group {group} was not placed on {pos.topic}[{pos.partition}] "
                      f"({pos.note}): "
                      "its consumers start there at auto.offset.reset; set its position "
                      "by hand before they start, then run failback again to finish (it does "
                      "not move that group again).")
        if result.switch_back.waiting or result.switch_back.skipping:
            term.warn(f"Incident {result.marker.incident} stays open. Stop those groups' "
                      f"consumers on {rep.target} and run failback again: it moves only "
                      "the groups left.")
        raise typer.Exit(result.exit_status)
    # What still needs the operator comes before the closing line, never after a "done".
    problems = []
    if result.audit.get("totals", {}).get("skipped"):
        problems.append(f"The failover made groups skip {result.audit['totals']['skipped']} "
                        "record(s) (audit above): their consumers never read them; replay "
                        "them.")
    for lost in result.gap.get("lost", []):
        count = (f"{lost['count']:,} record(s), offsets {lost['from']}–{lost['to'] - 1}"
                 if lost["count"] is not None else
                 f"an unknown number of records before offset {lost['to']}")
        problems.append(f"{lost['topic']}[{lost['partition']}]: {count} were deleted by "
                        f"retention on {rep.source} before they reached {rep.target}: gone "
                        f"before they could be compared ({lost['proof']}).")
    if result.audit.get("totals", {}).get("not_placed"):
        problems.append(f"{result.audit['totals']['not_placed']} partition(s) a group had "
                        "committed got no position at failover (audit above): its consumers "
                        "started there at auto.offset.reset.")
    taken = result.marker.steps.get("failback:unmirrored")
    handled = set(taken.result.get("topics", {})) if taken else set()
    for t in result.marker.left_behind.get("topics", []):
        if t["topic"] in handled:
            continue
        problems.append(f"Topic {t['topic']} was never mirrored to {rep.target}: its records "
                        f"are only on {rep.source}, not compared and not reconciled. Mirror "
                        "it (restart forward replication) and check its consumers.")
    for line in problems:
        term.warn(line)
    if problems:
        term.warn(f"Failback of {result.marker.incident} finished, but {len(problems)} "
                  f"problem(s) above need you (exit {int(result.exit_status)}).")
    else:
        term.success(f"Failback of {result.marker.incident} done.")
    covers = result.marker.covers
    what = ("The pair is exposed: nothing replicates" if covers.whole else
            f"{covers.describe_first()} is exposed: nothing of it replicates")
    term.warn(f"{what} {rep.source} -> {rep.target} until the return to protection. Move "
              f"producers and consumers back to {rep.source}, then run:")
    term.emit_text(f"  {_with_config(result.next_command)}")
    if result.exit_status:
        raise typer.Exit(result.exit_status)


def _with_config(command: str) -> str:
    """`command` as the operator types it, with the --config this run was given."""
    given = CURRENT.config_option
    return command.replace("drctl ", f"drctl --config {given} ", 1) if given else command


def render_switch_back(sb: SwitchBack) -> None:
    """Per group and partition: where it resumes on the source and what it receives."""
    term = CURRENT.terminal()
    rows = []
    for g in sb.groups:
        for p in g.partitions:
            missed = sum(e - s for s, e in p.quarantined_missed)
            rows.append([g.group, f"{p.topic}[{p.partition}]", p.before, p.after,
                         p.confidence, p.redelivered or "", p.unread_gap or "",
                         missed or "", p.not_delivered or "",
                         "yes" if g.applied else ("waiting" if g.skipped else "no")])
    term.table("Consumer groups on the source", ["group", "partition", "before", "after",
                                                 "confidence", "re-delivered", "gap unread",
                                                 "quarantined missed", "never delivered",
                                                 "moved"], rows)
    s = sb.summary()
    term.info(f"{s['applied']} of {s['groups']} groups moved; {s['rewound']} position(s) "
              f"rewound to gap records not read on the target; {s['redelivered']} records "
              f"re-delivered, {s['quarantined_missed']} quarantined records not delivered, "
              f"{s['not_delivered']} never delivered.")


def region_failback(region: str | None, incident: str | None, *, dry_run: bool, yes: bool,
                    deadline: float, timeout: float, report_dir: Path | None,
                    output: OutputFormat | None) -> None:
    """`drctl failback` on an active-active pair: a region's applications back to it."""
    from drctl.ops.active_active.failback import (
        RegionFailbackOptions,
        find_incident,
        run_region_failback,
    )
    from drctl.ops.active_active.pair import Pair

    config = CURRENT.config()
    term = CURRENT.terminal(output)
    pair = Pair(config)
    name, marker = find_incident(pair, region, term.step, deadline, incident)
    to = pair.other(name)
    if not dry_run:
        term.info(f"Incident {marker.incident}: {name}'s applications run on {to}. Before "
                  f"failback: {name}'s producers stopped, its consumers stopped on {to}.")
        confirm_or_abort(f"Fail {name} back from {to}?", yes=yes)
    opts = RegionFailbackOptions(region=name, dry_run=dry_run, deadline_s=deadline,
                                 timeout_s=timeout)
    with pair.context(name, term.step, deadline) as ctx, \
            pair.context(to, term.step, deadline) as back:
        result = run_region_failback(pair, ctx, back, marker, opts)
        paths = result.write_reports(ctx, report_dir)
    late = result.late_arrivals or {}
    if late.get("total"):
        term.warn(f"Late arrivals: {late['summary']}.")
        for row in late["partitions"]:
            term.warn(f"  {row['topic']}[{row['partition']}]: {row['records']} record(s), "
                      f"offsets {row['first_offset']}-{row['last_offset']}, written "
                      f"{row['first_time']} .. {row['last_time']}")
    for group, why in sorted(result.not_moved.items()):
        term.warn(f"Group {group} not moved back: {why}.")
    if result.skipped:
        term.warn(f"The audit found {result.skipped} record(s) a group skipped (see the "
                  "report).")
    if term.json_mode:
        term.emit_json(result.as_dict(paths))
        if result.exit_status:
            raise typer.Exit(result.exit_status)
        return
    if result.audit:
        render_audit(result.audit)
    if result.translation is not None:
        render_translation(result.translation)
    for p in paths:
        term.info(f"  report: {p}")
    if not dry_run:
        for line in describe_scorecard(result.scorecard()):
            term.info(line)
    if result.done:
        term.success(f"Failback {marker.incident} done: {name}'s groups are back on {name} "
                     f"({len(result.moved)} moved this run); both flows run. Start {name}'s "
                     f"producers on {name} again.")
    if result.exit_status:
        raise typer.Exit(result.exit_status)

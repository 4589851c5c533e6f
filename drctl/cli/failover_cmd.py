"""`drctl failover`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from drctl.cli.confirm import confirm_or_abort, operator_confirms
from drctl.cli.durations import duration_option
from drctl.cli.options import (
    DEFAULT_DEADLINE_S,
    App,
    DryRun,
    FailoverDeadline,
    Groups,
    Incident,
    OldSourceDeadline,
    OutputOption,
    ReportDir,
    ScopeTopics,
    Yes,
    renamed,
)
from drctl.cli.state import CURRENT
from drctl.cli.views import describe_preview, render_plan, render_translation
from drctl.errors import UsageError
from drctl.ops.one_way.failover import run_failover
from drctl.ops.one_way.scorecard import describe as describe_scorecard
from drctl.ops.steps.failover_point import FailoverOptions, describe_left_behind
from drctl.ops.steps.fence import open_risks
from drctl.terminal import OutputFormat
from drctl.translate.model import TranslateMethod


def failover_command(
    planned: Annotated[bool, typer.Option(
        "--planned", help="Switchover with the source up: producers stopped, zero gap.")]
    = False,
    dry_run: DryRun = False,
    yes: Yes = False,
    app: App = None,
    topics: ScopeTopics = None,
    groups: Groups = ".*",
    method: Annotated[TranslateMethod, typer.Option(help="Offset translation method.")]
    = TranslateMethod.AUTO,
    incident: Incident = None,
    new_incident: Annotated[bool, typer.Option(
        "--new-incident", help="Open a new incident for a new outage; the flow's open "
        "incidents are closed as superseded.")] = False,
    continue_within: Annotated[float, duration_option(
        "Without --incident, continue the flow's open incident only when it was opened "
        "this recently (exit 2 otherwise).", default="12h")] = 12 * 3600.0,
    deadline: FailoverDeadline = DEFAULT_DEADLINE_S,
    old_source_deadline: OldSourceDeadline = None,
    timeout: Annotated[float, duration_option(
        "--planned: how long to wait for the source to go quiet and replication to catch up "
        "(exit 1 with the records left per partition).", default="30m")] = 1800.0,
    force: Annotated[bool, typer.Option(
        "--force", help="Take the failover point even behind a hanging transaction (its "
        "records stay unread by read_committed consumers), and with schema ids the target's "
        "registry lacks or reads as another schema (named in the report).")] = False,
    transaction_age: Annotated[float | None, duration_option(
        "An open transaction older than this is hanging (default: the brokers' "
        "transaction.max.timeout.ms).", default=None)] = None,
    report_dir: ReportDir = None,
    region: Annotated[str | None, typer.Option(
        "--region", metavar="CLUSTER",
        help="Active-active (`topology:`): the region to fail over; its producers and groups "
             "move to the other region, both flows keep running.")] = None,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Fail over from the replication source to its target, or (active-active) a region to
    the other one.

    Preflight first, then the plan, then the question (unless --yes). Every step is recorded
    in the failover marker: a re-run continues where it stopped.

    \b
    Examples:
      drctl failover --dry-run         # the plan and offsets; nothing changes
      drctl failover --yes             # the source is gone
      drctl failover --planned --yes   # switchover, producers stopped
      drctl failover --app billing --planned --yes   # one application; the rest
                                                     # keeps replicating
      drctl failover --region primary --yes   # active-active: primary is gone

    \b
    Exit status: 0 done; 1 a wait ran out (--planned); 2 usage, config, or an
    open incident it must not continue; 3 preflight failed (a hanging
    transaction, schema ids the target's registry lacks or reads otherwise, names
    kept both ways in an active-active pair) or a group or topic was left behind
    or refused; 4 the target unreachable (also mid-run, past --deadline); 5 not
    confirmed."""
    config = CURRENT.config()
    term = CURRENT.terminal(output)
    deadline = renamed(deadline, old_source_deadline, old="--source-deadline",
                       new="--deadline", warn=term.warn)
    if config.topology is not None or region is not None:
        if app or topics:
            raise UsageError("--app and --topics are for one flow; an active-active pair "
                             "fails over by --region.")
        region_failover(region, FailoverOptions(
            planned=planned, dry_run=dry_run, groups=groups, method=method, incident=incident,
            new_incident=new_incident, continue_within_s=continue_within,
            source_deadline_s=deadline, catch_up_deadline_s=timeout, force=force),
            yes=yes, report_dir=report_dir, output=output)
        return
    rep = config.require_replication()
    opts = FailoverOptions(planned=planned, dry_run=dry_run, groups=groups, method=method,
                           incident=incident, new_incident=new_incident,
                           continue_within_s=continue_within, source_deadline_s=deadline,
                           catch_up_deadline_s=timeout, force=force,
                           transaction_age_s=transaction_age)
    def approve(preview: dict[str, Any]) -> None:
        # The plan first, then the question (as terraform shows a plan before apply).
        for line in describe_preview(preview):
            term.info(line)
        confirm_or_abort(f"Fail over {rep.source} -> {rep.target} ({preview['mode']})?",
                         yes=yes)

    ctx = CURRENT.context(deadline, app=app, topics=topics or (),
                          groups=[groups] if topics and groups != ".*" else ())
    result = run_failover(ctx, opts, confirm=operator_confirms, approve=approve)
    marker = result.marker
    paths = result.write_reports(ctx, report_dir)
    # On stderr in every output mode: the operator must not miss an unfenced replicator.
    fence = marker.fence
    if not dry_run and marker.replication_stop == "pending" and fence.get("state") == "fenced":
        term.warn("Replication could not be stopped (Connect unreachable). It is fenced: "
                  f"{fence['principal']} may not write {len(fence['topics'])} topic(s) on "
                  f"{rep.target} until failback confirms the stop and lifts the fence.")
    for risk in [] if dry_run else open_risks(marker):
        term.warn(risk)
    for line in [] if dry_run else describe_left_behind(marker):
        term.warn(f"Left behind: {line}")
    if term.json_mode:
        term.emit_json(result.as_dict(paths))
        if result.exit_status:
            raise typer.Exit(result.exit_status)
        return
    if dry_run:
        render_plan(result.plan)
        if result.translation_report is not None:
            render_translation(result.translation_report)
        return
    summary = (result.translation or {}).get("summary", {})
    scope = marker.covers
    term.success(f"Failover {marker.incident} done: "
                 + (f"{rep.target} is now primary. " if scope.whole else
                    f"{rep.target} is now primary for {scope.describe()} "
                    f"({len(marker.topics)} topic(s)); the rest of the flow keeps "
                    "replicating. ")
                 + f"{summary.get('applied', 0)} groups moved, replication "
                 f"{marker.replication_stop}.")
    for line in describe_scorecard(result.scorecard()):
        term.info(line)
    for p in paths:
        term.info(f"  report: {p}")
    term.info(f"Next: switch clients to {rep.target}; when {rep.source} is back run "
              "`drctl failback`.")
    if result.exit_status:
        term.warn(f"{len(describe_left_behind(marker))} topic(s)/group(s) were left behind "
                  "(listed above and in the report).")
        raise typer.Exit(result.exit_status)


def region_failover(region: str | None, opts: FailoverOptions, *, yes: bool,
                    report_dir: Path | None, output: OutputFormat | None) -> None:
    """`drctl failover --region`: one region of an active-active pair to the other."""
    from drctl.ops.active_active.failover import run_region_failover
    from drctl.ops.active_active.pair import Pair

    config = CURRENT.config()
    term = CURRENT.terminal(output)
    pair = Pair(config)
    if region is None:
        raise UsageError("An active-active pair fails over by region: name the one to fail "
                         "over.", f"Pass --region {' or --region '.join(pair.regions)}.")
    region = pair.region(region)
    dry_run, deadline = opts.dry_run, opts.source_deadline_s
    to = pair.other(region)

    def approve(plan: dict[str, Any]) -> None:
        for old in plan["superseding"]:
            term.warn(f"Incident {old} is closed as superseded (--new-incident)")
        term.info(f"Incident {plan['incident']}"
                  + (" (continuing)" if plan["continuing"] else "") + f": {region} -> {to}, "
                  f"{plan['mode']}, {plan['topics']} local topic(s) of {region}"
                  + ("" if plan["region_reachable"] else f"; {region} is unreachable: positions "
                     "from guard's snapshots and MirrorMaker 2's checkpoints, bounds stated"))
        confirm_or_abort(f"Fail {region} over to {to}?", yes=yes)

    with pair.context(region, term.step, deadline) as ctx:
        result = run_region_failover(pair, ctx, region, opts, approve=approve,
                                     confirm=operator_confirms)
        paths = result.write_reports(ctx, report_dir)
    for line in [] if dry_run else describe_left_behind(result.marker):
        term.warn(f"Left behind: {line}")
    for line in result.refused:
        term.warn(f"Not moved: {line}")
    for line in result.warnings:
        term.warn(line)
    if term.json_mode:
        term.emit_json(result.as_dict(paths))
        if result.exit_status:
            raise typer.Exit(result.exit_status)
        return
    if result.translation is not None:
        render_translation(result.translation)
    if dry_run:
        return
    summary = result.translation.summary() if result.translation else {}
    term.success(f"Region failover {result.marker.incident} done: {region}'s applications run "
                 f"on {to}; {summary.get('applied', 0)} group(s) moved; {region} -> {to} "
                 f"{result.marker.replication_stop} until failback, {to} -> {region} runs.")
    for topic, now in sorted(result.producers.items()):
        term.info(f"  producers of {topic} on {region}: write to {now} on {to}")
    for p in paths:
        term.info(f"  report: {p}")
    for line in describe_scorecard(result.scorecard()):
        term.info(line)
    term.info(f"Next: when {region} is back, `drctl failback --region {region}` (its producers "
              f"stopped, its consumers stopped on {to}).")
    if result.exit_status:
        raise typer.Exit(result.exit_status)

"""`drctl translate-offsets`."""

from __future__ import annotations

from typing import Annotated

import typer

from drctl.cli.confirm import confirm_or_abort, interactive
from drctl.cli.options import (
    DEFAULT_DEADLINE_S,
    App,
    Groups,
    OldSourceDeadline,
    OutputOption,
    ScopeTopics,
    SourceDeadline,
    old_spelling,
    renamed,
)
from drctl.cli.state import CURRENT
from drctl.cli.views import render_translation
from drctl.errors import ExitStatus, UsageError
from drctl.terminal import OutputFormat
from drctl.translate.engine import TranslateRequest, run_translation
from drctl.translate.inventory import keep_inventory
from drctl.translate.model import TranslateMethod, TranslationReport


def translate_offsets_command(
    source: Annotated[str | None, typer.Option(
        "--source", metavar="CLUSTER",
        help="Cluster the groups consumed on (default: the replication source).")]
    = None,
    target: Annotated[str | None, typer.Option(
        "--target", metavar="CLUSTER",
        help="Cluster they move to (default: the replication target).")] = None,
    app: App = None,
    topics: ScopeTopics = None,
    groups: Groups = ".*",
    method: Annotated[TranslateMethod, typer.Option(
        help="Offset translation method (auto: by replication kind and whether the source "
             "answers).")] = TranslateMethod.AUTO,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Show the translated positions; commit nothing.")] = False,
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="Commit without asking (only to groups with no active members "
                            "on the target).")] = False,
    allow_rewind: Annotated[bool, typer.Option(
        "--allow-rewind", help="Allow moving a group backwards on the target.")] = False,
    max_scan: Annotated[int, typer.Option(
        metavar="N",
        help="Records scanned per position before giving up on an exact match.")] = 100_000,
    deadline: SourceDeadline = DEFAULT_DEADLINE_S,
    old_source_deadline: OldSourceDeadline = None,
    old_from: Annotated[str | None, old_spelling("--from")] = None,
    old_to: Annotated[str | None, old_spelling("--to")] = None,
    old_apply: Annotated[bool | None, old_spelling("--apply")] = None,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Move consumer-group positions between clusters: no record skipped, none twice.

    The positions first, then the question (unless --yes); nothing is committed without
    an answer or --yes.

    \b
    Examples:
      drctl translate-offsets --groups 'billing-.*' --dry-run  # what would move
      drctl translate-offsets --groups 'billing-.*' --yes      # commit it
      drctl translate-offsets --source secondary --target primary --dry-run

    \b
    Exit status: 0 done; 2 usage or config; 3 a position not placed (none
    provable, or its topic missing on the target) or a group not applied
    (active members); 4 a cluster unreachable; 5 not confirmed."""
    config = CURRENT.config()
    term = CURRENT.terminal(output)
    deadline = renamed(deadline, old_source_deadline, old="--source-deadline",
                       new="--deadline", warn=term.warn)
    source = renamed(source, old_from, old="--from", new="--source", warn=term.warn)
    target = renamed(target, old_to, old="--to", new="--target", warn=term.warn)
    yes = renamed(yes, old_apply, old="--apply", new="--yes", warn=term.warn)
    if dry_run and yes:
        raise UsageError("--dry-run commits nothing and --yes commits without asking: give "
                         "one of them.")
    rep = config.require_replication()
    req = TranslateRequest(source or rep.source, target or rep.target, groups, method,
                           not dry_run, allow_rewind, max_scan, deadline)

    def approve(report: TranslationReport) -> None:
        # The positions first, then the question (as failover shows its plan).
        if not yes and interactive() and not term.json_mode:
            render_translation(report, pending=True)
        s = report.summary()
        confirm_or_abort(f"Commit {s['partitions']} position(s) of {s['groups']} group(s) "
                         f"on {req.target}?", yes=yes,
                         how="pass --yes to commit, or --dry-run to see the positions only")

    ctx = CURRENT.context(deadline, app=app, topics=topics or ())
    report = run_translation(ctx, req, approve=approve)
    if report.source_reachable and (req.source, req.target) == (rep.source, rep.target):
        # Both clusters answer: keep what a failover needs should the source die.
        term.step(keep_inventory(config, ctx.source, ctx.target).describe())
    if term.json_mode:
        term.emit_json(report.as_dict())
    else:
        render_translation(report)
    unapplied = [g for g in report.groups if g.skipped and not g.applied]
    if report.apply and unapplied:
        term.warn(f"{len(unapplied)} group(s) not applied: "
                  + "; ".join(f"{g.group}: {g.skipped}" for g in unapplied[:5]))
    unplaced = report.unplaced()
    if unplaced:
        # Those groups stay where they were on these partitions: never a success.
        term.warn(f"{len(unplaced)} position(s) not placed, their groups left where they were "
                  "there: " + "; ".join(f"{p.group} {p.target_topic}[{p.partition}]: "
                                        f"{p.note or p.confidence}" for p in unplaced[:5])
                  + (f" (+{len(unplaced) - 5} more)" if len(unplaced) > 5 else ""))
    if (report.apply and unapplied) or unplaced:
        raise typer.Exit(ExitStatus.CHECK_FAILED)

"""`drctl reprotect`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from drctl.cli.confirm import confirm_or_abort, operator_confirms
from drctl.cli.durations import duration_option
from drctl.cli.options import (
    DEFAULT_DEADLINE_S,
    App,
    Incident,
    OutputOption,
    ReportDir,
    RunDeadline,
    Yes,
)
from drctl.cli.state import CURRENT
from drctl.cli.views import describe_reprotect_preview, render_plan
from drctl.ops.one_way.reprotect import ReprotectOptions, run_reprotect
from drctl.ops.one_way.scorecard import describe as describe_scorecard
from drctl.terminal import OutputFormat


def reprotect_command(
    incident: Incident = None,
    app: App = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the positions forward replication would start from; change "
        "nothing.")] = False,
    yes: Yes = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Go on while the target's failover topics still take writes (they "
        "stay on the target only); the report names what was skipped.")] = False,
    settle: Annotated[float, duration_option(
        "How long the target's failover topics must take no write (producers moved back).",
        default="10s")] = 10.0,
    deadline: RunDeadline = DEFAULT_DEADLINE_S,
    timeout: Annotated[float, duration_option(
        "How long the reverse catch-up and the forward check may each take while they "
        "progress; a cluster that does not answer is --deadline's.",
        default="15m")] = 900.0,
    report_dir: ReportDir = None,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Return to protection after failback: retire the reverse flow, restart forward
    replication from the cut-over, check it copies, close the incident.

    Both clusters are checked first, then the plan is shown, then the question (unless
    --yes).

    \b
    Examples:
      drctl reprotect --dry-run
      drctl reprotect --incident fo-20261125T022355Z-cf1f5b --yes

    \b
    Exit status: 0 protected again; 2 no incident whose failback is done;
    3 producers still write to the target, or the forward check failed;
    4 a cluster unreachable; 5 not confirmed."""
    config = CURRENT.config()
    term = CURRENT.terminal(output)
    rep = config.require_replication()
    opts = ReprotectOptions(incident=incident, dry_run=dry_run, force=force, settle_s=settle,
                            deadline_s=deadline, timeout_s=timeout)

    def approve(preview: dict[str, Any]) -> None:
        # The plan first (both clusters answer), then the question.
        for line in describe_reprotect_preview(preview):
            term.info(line)
        confirm_or_abort(f"Retire the reverse flow {rep.target} -> {rep.source} and restart "
                         f"forward replication {rep.source} -> {rep.target}?", yes=yes)

    ctx = CURRENT.context(deadline, app=app)
    result = run_reprotect(ctx, opts, confirm=operator_confirms, approve=approve)
    paths = result.write_reports(ctx, report_dir)
    for line in result.forced:
        term.warn(f"--force: {line}")
    if term.json_mode:
        term.emit_json(result.as_dict(paths))
        return
    if dry_run:
        render_plan(result.plan)
        return
    rows = [[topic, p, off] for topic, parts in sorted(result.forward_starts.items())
            for p, off in sorted(parts.items(), key=lambda kv: int(kv[0]))]
    term.table(f"Forward replication {rep.source} -> {rep.target} starts at",
               ["topic", "partition", "first offset"], rows)
    s = result.summary()
    for line in describe_scorecard(result.scorecard()):
        term.info(line)
    for p in paths:
        term.info(f"  report: {p}")
    if result.waiting_for:
        term.warn(f"Incident {result.marker.incident} waits for incident "
                  f"{result.waiting_for}: its topics are back in forward replication from "
                  f"its cut-over, which stays stopped — the whole flow {rep.source} -> "
                  f"{rep.target} unprotected — until that incident returns.")
        term.info(f"Next: `drctl reprotect --incident {result.waiting_for}` resumes it, "
                  f"checks this incident's topics and closes both.")
        return
    term.success(f"Incident {result.marker.incident} closed: {rep.source} -> {rep.target} is "
                 f"protected again ({s['forward_copied']} record(s) written since the "
                 f"cut-over checked on {rep.target}).")
    for done in result.finished:
        term.success(f"Incident {done['incident']}, which waited for it, closed too "
                     f"({done['forward_copied']} record(s) since its cut-over checked).")

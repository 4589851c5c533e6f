"""`drctl runbook run`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from drctl.cli.options import OutputOption
from drctl.cli.runbook.execution import (
    JunitOption,
    OldReportOption,
    ReportDirOption,
    RunbookArg,
    VarOption,
    VarsFileOption,
    execute,
)
from drctl.terminal import OutputFormat


def run(
    file: RunbookArg,
    var: VarOption = None,
    vars_file: VarsFileOption = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Plan only: render every step; checks run, actions and shell steps "
                          "do not.")] = False,
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="Approve every approval gate.")] = False,
    non_interactive: Annotated[bool, typer.Option(
        "--non-interactive", help="Never prompt (also when CI is set or there is no TTY).")]
    = False,
    resume: Annotated[Path | None, typer.Option(
        "--resume", metavar="JOURNAL",
        help="Continue the run of this journal after its last completed step.")] = None,
    journal: Annotated[Path | None, typer.Option(
        "--journal", metavar="PATH",
        help="Where to write the journal (default: STATE_DIR/runbooks/).")] = None,
    junit: JunitOption = None,
    report_dir: ReportDirOption = None,
    old_report: OldReportOption = None,
    output: Annotated[OutputFormat | None, OutputOption] = None,
    time_scale: Annotated[float, typer.Option(
        "--time-scale", envvar="DRCTL_RUNBOOK_TIME_SCALE", hidden=True, min=0.0,
        help="Multiply pauses and retry delays (tests).")] = 1.0,
) -> None:
    """Run a runbook, journaling every step; exit non-zero if anything failed.

    \b
    Examples:
      drctl runbook run failover --yes
      drctl runbook run my-drill.yaml --var target=secondary --vars-file site.yaml
      drctl runbook run drill --resume .drctl/runbooks/drill-<time>.jsonl

    \b
    Exit status: 0 every step ok; 1 a step failed; 2 the runbook or a variable
    is invalid; 3 a check did not hold; 4 a cluster did not answer; 5 an
    approval missing or declined; 130 interrupted (resume with --resume)."""
    execute(file=file, var=var, vars_file=vars_file, dry_run=dry_run, yes=yes,
             non_interactive=non_interactive, resume=resume, journal_path=journal,
             junit=junit, report_dir=report_dir,
             old_report=old_report, output=output, time_scale=time_scale)

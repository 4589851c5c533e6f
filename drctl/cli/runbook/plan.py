"""`drctl runbook plan`."""

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


def plan(
    file: RunbookArg,
    var: VarOption = None,
    vars_file: VarsFileOption = None,
    journal: Annotated[Path | None, typer.Option(
        "--journal", metavar="PATH", help="Also journal the plan.")] = None,
    junit: JunitOption = None,
    report_dir: ReportDirOption = None,
    old_report: OldReportOption = None,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Show every step with its resolved values; run the checks only.

    \b
    Examples:
      drctl runbook plan failover
      drctl runbook plan my-drill.yaml --var target=secondary --report-dir plans/

    \b
    Exit status: 0 every check held; 2 the runbook or a variable is invalid;
    3 a check did not hold; 4 a cluster did not answer (a check could not
    look)."""
    execute(file=file, var=var, vars_file=vars_file, dry_run=True, yes=False,
             non_interactive=True, resume=None, journal_path=journal, junit=junit,
             report_dir=report_dir,
             old_report=old_report, output=output, time_scale=1.0)

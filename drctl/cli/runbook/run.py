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
    execute_campaign,
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
    faults: Annotated[int | None, typer.Option(
        "--faults", metavar="N", min=0, rich_help_panel="Drills under faults",
        help="A campaign: N faults per round at random moments (the runbook's `faults` "
             "input; the shipped drill lands them in failover, failback and the return).")]
    = None,
    seed: Annotated[int | None, typer.Option(
        "--seed", metavar="S", rich_help_panel="Drills under faults",
        help="The first round's seed (round r: S + r - 1); the same seed, the same faults "
             "[default: 1].")] = None,
    rounds: Annotated[int | None, typer.Option(
        "--rounds", metavar="R", min=1, rich_help_panel="Drills under faults",
        help="Run the runbook R times, each under its own faults, one scorecard for all "
             "[default: 1].")] = None,
    reruns: Annotated[int, typer.Option(
        "--reruns", metavar="N", min=0, rich_help_panel="Drills under faults",
        help="How many times a round's failed step is run again (the runbook's resume) "
             "after what the faults broke is healed.")] = 5,
) -> None:
    """Run a runbook, journaling every step; exit non-zero if anything failed.

    \b
    Examples:
      drctl runbook run failover --yes
      drctl runbook run my-drill.yaml --var target=secondary --vars-file site.yaml
      drctl runbook run drill --resume .drctl/runbooks/drill-<time>.jsonl
      drctl runbook run drill --yes --faults 4 --seed 1 --rounds 20

    \b
    With --faults, --seed or --rounds it is a campaign: R rounds, each under its
    own seeded faults, a failed step run again after healing (--reruns), one
    scorecard in --report-dir (the same command again goes on where it stopped).

    \b
    Exit status: 0 every step ok; 1 a step failed; 2 the runbook or a variable
    is invalid; 3 a check did not hold; 4 a cluster did not answer; 5 an
    approval missing or declined; 130 interrupted (resume with --resume)."""
    if faults is not None or seed is not None or rounds is not None:
        if resume is not None or dry_run or journal is not None or junit is not None \
                or old_report is not None:
            from drctl.errors import UsageError

            raise UsageError("A campaign (--faults, --seed, --rounds) keeps its own journals "
                             "and reports in --report-dir: --resume, --dry-run, --journal, "
                             "--junit and --report do not apply.",
                             "Run the same campaign command again to go on with it.")
        execute_campaign(file=file, var=var, vars_file=vars_file, yes=yes,
                         faults=faults if faults is not None else 1,
                         seed=seed if seed is not None else 1,
                         rounds=rounds if rounds is not None else 1, reruns=reruns,
                         report_dir=report_dir, output=output, time_scale=time_scale)
        return
    execute(file=file, var=var, vars_file=vars_file, dry_run=dry_run, yes=yes,
             non_interactive=non_interactive, resume=resume, journal_path=journal,
             junit=junit, report_dir=report_dir,
             old_report=old_report, output=output, time_scale=time_scale)

"""What the runbook commands share: how a runbook is found, loaded with its variables, run
and its outcome shown."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.markup import escape
from rich.prompt import Confirm

from drctl.cli.confirm import interactive
from drctl.cli.options import old_spelling, renamed
from drctl.cli.state import CURRENT
from drctl.config import Config, config_context
from drctl.errors import UsageError
from drctl.interrupts import sigterm_interrupts
from drctl.reports import report_format, write_report
from drctl.runbook.actions import builtin_registry
from drctl.runbook.executor import Executor, RunObserver
from drctl.runbook.journal import Journal, read_journal
from drctl.runbook.junit import write_junit
from drctl.runbook.kinds import STEP_KINDS
from drctl.runbook.loader import load_runbook
from drctl.runbook.model import Runbook, Step
from drctl.runbook.options import RunOptions
from drctl.runbook.result import RunResult, Status, StepResult
from drctl.runbook.shipped import runbook_file
from drctl.runbook.templating import plain
from drctl.runbook.variables import (
    RunRedactor,
    Variables,
    parse_assignments,
    read_vars_file,
    resolve_variables,
)
from drctl.secrets import Redactor
from drctl.terminal import OutputFormat, Terminal

RunbookArg = Annotated[str, typer.Argument(
    metavar="FILE|NAME", show_default=False,
    help="The runbook: a YAML file, or the name of one drctl ships (`drctl runbook list`).")]
VarOption = Annotated[list[str] | None, typer.Option(
    "--var", "-V", metavar="NAME=VALUE",
    help="A variable (repeatable); a.b=v nests; ${env:X} / ${file:P} are secrets by reference.")]
VarsFileOption = Annotated[list[Path] | None, typer.Option(
    "--vars-file", metavar="FILE", help="A YAML mapping of variables (repeatable; --var wins).")]
JunitOption = Annotated[Path | None, typer.Option(
    "--junit", metavar="PATH", help="Write a JUnit XML report: one test case per step.")]
ReportDirOption = Annotated[Path | None, typer.Option(
    "--report-dir", metavar="DIR",
    help="Write the run's report in DIR: NAME-RUN_ID.md, .html and .json.")]
# --report PATH (one file, .md or .html) before --report-dir; hidden for one release.
OldReportOption = Annotated[Path | None, old_spelling("--report")]

_STATUS_STYLE = {
    Status.ok: "green", Status.planned: "cyan", Status.skipped: "dim", Status.not_run: "dim",
    Status.deferred: "yellow", Status.check_failed: "bold red", Status.failed: "bold red",
    Status.unreachable: "bold red",
    Status.approval_missing: "bold red", Status.declined: "bold red",
    Status.interrupted: "bold red",
}


class _InputsDumper(yaml.SafeDumper):
    """Multi-line values (shell scripts) as YAML block scalars, as they were written."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data.rstrip("\n") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data.rstrip("\n") if style is None
                                   else data, style=style)


_InputsDumper.add_representer(str, _str_presenter)


class _Printer(RunObserver):
    def __init__(self, term: Terminal, *, show_inputs: bool) -> None:
        self.term = term
        self.show_inputs = show_inputs

    def step_started(self, step: Step) -> None:
        phase = " (rollback)" if step.phase.value == "rollback" else ""
        self.term.step(f"{step.name}{phase}: {STEP_KINDS[step.kind].describe(step)}")

    def step_retrying(self, step: Step, attempt: int, error: str, delay_s: float) -> None:
        self.term.warn(f"{step.name}: attempt {attempt} failed ({error}); "
                       f"retrying in {delay_s:.1f} s")

    def step_finished(self, result: StepResult) -> None:
        text = f"{result.name}: {result.status.value}"
        note = result.error or result.detail
        if note:
            text += f" — {note}"
        if result.status in (Status.ok, Status.planned, Status.skipped):
            self.term.success(text)
        elif result.status == Status.deferred:
            self.term.warn(text)
        else:
            self.term.error(text)
        if self.show_inputs and result.inputs:
            # Masked before dumping: YAML may fold or quote a secret beyond recognition.
            masked = self.term.redactor.redact_data(plain(result.inputs))
            shown = yaml.dump(masked, Dumper=_InputsDumper, sort_keys=False,
                              default_flow_style=None, width=96, allow_unicode=True).rstrip()
            self.term.err.print(textwrap.indent(shown, "    "), markup=False, highlight=False)

    def message(self, text: str) -> None:
        self.term.info(f"  {text}")


def supplied(assignments: list[str], files: list[Path]) -> frozenset[str]:
    names: set[str] = set(parse_assignments(assignments))
    for path in files:
        names.update(read_vars_file(path))
    return frozenset(names)


def _can_prompt(non_interactive: bool, term: Terminal) -> bool:
    # Rich prompts on stderr, so that must be a terminal too.
    return not non_interactive and interactive() and term.err.is_terminal


def _prepare(file: str, var: list[str] | None, vars_file: list[Path] | None,
             ) -> tuple[Runbook, Variables, Config | None, Redactor]:
    assignments, files = list(var or []), list(vars_file or [])
    runbook = load_runbook(runbook_file(file), builtin_registry(),
                           supplied(assignments, files))
    for warning in runbook.warnings:
        CURRENT.terminal().warn(warning)
    config = CURRENT.config() if runbook.uses_config else None
    variables = resolve_variables(runbook, files=files, assignments=assignments,
                                  config_data=config_context(config) if config else None)
    redactor: Redactor = (RunRedactor(variables.redactor, config.redactor) if config
                          else variables.redactor)
    return runbook, variables, config, redactor


def _default_journal(runbook: Runbook, config: Config | None) -> Path:
    base = config.state.dir if config is not None else Path(".drctl")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return base / "runbooks" / f"{runbook.name}-{stamp}-{os.getpid()}.jsonl"


def execute(*, file: str, var: list[str] | None, vars_file: list[Path] | None,
             dry_run: bool, yes: bool, non_interactive: bool, resume: Path | None,
             journal_path: Path | None, junit: Path | None, report_dir: Path | None,
             old_report: Path | None, output: OutputFormat | None, time_scale: float) -> None:
    term = CURRENT.terminal(output)
    report = renamed(report_dir, old_report, old="--report", new="--report-dir",
                     warn=term.warn, meaning="a directory: NAME-RUN_ID.md, .html and .json")
    if old_report is not None:
        try:
            report_format(old_report)
        except ValueError as exc:
            raise UsageError(str(exc), "Use --report-dir DIR.") from exc
    if resume is not None and dry_run:
        raise UsageError("--resume continues a run; a plan (--dry-run) has nothing to resume.")
    runbook, variables, config, redactor = _prepare(file, var, vars_file)
    term.redactor = redactor
    state = read_journal(resume) if resume is not None else None
    if resume is not None:
        journal_path = resume
    elif journal_path is None and not dry_run:
        journal_path = _default_journal(runbook, config)
    prompt = None
    if not dry_run and _can_prompt(non_interactive, term):
        def prompt(text: str) -> bool:
            return Confirm.ask(text, console=term.err, default=False)
    options = RunOptions(dry_run=dry_run, assume_yes=yes, prompt=prompt,
                         time_scale=time_scale)
    journal = Journal(journal_path, redactor) if journal_path is not None else None
    executor = Executor(runbook, variables, builtin_registry(), options=options,
                        journal=journal, config=config,
                        observer=_Printer(term, show_inputs=dry_run), redactor=redactor)
    verb = "Planning" if dry_run else ("Resuming" if state else "Running")
    term.info(f"{verb} runbook [bold]{escape(term.redactor.redact(runbook.name))}[/] "
              f"({len(runbook.steps)} steps)"
              + (escape(f"; journal {journal_path}") if journal_path else ""), markup=True)
    try:
        with sigterm_interrupts():
            result = executor.run(resume=state)
    finally:
        if journal is not None:
            journal.close()
    data = result.as_dict(redactor)
    _summary(term, result)
    if junit is not None:
        write_junit(data, junit)
        term.info(f"JUnit report: {junit}")
    reports: list[Path] = []
    if old_report is not None:
        reports = write_report(old_report.parent, old_report.stem, {"run": data},
                               "runbook-report", extensions=(old_report.suffix.lstrip("."),))
    elif report is not None:
        reports = write_report(report, f"{runbook.name}-{result.run_id}", {"run": data},
                               "runbook-report")
    for path in reports:
        term.info(f"Report: {path}")
    if term.json_mode:
        term.emit_json({**data, "reports": [str(p) for p in reports]})
    _verdict(term, result)
    if result.exit_status != 0:
        raise typer.Exit(int(result.exit_status))


def execute_campaign(*, file: str, var: list[str] | None, vars_file: list[Path] | None,
                     yes: bool, faults: int, seed: int, rounds: int, reruns: int,
                     report_dir: Path | None, output: OutputFormat | None,
                     time_scale: float) -> None:
    """The runbook run round after round under seeded faults (runbook/campaign.py)."""
    from drctl.runbook.campaign import Campaign, CampaignSpec, exit_status
    from drctl.runbook.faults import heal_left_broken
    from drctl.runbook.journal import JournalState

    term = CURRENT.terminal(output)
    first, _, config, redactor = _prepare(file, var, vars_file)
    term.redactor = redactor
    if report_dir is None:
        base = config.state.dir if config is not None else Path(".drctl")
        report_dir = base / "campaigns" / f"{first.name}-f{faults}-s{seed}-r{rounds}"
    spec = CampaignSpec(runbook=file, rounds=rounds, faults=faults, seed=seed, reruns=reruns,
                        report_dir=report_dir, assignments=tuple(var or ()),
                        var_files=tuple(str(p) for p in vars_file or ()),
                        config=(CURRENT.config_option or str(CURRENT.config_path))
                        if config is not None else None)

    def load(assignments: Sequence[str]) -> tuple[Runbook, Variables]:
        runbook, variables, _, _ = _prepare(file, list(assignments), vars_file)
        return runbook, variables

    def executor(runbook: Runbook, variables: Variables, journal: Journal) -> Executor:
        options = RunOptions(assume_yes=yes, prompt=None, time_scale=time_scale)
        return Executor(runbook, variables, builtin_registry(), options=options,
                        journal=journal, config=config,
                        observer=_Printer(term, show_inputs=False), redactor=redactor)

    def heal(state: JournalState) -> list[str]:
        steps = [r.get("inputs") or {} for r in state.completed.values() if r.get("faults")]
        return heal_left_broken(state.faults, steps, notify=term.step)

    def run_done(round_no: int, result: RunResult) -> None:
        write_report(report_dir / "rounds", f"round-{round_no:02d}-{result.run_id}",
                     {"run": result.as_dict(redactor)}, "runbook-report")

    term.info(f"Campaign: {rounds} round(s) of {escape(first.name)}, {faults} fault(s) each, "
              f"seeds {seed}..{seed + rounds - 1}; reports in {escape(str(report_dir))}",
              markup=True)
    def scored(card: dict[str, Any]) -> list[Path]:
        # Masked: the reproduce lines carry the --var values as given.
        return write_report(report_dir, "campaign", {"card": card}, "drill-campaign",
                            redactor)

    campaign = Campaign(spec, load=load, executor=executor, heal=heal, notify=term.step,
                        run_done=run_done, scored=scored)
    with sigterm_interrupts():
        card = campaign.run()
    paths = scored(card)
    for path in paths:
        term.info(f"Scorecard: {path}")
    if term.json_mode:
        term.emit_json({**card, "reports": [str(p) for p in paths]})
    status = exit_status(card)
    if card.get("interrupted"):
        term.error(f"Campaign interrupted in round {card['interrupted']}: run the same command "
                   "again to go on with it.")
        raise typer.Exit(int(status))
    landed = card["faults"]["landed"]
    text = (f"Campaign: {card['passed']} of {card['rounds']} round(s) passed; {landed} "
            f"fault(s) landed, {card['reruns']['total']} re-run(s); records lost "
            f"{card['ledger']['lost']}, twice {card['ledger']['twice']}, never read by a group "
            f"{card['ledger']['groups_lost']}, re-delivered beyond what drctl stated "
            f"{card['ledger']['redelivered_over']}.")
    if status == 0:
        term.success(text)
    else:
        term.error(text)
        for failed in card["failed"]:
            term.err.print(redactor.redact(
                f"  Round {failed['round']} (seed {failed['seed']}): {failed['reason']}. "
                f"Reproduce: {failed['reproduce']}"), markup=False)
        raise typer.Exit(int(status))


def _summary(term: Terminal, result: RunResult) -> None:
    rows: list[list[Any]] = []
    for step in result.steps:
        style = _STATUS_STYLE.get(step.status, "")
        status = f"[{style}]{step.status.value}[/]" if style else step.status.value
        if step.resumed:
            status += " (earlier run)"
        name = escape(step.name) + (" ↺" if step.phase.value == "rollback" else "")
        detail = escape(term.redactor.redact(step.error or step.detail or ""))
        rows.append([name, step.kind, status, step.attempts or "",
                     f"{step.duration_s:.1f} s", detail])
    term.table(f"Runbook {result.runbook.name}",
               ["step", "kind", "status", "attempts", "time", "detail"], rows, markup=True)


def _verdict(term: Terminal, result: RunResult) -> None:
    status = result.status.value
    if result.exit_status == 0:
        term.success(f"Runbook {result.runbook.name}: {status} in {result.duration_s:.1f} s.")
        return
    term.error(f"Runbook {result.runbook.name}: {status} — {result.reason}")
    if result.hint:
        term.err.print(f"  {term.redactor.redact(result.hint)}", markup=False)



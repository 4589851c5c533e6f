"""Options several commands take, declared once: the same flag reads and behaves the same
everywhere (like datasette's shared publish options)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

# Typer vendors Click (typer._click) since 0.29: which value was given on the command line.
from typer._click.core import ParameterSource
from typer._click.globals import get_current_context

from drctl.cli.durations import duration_option
from drctl.errors import UsageError
from drctl.suggest import renamed_note

T = TypeVar("T")

Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")]
Groups = Annotated[str, typer.Option(
    metavar="REGEX", help="Consumer groups (a regex on the whole group id).")]
# The incident scope (docs/operations.md, "Failing over one application").
App = Annotated[str | None, typer.Option(
    "--app", metavar="NAME", help="Only this application (the config's `applications:`): "
    "its topics and the groups that read them; the rest of the flow is not touched.")]
ScopeTopics = Annotated[list[str] | None, typer.Option(
    "--topics", metavar="REGEX", help="Only these source topics (a regex on the whole name; "
    "repeatable), with --groups as their groups: a one-off application.")]
Incident = Annotated[str | None, typer.Option(
    metavar="ID", help="The incident (default: the flow's one open incident).")]
ReportDir = Annotated[Path | None, typer.Option(
    metavar="DIR", help="Where to write the report (default: STATE_DIR/reports).")]
# One meaning and one default for every command that reaches clusters: how long each
# cluster is retried (the config's retry policy under this deadline) before it is called
# unreachable. What unreachable then means is the command's: exit 4 for most; a row that says
# so for status and check; the source treated as down for failover and translate-offsets.
DEFAULT_DEADLINE_S = 30.0
DEADLINE_HELP = ("How long to retry each cluster (and Kafka Connect) before calling it "
                 "unreachable")


def deadline_option(then: str, *, default: str = "30s") -> Any:
    """--deadline: DEADLINE_HELP, then what unreachable means for this command."""
    return duration_option(f"{DEADLINE_HELP}: {then}", default=default, names=("--deadline",))


# `deadline: Deadline = DEFAULT_DEADLINE_S`
Deadline = Annotated[float, deadline_option("exit 4.")]
# Failback and reprotect: also a cluster that drops mid-run (drctl/rerun.py).
RunDeadline = Annotated[float, deadline_option(
    "exit 4. Also mid-run: a cluster that stops answering is waited for this long; back in "
    "time, the run goes on, else run it again once it is back.")]
SourceDeadline = Annotated[float, deadline_option(
    "a source is then treated as down, a target is exit 4.")]
# Failover: also the target (and a planned failover's source) dropping mid-run
# (drctl/rerun.py).
FailoverDeadline = Annotated[float, deadline_option(
    "a source is then treated as down, a target is exit 4. Also mid-run: a target (and a "
    "planned failover's source) that stops answering is waited for this long; back in time, "
    "the run goes on, else run it again once it is back.")]
# `output: Annotated[OutputFormat | None, OutputOption] = None`: the global --output, per command.
OutputOption = typer.Option(
    "--output", "-o", case_sensitive=False,
    help="text: tables and data on stdout, messages on stderr; json: one JSON document on "
         "stdout.")


# -- old spellings ----------------------------------------------------------------------
# An option renamed for the one vocabulary (docs/operations.md, "One vocabulary") keeps its
# old spelling for a release: a hidden parameter of the same type, default None, read through
# `renamed`, which warns on stderr. E.g.
#     old_apply: Annotated[bool | None, old_spelling("--apply")] = None
#     yes = renamed(yes, old_apply, old="--apply", new="--yes", warn=term.warn)


def old_spelling(*names: str) -> Any:
    """The hidden option an old spelling stays as (default None: not given)."""
    return typer.Option(*names, hidden=True)


# failover and translate-offsets took --source-deadline before 0.2; hidden for one release.
OldSourceDeadline = Annotated[float | None, duration_option(
    "", default=None, names=("--source-deadline",), hidden=True)]


def renamed(new_value: T, old_value: T | None, *, old: str, new: str,
            warn: Callable[[str], None], meaning: str = "") -> T:
    """An option's value under its new name, or under its old one (hidden, kept for one
    release) with a warning on stderr; both on one command line is a usage error. `meaning`
    says what the new one takes when that changed."""
    if old_value is None:
        return new_value
    if _given(new, new_value):
        raise UsageError(f"{old} is the old name of {new}: give {new} only.")
    warn(renamed_note(old, f"{new} ({meaning})" if meaning else new))
    return old_value


def _given(option: str, value: object) -> bool:
    """Whether `option` was given (on the command line or through its environment variable),
    not left at its default; outside a command, whether it has a value."""
    ctx = get_current_context(silent=True)
    param = next((p for p in ctx.command.params if option in (*p.opts, *p.secondary_opts)),
                 None) if ctx is not None else None
    if ctx is None or param is None or param.name is None:
        return value is not None
    return ctx.get_parameter_source(param.name) in (ParameterSource.COMMANDLINE,
                                                     ParameterSource.ENVIRONMENT)


def names_regex(names: Sequence[str]) -> str:
    """Exact names as one regex on the whole name: an old repeatable `--topic NAME` read as
    `--topics REGEX`."""
    return "|".join(re.escape(name) for name in names)

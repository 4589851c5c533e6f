"""Options several commands take, declared once: the same flag reads and behaves the same
everywhere (like datasette's shared publish options)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from drctl.errors import UsageError

T = TypeVar("T")

Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")]
Groups = Annotated[str, typer.Option(
    metavar="REGEX", help="Consumer groups (a regex on the whole group id).")]
Incident = Annotated[str | None, typer.Option(
    metavar="ID", help="The incident (default: the flow's one open incident).")]
ReportDir = Annotated[Path | None, typer.Option(
    metavar="DIR", help="Where to write the report (default: STATE_DIR/reports).")]
# `output: Annotated[OutputFormat | None, OutputOption] = None`: the global --output, per command.
OutputOption = typer.Option(
    "--output", "-o", case_sensitive=False,
    help="text: tables and data on stdout, messages on stderr; json: one JSON document on "
         "stdout.")


def renamed(new_value: T | None, old_value: T | None, *, old: str, new: str,
            warn: Callable[[str], None]) -> T | None:
    """An option's value under its new name, or under its old one (hidden, kept for one
    release) with a warning on stderr."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise UsageError(f"{old} is the old name of {new}: give {new} only.")
    warn(f"{old} is now {new}; the old name goes in the next release.")
    return old_value

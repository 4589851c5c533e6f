"""Options several commands take, declared once: the same flag reads and behaves the same
everywhere (like datasette's shared publish options)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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

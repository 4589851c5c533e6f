"""`drctl runbook show`."""

from __future__ import annotations

from typing import Annotated

from drctl.cli.options import OutputOption
from drctl.cli.runbook.execution import (
    RunbookArg,
)
from drctl.cli.state import CURRENT
from drctl.errors import UsageError
from drctl.runbook.shipped import runbook_file
from drctl.terminal import OutputFormat


def show(file: RunbookArg,
         output: Annotated[OutputFormat | None, OutputOption] = None) -> None:
    """Print a runbook's YAML (a shipped one by name): to read, or to copy and adapt.

    \b
    Examples:
      drctl runbook show failover
      drctl runbook show failover > my-failover.yaml"""
    term = CURRENT.terminal(output)
    path = runbook_file(file)
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the runbook: {exc.strerror}.",
                         "Check the path.") from exc
    if term.json_mode:
        term.emit_json({"path": str(path), "yaml": source})
    else:
        term.emit_text(source.rstrip("\n"))

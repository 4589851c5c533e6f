"""`drctl audit`."""

from __future__ import annotations

from typing import Annotated

import typer

from drctl.cli.options import DEFAULT_DEADLINE_S, App, Deadline, Incident, OutputOption
from drctl.cli.state import CURRENT
from drctl.cli.views import render_audit
from drctl.errors import ExitStatus
from drctl.ops.steps.audit import audit_incident
from drctl.terminal import OutputFormat


def audit_command(
    incident: Incident = None,
    app: App = None,
    deadline: Deadline = DEFAULT_DEADLINE_S,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Compare the group positions a failover applied with where each group really was.

    Needs the source back, before failback moves the groups (failback runs it itself).
    The audit is recorded in the incident's marker; failback reuses it.

    \b
    Examples:
      drctl audit
      drctl audit --incident fo-20261125T022355Z-cf1f5b -o json

    \b
    Exit status: 0 no group skipped a record; 2 usage, config, or no open
    incident; 3 a group was made to skip records; 4 a cluster unreachable."""
    term = CURRENT.terminal(output)
    marker, found = audit_incident(CURRENT.context(deadline, app=app), incident,
                                   deadline)
    if term.json_mode:
        term.emit_json({"incident": marker.incident, **found})
    else:
        render_audit(found)
    if found.get("totals", {}).get("skipped"):
        raise typer.Exit(ExitStatus.CHECK_FAILED)

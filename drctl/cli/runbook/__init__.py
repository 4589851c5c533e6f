"""`drctl runbook`: one module per command (hatch's layout), the shared run machinery in
`execution.py`."""

from __future__ import annotations

from drctl.cli.help import Typer
from drctl.cli.runbook import actions, listing, plan, run, show, validate

app = Typer(help="Runbooks: DR procedures as data — validate, plan, run, resume."
                 "\n\n\b\nExamples:"
                 "\n  drctl runbook list"
                 "\n  drctl runbook plan failover"
                 "\n  drctl runbook run failover --junit failover.xml",
            no_args_is_help=True, pretty_exceptions_show_locals=False)
app.command("run")(run.run)
app.command("plan")(plan.plan)
app.command("validate")(validate.validate)
app.command("actions")(actions.actions)
app.command("list")(listing.list_runbooks)
app.command("show")(show.show)

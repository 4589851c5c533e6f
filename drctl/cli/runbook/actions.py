"""`drctl runbook actions`."""

from __future__ import annotations

from typing import Annotated

from drctl.cli.options import OutputOption
from drctl.cli.state import CURRENT
from drctl.runbook.actions import Action, builtin_registry
from drctl.terminal import OutputFormat


def actions(output: Annotated[OutputFormat | None, OutputOption] = None) -> None:
    """The actions a runbook step can call, with their typed parameters.

    \b
    Examples:
      drctl runbook actions
      drctl runbook actions -o json | jq '.actions[].name'"""
    term = CURRENT.terminal(output)
    listed: list[tuple[Action, list[str]]] = [
        (action, [f"{p.name}: {p.type_name}" + ("" if p.required else f" = {p.default!r}")
                  for p in action.params])
        for action in builtin_registry()]
    if term.json_mode:
        term.emit_json({"actions": [
            {"name": action.name, "read_only": action.read_only,
             "needs_config": action.needs_config, "params": params, "help": action.help}
            for action, params in listed]})
        return
    term.table("Runbook actions", ["action", "read-only", "parameters", "what it does"],
               [[action.name, "yes" if action.read_only else "", "\n".join(params), action.help]
                for action, params in listed])

"""`drctl runbook validate`."""

from __future__ import annotations

from typing import Annotated

from drctl.cli.options import OutputOption
from drctl.cli.runbook.execution import (
    RunbookArg,
    VarOption,
    VarsFileOption,
    supplied,
)
from drctl.cli.state import CURRENT
from drctl.runbook.actions import builtin_registry
from drctl.runbook.loader import load_runbook
from drctl.runbook.shipped import runbook_file
from drctl.terminal import OutputFormat


def validate(
    file: RunbookArg,
    var: VarOption = None,
    vars_file: VarsFileOption = None,
    output: Annotated[OutputFormat | None, OutputOption] = None,
) -> None:
    """Check a runbook without running anything: exit 2 naming file, line and step.

    \b
    Examples:
      drctl runbook validate my-drill.yaml
      drctl runbook validate failover -o json"""
    term = CURRENT.terminal(output)
    path = runbook_file(file)
    runbook = load_runbook(path, builtin_registry(),
                           supplied(list(var or []), list(vars_file or [])))
    steps = [{"name": s.name, "phase": s.phase.value, "kind": s.kind,
              "action": s.action or (s.check.probe if s.check else None), "line": s.line}
             for s in (*runbook.steps, *runbook.rollback)]
    inputs = [{"name": i.name, "required": not i.has_default, "secret": i.secret,
               "description": i.description} for i in runbook.inputs.values()]
    for warning in runbook.warnings:
        term.warn(warning)
    if term.json_mode:
        term.emit_json({"valid": True, "runbook": runbook.name, "path": str(path),
                        "uses_config": runbook.uses_config, "steps": steps,
                        "inputs": inputs, "warnings": list(runbook.warnings)})
        return
    term.success(f"{path}: runbook '{runbook.name}' is valid — {len(runbook.steps)} steps, "
                 f"{len(runbook.rollback)} rollback steps.")
    term.table("Steps", ["line", "step", "phase", "kind", "action"],
               [[s["line"], s["name"], s["phase"], s["kind"], s["action"] or ""]
                for s in steps])
    if inputs:
        term.table("Inputs", ["input", "required", "secret", "description"],
                   [[i["name"], "yes" if i["required"] else "", "yes" if i["secret"] else "",
                     i["description"]] for i in inputs])

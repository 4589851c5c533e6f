"""`approval:` steps: a gate that asks the operator, or passes with `--yes` or
`--var approve.<step>=yes`. A run that cannot ask stops there (exit 5); plans never ask."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from drctl.runbook.kinds.interface import (
    StepKindDefinition,
    StepParser,
    StepRunner,
    StepValidator,
)
from drctl.runbook.model import APPROVE_VAR, Phase, Step, StepKind
from drctl.runbook.result import Status, StepResult
from drctl.runbook.yaml_lines import LineDict


class ApprovalStep(StepKindDefinition):
    kind = StepKind("approval")
    plans_itself = True

    def parse(self, step: Step, raw: LineDict, at: Callable[[str], int],
              parser: StepParser) -> Step:
        prompt = raw["approval"]
        if not isinstance(prompt, str) or not prompt.strip():
            parser.issue(at("approval"), step.name, "'approval' must be the question to approve")
            prompt = ""
        return replace(step, prompt=prompt)

    def validate(self, step: Step, validator: StepValidator) -> None:
        if step.phase == Phase.rollback:
            validator.issue(step.line, step.name, "a rollback step cannot be an approval gate")

    def inputs(self, step: Step, runner: StepRunner) -> tuple[dict[str, Any], bool]:
        prompt, deferred = runner.render(step.prompt)
        return {"prompt": str(prompt)}, deferred

    def run(self, step: Step, result: StepResult, inputs: dict[str, Any], deferred: bool,
            runner: StepRunner) -> None:
        options = runner.options
        var = f"{APPROVE_VAR}.{step.name}"
        how = f"pass --yes, or --var {var}=yes to approve this gate alone"
        if options.dry_run:
            result.status = Status.planned
            result.detail = f"asks for approval when run ({how})"
            return
        result.attempts = 1
        if runner.variables.approved(step.name):
            result.approved_by = f"--var {var}"
        elif options.assume_yes:
            result.approved_by = "--yes"
        elif options.prompt is not None:
            if not options.prompt(inputs["prompt"]):
                result.status, result.error = Status.declined, "declined by the operator"
                result.hint = "Nothing after the gate ran."
                return
            result.approved_by = f"{getpass.getuser()} (interactive)"
        else:
            result.status = Status.approval_missing
            result.error = f"approval required: {inputs['prompt']}"
            result.hint = (f"This run cannot ask (no terminal, CI, or --non-interactive): "
                           f"{how}.")
            return
        result.detail = f"approved by {result.approved_by}"

"""`pause:` steps: wait a duration (`10s`, `2m`, or a template that renders to one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from drctl.runbook.kinds.interface import (
    NotRetried,
    StepKindDefinition,
    StepParser,
    StepRunner,
)
from drctl.runbook.model import Step, StepKind
from drctl.runbook.result import StepResult
from drctl.runbook.templating import is_template
from drctl.runbook.yaml_lines import LineDict
from drctl.timeparse import parse_duration


class PauseStep(StepKindDefinition):
    kind = StepKind("pause")

    def parse(self, step: Step, raw: LineDict, at: Callable[[str], int],
              parser: StepParser) -> Step:
        pause = raw["pause"]
        if not is_template(pause):
            try:
                parse_duration(pause)
            except ValueError as exc:
                parser.issue(at("pause"), step.name, f"pause: {exc}")
        return replace(step, pause=pause)

    def inputs(self, step: Step, runner: StepRunner) -> tuple[dict[str, Any], bool]:
        pause, deferred = runner.render(step.pause)
        if deferred:
            return {"seconds": str(pause)}, True
        try:
            return {"seconds": parse_duration(pause)}, False
        except ValueError as exc:
            raise NotRetried(f"pause: {exc}") from exc

    def run(self, step: Step, result: StepResult, inputs: dict[str, Any], deferred: bool,
            runner: StepRunner) -> None:
        result.attempts = 1
        runner.options.sleep(inputs["seconds"] * runner.options.time_scale)

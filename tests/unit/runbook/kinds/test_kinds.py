"""A step kind is one `StepKindDefinition` registered in `STEP_KINDS`: the loader and the
executor pick it up with nothing else changed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from drctl.runbook.kinds import STEP_KINDS
from drctl.runbook.kinds.interface import StepKindDefinition, StepParser, StepRunner
from drctl.runbook.loader import RunbookInvalid
from drctl.runbook.model import Step, StepKind
from drctl.runbook.result import RunStatus, Status, StepResult
from drctl.runbook.yaml_lines import LineDict
from tests.unit.runbook.support import load, run


class _Shout(StepKindDefinition):
    """`shout: text` upper-cases its (rendered) text; `times:` repeats it."""

    kind = StepKind("shout")
    keys = ("times",)

    def parse(self, step: Step, raw: LineDict, at: Callable[[str], int],
              parser: StepParser) -> Step:
        if not isinstance(raw.get("times", 1), int):
            parser.issue(at("times"), step.name, "'times' must be a number")
        return replace(step, params={"text": raw["shout"], "times": raw.get("times", 1)})

    def inputs(self, step: Step, runner: StepRunner) -> tuple[dict[str, Any], bool]:
        return runner.render(dict(step.params))

    def run(self, step: Step, result: StepResult, inputs: dict[str, Any], deferred: bool,
            runner: StepRunner) -> None:
        runner.outputs(step, result, {"result": str(inputs["text"]).upper() * inputs["times"]})


@pytest.fixture
def shout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(STEP_KINDS, StepKind("shout"), _Shout())


@pytest.mark.usefixtures("shout")
def test_a_registered_kind_loads_validates_and_runs() -> None:
    result = run("""
        inputs: {who: ops}
        steps:
          - name: hello
            shout: "hi {{ vars.who }} "
            times: 2
            outputs: {said: "{{ result }}"}
    """)
    assert result.status == RunStatus.succeeded
    assert result.steps[0].status == Status.ok
    assert result.steps[0].outputs == {"said": "HI OPS HI OPS "}
    with pytest.raises(RunbookInvalid) as err:
        load("""
            steps:
              - name: hello
                shout: hi
                times: many
                env: {A: b}
        """)
    message = str(err.value)
    assert "test.yaml:4: step 'hello': 'times' must be a number" in message
    assert "test.yaml:5: step 'hello': 'env' does not apply to a shout step" in message


def test_messages_list_the_registered_kinds() -> None:
    with pytest.raises(RunbookInvalid) as err:
        load("""
            steps:
              - name: nothing
                sleep: 5
        """)
    assert "use exactly one of action, shell, check, approval, pause" in str(err.value)

"""What a step kind is, and what the loader and the executor offer it.

A kind owns its keys (`action:` with `with:`, `shell:` with `env:`/`cwd:`, ...), parses and
validates them, renders its inputs and runs. The loader asks it through `StepParser` and
`StepValidator`, the executor through `StepRunner`; a kind imports neither of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from drctl.runbook.actions import ActionContext, Registry
from drctl.runbook.faults import FaultInjector
from drctl.runbook.model import Runbook, Step, StepKind
from drctl.runbook.options import RunOptions
from drctl.runbook.result import StepResult
from drctl.runbook.variables import Variables
from drctl.runbook.yaml_lines import LineDict


class AttemptFailed(Exception):
    """This attempt failed; another may succeed (the step's retry policy decides). `check`:
    a check did not hold; `unreachable`: a cluster or service did not answer."""

    def __init__(self, message: str, *, check: bool = False, hint: str | None = None,
                 unreachable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.check = check
        self.hint = hint
        self.unreachable = unreachable


class NotRetried(Exception):
    """A failure another attempt cannot fix, or must not risk (an action still running)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class StepParser(Protocol):
    """The loader's schema parser, as a kind's `parse` uses it."""

    def issue(self, line: int | None, step: str | None, message: str) -> None: ...

    def mapping(self, value: Any, line: int, step: str, key: str) -> Mapping[str, Any]: ...


class StepValidator(Protocol):
    """The loader's reference validator, as a kind's `validate` uses it."""

    def issue(self, line: int | None, step: str | None, message: str) -> None: ...

    def check_action(self, step: Step, name: str, params: Mapping[str, Any],
                     raw: Mapping[str, Any], key: str, *, read_only_needed: bool) -> None: ...

    def steps_after(self, step: Step) -> list[Step]:
        """The main steps that follow `step`."""
        ...


class StepRunner(Protocol):
    """The executor, as a kind's `inputs` and `run` use it."""

    options: RunOptions
    registry: Registry
    variables: Variables
    runbook: Runbook
    faults: FaultInjector

    def render(self, value: Any, **extra: Any) -> tuple[Any, bool]:
        """`value` rendered with vars, config, earlier steps and `extra`; and whether it is
        deferred (a plan cannot know it yet)."""
        ...

    def attempts(self, step: Step, result: StepResult, attempt: Callable[[], Any]) -> Any:
        """`attempt()` under the step's retry policy; on giving up, marks `result` failed and
        returns None."""
        ...

    def until(self, step: Step, outcome: Any) -> Any: ...

    def outputs(self, step: Step, result: StepResult, extra: Mapping[str, Any]) -> None: ...

    def action_context(self) -> ActionContext: ...

    def child_process(self, step: Step, pid: int | None) -> None:
        """The process running `step` (`process: child`) started (its pid) or ended (None):
        a drill's fault may signal it."""
        ...


class StepKindDefinition:
    """One step kind. Subclasses set `kind` and `keys` and override what they need."""

    kind: StepKind
    # Keys a step of this kind may have besides its kind key and the common ones.
    keys: tuple[str, ...] = ()
    # False: a plan shows the step as planned without running it. True: `run` handles plans.
    plans_itself: bool = False

    def parse(self, step: Step, raw: LineDict, at: Callable[[str], int],
              parser: StepParser) -> Step:
        """`step` completed from the kind's keys in `raw`; problems go to `parser.issue`."""
        raise NotImplementedError

    def validate(self, step: Step, validator: StepValidator) -> None:
        """Checks that need more than the step itself (the action registry, the phase)."""

    def describe(self, step: Step) -> str:
        """What the step does, in a few words for progress lines."""
        return step.kind

    def result_names(self, step: Step, key: str) -> frozenset[str]:
        """Names besides vars, config, steps and run that templates under `key` may use."""
        return frozenset({"result"}) if key in ("outputs", "until") else frozenset()

    def inputs(self, step: Step, runner: StepRunner) -> tuple[dict[str, Any], bool]:
        """The rendered inputs (journaled and shown in plans), and whether any is deferred."""
        raise NotImplementedError

    def run(self, step: Step, result: StepResult, inputs: dict[str, Any], deferred: bool,
            runner: StepRunner) -> None:
        """Run the step, recording the outcome in `result` (status ok unless changed)."""
        raise NotImplementedError

    def resumed(self, step: Step, record: Mapping[str, Any], runner: StepRunner,
                done_steps: frozenset[str], landed: frozenset[str]) -> None:
        """A resumed run passed over this step, completed by an earlier run (`record`, its
        journal's step-end): what the step set up for later steps is set up again (a fault
        step's faults not landed yet). `done_steps`: the steps completed earlier; `landed`:
        the faults landed (or missed) earlier."""

"""`action:` steps: call an action of the registry, with typed parameters (`with:`).

In-process by default: with a `timeout:` the action runs on a daemon thread, and one that
outlives its timeout is not retried, because it may still be running. With `process: child`
it runs in a child process of its own (runbook/child.py): a timeout ends that process (so the
attempt may be retried), and a drill's fault can kill it like a lost machine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from drctl.errors import DrctlError, ExitStatus
from drctl.jsonable import to_jsonable
from drctl.runbook.actions import Action, ActionContext, CoercionError
from drctl.runbook.child import call_in_child
from drctl.runbook.kinds.interface import (
    AttemptFailed,
    NotRetried,
    StepKindDefinition,
    StepParser,
    StepRunner,
    StepValidator,
)
from drctl.runbook.model import Step, StepKind
from drctl.runbook.result import Status, StepResult, scorecard_of
from drctl.runbook.yaml_lines import LineDict


class ActionStep(StepKindDefinition):
    kind = StepKind("action")
    keys = ("with", "until", "timeout", "retry", "process")

    def parse(self, step: Step, raw: LineDict, at: Callable[[str], int],
              parser: StepParser) -> Step:
        action = raw["action"]
        if not isinstance(action, str) or not action:
            parser.issue(at("action"), step.name, "'action' must name an action, e.g. lab.status")
            action = ""
        process = raw.get("process", "in-process")
        if process not in ("in-process", "child"):
            parser.issue(at("process"), step.name,
                         f"'process' must be in-process or child, got {process!r}")
        return replace(step, action=action, in_child=process == "child",
                       params=parser.mapping(raw.get("with"), at("with"), step.name, "with"))

    def describe(self, step: Step) -> str:
        return f"action {step.action}" if step.action else step.kind

    def validate(self, step: Step, validator: StepValidator) -> None:
        if step.action:
            validator.check_action(step, step.action, step.params, step.raw, "with",
                                   read_only_needed=False)

    def inputs(self, step: Step, runner: StepRunner) -> tuple[dict[str, Any], bool]:
        params, deferred = runner.render(dict(step.params))
        return {"action": step.action, "with": params}, deferred

    def run(self, step: Step, result: StepResult, inputs: dict[str, Any], deferred: bool,
            runner: StepRunner) -> None:
        action = runner.registry.get(step.action or "")
        assert action is not None  # the loader checked it

        def attempt() -> Any:
            if not step.in_child:
                return call_action(action, inputs["with"], step.timeout_s,
                                   runner.action_context())
            ctx = runner.action_context()
            try:
                return call_in_child(
                    action.name, inputs["with"], registry_factory=runner.registry.factory,
                    config_path=ctx.config.path if action.needs_config else None,
                    timeout_s=step.timeout_s, grace_s=runner.options.kill_grace_s,
                    notify=ctx.notify, started=lambda pid: runner.child_process(step, pid))
            finally:
                runner.child_process(step, None)

        outcome = runner.attempts(step, result, lambda: runner.until(step, attempt()))
        if result.status == Status.ok:
            result.scorecard = scorecard_of(outcome)
            runner.outputs(step, result, {"result": outcome})


def call_action(action: Action, params: Mapping[str, Any], timeout_s: float | None,
                ctx: ActionContext) -> Any:
    """The action's JSON-like result; its failures as AttemptFailed or NotRetried."""
    if timeout_s is None:
        return _outcome(lambda: action.call(ctx, params))
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = action.call(ctx, params)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = exc

    worker = threading.Thread(target=target, name=f"runbook-{action.name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise NotRetried(
            f"action {action.name} timed out after {timeout_s:g} s; it may still be "
            "running, so it is not retried",
            "Raise the step's timeout, or check what the action left behind.")

    def outcome() -> Any:
        if "error" in box:
            raise box["error"]
        return box.get("value")
    return _outcome(outcome)


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return to_jsonable(call())
    except CoercionError as exc:
        raise NotRetried(str(exc)) from exc
    except DrctlError as exc:
        raise AttemptFailed(exc.message, hint=exc.hint,
                            unreachable=exc.exit_status == ExitStatus.UNREACHABLE) from exc
    except Exception as exc:
        # Unexpected: keep the traceback for --debug.
        logging.getLogger("drctl.runbook").debug("action failed", exc_info=True)
        raise AttemptFailed(f"{type(exc).__name__}: {exc}") from exc

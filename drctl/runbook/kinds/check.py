"""`check:` steps: a value and exactly one tolerance (equals, range, one_of, regex).

The value is a template, or comes from a read-only probe action (`action:` and `with:` under
`check:`) called afresh on every attempt, so a retried check can wait for a condition. Checks
also run in plans, unless they depend on outputs of steps a plan does not run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from drctl.runbook.checks import ToleranceError, evaluate
from drctl.runbook.kinds.action import call_action
from drctl.runbook.kinds.interface import (
    AttemptFailed,
    NotRetried,
    StepKindDefinition,
    StepParser,
    StepRunner,
    StepValidator,
)
from drctl.runbook.model import CheckSpec, Step, StepKind, Tolerance, ToleranceKind
from drctl.runbook.result import Status, StepResult
from drctl.runbook.templating import is_template
from drctl.runbook.yaml_lines import LineDict, line_of
from drctl.suggest import did_you_mean_aside

_CHECK_KEYS = ("value", "action", "with", *(t.value for t in ToleranceKind))


class CheckStep(StepKindDefinition):
    kind = StepKind("check")
    keys = ("timeout", "retry")
    plans_itself = True

    def parse(self, step: Step, raw: LineDict, at: Callable[[str], int],
              parser: StepParser) -> Step:
        return replace(step, check=_parse_check(raw["check"], at("check"), step.name, parser))

    def describe(self, step: Step) -> str:
        if step.check is None:
            return step.kind
        return f"check ({step.check.tolerance.kind.value})"

    def validate(self, step: Step, validator: StepValidator) -> None:
        if step.check is not None and step.check.probe:
            check_raw = step.raw.get("check")
            validator.check_action(step, step.check.probe, step.check.probe_params,
                                   check_raw if isinstance(check_raw, LineDict) else step.raw,
                                   "with", read_only_needed=True)

    def result_names(self, step: Step, key: str) -> frozenset[str]:
        if key == "outputs":
            return frozenset({"result", "value"})
        if key == "check" and step.check is not None and step.check.probe:
            return frozenset({"result"})
        return super().result_names(step, key)

    def inputs(self, step: Step, runner: StepRunner) -> tuple[dict[str, Any], bool]:
        check = step.check
        assert check is not None
        expected, deferred = runner.render(check.tolerance.expected)
        inputs: dict[str, Any] = {check.tolerance.kind.value: expected}
        if check.probe is not None:
            params, probe_deferred = runner.render(dict(check.probe_params))
            inputs.update({"action": check.probe, "with": params})
            return inputs, deferred or probe_deferred
        value, value_deferred = runner.render(check.value)
        inputs["value"] = value
        return inputs, deferred or value_deferred

    def run(self, step: Step, result: StepResult, inputs: dict[str, Any], deferred: bool,
            runner: StepRunner) -> None:
        check = step.check
        assert check is not None
        if deferred:
            result.status = Status.deferred
            result.detail = "depends on outputs of steps that do not run in a plan"
            return
        tolerance = check.tolerance
        expected = inputs[tolerance.kind.value]
        probe = runner.registry.get(check.probe) if check.probe else None
        seen: dict[str, Any] = {}

        def attempt() -> None:
            extra: dict[str, Any] = {}
            if probe is not None:
                extra["result"] = call_action(probe, inputs["with"], step.timeout_s,
                                              runner.action_context())
                value, _ = runner.render(check.value, **extra)
            else:
                value = inputs["value"]
            seen.update(extra, value=value)
            try:
                holds, why = evaluate(tolerance, value, expected)
            except ToleranceError as exc:
                raise NotRetried(str(exc)) from exc
            causes = errors_in(extra.get("result"))
            if not holds and causes:
                # The probe's own errors say why the value is what it is (a cluster that
                # refused the connection), not only that it differs.
                why = f"{why} — {'; '.join(causes[:3])}"
            seen["why"] = why
            if not holds:
                # A probe that could not reach a cluster read part of the world: the check is
                # unknown (exit 4), not "did not hold".
                raise AttemptFailed(why, check=True,
                                    unreachable=bool(unreachable_in(extra.get("result"))))

        runner.attempts(step, result, attempt)
        if "value" in seen:
            inputs["value"] = seen["value"]
        result.detail = seen.get("why")
        if result.status == Status.ok:
            runner.outputs(step, result, {"result": seen.get("result"),
                                          "value": seen.get("value")})


def _parse_check(value: Any, line: int, step: str, parser: StepParser) -> CheckSpec | None:
    if not isinstance(value, Mapping):
        parser.issue(line, step, "check: a mapping with 'value' and one tolerance "
                     "(equals, range, one_of, regex)")
        return None
    for key in value:
        if key not in _CHECK_KEYS:
            parser.issue(line_of(value, key, line), step, f"check: unknown key '{key}'"
                         f"{did_you_mean_aside(str(key), _CHECK_KEYS)}")
    tolerances = [t for t in ToleranceKind if t.value in value]
    if len(tolerances) != 1:
        parser.issue(line, step, "check: give exactly one tolerance: equals, range, one_of "
                     f"or regex (got {len(tolerances)})")
        return None
    if "value" not in value:
        parser.issue(line, step, "check: 'value' is missing (what to compare)")
        return None
    kind = tolerances[0]
    expected = value[kind.value]
    at = line_of(value, kind.value, line)
    if kind == ToleranceKind.range:
        expected = _parse_range(expected, at, step, parser)
    elif kind == ToleranceKind.one_of:
        if not isinstance(expected, list) or not expected:
            parser.issue(at, step, "check.one_of: a non-empty list of accepted values")
    elif kind == ToleranceKind.regex:
        if not isinstance(expected, str):
            parser.issue(at, step, "check.regex: a regular expression (text)")
        elif not is_template(expected):
            try:
                re.compile(expected)
            except re.error as exc:
                parser.issue(at, step, f"check.regex: not a valid regular expression: {exc}")
    probe = value.get("action")
    if probe is not None and not isinstance(probe, str):
        parser.issue(line_of(value, "action", line), step, "check.action: an action name")
        probe = None
    params = parser.mapping(value.get("with"), line_of(value, "with", line) or line, step,
                            "check.with")
    if params and probe is None:
        parser.issue(line_of(value, "with", line), step,
                     "check.with needs check.action (the probe that fetches the value)")
    return CheckSpec(value["value"], Tolerance(kind, expected), probe, params)


def _parse_range(value: Any, line: int | None, step: str,
                 parser: StepParser) -> tuple[Any, Any]:
    if isinstance(value, list) and len(value) == 2:
        low, high = value
    elif isinstance(value, Mapping) and value and set(value) <= {"min", "max"}:
        low, high = value.get("min"), value.get("max")
    else:
        parser.issue(line, step, "check.range: [min, max] or {min: x, max: y} (either end "
                     "may be left out in the mapping form)")
        return (None, None)
    for bound in (low, high):
        if bound is not None and not is_template(bound) and (
                isinstance(bound, bool) or not isinstance(bound, (int, float))):
            parser.issue(line, step, f"check.range: bound {bound!r} is not a number")
            return (None, None)
    if isinstance(low, (int, float)) and isinstance(high, (int, float)) and low > high:
        parser.issue(line, step, f"check.range: min {low} is greater than max {high}")
    return (low, high)


def unreachable_in(result: Any) -> list[str]:
    """The clusters a probe's result says did not answer (its `unreachable` list, as the
    `status` action gives it)."""
    names = result.get("unreachable") if isinstance(result, dict) else None
    return [str(n) for n in names] if isinstance(names, list) else []


def errors_in(result: Any, where: str = "") -> list[str]:
    """Every non-empty `error` a probe's result holds, named by where it sits
    (e.g. "clusters.primary: connection refused")."""
    found: list[str] = []
    if isinstance(result, dict):
        for key, value in result.items():
            path = f"{where}.{key}" if where else str(key)
            if key == "error" and isinstance(value, str) and value:
                found.append(f"{where or 'error'}: {value}")
            else:
                found += errors_in(value, path)
    elif isinstance(result, list):
        for i, value in enumerate(result):
            found += errors_in(value, f"{where}[{i}]")
    return found

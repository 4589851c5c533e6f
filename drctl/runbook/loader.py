"""Load a runbook from YAML and validate it before anything runs.

The schema of a runbook, its inputs and the keys every step shares lives here; each step kind
parses and validates its own keys (`runbook/kinds/`). Line numbers come from `yaml_lines`.

Every problem names the file, the line and the step, and all problems are reported at once
(`RunbookInvalid`, exit 2): unknown keys and step kinds, unknown actions and parameters,
undeclared variables, references to steps or outputs that do not exist, Jinja syntax errors,
and tolerances that cannot hold (a bad regex, a range whose minimum exceeds its maximum).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jinja2
import yaml

from drctl.config import type_name
from drctl.errors import UsageError
from drctl.retry import RetryPolicy
from drctl.runbook.actions import Registry
from drctl.runbook.kinds import STEP_KINDS
from drctl.runbook.model import (
    APPROVE_VAR,
    IDENTIFIER,
    NO_RETRY,
    Input,
    OnFailure,
    OnFailureMode,
    OutputSpec,
    Phase,
    Runbook,
    Step,
    StepKind,
)
from drctl.runbook.templating import is_template, references
from drctl.runbook.yaml_lines import LineDict, LineList, line_of, load_with_lines
from drctl.suggest import did_you_mean_aside
from drctl.timeparse import parse_duration

_TOP_KEYS = ("name", "description", "inputs", "steps", "rollback")
_COMMON_KEYS = ("name", "description", "when", "on_failure", "undo", "outputs")
_INPUT_KEYS = ("default", "secret", "description")
_RETRY_KEYS = ("attempts", "initial", "multiplier", "max", "deadline")
_BASE_NAMES = frozenset({"vars", "config", "steps", "run"})


@dataclass(frozen=True)
class Issue:
    file: str
    line: int | None
    step: str | None
    message: str

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "")
        step = f" step '{self.step}':" if self.step else ""
        return f"{where}:{step} {self.message}"


class RunbookInvalid(UsageError):
    """The runbook cannot run as written; lists every problem with file, line and step."""

    def __init__(self, issues: list[Issue]) -> None:
        issues = sorted(issues, key=lambda i: i.line or 0)
        count = f"{len(issues)} problem{'s' if len(issues) != 1 else ''}"
        file = issues[0].file if issues else "runbook"
        super().__init__(f"{file} is not a valid runbook ({count}):\n"
                         + "\n".join(f"  {issue}" for issue in issues),
                         "Fix these and check again with `drctl runbook validate FILE`.")
        self.issues = issues


# -- loading ------------------------------------------------------------------------------


def load_runbook(path: Path, registry: Registry,
                 supplied: frozenset[str] = frozenset()) -> Runbook:
    """Parse and validate `path`; `supplied` names variables given on the command line (they
    may be referenced without being declared as inputs)."""
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the runbook: {exc.strerror}.",
                         "Check the path.") from exc
    return parse_runbook(source, path, registry, supplied)


def parse_runbook(source: str, path: Path, registry: Registry,
                  supplied: frozenset[str] = frozenset()) -> Runbook:
    parser = _Parser(str(path))
    try:
        raw = load_with_lines(source)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise RunbookInvalid([Issue(str(path), mark.line + 1 if mark else None, None,
                                    f"not valid YAML: {problem}")]) from exc
    runbook = parser.runbook(raw, source, path)
    if runbook is not None:
        runbook = _Validator(parser, runbook, registry, supplied).validate()
    if parser.issues or runbook is None:
        raise RunbookInvalid(parser.issues)
    return runbook


class _Parser:
    def __init__(self, file: str) -> None:
        self.file = file
        self.issues: list[Issue] = []

    def issue(self, line: int | None, step: str | None, message: str) -> None:
        self.issues.append(Issue(self.file, line, step, message))

    def runbook(self, raw: Any, source: str, path: Path) -> Runbook | None:
        if not isinstance(raw, LineDict):
            self.issue(1, None, f"a runbook is a mapping with 'steps', got {type_name(raw)}")
            return None
        for key in raw:
            if key not in _TOP_KEYS:
                self.issue(line_of(raw, key, raw.line), None,
                           f"unknown key '{key}'{did_you_mean_aside(str(key), _TOP_KEYS)}")
        name = raw.get("name", path.stem)
        if not isinstance(name, str) or not name:
            self.issue(line_of(raw, "name", 1), None, "'name' must be a non-empty string")
            name = path.stem
        description = raw.get("description", "")
        if not isinstance(description, str):
            self.issue(line_of(raw, "description", 1), None, "'description' must be text")
            description = ""
        inputs = self.inputs(raw.get("inputs"), line_of(raw, "inputs", 1))
        steps = self.steps(raw.get("steps"), Phase.main, line_of(raw, "steps", raw.line))
        if "steps" not in raw:
            self.issue(raw.line, None, "missing 'steps': a runbook needs at least one step")
        rollback = self.steps(raw.get("rollback"), Phase.rollback,
                              line_of(raw, "rollback", raw.line))
        return Runbook(path=path, source=source, name=name, description=description,
                       inputs=inputs, steps=tuple(steps), rollback=tuple(rollback))

    def inputs(self, raw: Any, line: int | None) -> dict[str, Input]:
        if raw is None:
            return {}
        if not isinstance(raw, LineDict):
            self.issue(line, None, f"'inputs' must be a mapping, got {type_name(raw)}")
            return {}
        inputs: dict[str, Input] = {}
        for name, spec in raw.items():
            at = line_of(raw, name, line) or 1
            if not isinstance(name, str) or not IDENTIFIER.match(name):
                self.issue(at, None, f"input name '{name}' must be an identifier "
                           "(letters, digits, _)")
                continue
            if name == APPROVE_VAR:
                self.issue(at, None, f"'{APPROVE_VAR}' is reserved for pre-approvals "
                           f"(--var {APPROVE_VAR}.<step>=yes)")
                continue
            if not isinstance(spec, Mapping):
                inputs[name] = Input(name, at, default=spec, has_default=True)
                continue
            for key in spec:
                if key not in _INPUT_KEYS:
                    self.issue(line_of(spec, key, at), None,
                               f"input '{name}': unknown key '{key}'"
                               f"{did_you_mean_aside(str(key), _INPUT_KEYS)} (a mapping default "
                               "goes under 'default:')")
            secret = spec.get("secret", False)
            if not isinstance(secret, bool):
                self.issue(line_of(spec, "secret", at), None,
                           f"input '{name}': 'secret' must be true or false")
                secret = False
            inputs[name] = Input(name, at, default=spec.get("default"),
                                 has_default="default" in spec, secret=secret,
                                 description=str(spec.get("description", "")))
        return inputs

    def steps(self, raw: Any, phase: Phase, line: int | None) -> list[Step]:
        if raw is None:
            return []
        if not isinstance(raw, LineList) or (phase == Phase.main and not raw):
            self.issue(line, None, f"'{phase.value if phase == Phase.rollback else 'steps'}' "
                       f"must be a non-empty list of steps, got {type_name(raw)}")
            return []
        steps = []
        for index, item in enumerate(raw):
            step = self.step(item, phase, line_of(raw, index, line) or 1, index)
            if step is not None:
                steps.append(step)
        return steps

    def step(self, raw: Any, phase: Phase, line: int, index: int) -> Step | None:
        if not isinstance(raw, LineDict):
            self.issue(line, None, f"step #{index + 1} must be a mapping, got {type_name(raw)}")
            return None
        name = raw.get("name")
        if not isinstance(name, str) or not IDENTIFIER.match(name):
            self.issue(line, None, f"step #{index + 1} needs a 'name' that is an identifier "
                       "(letters, digits, _), so later steps can write steps.<name>")
            return None
        kinds = [k for k in STEP_KINDS if k in raw]
        if len(kinds) != 1:
            problem = ("has none of the step kinds" if not kinds else
                       f"has more than one step kind ({', '.join(kinds)})")
            self.issue(line, name, f"{problem}: use exactly one of "
                       f"{', '.join(STEP_KINDS)}")
            self._unknown_keys(raw, name, line, None)
            return None
        kind = kinds[0]
        self._unknown_keys(raw, name, line, kind)

        def at(key: str) -> int:
            return line_of(raw, key, line) or line

        step = Step(name=name, kind=kind, phase=phase, line=line, raw=raw,
                    description=self.text(raw.get("description", ""), at("description"), name,
                                          "description"))
        step = replace(step, when=self.template_text(raw.get("when"), at("when"), name, "when"),
                       on_failure=self.on_failure(raw.get("on_failure"), at("on_failure"), name,
                                                  phase),
                       undo=self.names(raw.get("undo"), at("undo"), name, "undo"),
                       outputs=self.outputs(raw.get("outputs"), at("outputs"), name))
        if "timeout" in raw:
            step = replace(step, timeout_s=self.duration(raw["timeout"], at("timeout"), name,
                                                         "timeout"))
        if "retry" in raw:
            step = replace(step, retry=self.retry(raw["retry"], at("retry"), name))
        if "until" in raw:
            step = replace(step, until=self.template_text(raw["until"], at("until"), name,
                                                          "until"))
        return STEP_KINDS[kind].parse(step, raw, at, self)

    def _unknown_keys(self, raw: LineDict, name: str, line: int, kind: StepKind | None) -> None:
        kind_names = tuple(STEP_KINDS)
        kind_keys = [definition.keys for definition in STEP_KINDS.values()]
        allowed = (*_COMMON_KEYS, *kind_names,
                   *(STEP_KINDS[kind].keys if kind else {k for ks in kind_keys for k in ks}))
        for key in raw:
            if key in allowed:
                continue
            if kind is not None and any(key in keys for keys in kind_keys):
                self.issue(line_of(raw, key, line), name,
                           f"'{key}' does not apply to a {kind} step")
            else:
                self.issue(line_of(raw, key, line), name,
                           f"unknown key '{key}'{did_you_mean_aside(str(key), allowed)}; "
                           f"step kinds are {', '.join(kind_names)}")

    def text(self, value: Any, line: int, step: str, key: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            self.issue(line, step, f"'{key}' must be text, got {type_name(value)}")
            return ""
        return value

    def template_text(self, value: Any, line: int, step: str, key: str) -> str | None:
        if value is None:
            return None
        if isinstance(value, bool):
            return "{{ true }}" if value else "{{ false }}"
        if not isinstance(value, str) or not value.strip():
            self.issue(line, step, f"'{key}' must be a condition such as "
                       "\"{{ steps.x.outputs.lag == 0 }}\"")
            return None
        return value

    def mapping(self, value: Any, line: int, step: str, key: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.issue(line, step, f"'{key}' must be a mapping, got {type_name(value)}")
            return {}
        for k in value:
            if not isinstance(k, str):
                self.issue(line, step, f"'{key}' keys must be names, got {k!r}")
                return {}
        return value

    def names(self, value: Any, line: int, step: str, key: str) -> tuple[str, ...]:
        if value is None:
            return ()
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            self.issue(line, step, f"'{key}' must be a step name or a list of step names")
            return ()
        return tuple(items)

    def duration(self, value: Any, line: int, step: str, key: str) -> float | None:
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            self.issue(line, step, f"{key}: {exc}")
            return None
        if seconds <= 0:
            self.issue(line, step, f"{key}: must be more than 0")
            return None
        return seconds

    def retry(self, value: Any, line: int, step: str) -> RetryPolicy:
        if value is None or value is False:
            return NO_RETRY
        if value is True:
            return RetryPolicy()
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 1:
                self.issue(line, step, "retry: attempts must be at least 1")
                return NO_RETRY
            return RetryPolicy(attempts=value)
        if not isinstance(value, Mapping):
            self.issue(line, step, "retry: give true (Debezium's defaults: 1 s doubling to "
                       "120 s, 16 attempts), a number of attempts, or a mapping with "
                       f"{', '.join(_RETRY_KEYS)}")
            return NO_RETRY
        defaults = RetryPolicy()
        for key in value:
            if key not in _RETRY_KEYS:
                self.issue(line_of(value, key, line), step, f"retry: unknown key '{key}'"
                           f"{did_you_mean_aside(str(key), _RETRY_KEYS)}")
        attempts = value.get("attempts", defaults.attempts)
        multiplier = value.get("multiplier", defaults.multiplier)
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            self.issue(line_of(value, "attempts", line), step,
                       "retry.attempts must be an integer of at least 1")
            attempts = 1
        if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) \
                or multiplier < 1:
            self.issue(line_of(value, "multiplier", line), step,
                       "retry.multiplier must be a number of at least 1")
            multiplier = defaults.multiplier
        durations: dict[str, float | None] = {}
        for key, default in (("initial", defaults.initial_s), ("max", defaults.max_s),
                             ("deadline", None)):
            if key not in value:
                durations[key] = default
                continue
            try:
                durations[key] = parse_duration(value[key])
            except ValueError as exc:
                self.issue(line_of(value, key, line), step, f"retry.{key}: {exc}")
                durations[key] = default
        return RetryPolicy(initial_s=durations["initial"] or 0.0, multiplier=float(multiplier),
                           max_s=durations["max"] or 0.0, attempts=attempts,
                           deadline_s=durations["deadline"])

    def on_failure(self, value: Any, line: int, step: str, phase: Phase) -> OnFailure:
        if value is None:
            return OnFailure()
        if isinstance(value, str) and value in ("abort", "continue", "rollback"):
            if phase == Phase.rollback and value == "rollback":
                self.issue(line, step, "a rollback step cannot itself start a rollback")
                return OnFailure()
            return OnFailure(OnFailureMode(value))
        if isinstance(value, Mapping) and list(value) == ["rollback"] \
                and phase == Phase.main:
            targets = self.names(value["rollback"], line, step, "on_failure.rollback")
            if not targets:
                self.issue(line, step, "on_failure.rollback must name at least one rollback "
                           "step")
            return OnFailure(OnFailureMode.rollback, targets)
        self.issue(line, step, "on_failure must be abort, continue, rollback, or "
                   "{rollback: [step names]}")
        return OnFailure()

    def outputs(self, value: Any, line: int, step: str) -> tuple[OutputSpec, ...]:
        if value is None:
            return ()
        specs: list[OutputSpec] = []
        if isinstance(value, list):
            for i, name in enumerate(value):
                if not isinstance(name, str) or not IDENTIFIER.match(name):
                    self.issue(line_of(value, i, line), step,
                               f"output name {name!r} must be an identifier")
                    continue
                specs.append(OutputSpec(name, "{{ result['" + name + "'] }}"))
            return tuple(specs)
        if not isinstance(value, Mapping):
            self.issue(line, step, "outputs: a list of result keys, or a mapping "
                       "name: template")
            return ()
        for name, spec in value.items():
            at = line_of(value, name, line)
            if not isinstance(name, str) or not IDENTIFIER.match(name):
                self.issue(at, step, f"output name {name!r} must be an identifier")
                continue
            if isinstance(spec, Mapping):
                unknown = [k for k in spec if k not in ("value", "secret")]
                if unknown or "value" not in spec or not isinstance(spec.get("secret", False),
                                                                     bool):
                    self.issue(at, step, f"output '{name}': use a template, or "
                               "{value: template, secret: true}")
                    continue
                specs.append(OutputSpec(name, spec["value"], bool(spec.get("secret", False))))
            else:
                specs.append(OutputSpec(name, spec))
        return tuple(specs)


# -- validation of references -------------------------------------------------------------


class _Validator:
    def __init__(self, parser: _Parser, runbook: Runbook, registry: Registry,
                 supplied: frozenset[str]) -> None:
        self.p = parser
        self.runbook = runbook
        self.registry = registry
        self.known_vars = set(runbook.inputs) | set(supplied) | {APPROVE_VAR}
        self.uses_config = False
        self.warnings: list[Issue] = []

    def validate(self) -> Runbook:
        rb = self.runbook
        seen: dict[str, int] = {}
        for step in (*rb.steps, *rb.rollback):
            if step.name in seen:
                self.p.issue(step.line, step.name, f"duplicate step name (first at line "
                             f"{seen[step.name]})")
            seen.setdefault(step.name, step.line)
        for name, spec in rb.inputs.items():
            if is_template(spec.default):
                for line, source in self._strings(spec.default, spec.line):
                    self._template(source, line, None, frozenset({"vars", "config"}),
                                   before=(), what=f"input '{name}'")
        main_names = [s.name for s in rb.steps]
        for index, step in enumerate(rb.steps):
            self._step(step, before=tuple(main_names[:index]))
        rollback_names = [s.name for s in rb.rollback]
        for index, step in enumerate(rb.rollback):
            self._step(step, before=(*main_names, *rollback_names[:index]))
        return replace(rb, uses_config=self.uses_config,
                       warnings=tuple(str(w) for w in self.warnings))

    def _step(self, step: Step, before: tuple[str, ...]) -> None:
        raw = step.raw
        for target in (*step.undo, *step.on_failure.targets):
            if self.runbook.rollback_step(target) is None:
                known = [s.name for s in self.runbook.rollback]
                self.p.issue(line_of(raw, "undo" if target in step.undo else "on_failure",
                                      step.line), step.name,
                             f"'{target}' is not a step of the rollback section"
                             f"{did_you_mean_aside(target, known)}")
        if step.undo and step.phase == Phase.rollback:
            self.p.issue(line_of(raw, "undo", step.line), step.name,
                         "rollback steps cannot have 'undo'")
        kind = STEP_KINDS[step.kind]
        kind.validate(step, self)
        for key, value in raw.items():
            if key in ("name", "description", "on_failure", "undo", "retry", "timeout",
                       "action"):
                continue
            names = _BASE_NAMES | kind.result_names(step, key)
            line = line_of(raw, key, step.line) or step.line
            for at, source in self._strings(value, line):
                self._template(source, at, step.name, names, before)

    def issue(self, line: int | None, step: str | None, message: str) -> None:
        self.p.issue(line, step, message)

    def steps_after(self, step: Step) -> list[Step]:
        names = [s.name for s in self.runbook.steps]
        return list(self.runbook.steps[names.index(step.name) + 1:]) \
            if step.name in names else []

    def check_action(self, step: Step, name: str, params: Mapping[str, Any],
                     raw: Mapping[str, Any], key: str, *, read_only_needed: bool) -> None:
        """`name` is a registered action (read-only if need be) taking these `params`."""
        action = self.registry.get(name)
        line = line_of(raw, "action", step.line) or step.line
        if action is None:
            self.p.issue(line, step.name, f"unknown action '{name}'"
                         f"{did_you_mean_aside(name, self.registry.names())}; known actions: "
                         f"{', '.join(self.registry.names())}")
            return
        if read_only_needed and not action.read_only:
            self.p.issue(line, step.name, f"action '{name}' changes things, so it cannot fetch "
                         "a check's value (checks also run in plans); use a read-only action")
        if action.needs_config:
            self.uses_config = True
        params_line = line_of(raw, key, line) or line
        for issue in action.check_params(params):
            self.p.issue(line_of(params, issue.param, params_line) if issue.param
                         else params_line, step.name, f"action '{name}': {issue.message}")
        for old, note in action.old_names(params).items():
            self.warnings.append(Issue(self.p.file, line_of(params, old, params_line),
                                       step.name, f"action '{name}': {note}"))

    def _strings(self, value: Any, line: int) -> Iterator[tuple[int, str]]:
        if isinstance(value, Mapping):
            for k, v in value.items():
                if is_template(k):
                    yield line_of(value, k, line) or line, str(k)
                yield from self._strings(v, line_of(value, k, line) or line)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                yield from self._strings(v, line_of(value, i, line) or line)
        elif is_template(value):
            yield line, value

    def _template(self, source: str, line: int, step: str | None, allowed: frozenset[str],
                  before: tuple[str, ...], what: str = "") -> None:
        prefix = f"{what}: " if what else ""
        try:
            refs = references(source)
        except jinja2.TemplateSyntaxError as exc:
            self.p.issue(line + (exc.lineno or 1) - 1, step,
                         f"{prefix}Jinja syntax error: {exc.message}")
            return
        if "config" in refs.names:
            self.uses_config = True
        for name in sorted(refs.names - allowed):
            self.p.issue(line, step, f"{prefix}unknown name '{name}' in a template "
                         f"(available here: {', '.join(sorted(allowed))})")
        for var in sorted(refs.variables - self.known_vars):
            self.p.issue(line, step, f"{prefix}missing variable 'vars.{var}': declare it under "
                         f"'inputs:' or pass --var {var}=..."
                         f"{did_you_mean_aside(var, self.known_vars - {APPROVE_VAR})}")
        for path in refs.steps:
            target = path[1]
            other = self.runbook.step(target)
            if other is None:
                self.p.issue(line, step, f"{prefix}steps.{target}: no such step"
                             f"{did_you_mean_aside(target, [s.name for s in self.runbook.steps])}")
                continue
            if target not in before:
                self.p.issue(line, step, f"{prefix}steps.{target} is not an earlier step, so "
                             "its outputs are not known yet")
                continue
            if len(path) >= 3 and path[2] not in ("outputs", "status"):
                self.p.issue(line, step, f"{prefix}steps.{target}.{path[2]}: a step has "
                             "'outputs' and 'status'")
            elif len(path) >= 4 and path[2] == "outputs" \
                    and path[3] not in other.output_names:
                declared = ", ".join(other.output_names) or "none"
                self.p.issue(line, step, f"{prefix}steps.{target}.outputs.{path[3]}: step "
                             f"'{target}' declares no such output (declared: {declared})")

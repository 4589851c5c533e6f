"""A run's variables: input defaults, then var files, then `--var`, later sources winning.

Values may be secrets given by reference (`${env:NAME}`, `${file:/path}`): they are resolved
here, and every resolved reference, every input marked `secret: true` and every variable whose
name looks secret (password, token, ...) joins the run's Redactor, so it is masked everywhere
the run writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from drctl.errors import UsageError
from drctl.runbook.model import APPROVE_VAR, Runbook
from drctl.runbook.templating import Renderer, RenderError
from drctl.secrets import Redactor, UnresolvedReference, is_secret_key, resolve_references

_REFERENCE = re.compile(r"\$\{(env|file):[^}]+\}")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)=(.*)$", re.DOTALL)


class VariableError(UsageError):
    pass


@dataclass
class Variables:
    values: dict[str, Any] = field(default_factory=dict)
    # As given (references unresolved), for the run digest; secret literals are left out.
    as_given: dict[str, Any] = field(default_factory=dict)
    secret_names: set[str] = field(default_factory=set)
    redactor: Redactor = field(default_factory=lambda: RunRedactor())

    def approved(self, step: str) -> bool:
        approvals = self.values.get(APPROVE_VAR)
        if not isinstance(approvals, Mapping):
            return False
        value = approvals.get(step)
        return value is True or (isinstance(value, str)
                                 and value.strip().lower() in ("yes", "y", "true", "1"))


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """`--var k=v` and `--var a.b=v` into a nested mapping of strings."""
    values: dict[str, Any] = {}
    for item in items:
        match = _ASSIGNMENT.match(item)
        if match is None:
            raise VariableError(f"--var '{item}' is not NAME=VALUE.",
                                "Example: --var lab_dir=lab, or --var approve.failover=yes.")
        _set(values, match.group(1).split("."), match.group(2), item)
    return values


def _set(target: dict[str, Any], path: list[str], value: Any, item: str) -> None:
    for part in path[:-1]:
        child = target.setdefault(part, {})
        if not isinstance(child, dict):
            raise VariableError(f"--var '{item}': '{part}' already holds a value.")
        target = child
    target[path[-1]] = value


def read_vars_file(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise VariableError(f"{path}: cannot read the vars file: {exc.strerror}.") from exc
    except yaml.YAMLError as exc:
        raise VariableError(f"{path}: the vars file is not valid YAML: {exc}.") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise VariableError(f"{path}: a vars file is a mapping of names to values.")
    return raw


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = dict(value) if isinstance(value, Mapping) else value


def resolve_variables(runbook: Runbook, *, files: Sequence[Path] = (),
                      assignments: Sequence[str] = (),
                      config_data: Mapping[str, Any] | None = None) -> Variables:
    """Every variable of a run, resolved; raises VariableError (exit 2) for missing ones."""
    given: dict[str, Any] = {}
    for path in files:
        _merge(given, read_vars_file(path))
    _merge(given, parse_assignments(list(assignments)))
    result = Variables()
    for name, value in given.items():
        secret = name in runbook.inputs and runbook.inputs[name].secret
        result.values[name] = _resolve(result, name, value, secret, f"variable '{name}'")
    renderer = Renderer()
    missing = []
    for name, spec in runbook.inputs.items():
        if name in given:
            continue
        if not spec.has_default:
            missing.append(spec)
            continue
        context: dict[str, Any] = {"vars": dict(result.values)}
        if config_data is not None:
            context["config"] = config_data
        try:
            default, _ = renderer.render(spec.default, context)
        except RenderError as exc:
            raise VariableError(f"{runbook.path}:{spec.line}: input '{name}': its default "
                                f"cannot be rendered: {exc}") from exc
        result.values[name] = _resolve(result, name, default, spec.secret,
                                       f"input '{name}' (default)")
        given[name] = spec.default
    if missing:
        lines = "\n".join(f"  {runbook.path}:{m.line}: input '{m.name}'"
                          + (f" — {m.description}" if m.description else "") for m in missing)
        raise VariableError(f"missing variable{'s' if len(missing) > 1 else ''}:\n{lines}",
                            "Give them with --var NAME=VALUE or --vars-file FILE.")
    for name, value in given.items():
        if name in result.secret_names and not _has_reference(value):
            result.as_given[name] = "<secret>"
        else:
            result.as_given[name] = value
    return result


def _has_reference(value: Any) -> bool:
    if isinstance(value, str):
        return bool(_REFERENCE.search(value))
    if isinstance(value, Mapping):
        return any(_has_reference(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_reference(v) for v in value)
    return False


def _resolve(result: Variables, name: str, value: Any, secret: bool, what: str) -> Any:
    if isinstance(value, Mapping):
        return {k: _resolve(result, f"{name}.{k}", v, secret, what) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(result, name, v, secret, what) for v in value]
    if not isinstance(value, str):
        if secret and value is not None:
            result.secret_names.add(name.split(".")[0])
            result.redactor.add(str(value))
        return value
    by_reference = bool(_REFERENCE.search(value))
    try:
        resolved = resolve_references(value)
    except UnresolvedReference as exc:
        raise VariableError(f"{what}: unresolved reference: {exc}.",
                            "Set the environment variable or create the file.") from exc
    if secret or by_reference or is_secret_key(name):
        result.secret_names.add(name.split(".")[0])
        result.redactor.add(resolved)
    return resolved


class RunRedactor(Redactor):
    """The run's own secrets plus those of other redactors (the configuration's)."""

    def __init__(self, *others: Redactor) -> None:
        super().__init__()
        self._others = others

    def redact(self, text: str) -> str:
        text = super().redact(text)
        for other in self._others:
            text = other.redact(text)
        return text

"""Jinja2 for runbooks: rendering values, and finding what a template refers to before it runs.

A string that is exactly one `{{ expression }}` evaluates to the expression's native value (a
number stays a number, a list stays a list); any other string renders to text. In a plan,
outputs of steps that did not run are *deferred*: they render as a visible placeholder instead
of failing, and a check that depends on one is reported as deferred rather than failed.
"""

from __future__ import annotations

import contextvars
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jinja2
from jinja2 import meta, nodes
from jinja2.runtime import missing

_SINGLE_EXPRESSION = re.compile(r"^\s*\{\{(.*)\}\}\s*$", re.DOTALL)
_deferred_seen: contextvars.ContextVar[bool] = contextvars.ContextVar("deferred", default=False)


class RenderError(Exception):
    """A template that cannot be rendered with the values at hand."""


class NotRun(dict[str, Any]):
    """What `steps.<name>` holds in a plan for a step that does not run there."""

    def __init__(self, step_name: str, status: str) -> None:
        super().__init__(status=status)
        self.step_name = step_name


class _Deferred(jinja2.ChainableUndefined):
    """A value only known once the run executes the step that produces it."""

    def __init__(self, hint: str | None = None, obj: Any = missing, name: str | None = None,
                 exc: type[jinja2.exceptions.TemplateRuntimeError] = jinja2.UndefinedError,
                 ) -> None:
        super().__init__(hint, obj, name, exc)
        _deferred_seen.set(True)

    def __getattr__(self, name: str) -> Any:
        if name[:2] == "__":
            raise AttributeError(name)
        return _Deferred(name=f"{self._undefined_name}.{name}")

    def __getitem__(self, key: Any) -> Any:
        return _Deferred(name=f"{self._undefined_name}.{key}")

    def __str__(self) -> str:
        return f"<{self._undefined_name}: known when the run gets there>"


class _PlanUndefined(jinja2.StrictUndefined):
    """Strict, except below a step that does not run in the plan: there it is deferred."""

    def __new__(cls, hint: str | None = None, obj: Any = missing, name: str | None = None,
                exc: type[jinja2.exceptions.TemplateRuntimeError] = jinja2.UndefinedError,
                ) -> Any:
        if isinstance(obj, NotRun):
            return _Deferred(name=f"steps.{obj.step_name}.{name}")
        return super().__new__(cls)


def _from_json(text: Any) -> Any:
    return json.loads(text)


def _to_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _environment(undefined: type[jinja2.Undefined]) -> jinja2.Environment:
    env = jinja2.Environment(undefined=undefined, autoescape=False, keep_trailing_newline=True)
    env.filters.update({
        "from_json": _from_json,
        "to_json": _to_json,
        "dirname": lambda p: os.path.dirname(str(p)),
        "basename": lambda p: os.path.basename(str(p)),
    })
    return env


STRICT = _environment(jinja2.StrictUndefined)
PLAN = _environment(_PlanUndefined)
GLOBAL_NAMES = frozenset(STRICT.globals)


def is_template(value: Any) -> bool:
    return isinstance(value, str) and any(t in value for t in ("{{", "{%", "{#"))


def single_expression(source: str) -> str | None:
    match = _SINGLE_EXPRESSION.match(source)
    if match is None or "{{" in match.group(1) or "}}" in match.group(1):
        return None
    return match.group(1)


def is_undefined(value: Any) -> bool:
    return isinstance(value, jinja2.Undefined)


class Renderer:
    """Renders template values, recursively through mappings and lists."""

    def __init__(self, *, plan: bool = False) -> None:
        self.env = PLAN if plan else STRICT
        self._cache: dict[str, Any] = {}

    def render(self, value: Any, context: Mapping[str, Any]) -> tuple[Any, bool]:
        """(rendered value, whether it depends on a deferred output)."""
        token = _deferred_seen.set(False)
        try:
            rendered = self._render(value, context)
            return rendered, _deferred_seen.get()
        except jinja2.UndefinedError as exc:
            if _deferred_seen.get():
                return _Deferred(name="a step that does not run in a plan"), True
            raise RenderError(f"undefined value: {exc.message}") from exc
        except jinja2.TemplateError as exc:
            raise RenderError(str(exc.message or exc)) from exc
        except RenderError:
            raise
        except Exception as exc:
            if _deferred_seen.get():
                return _Deferred(name="a step that does not run in a plan"), True
            raise RenderError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            _deferred_seen.reset(token)

    def _render(self, value: Any, context: Mapping[str, Any]) -> Any:
        if isinstance(value, Mapping):
            return {k: self._render(v, context) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._render(v, context) for v in value]
        if not is_template(value):
            return value
        compiled = self._cache.get(value)
        if compiled is None:
            expression = single_expression(value)
            compiled = (self.env.compile_expression(expression, undefined_to_none=False)
                        if expression is not None else self.env.from_string(value))
            self._cache[value] = compiled
        if isinstance(compiled, jinja2.Template):
            return compiled.render(context)
        value = compiled(**context)
        if isinstance(value, jinja2.Undefined) and not isinstance(value, _Deferred):
            # An expression's value is not rendered, so a strict undefined would slip through.
            value._fail_with_undefined_error()
        return value


@dataclass
class References:
    """What one template refers to."""

    names: set[str] = field(default_factory=set)  # top-level names, e.g. vars, steps, result
    variables: set[str] = field(default_factory=set)  # vars.<name>
    steps: list[tuple[str, ...]] = field(default_factory=list)  # steps.<name>[.<attr>[.<out>]]


def references(source: str) -> References:
    """Parse `source` (TemplateSyntaxError propagates) and list what it refers to."""
    tree = STRICT.parse(source)
    refs = References(names=set(meta.find_undeclared_variables(tree)) - GLOBAL_NAMES)
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        path = _path(node)
        if not path:
            continue
        if path[0] == "vars" and len(path) >= 2:
            refs.variables.add(path[1])
        elif path[0] == "steps" and len(path) >= 2:
            refs.steps.append(tuple(path))
    return refs


def _path(node: nodes.Node) -> list[str] | None:
    """['steps', 'x', 'outputs', 'y'] for steps.x.outputs['y']; None if not a plain chain."""
    parts: list[str] = []
    current: nodes.Node = node
    while True:
        if isinstance(current, nodes.Getattr):
            parts.append(current.attr)
            current = current.node
        elif isinstance(current, nodes.Getitem):
            if not isinstance(current.arg, nodes.Const) or not isinstance(current.arg.value,
                                                                         str):
                return None
            parts.append(current.arg.value)
            current = current.node
        elif isinstance(current, nodes.Name):
            parts.append(current.name)
            return parts[::-1]
        else:
            return None


def template_strings(value: Any) -> Iterator[str]:
    """Every template string inside a value (mappings and lists included)."""
    if isinstance(value, Mapping):
        for v in value.values():
            yield from template_strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from template_strings(v)
    elif is_template(value):
        yield value


def plain(value: Any) -> Any:
    """JSON-ready data: placeholders of deferred values become their text."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, jinja2.Undefined):
        return str(value)
    return value

"""Helpers shared by the runbook tests: run the real CLI (in-process or in a subprocess) and the
engine directly with a registry that holds test-only actions."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from drctl.cli import app as root
from drctl.runbook.actions import ActionContext, Registry, builtin_registry
from drctl.runbook.executor import Executor
from drctl.runbook.loader import parse_runbook
from drctl.runbook.model import Runbook
from drctl.runbook.options import RunOptions
from drctl.runbook.result import RunResult
from drctl.runbook.variables import parse_assignments, resolve_variables

REPO = Path(__file__).resolve().parents[3]



def entry_command(*args: str) -> list[str]:
    """argv that runs `drctl ARGS` in a fresh Python process."""
    return [sys.executable, "-m", "drctl", *args]


def drctl(*args: str) -> int:
    """Run `drctl ARGS` in-process through the real error boundary; returns the exit status."""
    return root.main(list(args))


def gone(pid: int, deadline_s: float = 5.0) -> bool:
    """Whether process `pid` ends (or is a zombie waiting for init) within the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z":
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.05)


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def registry_with_test_actions(calls: list[dict[str, Any]] | None = None) -> Registry:
    """The built-in actions plus `test.echo` (returns its parameters) and `test.flaky`
    (fails until its n-th call)."""
    registry = builtin_registry()
    seen = calls if calls is not None else []

    def echo(ctx: ActionContext, *, value: str = "", count: int = 0,
             tags: list[str] | None = None) -> dict[str, Any]:
        seen.append({"value": value, "count": count, "tags": tags})
        return {"value": value, "count": count, "tags": tags or [], "doubled": count * 2}

    def flaky(ctx: ActionContext, *, succeed_on: int = 3) -> dict[str, Any]:
        seen.append({"flaky": True})
        if len([c for c in seen if c.get("flaky")]) < succeed_on:
            raise ConnectionError("not yet")
        return {"calls": len(seen)}

    def probe(ctx: ActionContext, *, target: int = 0) -> dict[str, Any]:
        seen.append({"probe": True})
        return {"lag": max(0, target - len([c for c in seen if c.get("probe")]))}

    def hang(ctx: ActionContext, *, seconds: float = 30.0,
             cleanup_file: str = "") -> dict[str, Any]:
        import time

        seen.append({"hang": True})
        try:
            ctx.notify(f"hanging for {seconds:g} s")  # in the try: a signal may come at once
            time.sleep(seconds)
        finally:
            if cleanup_file:  # what an action's own cleanup does, however it ends
                Path(cleanup_file).write_text("cleaned up")
        return {}

    registry.register("test.echo", echo)
    registry.register("test.flaky", flaky)
    registry.register("test.probe", probe, read_only=True)
    registry.register("test.hang", hang)
    # A step with `process: child` builds this registry again in its child process.
    registry.factory = "tests.unit.runbook.support:registry_with_test_actions"
    return registry



def load(text: str, registry: Registry | None = None, path: Path = Path("test.yaml"),
         supplied: frozenset[str] = frozenset()) -> Runbook:
    return parse_runbook(textwrap.dedent(text).lstrip(), path,
                         registry or registry_with_test_actions(), supplied)


def run(text: str, *, registry: Registry | None = None, assignments: list[str] | None = None,
        **options: Any) -> RunResult:
    registry = registry or registry_with_test_actions()
    runbook = load(text, registry, supplied=frozenset(parse_assignments(assignments or [])))
    variables = resolve_variables(runbook, assignments=assignments or [])
    return Executor(runbook, variables, registry, options=RunOptions(**options)).run()

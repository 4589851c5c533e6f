"""What a runbook is once loaded: steps, checks, retries, failure handling, inputs.

Plain frozen dataclasses; the loader builds them from YAML and the executor runs them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, NewType

from drctl.retry import RetryPolicy

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Pre-approvals are variables `approve.<step>`; no input may take the name.
APPROVE_VAR = "approve"
# Without a `retry:` a step runs once.
NO_RETRY = RetryPolicy(attempts=1)

# The key that makes a step what it is (`action`, `shell`, ...): a name registered in
# `runbook.kinds.STEP_KINDS`, not an enum here, so a new kind is one module and one line there.
StepKind = NewType("StepKind", str)


class Phase(StrEnum):
    main = "main"
    rollback = "rollback"


class OnFailureMode(StrEnum):
    abort = "abort"  # stop; later steps do not run; nothing is rolled back
    continue_ = "continue"  # record the failure and go on; the run still fails
    rollback = "rollback"  # stop, then run rollback steps


@dataclass(frozen=True)
class OnFailure:
    mode: OnFailureMode = OnFailureMode.abort
    # Named rollback steps to run; empty with mode rollback means "undo what was done".
    targets: tuple[str, ...] = ()


class ToleranceKind(StrEnum):
    equals = "equals"
    range = "range"
    one_of = "one_of"
    regex = "regex"


@dataclass(frozen=True)
class Tolerance:
    kind: ToleranceKind
    # equals: the value; range: (min, max) with None for an open end; one_of: a list;
    # regex: the pattern. Any of them may still hold templates until the step renders.
    expected: Any


@dataclass(frozen=True)
class CheckSpec:
    value: Any
    tolerance: Tolerance
    # A read-only action that fetches the value afresh on every attempt (so a retried check
    # can wait for a condition, and `plan` can still evaluate it).
    probe: str | None = None
    probe_params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OutputSpec:
    name: str
    template: Any
    secret: bool = False


@dataclass(frozen=True)
class Step:
    name: str
    kind: StepKind
    phase: Phase
    line: int
    description: str = ""
    action: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    # `process: child`: the action runs in a child process of its own (runbook/child.py), so
    # a drill's fault can kill it and the runbook's resume run it again.
    in_child: bool = False
    command: str | None = None
    env: Mapping[str, Any] = field(default_factory=dict)
    cwd: Any = None
    check: CheckSpec | None = None
    prompt: str | None = None
    pause: Any = None
    fault: Any = None  # a `fault:` step's spec (runbook/kinds/fault.py)
    timeout_s: float | None = None
    retry: RetryPolicy = NO_RETRY
    until: str | None = None
    when: str | None = None
    on_failure: OnFailure = OnFailure()
    undo: tuple[str, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    # The step's YAML mapping with line numbers, for validation messages.
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.outputs)


@dataclass(frozen=True)
class Input:
    name: str
    line: int
    default: Any = None
    has_default: bool = False
    secret: bool = False
    description: str = ""


@dataclass(frozen=True)
class Runbook:
    path: Path
    source: str
    name: str
    description: str
    inputs: Mapping[str, Input]
    steps: tuple[Step, ...]
    rollback: tuple[Step, ...]
    # Set by validation: templates mention `config`, or an action needs the configuration.
    uses_config: bool = False
    # Set by validation: what runs but is spelt the old way ("file:line: step 'x': ...").
    warnings: tuple[str, ...] = ()

    def step(self, name: str) -> Step | None:
        for step in (*self.steps, *self.rollback):
            if step.name == name:
                return step
        return None

    def rollback_step(self, name: str) -> Step | None:
        for step in self.rollback:
            if step.name == name:
                return step
        return None

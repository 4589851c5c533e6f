"""`fault:` steps: faults at seeded random moments within a window of the steps that follow.

    - name: faults
      fault:
        count: 4                         # how many faults (a template: "{{ vars.faults }}")
        seed: 7                          # the same seed, the same faults
        window:                          # steps after this one where a fault may land
          - failover
          - {step: failback, within: [1s, 60s]}          # seconds into the step (drawn)
          - {step: return_to_protection, targets: [secondary, step]}
        targets: [primary, secondary, connect, spark-connect, step]   # default: all there are
        signals: [kill, stop, term]      # default: all three
        within: [1s, 20s]                # default for the window's steps
        stop_for: [1s, 4s]               # how long a stop holds before SIGCONT
        restart_after: 1s                # a killed server is started again after this
        lab: "{{ vars.lab_dir }}"        # the lab whose processes are targets, or:
        commands:                        # targets on clusters that are not the lab
          broker-b1:
            kill: ssh b1 sudo systemctl kill -s KILL kafka
            term: ssh b1 sudo systemctl stop kafka
            stop: ssh b1 sudo systemctl kill -s STOP kafka
            cont: ssh b1 sudo systemctl kill -s CONT kafka
            heal: ssh b1 sudo systemctl start kafka && ssh b1 /opt/kafka-ready.sh
            running: ssh b1 systemctl is-active kafka    # optional

The target `step` is the drctl step that runs then; only steps with `process: child` can be
faulted that way. A plan shows the faults without arming them. What the faults do, and how
they are healed, is in runbook/faults.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from drctl.errors import DrctlError
from drctl.runbook.faults import (
    STEP_TARGET,
    CommandTarget,
    FaultSignal,
    FaultSpec,
    PlannedFault,
    Target,
    WindowEntry,
    lab_targets,
    plan_faults,
)
from drctl.runbook.kinds.interface import (
    NotRetried,
    StepKindDefinition,
    StepParser,
    StepRunner,
    StepValidator,
)
from drctl.runbook.model import Phase, Step, StepKind
from drctl.runbook.result import Status, StepResult
from drctl.runbook.templating import is_template, plain
from drctl.runbook.yaml_lines import LineDict, line_of
from drctl.suggest import did_you_mean_aside
from drctl.timeparse import parse_duration

_KEYS = ("count", "seed", "window", "targets", "signals", "within", "stop_for",
         "restart_after", "lab", "commands")
_ENTRY_KEYS = ("step", "targets", "within")
_DEFAULT_WITHIN = ("1s", "20s")
_DEFAULT_STOP_FOR = ("1s", "4s")


class FaultStep(StepKindDefinition):
    kind = StepKind("fault")
    plans_itself = True

    def parse(self, step: Step, raw: LineDict, at: Callable[[str], int],
              parser: StepParser) -> Step:
        spec = raw["fault"]
        line = at("fault")
        if not isinstance(spec, Mapping):
            parser.issue(line, step.name, "fault: a mapping with 'count', 'seed' and 'window'")
            return step
        for key in spec:
            if key not in _KEYS:
                parser.issue(line_of(spec, key, line), step.name, f"fault: unknown key '{key}'"
                             f"{did_you_mean_aside(str(key), _KEYS)}")
        for key in ("count", "window"):
            if key not in spec:
                parser.issue(line, step.name, f"fault: '{key}' is missing")
        window = spec.get("window")
        if "window" in spec and (not isinstance(window, list) or not window):
            parser.issue(line_of(spec, "window", line), step.name,
                         "fault.window: a list of the later steps where faults may land")
        for entry in window if isinstance(window, list) else []:
            if isinstance(entry, Mapping):
                for key in entry:
                    if key not in _ENTRY_KEYS:
                        parser.issue(line_of(spec, "window", line), step.name,
                                     f"fault.window: unknown key '{key}'"
                                     f"{did_you_mean_aside(str(key), _ENTRY_KEYS)}")
                if not isinstance(entry.get("step"), str):
                    parser.issue(line_of(spec, "window", line), step.name,
                                 "fault.window: an entry names its 'step'")
            elif not isinstance(entry, str):
                parser.issue(line_of(spec, "window", line), step.name,
                             "fault.window: a step name, or {step, targets, within}")
        for signal in spec.get("signals") or []:
            if not is_template(signal) and signal not in set(FaultSignal):
                parser.issue(line_of(spec, "signals", line), step.name,
                             f"fault.signals: '{signal}' is not one of "
                             f"{', '.join(FaultSignal)}")
        for key in ("within", "stop_for"):
            def issue(message: str, key: str = key) -> None:
                parser.issue(line_of(spec, key, line), step.name, f"fault.{key}: {message}")
            _durations(spec.get(key), issue)
        commands = spec.get("commands") or {}
        if not is_template(commands) and not isinstance(commands, Mapping) or \
                isinstance(commands, Mapping) and not all(
                isinstance(c, Mapping) and set(c) <= set(CommandTarget.KEYS)
                for c in commands.values()):
            parser.issue(line_of(spec, "commands", line), step.name,
                         "fault.commands: per target a mapping of "
                         f"{', '.join(CommandTarget.KEYS)}")
        return replace(step, fault=spec)

    def validate(self, step: Step, validator: StepValidator) -> None:
        if step.phase == Phase.rollback:
            validator.issue(step.line, step.name, "a rollback step cannot be a fault step")
            return
        spec = step.fault if isinstance(step.fault, Mapping) else {}
        later = {s.name for s in validator.steps_after(step)}
        for entry in spec.get("window") or []:
            name = entry.get("step") if isinstance(entry, Mapping) else entry
            if isinstance(name, str) and not is_template(name) and name not in later:
                validator.issue(line_of(step.raw.get("fault", {}), "window", step.line),
                                step.name, f"fault.window: '{name}' is not a step after this "
                                "one" + did_you_mean_aside(name, sorted(later)))

    def describe(self, step: Step) -> str:
        return "fault injection"

    def inputs(self, step: Step, runner: StepRunner) -> tuple[dict[str, Any], bool]:
        rendered, deferred = runner.render(plain(step.fault))
        return dict(rendered), deferred

    def run(self, step: Step, result: StepResult, inputs: dict[str, Any], deferred: bool,
            runner: StepRunner) -> None:
        result.attempts = 1
        if deferred:
            result.status = Status.deferred
            result.detail = "depends on outputs of steps that do not run in a plan"
            return
        try:
            spec, targets = self._prepare(step, inputs, runner)
        except (DrctlError, ValueError) as exc:
            raise NotRetried(f"fault: {getattr(exc, 'message', exc)}",
                             getattr(exc, "hint", None)) from exc
        planned = plan_faults(spec, step.name, lambda t, s: targets[t].supports(s))
        result.faults = [f.as_dict() for f in planned]
        result.detail = (f"{len(planned)} fault(s): " + "; ".join(
            f"{f.signal.value} {f.target} in {f.moments[0][0]} at {f.moments[0][1]:.1f} s"
            for f in planned)) if planned else "no fault"
        if not runner.options.dry_run:
            runner.faults.arm(planned, targets, spec.restart_after)
            result.detail = "armed " + result.detail
        runner.outputs(step, result, {"result": {"faults": result.faults,
                                                 "count": len(planned)}})

    def resumed(self, step: Step, record: Mapping[str, Any], runner: StepRunner,
                done_steps: frozenset[str], landed: frozenset[str]) -> None:
        """A resumed run arms again the faults an earlier run armed and did not land."""
        planned = [PlannedFault.from_dict(f) for f in record.get("faults") or []]
        planned = [f for f in planned if f.id not in landed]
        if not planned:
            return
        try:
            spec, targets = self._prepare(step, record.get("inputs") or {}, runner)
        except (DrctlError, ValueError) as exc:
            raise NotRetried(f"fault: {getattr(exc, 'message', exc)}",
                             getattr(exc, "hint", None)) from exc
        runner.faults.arm(planned, targets, spec.restart_after, done_steps)

    def _prepare(self, step: Step, inputs: Mapping[str, Any], runner: StepRunner
                 ) -> tuple[FaultSpec, dict[str, Target]]:
        children = {s.name for s in runner.runbook.steps if s.in_child}
        available: dict[str, Target] = {}
        lab = inputs.get("lab")
        commands = inputs.get("commands") or {}
        if not isinstance(commands, Mapping) or not all(isinstance(c, Mapping)
                                                        for c in commands.values()):
            raise ValueError("commands: per target a mapping of "
                             f"{', '.join(CommandTarget.KEYS)}")
        wanted = inputs.get("targets")
        if lab:
            available.update(lab_targets(Path(str(lab)), wanted))
        for name, cmds in commands.items():
            available[str(name)] = CommandTarget(str(name), {k: str(v) for k, v in cmds.items()})
        targets = [str(t) for t in wanted] if wanted is not None \
            else [*available, STEP_TARGET]
        unknown = [t for t in targets if t != STEP_TARGET and t not in available]
        if unknown:
            raise ValueError(f"no target named {', '.join(unknown)} (there are: "
                             f"{', '.join([*available, STEP_TARGET])}; lab targets need "
                             "'lab:', others 'commands:')")
        within = _range(inputs.get("within"), _DEFAULT_WITHIN)
        window = []
        for entry in inputs.get("window") or []:
            entry = {"step": entry} if isinstance(entry, str) else dict(entry)
            name = str(entry["step"])
            allowed = [str(t) for t in entry.get("targets") or targets if t in targets]
            if name not in children:
                allowed = [t for t in allowed if t != STEP_TARGET]
            window.append(WindowEntry(name, tuple(allowed),
                                      _durations(entry.get("within"), _raise) or within))
        signals = tuple(FaultSignal(str(s)) for s in inputs.get("signals") or FaultSignal)
        count = int(inputs.get("count") or 0)
        if count < 0:
            raise ValueError(f"count must be 0 or more, got {count}")
        spec = FaultSpec(count=count, seed=str(inputs.get("seed", "")), window=tuple(window),
                         targets=tuple(targets), signals=signals,
                         stop_for=_range(inputs.get("stop_for"), _DEFAULT_STOP_FOR),
                         restart_after=parse_duration(inputs.get("restart_after", "1s")))
        return spec, {**available, STEP_TARGET: _STEP_PLACEHOLDER}


class _AnyStep:
    """The planner's view of the `step` target: it takes every signal."""

    name = STEP_TARGET

    def supports(self, sig: FaultSignal) -> bool:
        return True


_STEP_PLACEHOLDER: Any = _AnyStep()


def _raise(message: str) -> None:
    raise ValueError(message)


def _durations(value: Any, issue: Callable[[str], None]) -> tuple[float, float] | None:
    """A range of durations [low, high] (or one duration: exactly that); None when absent
    (or a template a parse cannot read yet)."""
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    if any(is_template(v) for v in items):
        return None
    try:
        seconds = [parse_duration(v) for v in items]
    except ValueError as exc:
        issue(str(exc))
        return None
    if len(seconds) not in (1, 2) or seconds[0] > seconds[-1]:
        issue("give a duration or [low, high]")
        return None
    return seconds[0], seconds[-1]


def _range(value: Any, default: tuple[str, str]) -> tuple[float, float]:
    found = _durations(value if value is not None else list(default), _raise)
    assert found is not None
    return found

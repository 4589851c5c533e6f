"""Runs a validated runbook step by step, or plans it (dry run).

Per step: evaluate `when`; ask the step's kind (`runbook/kinds/`) for its inputs, rendered with
the variables, the configuration and earlier outputs, and to run it with retries (drctl's one
RetryPolicy); derive named outputs; journal start and end.
A failure aborts (default), continues, or rolls back; the run's status maps to the exit
statuses of the design: 0 succeeded or planned, 1 a step failed, 3 a check did not hold, 5 an
approval was missing or declined, 130 interrupted.
"""

from __future__ import annotations

import getpass
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from drctl import __version__
from drctl.config import Config, config_context
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call
from drctl.runbook.actions import ActionContext, Registry
from drctl.runbook.faults import FaultInjector
from drctl.runbook.journal import (
    JOURNAL_VERSION,
    Journal,
    JournalState,
    check_resumable,
    now_iso,
    run_digest,
    source_digest,
)
from drctl.runbook.kinds import STEP_KINDS
from drctl.runbook.kinds.interface import AttemptFailed, NotRetried
from drctl.runbook.model import NO_RETRY, OnFailureMode, Phase, Runbook, Step
from drctl.runbook.options import RunOptions
from drctl.runbook.result import EXIT_STATUS, FAILED, RunResult, RunStatus, Status, StepResult
from drctl.runbook.templating import NotRun, Renderer, RenderError
from drctl.runbook.values import is_truthy
from drctl.runbook.variables import Variables
from drctl.secrets import Redactor


class RunObserver:
    """Progress callbacks; the CLI prints them, tests may record them."""

    def step_started(self, step: Step) -> None:
        pass

    def step_retrying(self, step: Step, attempt: int, error: str, delay_s: float) -> None:
        pass

    def step_finished(self, result: StepResult) -> None:
        pass

    def message(self, text: str) -> None:
        pass


class _Interrupted(BaseException):
    def __init__(self, result: StepResult) -> None:
        super().__init__("interrupted")
        self.result = result


class Executor:
    def __init__(self, runbook: Runbook, variables: Variables, registry: Registry, *,
                 options: RunOptions | None = None, journal: Journal | None = None,
                 config: Config | None = None, observer: RunObserver | None = None,
                 redactor: Redactor | None = None) -> None:
        self.runbook = runbook
        self.variables = variables
        self.registry = registry
        self.options = options or RunOptions()
        self.journal = journal
        self.config = config
        self.observer = observer or RunObserver()
        self.redactor = redactor or variables.redactor
        self.config_data = config_context(config) if config is not None else None
        self.digest = run_digest(runbook.source, variables.as_given,
                                 self.config_data if runbook.uses_config else None)
        self.renderer = Renderer(plan=self.options.dry_run)
        self.run_id = uuid.uuid4().hex[:12]
        self.steps_ctx: dict[str, Any] = {}
        self.started = now_iso()
        self.faults = FaultInjector(record=self._fault_record, notify=self.observer.message,
                                    where=self._where)
        # The faults of this journal by id: landed or missed, and how each was healed.
        self._faults_seen: dict[str, dict[str, Any]] = {}
        self._current: str | None = None

    # -- context --------------------------------------------------------------------------

    def context(self, **extra: Any) -> dict[str, Any]:
        ctx: dict[str, Any] = {
            "vars": self.variables.values, "steps": self.steps_ctx,
            "run": {"id": self.run_id, "dry_run": self.options.dry_run,
                    "runbook": self.runbook.name, "started": self.started},
        }
        if self.config_data is not None:
            ctx["config"] = self.config_data
        ctx.update(extra)
        return ctx

    def render(self, value: Any, **extra: Any) -> tuple[Any, bool]:
        return self.renderer.render(value, self.context(**extra))

    def action_context(self) -> ActionContext:
        config = self.config
        step = self._current

        def notify(text: str) -> None:
            if step is not None:
                self.faults.progress(step, text)  # where a fault lands, for its record
            self.observer.message(text)

        return ActionContext(config_loader=(lambda: config) if config is not None else None,
                             notify=notify, redactor=self.redactor)

    def child_process(self, step: Step, pid: int | None) -> None:
        self.faults.child(step.name, pid)

    def _fault_record(self, record: Mapping[str, Any]) -> None:
        self._write(record)
        fault = str(record["fault"])
        if record["type"] == "fault":
            self._faults_seen[fault] = dict(record)
        elif fault in self._faults_seen:
            self._faults_seen[fault]["healed"] = dict(record)

    def _where(self) -> dict[str, Any]:
        """Where the operation a fault landed in stood: its failover marker's last step and
        running phase (the local copy), when the run has a configuration."""
        if self.config is None:
            return {}
        from drctl.ops.one_way.phases import where_now

        return where_now(self.config.state.dir)

    def _remember(self, result: StepResult) -> None:
        if self.options.dry_run and result.status not in (Status.ok, Status.skipped):
            self.steps_ctx[result.name] = NotRun(result.name, result.status.value)
        else:
            self.steps_ctx[result.name] = {"status": result.status.value,
                                           "outputs": dict(result.outputs)}

    def _write(self, record: Mapping[str, Any]) -> None:
        if self.journal is not None:
            self.journal.write(record)

    # -- the run --------------------------------------------------------------------------

    def run(self, resume: JournalState | None = None) -> RunResult:
        if resume is not None:
            check_resumable(resume, runbook_path=self.runbook.path, source=self.runbook.source,
                            digest=self.digest,
                            variables=self.redactor.redact_data(self.variables.as_given),
                            steps=[s.name for s in self.runbook.steps])
            self.run_id = str(resume.header.get("run_id", self.run_id))
            self._faults_seen = {k: dict(v) for k, v in resume.faults.items()}
        t0 = time.monotonic()
        results: list[StepResult] = []
        stop: StepResult | None = None
        rollback: list[str] = []
        interrupted = False
        try:
            self._start_record(resume)
            for step in self.runbook.steps:
                if resume is not None and step.name in resume.completed:
                    record = resume.completed[step.name]
                    restored = self._restored(step, record)
                    results.append(restored)
                    self._remember(restored)
                    if not self.options.dry_run:
                        STEP_KINDS[step.kind].resumed(step, record, self,
                                                      frozenset(resume.completed),
                                                      frozenset(resume.faults))
                    continue
                if stop is not None:
                    results.append(StepResult(step.name, step.phase, step.kind, Status.not_run,
                                              step.description))
                    continue
                result = self._run_step(step)
                results.append(result)
                if result.status not in FAILED or self.options.dry_run:
                    continue
                if result.status in (Status.approval_missing, Status.declined):
                    stop = result
                elif step.on_failure.mode != OnFailureMode.continue_:
                    stop = result
                    if step.on_failure.mode == OnFailureMode.rollback:
                        rollback = list(step.on_failure.targets) or self._undo_chain(results)
            if self.options.dry_run:
                for step in self.runbook.rollback:
                    results.append(self._plan_rollback(step))
            elif rollback:
                self.observer.message(f"Rolling back: {', '.join(rollback)}")
                for name in rollback:
                    undo = self.runbook.rollback_step(name)
                    assert undo is not None  # the loader checked every name
                    result = self._run_step(undo)
                    results.append(result)
                    if result.status in FAILED and \
                            undo.on_failure.mode != OnFailureMode.continue_:
                        break
        except _Interrupted as exc:
            interrupted = True
            results.append(exc.result)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            self.faults.close()
        if interrupted:
            done = {r.name for r in results}
            results.extend(StepResult(s.name, s.phase, s.kind, Status.not_run, s.description)
                           for s in self.runbook.steps if s.name not in done)
        status, reason, hint = self._verdict(results, stop, interrupted)
        ended = now_iso()
        self._write({"type": "run-end", "status": status.value,
                     "exit_status": int(EXIT_STATUS[status]), "reason": reason})
        return RunResult(self.runbook, self.run_id, self.options.dry_run, status,
                         self.started, ended, time.monotonic() - t0, results,
                         dict(self.variables.values),
                         journal=str(self.journal.path) if self.journal else None,
                         reason=reason, hint=hint, resumed=resume is not None,
                         faults=list(self._faults_seen.values()))

    def _start_record(self, resume: JournalState | None) -> None:
        if resume is not None:
            pending = [s.name for s in self.runbook.steps if s.name not in resume.completed]
            self._write({"type": "resume", "run_id": self.run_id,
                         "from_step": pending[0] if pending else None, "pid": os.getpid(),
                         "user": getpass.getuser()})
            return
        self._write({
            "type": "run", "version": JOURNAL_VERSION, "run_id": self.run_id,
            "runbook": str(self.runbook.path), "name": self.runbook.name,
            "source_digest": source_digest(self.runbook.source), "digest": self.digest,
            "dry_run": self.options.dry_run, "vars": self.variables.values,
            "vars_as_given": self.variables.as_given,
            "steps": [s.name for s in self.runbook.steps], "user": getpass.getuser(),
            "host": socket.gethostname(), "pid": os.getpid(), "drctl": __version__,
        })

    def _restored(self, step: Step, record: Mapping[str, Any]) -> StepResult:
        return StepResult(step.name, step.phase, step.kind, Status(record["status"]),
                          step.description, started=record.get("started"),
                          ended=record.get("time"), duration_s=record.get("duration_s", 0.0),
                          attempts=record.get("attempts", 0),
                          inputs=record.get("inputs") or {},
                          outputs=record.get("outputs") or {}, error=record.get("error"),
                          detail="completed by an earlier run of this journal",
                          approved_by=record.get("approved_by"), resumed=True, completed=True,
                          scorecard=record.get("scorecard"), faults=record.get("faults"))

    def _undo_chain(self, results: list[StepResult]) -> list[str]:
        """Undo steps of what was attempted, newest first (the failing step included: it may
        have done part of its work)."""
        names: list[str] = []
        for result in reversed(results):
            if result.status in (Status.skipped, Status.not_run):
                continue
            step = self.runbook.step(result.name)
            for name in step.undo if step else ():
                if name not in names:
                    names.append(name)
        return names

    def _verdict(self, results: list[StepResult], stop: StepResult | None,
                 interrupted: bool) -> tuple[RunStatus, str | None, str | None]:
        resume_hint = (f"Fix the cause, then continue with `drctl runbook run "
                       f"{self.runbook.path} --resume {self.journal.path}` (same --var values)."
                       if self.journal is not None and not self.options.dry_run else None)
        if interrupted:
            return RunStatus.interrupted, "interrupted", resume_hint
        rolled_back = any(r.phase == Phase.rollback and r.status != Status.planned
                          for r in results)
        if rolled_back:
            resume_hint = "The run was rolled back; start a new run when the cause is fixed."
        if stop is not None:
            reason = f"step '{stop.name}' {stop.status.value}: {stop.error}"
            if stop.status in (Status.approval_missing, Status.declined):
                return RunStatus.aborted, reason, stop.hint
            if stop.status == Status.check_failed:
                return RunStatus.check_failed, reason, resume_hint
            if stop.status == Status.unreachable:
                return RunStatus.unreachable, reason, stop.hint or resume_hint
            return RunStatus.failed, reason, stop.hint or resume_hint
        failed = [r for r in results if r.status == Status.failed]
        unknown = [r for r in results if r.status == Status.unreachable]
        checks = [r for r in results if r.status == Status.check_failed]
        if failed:
            return RunStatus.failed, (f"{len(failed)} step(s) failed: "
                                      + ", ".join(r.name for r in failed)), None
        if unknown:  # a check that could not look is unknown, whatever the others found
            return RunStatus.unreachable, (f"{len(unknown)} step(s) could not reach a cluster: "
                                           + ", ".join(r.name for r in unknown)), None
        if checks:
            return RunStatus.check_failed, (f"{len(checks)} check(s) did not hold: "
                                            + ", ".join(r.name for r in checks)), None
        return (RunStatus.planned if self.options.dry_run else RunStatus.succeeded), None, None

    # -- one step -------------------------------------------------------------------------

    def _run_step(self, step: Step) -> StepResult:
        result = StepResult(step.name, step.phase, step.kind, Status.ok, step.description,
                            started=now_iso())
        t0 = time.monotonic()
        self.observer.step_started(step)
        self._current = step.name
        self.faults.step_started(step.name)
        try:
            try:
                self._execute(step, result)
            except RenderError as exc:
                result.status, result.error = Status.failed, f"cannot render: {exc}"
            except NotRetried as exc:
                result.status, result.error, result.hint = Status.failed, exc.message, exc.hint
        except KeyboardInterrupt:
            result.status, result.error = Status.interrupted, "interrupted"
            self._finish(step, result, t0)
            raise _Interrupted(result) from None
        self._finish(step, result, t0)
        return result

    def _finish(self, step: Step, result: StepResult, t0: float) -> None:
        result.ended = now_iso()
        result.duration_s = time.monotonic() - t0
        result.completed = result.status in (Status.ok, Status.skipped) or (
            result.status in (Status.failed, Status.check_failed, Status.unreachable)
            and step.on_failure.mode == OnFailureMode.continue_)
        self._write({"type": "step-end", "step": step.name, "phase": step.phase.value,
                     "status": result.status.value, "completed": result.completed,
                     "started": result.started, "duration_s": round(result.duration_s, 3),
                     "attempts": result.attempts, "inputs": result.inputs,
                     "outputs": result.outputs, "error": result.error, "detail": result.detail,
                     "approved_by": result.approved_by, "scorecard": result.scorecard,
                     "faults": result.faults})
        self._current = None
        # What the step's faults broke is back before anything else runs.
        self.faults.step_ended(step.name, result.completed)
        self._remember(result)
        self.observer.step_finished(result)

    def _execute(self, step: Step, result: StepResult) -> None:
        if step.when is not None:
            condition, deferred = self.render(step.when)
            if deferred:
                result.detail = f"runs only if {step.when.strip()}"
            elif not is_truthy(condition):
                result.status = Status.skipped
                result.detail = f"skipped: {step.when.strip()} is false"
                return
        kind = STEP_KINDS[step.kind]
        inputs, deferred = kind.inputs(step, self)
        result.inputs = inputs
        self._write({"type": "step-start", "step": step.name, "phase": step.phase.value,
                     "kind": step.kind, "inputs": inputs})
        if self.options.dry_run and not kind.plans_itself:
            result.status = Status.planned
            result.detail = result.detail or "not run in a plan"
            return
        kind.run(step, result, inputs, deferred, self)

    # -- what step kinds use (kinds.interface.StepRunner) ----------------------------------

    def attempts(self, step: Step, result: StepResult, attempt: Callable[[], Any]) -> Any:
        policy: RetryPolicy = (NO_RETRY if self.options.dry_run
                               else step.retry.scaled(self.options.time_scale))

        def counted() -> Any:
            result.attempts += 1
            return attempt()

        def on_retry(number: int, exc: BaseException, delay: float) -> None:
            message = self.redactor.redact(str(exc))
            self._write({"type": "attempt-failed", "step": step.name, "attempt": number,
                         "error": message, "retry_in_s": round(delay, 3)})
            self.observer.step_retrying(step, number, message, delay)

        try:
            return retry_call(counted, policy, retry_on=(AttemptFailed,), on_retry=on_retry,
                              sleep=self.options.sleep)
        except RetriesExhausted as exc:
            last = exc.last
            assert isinstance(last, AttemptFailed)
            result.status = (Status.unreachable if last.unreachable else
                             Status.check_failed if last.check else Status.failed)
            result.error = last.message + (f" (after {exc.attempts} attempts)"
                                           if exc.attempts > 1 else "")
            result.hint = last.hint
            return None

    def until(self, step: Step, outcome: Any) -> Any:
        if step.until is None:
            return outcome
        value, _ = self.render(step.until, result=outcome)
        if not is_truthy(value):
            raise AttemptFailed(f"condition not met yet: {step.until.strip()}")
        return outcome

    def outputs(self, step: Step, result: StepResult, extra: Mapping[str, Any]) -> None:
        ctx = self.context(**extra)
        for spec in step.outputs:
            try:
                value, _ = self.renderer.render(spec.template, ctx)
            except RenderError as exc:
                result.status = Status.failed
                result.error = f"output '{spec.name}': {exc}"
                return
            if spec.secret and value is not None:
                self.redactor.add(str(value))
            result.outputs[spec.name] = value

    def _plan_rollback(self, step: Step) -> StepResult:
        result = StepResult(step.name, step.phase, step.kind, Status.planned, step.description,
                            detail="runs only when a failure triggers a rollback")
        try:
            result.inputs, _ = STEP_KINDS[step.kind].inputs(step, self)
        except (RenderError, NotRetried) as exc:
            result.status, result.error = Status.failed, f"cannot render: {exc}"
        return result

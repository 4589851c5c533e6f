"""What a run produced: each step's status, inputs, outputs and timing, and the run's verdict.

`RunResult.as_dict` is the shape reports, JUnit and `--output json` share; `EXIT_STATUS` maps a
run's verdict to the process's exit status. An action whose result carries a `scorecard`
(failover, failback, reprotect: ops/one_way/scorecard.py) hands it to its step, and the run's
scorecard gathers them: RTO by phase and the RPO measured, against the objectives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from drctl.errors import ExitStatus
from drctl.runbook.model import Phase, Runbook, StepKind
from drctl.runbook.templating import plain
from drctl.secrets import Redactor


class Status(StrEnum):
    ok = "ok"
    failed = "failed"
    check_failed = "check-failed"
    # A cluster or service did not answer (an action's Unreachable, or a check whose probe
    # could not reach one): unknown, never "did not hold".
    unreachable = "unreachable"
    skipped = "skipped"  # `when` was false
    not_run = "not-run"  # an earlier step ended the run
    planned = "planned"  # a plan shows it without running it
    deferred = "deferred"  # a plan cannot evaluate it: it needs outputs of unrun steps
    approval_missing = "approval-missing"
    declined = "declined"
    interrupted = "interrupted"


FAILED = frozenset({Status.failed, Status.check_failed, Status.unreachable,
                    Status.approval_missing, Status.declined, Status.interrupted})


class RunStatus(StrEnum):
    succeeded = "succeeded"
    planned = "planned"
    failed = "failed"
    check_failed = "check-failed"
    unreachable = "unreachable"
    aborted = "aborted"
    interrupted = "interrupted"


EXIT_STATUS = {
    RunStatus.succeeded: ExitStatus.SUCCESS,
    RunStatus.planned: ExitStatus.SUCCESS,
    RunStatus.failed: ExitStatus.FAILURE,
    RunStatus.check_failed: ExitStatus.CHECK_FAILED,
    RunStatus.unreachable: ExitStatus.UNREACHABLE,
    RunStatus.aborted: ExitStatus.ABORTED,
    RunStatus.interrupted: ExitStatus.INTERRUPTED,
}


@dataclass
class StepResult:
    name: str
    phase: Phase
    kind: StepKind
    status: Status
    description: str = ""
    started: str | None = None
    ended: str | None = None
    duration_s: float = 0.0
    attempts: int = 0
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    hint: str | None = None
    detail: str | None = None
    approved_by: str | None = None
    resumed: bool = False  # completed by an earlier run of the same journal
    completed: bool = False  # the run moved past it (a resume does not run it again)
    # What its action measured against the objectives (ops/one_way/scorecard.py), when it did.
    scorecard: dict[str, Any] | None = None
    # A `fault:` step's planned faults (runbook/faults.py PlannedFault.as_dict).
    faults: list[dict[str, Any]] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "phase": self.phase.value, "kind": self.kind,
            "status": self.status.value, "description": self.description,
            "started": self.started, "ended": self.ended,
            "duration_s": round(self.duration_s, 3), "attempts": self.attempts,
            "inputs": plain(self.inputs), "outputs": plain(self.outputs), "error": self.error,
            "hint": self.hint, "detail": self.detail, "approved_by": self.approved_by,
            "resumed": self.resumed, "scorecard": self.scorecard, "faults": self.faults,
        }


@dataclass
class RunResult:
    runbook: Runbook
    run_id: str
    dry_run: bool
    status: RunStatus
    started: str
    ended: str
    duration_s: float
    steps: list[StepResult]
    variables: dict[str, Any]
    journal: str | None = None
    reason: str | None = None
    hint: str | None = None
    resumed: bool = False
    # The faults of the run's `fault:` steps, landed or missed, with how each was healed
    # (runbook/faults.py), earlier runs of the journal included.
    faults: list[dict[str, Any]] = field(default_factory=list)

    @property
    def exit_status(self) -> ExitStatus:
        return EXIT_STATUS[self.status]

    def as_dict(self, redactor: Redactor) -> dict[str, Any]:
        """Everything a report shows, secrets masked."""
        counts: dict[str, int] = {}
        for step in self.steps:
            counts[step.status.value] = counts.get(step.status.value, 0) + 1
        data = {
            "runbook": {"name": self.runbook.name, "path": str(self.runbook.path),
                        "description": self.runbook.description},
            "run_id": self.run_id, "dry_run": self.dry_run, "status": self.status.value,
            "exit_status": int(self.exit_status), "reason": self.reason, "hint": self.hint,
            "started": self.started, "ended": self.ended,
            "duration_s": round(self.duration_s, 3), "journal": self.journal,
            "resumed": self.resumed, "vars": self.variables, "counts": counts,
            "steps": [s.as_dict() for s in self.steps],
            "scorecard": run_scorecard(self.steps),
            "faults": self.faults,
        }
        redacted: dict[str, Any] = redactor.plain_data(plain(data))
        return redacted


def scorecard_of(outcome: Any) -> dict[str, Any] | None:
    """The scorecard an action's result carries (under `scorecard`), if any."""
    if isinstance(outcome, Mapping) and isinstance(outcome.get("scorecard"), Mapping):
        return dict(outcome["scorecard"])
    return None


def run_scorecard(steps: Sequence[StepResult]) -> dict[str, Any] | None:
    """The run's scorecard: each step's (its operation's timing by phase and RPO), and every
    objective judged, named by step; None when no step measured anything."""
    operations = [{"step": s.name, **s.scorecard} for s in steps if s.scorecard]
    if not operations:
        return None
    return {"operations": operations,
            "objectives": [{"step": op["step"], "operation": op["operation"], **o}
                           for op in operations for o in op.get("objectives", [])]}

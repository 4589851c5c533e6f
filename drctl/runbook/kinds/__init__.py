"""Step kinds: one module per kind, each with its keys, parsing, validation, inputs and run.

The loader asks a step's kind to parse and validate it; the executor asks it for the step's
inputs and to run it. To add a kind (say `http:`), write `kinds/http.py` with a
`StepKindDefinition` subclass (`kind = StepKind("http")`) and register it below with one line.
The order here is the order messages list the kinds in.
"""

from __future__ import annotations

from drctl.runbook.kinds.action import ActionStep
from drctl.runbook.kinds.approval import ApprovalStep
from drctl.runbook.kinds.check import CheckStep
from drctl.runbook.kinds.fault import FaultStep
from drctl.runbook.kinds.interface import StepKindDefinition
from drctl.runbook.kinds.pause import PauseStep
from drctl.runbook.kinds.shell import ShellStep
from drctl.runbook.model import StepKind

STEP_KINDS: dict[StepKind, StepKindDefinition] = {
    kind.kind: kind
    for kind in (
        ActionStep(),
        ShellStep(),
        CheckStep(),
        ApprovalStep(),
        PauseStep(),
        FaultStep(),
    )
}

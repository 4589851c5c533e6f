"""How a run behaves: plan or run, approvals, waits. The CLI fills it in; step kinds read it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class RunOptions:
    dry_run: bool = False
    assume_yes: bool = False
    # Asks the operator; None means never prompt (CI, no TTY, --non-interactive).
    prompt: Callable[[str], bool] | None = None
    # Multiplies waits (pauses and retry delays), never timeouts: tests run drills fast.
    time_scale: float = 1.0
    kill_grace_s: float = 2.0
    sleep: Callable[[float], None] = time.sleep

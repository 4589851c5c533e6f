"""Crash injection for drills and tests: `DRCTL_CRASH_AT=<step>` SIGKILLs drctl right after
that step was recorded, the way a lost machine would. Proves that re-runs finish the job."""

from __future__ import annotations

import os
import signal


def crash_point(step: str) -> None:
    if os.environ.get("DRCTL_CRASH_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)

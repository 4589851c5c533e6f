"""Fault injection for drills and tests, right after a step was recorded:
`DRCTL_CRASH_AT=<step>` SIGKILLs drctl there, the way a lost machine would (proves that re-runs
finish the job); `DRCTL_PAUSE_AT=<step>` stops it there (SIGSTOP) until it is continued
(SIGCONT), so that a drill can make a cluster fail at that exact point of the procedure."""

from __future__ import annotations

import os
import signal


def crash_point(step: str) -> None:
    if os.environ.get("DRCTL_CRASH_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("DRCTL_PAUSE_AT") == step:
        os.kill(os.getpid(), signal.SIGSTOP)

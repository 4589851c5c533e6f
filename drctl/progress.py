"""How the core reports progress: a callback taking one line of text.

The core never prints; the CLI passes `Terminal.step`, the runbook engine its own observer,
tests a list's `append`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Notify = Callable[[str], None]


class Ticker:
    """When a long wait says where it stands: first after `first_s` (a short wait says
    nothing), then every `every_s` — a log line every ten seconds reads well in a terminal
    and in a CI log alike."""

    def __init__(self, first_s: float = 2.0, every_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._every_s = every_s
        self._next = clock() + first_s

    def due(self) -> bool:
        now = self._clock()
        if now < self._next:
            return False
        self._next = now + self._every_s
        return True

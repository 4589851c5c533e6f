"""How the core reports progress: a callback taking one line of text.

The core never prints; the CLI passes `Terminal.step`, the runbook engine its own observer,
tests a list's `append`.
"""

from __future__ import annotations

from collections.abc import Callable

Notify = Callable[[str], None]

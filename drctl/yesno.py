"""The one reading of yes/no words, for runbook parameters, tolerances and environment
variables (`CI`, `DRCTL_DEBUG`) alike."""

from __future__ import annotations

_TRUE = frozenset({"true", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "no", "n", "off", "0"})


def bool_from_text(text: str) -> bool | None:
    """`true`, `yes`, `y`, `on`, `1` (any case) → True; their opposites → False; else None."""
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    return None

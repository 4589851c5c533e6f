"""How runbook values read as booleans.

Two rules on purpose. A *yes/no* (`bool_from_text`) is strict: an action's `bool` parameter and a
tolerance comparing with `true` accept only these words. A *condition* (`is_truthy`, for
`when:` and `until:`) is lenient like Jinja: any non-empty text other than a "no" word holds.
"""

from __future__ import annotations

from typing import Any

_TRUE = frozenset({"true", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "no", "n", "off", "0"})
_FALSY_CONDITIONS = frozenset({"", "false", "no", "0", "none", "off"})


def bool_from_text(text: str) -> bool | None:
    """`true`, `yes`, `y`, `on`, `1` (any case) → True; their opposites → False; else None."""
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    return None


def is_truthy(value: Any) -> bool:
    """Whether a rendered `when:`/`until:` condition holds."""
    if isinstance(value, str):
        return value.strip().lower() not in _FALSY_CONDITIONS
    return bool(value)

"""How a runbook's `when:`/`until:` conditions read as booleans.

Two rules on purpose. A *yes/no* (`drctl.yesno.bool_from_text`) is strict: an action's `bool`
parameter and a tolerance comparing with `true` accept only those words. A *condition*
(`is_truthy`) is lenient like Jinja: any non-empty text other than a "no" word holds.
"""

from __future__ import annotations

from typing import Any

_FALSY_CONDITIONS = frozenset({"", "false", "no", "0", "none", "off"})


def is_truthy(value: Any) -> bool:
    """Whether a rendered `when:`/`until:` condition holds."""
    if isinstance(value, str):
        return value.strip().lower() not in _FALSY_CONDITIONS
    return bool(value)

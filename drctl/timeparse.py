"""Times and durations as operators write them, for every command and runbook.

Durations: a number with an optional unit, `ms`, `s`, `m`, `h`, `d` or `w` (`90s`, `1.5m`,
`500 ms`); a bare number is seconds. Times: epoch milliseconds (`1714564800000`) or ISO 8601
(`2024-05-01T12:00:00Z`, `2024-05-01`), UTC unless the text names a zone.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, NewType

from drctl.errors import UsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
            "w": 604_800_000}
# ms / 1000 gives the same floats as the literals 0.001, 1.0, 60.0, 3600.0.
_UNIT_S = {unit: ms / 1000 for unit, ms in _UNIT_MS.items()}
_EPOCH_MS = re.compile(r"-?\d+")

# Seconds written in the duration syntax: runbook action parameters typed so read "15m".
Seconds = NewType("Seconds", float)


def parse_duration(value: Any) -> float:
    """Seconds from a number (`5`, `2.5`) or a duration text (`"500ms"`, `"2m"`, `"1h"`);
    ValueError otherwise (runbook validation reports it against the YAML line)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 5s or 2m, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"a duration cannot be negative, got {value}")
        return float(value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return float(match.group(1)) * _UNIT_S[match.group(2) or "s"]
    raise ValueError(f"expected a duration such as 5s, 500ms or 2m, got {value!r}")


def format_duration(seconds: float) -> str:
    """`45s`, `12m30s`, `2h05m`: seconds as people read them."""
    whole = round(seconds)
    if whole < 60:
        return f"{seconds:g}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"


def parse_time_ms(text: str, option: str) -> int:
    """Epoch milliseconds from the time given to a command-line `option`."""
    stripped = text.strip()
    if _EPOCH_MS.fullmatch(stripped):
        return int(stripped)
    try:
        moment = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option} {stripped!r} is neither an ISO time nor epoch milliseconds.",
                         "Examples: 2024-05-01T12:00:00Z, 2024-05-01, 1714564800000.") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)

"""Tolerances: does a value hold? Pure functions, shared by runs and plans.

Comparison is lenient about representation, strict about meaning: a shell step's `"0"` equals
a tolerance's `0`, `"true"` equals `true`, but `"0.5"` is not within `[0, 0]` and a non-number
never satisfies a range.
"""

from __future__ import annotations

import math
import re
from typing import Any

from drctl.runbook.model import Tolerance, ToleranceKind
from drctl.yesno import bool_from_text


class ToleranceError(ValueError):
    """A tolerance that cannot be evaluated (a bound that is not a number, a bad regex)."""


def as_number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if not math.isnan(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return None if math.isnan(number) else number
    return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        return bool_from_text(value)
    return None


def same(value: Any, expected: Any) -> bool:
    if isinstance(expected, bool) or isinstance(value, bool):
        left, right = _as_bool(value), _as_bool(expected)
        return left is not None and left == right
    if isinstance(expected, (int, float)) or isinstance(value, (int, float)):
        if isinstance(expected, (int, float)) and isinstance(value, (int, float)):
            return bool(value == expected)
        left_n, right_n = as_number(value), as_number(expected)
        return left_n is not None and left_n == right_n
    if isinstance(expected, str) and isinstance(value, str):
        return value == expected
    return bool(value == expected)


def _bound(value: Any, which: str) -> float | None:
    if value is None:
        return None
    number = as_number(value)
    if number is None:
        raise ToleranceError(f"range {which} {value!r} is not a number")
    return number


def evaluate(tolerance: Tolerance, value: Any, expected: Any) -> tuple[bool, str]:
    """(holds, explanation); `expected` is the tolerance's rendered expectation."""
    kind = tolerance.kind
    if kind == ToleranceKind.equals:
        if same(value, expected):
            return True, f"{value!r} equals {expected!r}"
        return False, f"expected {expected!r}, got {value!r}"
    if kind == ToleranceKind.range:
        low_raw, high_raw = expected
        low, high = _bound(low_raw, "min"), _bound(high_raw, "max")
        shown = f"[{'-inf' if low is None else _num(low)}, {'inf' if high is None else _num(high)}]"
        number = as_number(value)
        if number is None:
            return False, f"{value!r} is not a number, so it is not within {shown}"
        if (low is None or number >= low) and (high is None or number <= high):
            return True, f"{_num(number)} is within {shown}"
        return False, f"{_num(number)} is not within {shown}"
    if kind == ToleranceKind.one_of:
        if not isinstance(expected, (list, tuple)):
            raise ToleranceError(f"one_of needs a list, got {expected!r}")
        if any(same(value, e) for e in expected):
            return True, f"{value!r} is one of {list(expected)!r}"
        return False, f"{value!r} is not one of {list(expected)!r}"
    try:
        pattern = re.compile(str(expected))
    except re.error as exc:
        raise ToleranceError(f"regex {expected!r} is not valid: {exc}") from exc
    if value is None:
        return False, f"no value to match against /{expected}/"
    if pattern.search(str(value)):
        return True, f"{value!r} matches /{expected}/"
    return False, f"{value!r} does not match /{expected}/"


def _num(number: float) -> str:
    return str(int(number)) if number.is_integer() else str(number)

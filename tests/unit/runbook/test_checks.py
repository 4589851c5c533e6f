"""Check tolerances (drctl/runbook/checks.py): equals, range, one_of, regex."""

from __future__ import annotations

import pytest

from drctl.runbook.checks import ToleranceError, evaluate
from drctl.runbook.model import Tolerance, ToleranceKind


def holds(kind: str, value: object, expected: object) -> bool:
    return evaluate(Tolerance(ToleranceKind(kind), expected), value, expected)[0]


def test_equals_compares_meaning_not_representation() -> None:
    assert holds("equals", "0", 0) and holds("equals", 0, "0") and holds("equals", 0, 0.0)
    assert holds("equals", "true", True) and holds("equals", True, "yes")
    assert not holds("equals", "1.5", 1) and not holds("equals", None, 0)
    assert not holds("equals", "True!", True) and not holds("equals", "abc", "ABC")
    assert holds("equals", ["a", "b"], ["a", "b"]) and not holds("equals", ["a"], ["b"])


def test_range_one_of_regex() -> None:
    assert holds("range", 3, (1, 3)) and holds("range", "2.5", (None, 3))
    assert not holds("range", 4, (1, 3)) and not holds("range", "many", (0, None))
    assert not holds("range", True, (0, 1))  # a boolean is not a count
    assert holds("range", 10, ("5", "20"))  # bounds rendered from templates arrive as text
    with pytest.raises(ToleranceError):
        holds("range", 1, ("x", 2))
    assert holds("one_of", "RUNNING", ["RUNNING", "PAUSED"]) and holds("one_of", "2", [1, 2])
    assert not holds("one_of", "FAILED", ["RUNNING"])
    assert holds("regex", "4.3.1", r"^\d+\.\d+") and not holds("regex", "x4.3", r"^\d")
    assert not holds("regex", None, ".*")
    with pytest.raises(ToleranceError):
        holds("regex", "x", "(")

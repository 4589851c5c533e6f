"""Action parameters (drctl/runbook/actions.py): coercion, durations, and the mode enums
a runbook is checked against."""

from __future__ import annotations

import pytest

from drctl.runbook.actions import CoercionError, builtin_registry, coerce
from drctl.timeparse import Seconds


def test_coercion_of_action_parameters() -> None:
    assert coerce("3", int) == 3 and coerce(3.0, int) == 3 and coerce("yes", bool) is True
    assert coerce(None, int | None) is None and coerce(["1", 2], list[int]) == [1, 2]
    assert coerce(5, str) == "5"
    for value, annotation in (("x", int), (True, int), ("maybe", bool), ("a", list[str])):
        with pytest.raises(CoercionError):
            coerce(value, annotation)


def test_runbook_duration_parameters() -> None:
    assert coerce("15m", Seconds) == 900
    assert coerce(" 2h ", Seconds) == 7200
    assert coerce(30, Seconds) == 30.0
    assert coerce("45", Seconds | None) == 45.0
    assert coerce(None, Seconds | None) is None
    with pytest.raises(CoercionError, match="expected a duration such as 5s, 500ms or 2m"):
        coerce("soon", Seconds)
    failback = builtin_registry().get("failback")
    assert failback is not None
    lookback = failback.param("lookback")
    assert lookback is not None and lookback.type_name == "duration | None"
    assert failback.check_params({"lookback": "6h"}) == []
    [issue] = failback.check_params({"lookback": "soon"})
    assert issue.param == "lookback" and "expected a duration" in issue.message


def test_runbook_parameters_are_checked_against_the_enums() -> None:
    registry = builtin_registry()
    failback = registry.get("failback")
    assert failback is not None
    [issue] = failback.check_params({"reconcile": "copy-all"})
    assert issue.message == ("parameter 'reconcile': expected one of copy-safe, quarantine, "
                             "none, got 'copy-all'")
    assert failback.check_params({"reconcile": "quarantine"}) == []
    assert failback.check_params({"reconcile": "{{ vars.reconcile }}"}) == []
    translate = registry.get("translate-offsets")
    assert translate is not None
    assert translate.check_params({"method": "exact"}) == []
    assert "expected one of auto, exact" in translate.check_params({"method": "fast"})[0].message
    param = failback.param("reconcile")
    assert param is not None and param.default == "copy-safe"
    assert param.type_name == "copy-safe|quarantine|none"

"""Reconcile (drctl/ops/one_way/reconcile.py): the mode values the CLI and runbooks spell, and
`none` touches nothing."""

from __future__ import annotations

from pathlib import Path

from drctl.ops.one_way.reconcile import GapOutcome, ReconcileMode, reconcile
from drctl.translate.model import TranslateMethod
from tests.unit.ops.support import _marker_with_groups


def test_enum_values_are_todays_strings() -> None:
    assert [m.value for m in ReconcileMode] == ["copy-safe", "quarantine", "none"]
    assert [m.value for m in TranslateMethod] == ["auto", "exact", "timestamp", "checkpoint",
                                                  "identity", "snapshot"]
    assert ReconcileMode.COPY_SAFE == "copy-safe" and f"{TranslateMethod.EXACT}" == "exact"


def test_reconcile_none_touches_nothing(tmp_path: Path) -> None:
    outcome = reconcile(ReconcileMode.NONE, None, _marker_with_groups(), GapOutcome(), tmp_path)  # type: ignore[arg-type]
    assert outcome.as_dict() == {"mode": "none", "not_copied": {"left": {}}}

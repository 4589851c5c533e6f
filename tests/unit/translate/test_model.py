"""Translation reports (drctl/translate/model.py): their runbook summary."""

from __future__ import annotations

from tests.unit.ops.support import _translation


def test_translation_runbook_summary_adds_the_groups_an_apply_skipped() -> None:
    assert _translation(apply=True).runbook_summary()["not_applied"] == ["g2"]
    dry = _translation(apply=False).runbook_summary()
    assert dry["not_applied"] == [] and dry["method"] == "exact"
    assert list(dry)[:-1] == list(_translation(apply=False).as_dict())

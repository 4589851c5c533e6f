"""Translation reports (drctl/translate/model.py): their runbook summary."""

from __future__ import annotations

from tests.unit.ops.support import _translation


def test_translation_runbook_summary_adds_the_groups_an_apply_skipped() -> None:
    assert _translation(apply=True).runbook_summary()["not_applied"] == ["g2"]
    dry = _translation(apply=False).runbook_summary()
    assert dry["not_applied"] == [] and dry["method"] == "exact"
    assert list(dry)[:-2] == list(_translation(apply=False).as_dict())


def test_a_position_no_method_placed_is_named_and_counted() -> None:
    report = _translation(apply=True)
    assert report.summary()["unplaced"] == 0 and report.runbook_summary()["unplaced"] == []
    lost = report.groups[0].partitions[1]
    lost.target_offset, lost.confidence = None, "unproven"
    assert report.unplaced() == [lost] and report.summary()["unplaced"] == 1
    assert report.runbook_summary()["unplaced"] == ["g1 t[1]"]

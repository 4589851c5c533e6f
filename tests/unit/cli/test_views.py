"""What the CLI shows (drctl/cli/views.py): the failover plan shown before the prompt."""

from __future__ import annotations

from drctl.cli.views import describe_preview

PREVIEW = {"source": "dc1", "target": "dc2", "mode": "unplanned", "incident": "fo-2",
           "continuing": False, "done": [], "supersedes": ["fo-1"], "source_reachable": False,
           "topics": 12, "unmirrored": ["audit"], "active_groups_on_target": ["billing"],
           "groups": "app-.*"}


def test_the_plan_names_what_changes_and_what_is_at_risk() -> None:
    text = "\n".join(describe_preview(PREVIEW))
    assert text.startswith("Plan: fail over dc1 -> dc2 (unplanned), new incident fo-2")
    assert "source dc1: does not answer (treated as down)" in text
    assert "12 topic(s) switch to dc2; groups matching 'app-.*' move" in text
    assert "left behind (never mirrored): audit" in text
    assert "groups already active on the target (not moved): billing" in text
    assert "closes as superseded: fo-1" in text


def test_a_continued_incident_says_what_is_done() -> None:
    lines = describe_preview({**PREVIEW, "continuing": True, "done": ["stop-replication"],
                              "supersedes": [], "unmirrored": [],
                              "active_groups_on_target": [], "source_reachable": True})
    assert lines[0].endswith("continuing incident fo-2 (done: stop-replication)")
    assert len(lines) == 3 and "source dc1: answers" in lines[1]

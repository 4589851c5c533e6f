"""Every report says the same in Markdown and HTML: the HTML is the Markdown rendered, so a
topic, a number or an instruction can be missing from neither (the HTML is the version shared
with application teams)."""

from __future__ import annotations

import html
import re
from dataclasses import asdict
from typing import Any

import pytest

from drctl.ops.fence import open_risks, unfenced_record
from drctl.reports import render_report
from drctl.runbook.model import Phase, StepKind
from drctl.runbook.result import Status, StepResult
from drctl.state import FailoverMarker

_WORD = re.compile(r"[A-Za-z0-9][\w.:-]*")


def _failover(pending: bool) -> dict[str, Any]:
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    marker.topics = {"orders": "primary.orders", "pay_ments-v2": "primary.pay_ments-v2"}
    marker.failover_point = {"primary.orders": {0: 41, 1: 7}, "primary.pay_ments-v2": {0: 3}}
    marker.groups = {"billing": {"applied": True, "skipped": None, "confidence": ["exact"]},
                     "<audit|team>": {"applied": False, "skipped": "active | members",
                               "confidence": ["checkpoint"]}}
    marker.replication_stop = "pending" if pending else "stopped"
    marker.record("stop-replication", status="pending" if pending else "done")
    marker.record("translate-offsets")
    if pending:
        marker.fence = unfenced_record("User:mm2", ["orders", "primary.orders"], "unsupported",
                                       "the cluster has no authorizer (SECURITY_DISABLED)")
    return {"marker": asdict(marker), "failover_time": "2026-11-23T08:00:00+00:00",
            "open_risks": open_risks(marker),
            "unreplicated": [{"topic": "orders", "partition": 0, "source_end": 50,
                              "target_end": 41, "estimate": 9}],
            "source_bootstrap": "127.0.0.1:9092", "target_bootstrap": "127.0.0.1:9192",
            "failover_topics": {"orders": "orders", "pay_ments-v2": "pay_ments-v2"}}


def _failback() -> dict[str, Any]:
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    marker.status = "closed"
    return {"marker": asdict(marker), "gap": {"safe": 3, "conflict": 1, "unkeyed": 2},
            "reconcile": {"mode": "copy-safe", "copy_safe": {"copied": 3, "skipped": 0},
                          "quarantine": {"count": 3, "file": "state/q.jsonl",
                                         "topics": ["orders.quarantine"]}},
            "reverse": {"kind": "mirrormaker2", "connector": "secondary-primary-source",
                        "start": {"orders": {0: 57}}},
            "translation": {"applied": 2, "groups": 2, "exact": 6, "partitions": 6}}


def _run() -> dict[str, Any]:
    step = StepResult("stop-<replication>", Phase.main, StepKind("shell"), Status.failed,
                      attempts=2, duration_s=1.5, error="exit 3\nsee log",
                      inputs={"command": "echo hi"})
    return {"run": {"runbook": {"name": "drill", "path": "runbooks/drill.yaml",
                                "description": "A drill"},
                    "status": "failed", "dry_run": False, "run_id": "r1", "resumed": False,
                    "started": "s", "ended": "e", "duration_s": 2.0, "exit_status": 3,
                    "journal": "j.jsonl", "reason": "a check failed",
                    "hint": "look at step 1", "steps": [step.as_dict()],
                    "vars": {"region": "<eu>"}}}


def _visible_words(page: str) -> list[str]:
    body = page.split("<body>", 1)[1]
    return _WORD.findall(html.unescape(re.sub(r"<[^>]+>", " ", body)))


def _markdown_words(markdown: str) -> list[str]:
    text = markdown.replace("\\|", "|").replace("<br>", " ")
    text = re.sub(r"```\w*", " ", text)  # a fence and its language are syntax, not content
    return _WORD.findall(re.sub(r"[`*#]", " ", text))


CASES = {"failover-pending": ("failover-report", _failover(pending=True)),
         "failover-stopped": ("failover-report", _failover(pending=False)),
         "failback": ("failback-report", _failback())}


@pytest.mark.parametrize("case", sorted(CASES))
def test_html_carries_every_word_of_the_markdown(case: str) -> None:
    template, context = CASES[case]
    markdown = render_report(template, "md", **context)
    page = render_report(template, "html", **context)
    assert _visible_words(page) == _markdown_words(markdown)


def test_runbook_report_html_carries_the_markdown() -> None:
    markdown = render_report("runbook-report", "md", **_run())
    page = render_report("runbook-report", "html", **_run())
    assert _visible_words(page) == _markdown_words(markdown)
    assert "<script" not in page and "stop-&lt;replication&gt;" in page
    assert "exit 3<br>see log" in page  # a multi-line cell stays in its cell


def test_a_step_output_of_rows_is_a_table_in_the_runbook_report() -> None:
    """Rows (the drill's audit per group) read as a table; everything else stays JSON."""
    context = _run()
    context["run"]["steps"][0]["outputs"] = {"copied": 3, "audit_groups": [
        {"group": "app-a", "from": "snapshot", "redelivered": 12, "stated_bound": 40},
        {"group": "app|b", "from": "checkpoint", "redelivered": 0, "stated_bound": None}]}
    markdown = render_report("runbook-report", "md", **context)
    assert ("Output `audit_groups`:\n\n| group | from | redelivered | stated_bound |\n"
            "|---|---|---|---|\n| app-a | snapshot | 12 | 40 |\n"
            "| app\\|b | checkpoint | 0 |  |\n") in markdown
    assert '"copied": 3' in markdown and '"audit_groups"' not in markdown
    page = render_report("runbook-report", "html", **context)
    assert "<td>app-a</td>\n<td>snapshot</td>\n<td>12</td>" in page
    assert _visible_words(page) == _markdown_words(markdown)


def test_prefixed_failover_html_tells_consumers_to_read_both_topics() -> None:
    page = render_report("failover-report", "html", **_failover(pending=True))
    assert ("consumers read <code>primary.orders</code> and <code>orders</code>; "
            "producers write <code>orders</code>") in page
    assert "Stop it before anything else" in page
    assert "<strong>NOT fenced</strong>: the cluster has no authorizer" in page
    assert "Open risks" in page and "enable one (authorizer.class.name)" in page
    assert "stop-replication" in page and "translate-offsets" in page  # the steps
    assert "drctl failback --check-order" in page  # the next action
    assert "<title>Failover report" in page
    assert "<td>&lt;audit|team&gt;</td>" in page and "<td>active | members</td>" in page


def test_failback_html_names_quarantine_topics_and_reverse_connector() -> None:
    page = render_report("failback-report", "html", **_failback())
    assert "orders.quarantine" in page and "secondary-primary-source" in page
    assert "state/q.jsonl" in page

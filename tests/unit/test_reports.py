"""Reports and templates (drctl/reports.py): what they render, the report files, and
that every report says the same in every format: the HTML shared with application teams
carries every word of the Markdown (instructions, steps, topics, numbers), prefixed names
included, and is well-formed; the JSON is the context both were rendered from."""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from drctl.ops.steps.fence import open_risks, unfenced_record
from drctl.reports import render, render_report, report_format, write_report
from drctl.runbook.model import Phase, StepKind
from drctl.runbook.result import Status, StepResult
from drctl.state import FailoverMarker


def test_rendered_replicator_config_parses() -> None:
    rep = json.loads(render("replicator-connector.json.j2", name="r", group="g",
                            topics=["a", "b"], source_bootstrap="s:1", target_bootstrap="t:1",
                            source_cluster="secondary", target_cluster="primary"))
    assert rep["config"]["src.consumer.group.id"] == "g"
    assert rep["config"]["topic.whitelist"] == "a,b"
    assert rep["config"]["provenance.header.enable"] == "true"


def test_failover_report_renders_markdown_and_escaped_html() -> None:
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=True)
    marker.topics = {"<orders>": "<orders>"}
    marker.failover_point = {"<orders>": {0: 5}}
    marker.groups = {"g": {"applied": True, "skipped": None, "confidence": ["exact"]}}
    from dataclasses import asdict

    ctx = {"marker": asdict(marker), "failover_time": "now", "unreplicated": None,
           "source_bootstrap": "a:1", "target_bootstrap": "b:1",
           "failover_topics": {"<orders>": "<orders>"}, "open_risks": []}
    md = render("failover-report.md.j2", **ctx)
    html = render_report("failover-report", "html", **ctx)
    assert "| <orders> | 0 | 5 |" in md and "gap is unknown" in md
    assert "&lt;orders&gt;" in html and "<orders>" not in html


def test_failback_report_renders_reconcile_and_reverse_start() -> None:
    from dataclasses import asdict

    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    marker.status = "closed"
    ctx = {"marker": asdict(marker), "gap": {"safe": 3, "conflict": 1, "unkeyed": 2},
           "reconcile": {"mode": "copy-safe", "copy_safe": {"copied": 3, "skipped": 0},
                         "quarantine": {"count": 3, "file": "q.jsonl", "topics": ["t.q"]}},
           "reverse": {"kind": "mirrormaker2", "connector": "rev", "start": {"t": {0: 7}}},
           "translation": {"applied": 2, "groups": 2, "exact": 6, "partitions": 6}}
    md = render("failback-report.md.j2", **ctx)
    assert "Copied 3 safe record(s)" in md and "Quarantined 3 record(s)" in md
    assert "| t | 0 | 7 |" in md and "6 of 6 positions exact" in md
    assert "Copied 3 safe record(s)" in render_report("failback-report", "html", **ctx)


def test_report_files_and_formats(tmp_path: Path) -> None:
    paths = write_report(tmp_path, "inc", {"k": "v"}, "failover-report", extensions=("json",))
    assert paths == [tmp_path / "inc.json"] and json.loads(paths[0].read_text()) == {"k": "v"}
    assert not list(tmp_path.glob("*.tmp"))
    # The extension of a report's name picks its template.
    assert [report_format(Path(n)) for n in ("r.md", "r.MARKDOWN", "r.htm", "r.HTML")] == \
        ["md", "md", "html", "html"]
    with pytest.raises(ValueError, match="a report is .md or .html"):
        report_format(Path("r.pdf"))


def test_reports_name_late_copies_and_the_end_state() -> None:
    from dataclasses import asdict

    from drctl.ops.one_way.late_copies import LateCopies, PartitionLateCopies, describe

    found = LateCopies(1, {"orders": {0: PartitionLateCopies(after_f=9, late=4, of_gap=3,
                                                              runs=[[12, 14], [15, 17]],
                                                              stale_keys=["acct-1"])}})
    assert found.by_tp() == {("orders", 0): {12, 13, 15, 16}}
    assert found.last_offsets() == {"orders": {0: 16}}
    assert LateCopies.from_dict(found.as_dict()).by_tp() == found.by_tp()
    assert "1 key(s) got an old value" in describe(found)[1]
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    marker.late_copies = found.as_dict()
    ctx = {"marker": asdict(marker), "failover_time": "now", "unreplicated": None,
           "source_bootstrap": "a:1", "target_bootstrap": "b:1", "failover_topics": {},
           "open_risks": []}
    md = render("failover-report.md.j2", **ctx)
    assert "| orders | 0 | 9 | 4 | 3 |" in md and "acct-1" in md
    marker.late_copies = {"total": None, "notes": ["Not checked: 'primary' is unreachable."]}
    assert "Not checked" in render("failover-report.md.j2", **{**ctx,
                                                                "marker": asdict(marker)})
    back = {"marker": asdict(marker), "gap": {"late_copies": 4},
            "reconcile": {"mode": "copy-safe"},
            "reverse": {"kind": "mirrormaker2", "start": {}, "copied_back": {"copied": 2}},
            "verification": {"ok": False, "totals": {"expected": 5, "found": 6, "missing": 0,
                                                     "extra": 0, "twice": 1},
                             "notes": [], "partitions": [
                                 {"reverse_topic": "orders", "partition": 0, "expected": 5,
                                  "found": 6, "missing": 0, "extra": 0, "twice": 1}]},
            "translation": None}
    md = render("failback-report.md.j2", **back)
    assert "copied late by the replicator, after the failover point | 4 |" in md
    assert "drctl copied 2 post-failover write(s)" in md
    assert "**Failed:** 0 post-failover writes missing" in md
    assert "| orders | 0 | 5 | 6 | 0 | 0 | 1 |" in md


_VOID = {"br", "hr", "meta", "img", "input", "link"}


class _Text(HTMLParser):
    """The visible text of an HTML page, and whether its tags nest."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.open: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in _VOID:
            self.open.append(tag)
        self.text.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
        else:
            self.open.pop()
        self.text.append(" ")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _words(text: str) -> list[str]:
    # Markdown syntax (emphasis, code, table rules, headings, bullets) is not content.
    text = re.sub(r"^[\s:|-]+$", " ", text, flags=re.M)  # table rules
    text = re.sub(r"[`*|#]|^\s*- ", " ", text, flags=re.M)
    return re.findall(r"[^\s]+", html.unescape(text))


def _same_content(md: str, page: str) -> None:
    parser = _Text()
    parser.feed(page)
    parser.close()
    assert not parser.errors and parser.open == [], (parser.errors, parser.open)
    words = " ".join(_words("".join(parser.text)))
    for line in md.splitlines():
        expected = " ".join(_words(line))
        if expected:
            assert expected in words, line


def _parity_failover(names_kept: bool) -> dict[str, Any]:
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    mirror = "orders" if names_kept else "primary.orders"
    marker.topics = {"orders": mirror}
    marker.failover_point = {mirror: {0: 5, 1: 7}}
    marker.replication_stop = "pending"
    marker.groups = {"billing": {"applied": True, "skipped": None, "confidence": ["snapshot"],
                                 "positions": {mirror: {"0": {"offset": 4, "confidence":
                                                              "snapshot",
                                                              "max_redelivered": 1}}}}}
    marker.left_behind = {"topics": [{"topic": "late", "groups": ["audit-app"]}]}
    return {"marker": asdict(marker), "failover_time": "2026-11-23T14:00:00+00:00",
            "unreplicated": None, "source_bootstrap": "p:9092", "target_bootstrap": "s:9092",
            "failover_topics": {"orders": "orders"}, "open_risks": ["Replication is NOT fenced"],
            "left_behind": ["Topic late has no mirror on secondary: its records are not there "
                            "(read by audit-app); failback names it."]}


@pytest.mark.parametrize("names_kept", [True, False])
def test_failover_report_html_says_what_the_markdown_says(names_kept: bool) -> None:
    ctx = _parity_failover(names_kept)
    md = render("failover-report.md.j2", **ctx)
    page = render_report("failover-report", "html", **ctx)
    _same_content(md, page)
    with pytest.raises(AssertionError):  # a line the page lacks is caught
        _same_content(md + "\n- Consumers read `orders.extra` too.", page)
    if not names_kept:  # consumers must read both topics, in both formats
        for text in (md, html.unescape(page)):
            assert "primary.orders" in text and "and `orders`" in text.replace(
                "<code>orders</code>", "`orders`")


def test_failback_report_html_says_what_the_markdown_says() -> None:
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    ctx = {"marker": asdict(marker), "gap": {"safe": 3, "conflict": 1, "unkeyed": 0},
           "reconcile": {"mode": "copy-safe", "copy_safe": {"copied": 3, "skipped": 0},
                         "quarantine": {"count": 1, "file": "q.jsonl",
                                        "topics": ["orders.drctl-quarantine"]}},
           "reverse": {"kind": "mirrormaker2", "connector": "rev",
                       "start": {"orders": {0: 7}}},
           "verification": {}, "translation": None,
           "audit": {"totals": {"positions": 1, "audited": 1, "redelivered": 2, "skipped": 0,
                                "over_bound": 0}, "notes": [],
                     "positions": [{"group": "billing", "topic": "orders", "partition": 0,
                                    "applied": 4, "confidence": "snapshot", "exact": 6,
                                    "redelivered": 2, "skipped": 0, "max_redelivered": 3,
                                    "note": None}]},
           "switch_back": {"applied": True, "summary": {
               "groups": 1, "applied": 1, "waiting": [], "rewound": 1, "redelivered": 50,
               "not_delivered": 0, "quarantined_missed": 1},
               "groups": [{"group": "billing", "state": "EMPTY", "applied": True,
                           "skipped": None, "totals": {},
                           "partitions": [{"topic": "orders", "partition": 0, "before": 300,
                                           "after": 302, "translated": 360,
                                           "confidence": "rewound", "redelivered": 50,
                                           "unread_gap": 8, "not_delivered": 0,
                                           "quarantined_missed": [[300, 302]],
                                           "quarantined_read": 0, "note": None,
                                           "proof": {"last_read": {"topic": "orders",
                                                                   "offset": 349},
                                                     "copy": {"topic": "orders",
                                                              "offset": 359}}}]}]}}
    md = render("failback-report.md.j2", **ctx)
    _same_content(md, render_report("failback-report", "html", **ctx))
    assert "orders.drctl-quarantine" in md and "300–301" in md


def test_the_json_report_is_the_context_both_were_rendered_from(tmp_path: Path) -> None:
    ctx = _parity_failover(False)
    paths = write_report(tmp_path, "inc", ctx, "failover-report")
    data = json.loads(next(p for p in paths if p.suffix == ".json").read_text())
    assert data == json.loads(json.dumps(ctx, default=str))
    md = next(p for p in paths if p.suffix == ".md").read_text()
    _same_content(md, next(p for p in paths if p.suffix == ".html").read_text())


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
    assert "run <code>drctl failback</code>." in page  # the next action
    assert "<title>Failover report" in page
    assert "<td>&lt;audit|team&gt;</td>" in page and "<td>active | members</td>" in page


def test_failback_html_names_quarantine_topics_and_reverse_connector() -> None:
    page = render_report("failback-report", "html", **_failback())
    assert "orders.quarantine" in page and "secondary-primary-source" in page
    assert "state/q.jsonl" in page


def test_reports_show_the_rpo_and_the_time_by_phase() -> None:
    from drctl.config import Objectives
    from drctl.ops.one_way.phases import command_timing
    from drctl.ops.one_way.scorecard import failover_scorecard, operation_scorecard
    from drctl.ops.steps.rpo import unknown_rpo

    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    run = {"run_id": "r2", "command": "failover", "started_ms": 1_714_564_860_000,
           "started_at": "2024-05-01T12:01:00Z", "total_s": 9.0, "finished": True,
           "ended": True, "phases": [
               {"phase": "preflight", "start_s": 0.0, "seconds": 2.0, "running": False},
               {"phase": "translate-offsets", "start_s": 2.0, "seconds": 7.0,
                "running": False}]}
    crashed = {**run, "run_id": "r1", "started_ms": 1_714_564_800_000, "total_s": 3.0,
               "finished": False, "ended": False, "started_at": "2024-05-01T12:00:00Z",
               "phases": [{"phase": "stop-replication", "start_s": 0.0, "seconds": 3.0,
                           "running": True}]}
    timing = command_timing([crashed], "failover", run)
    card = failover_scorecard(marker.incident, Objectives(rpo_s=60), timing,
                              unknown_rpo(1_714_564_800_000, "nothing readable").as_dict())
    ctx = {"marker": asdict(marker), "failover_time": "now", "unreplicated": None,
           "source_bootstrap": "a:1", "target_bootstrap": "b:1", "failover_topics": {},
           "open_risks": [], "scorecard": card}
    md = render("failover-report.md.j2", **ctx)
    assert "| RPO | RPO unknown: nothing readable |" in md
    assert "| Took | 1m09s from the command's start (2 runs) |" in md
    assert "| RPO | 1m | — | **not measured** |" in md
    assert "| translate-offsets | 2.0 s | 7.0 s |" in md
    assert "| 2024-05-01T12:00:00Z | stop-replication (did not end) | 3.0 s | no: stopped " \
           "or crashed |" in md
    back = operation_scorecard("reprotect", marker.incident,
                               command_timing([], "reprotect", {**run, "command": "reprotect"}))
    md = render("reprotect-report.md.j2", marker=asdict(marker), steps={}, phases_s={},
                summary={"phase": "closed", "forced": []}, scorecard=back)
    assert "## Time by phase" in md and "| preflight | 0.0 s | 2.0 s |" in md


def test_a_return_that_waits_for_the_whole_flow_says_so_in_its_report() -> None:
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    common = {"marker": asdict(marker), "phases_s": {}, "scorecard": None,
              "summary": {"phase": "reprotecting", "forced": []}}
    md = render("reprotect-report.md.j2", steps={"forward-resumed": {
        "held_by": "fo-whole", "taken_back": ["src"]}}, **common)
    assert "stays stopped while\nincident fo-whole is open" in md
    md = render("reprotect-report.md.j2", steps={"forward-resumed": {
        "components": {"src": "RUNNING"}}}, **common)
    assert "Resumed: `src` RUNNING." in md


def test_the_reports_say_whether_schemas_were_checked_with_the_ids_and_the_result() -> None:
    from drctl.registry.parity import Issue, IssueKind, Parity

    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    ctx = {"marker": asdict(marker), "failover_time": "now", "unreplicated": None,
           "source_bootstrap": "a:1", "target_bootstrap": "b:1", "failover_topics": {},
           "open_risks": []}
    assert "Not checked: no `schema_registry`" in render("failover-report.md.j2", **ctx)
    forced = Parity("mirrored records", "primary", "secondary", records=40, encoded=40,
                    ids=[1, 3], issues=[Issue(IssueKind.MISSING, 3, "pay-value", 1, ("pay",),
                                              "schema id 3 (pay-value v1 on primary's "
                                              "registry) is missing on secondary's registry",
                                              versions=(("pay-value", 1),))])
    marker.schemas["failover"] = [forced.as_dict()]
    md = render("failover-report.md.j2", **{**ctx, "marker": asdict(marker)})
    assert ("| mirrored records | primary -> secondary | 40 | 40 | 1, 3 | **not in parity**: "
            "schemas NOT in parity: 1 id(s) missing on secondary's registry (2 ids sampled) |"
            in md)
    assert "passed with --force" in md and "schema id 3 (pay-value v1" in md
    assert "Fix: register on secondary's registry, in this order" in md
    back = Parity("post-failover writes", "secondary", "primary", records=5, encoded=5, ids=[2])
    marker.schemas["failback"] = [back.as_dict()]
    md = render("failback-report.md.j2", marker=asdict(marker), gap={}, reconcile={},
                reverse={}, translation=None)
    assert "| post-failover writes | secondary -> primary | 5 | 5 | 2 | **in parity** |" in md

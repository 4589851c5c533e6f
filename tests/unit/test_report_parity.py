"""Every report says the same in every format: the HTML shared with application teams carries
every line of the Markdown (instructions, steps, topics, numbers), prefixed names included,
and is well-formed; the JSON is the context both were rendered from."""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from drctl.reports import render, render_report, write_report
from drctl.state import FailoverMarker

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


def _failover(names_kept: bool) -> dict[str, Any]:
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
    ctx = _failover(names_kept)
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
    ctx = _failover(False)
    paths = write_report(tmp_path, "inc", ctx, "failover-report")
    data = json.loads(next(p for p in paths if p.suffix == ".json").read_text())
    assert data == json.loads(json.dumps(ctx, default=str))
    md = next(p for p in paths if p.suffix == ".md").read_text()
    _same_content(md, next(p for p in paths if p.suffix == ".html").read_text())

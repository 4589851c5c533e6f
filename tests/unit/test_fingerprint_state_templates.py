from __future__ import annotations

import json
from pathlib import Path

import pytest

from drctl.fingerprint import DIGEST_BYTES, fingerprint, items
from drctl.reports import render, render_report, report_format, write_report
from drctl.state import FailoverMarker, MarkerStore


def test_fingerprint_separates_null_empty_and_shifted_fields() -> None:
    variants = {
        "null key": fingerprint(0, None, b"x"),
        "null value": fingerprint(0, b"x", None),
        "empty key": fingerprint(0, b"", b"x"),
        "empty value": fingerprint(0, b"x", b""),
        "both null": fingerprint(0, None, None),
        "both empty": fingerprint(0, b"", b""),
        "shifted": fingerprint(0, b"xx", b""),
        "shifted back": fingerprint(0, b"", b"xx"),
        "other partition": fingerprint(1, None, b"x"),
        "header": fingerprint(0, None, b"x", [("h", b"")]),
        "null header": fingerprint(0, None, b"x", [("h", None)]),
        "timestamp": fingerprint(0, None, b"x", None, 5),
    }
    assert len(set(variants.values())) == len(variants)
    assert all(len(d) == DIGEST_BYTES == 16 for d in variants.values())


def test_replication_headers_are_left_out() -> None:
    base = fingerprint(3, b"k", b"v", [("app", b"1")], 1000)
    assert fingerprint(3, b"k", b"v", [("app", b"1"), ("__replicator_id", b"\x00\x01")],
                       1000) == base
    assert fingerprint(3, b"k", b"v", [("drctl-reconciled", b"fo-1:t:3:9"), ("app", b"1")],
                       1000) == base
    assert fingerprint(3, b"k", b"v", [("app", b"2")], 1000) != base


def test_items_flag_nulls_and_count_headers() -> None:
    assert items(0, None, b"", None, None) == [0, True, False, b"", 0, False]
    assert items(7, b"k", None, [("h", None), ("__replicator_id", b"x")], 9) == \
        [7, False, b"k", True, 1, b"h", True, True, 9]


def test_digest_is_two_seeded_xxh64_chains() -> None:
    """Written out by hand with the xxhash package: what Spark's xxhash64 computes."""
    import struct

    import xxhash

    def h(data: bytes, seed: int) -> int:
        return xxhash.xxh64_intdigest(data, seed)

    def i32(n: int) -> bytes:
        return struct.pack("<i", n)

    expected = b""
    for start in (1, 2):
        acc = h(i32(start), 42)
        for data in (i32(3), i32(0), b"k", i32(1), i32(0), i32(1), struct.pack("<q", 5)):
            acc = h(data, acc)
        expected += acc.to_bytes(8, "big")
    assert fingerprint(3, b"k", None, [], 5) == expected


def test_marker_round_trips_and_records_steps(tmp_path: Path) -> None:
    store = MarkerStore(tmp_path, "_drctl_state", None)
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    marker.failover_point = {"orders": {0: 10, 1: 20}}
    marker.record("stop-replication", {"state": "pending"})
    store.save(marker)
    [loaded] = store.open_markers("primary", "secondary")
    assert loaded.incident == marker.incident
    assert loaded.failover_point == {"orders": {0: 10, 1: 20}}  # int partitions again
    assert loaded.done("stop-replication") and not loaded.done("failover-point")
    assert store.open_markers("secondary", "primary") == []
    loaded.status = "closed"
    store.save(loaded)
    assert store.open_markers() == []
    assert not list(tmp_path.glob("markers/*.tmp"))  # written atomically


def test_newer_marker_schema_is_refused() -> None:
    with pytest.raises(Exception, match="newer drctl"):
        FailoverMarker.from_json(json.dumps({"incident": "x", "schema": 99}))


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

    from drctl.ops.late_copies import LateCopies, PartitionLateCopies, describe

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

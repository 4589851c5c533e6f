"""Operation results (JSON, runbook summaries, reports), the mode enums on the CLI and in
runbooks, and the one quarantine producer — without a cluster."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import drctl.gap.quarantine as quarantine_module
from drctl.cli.app import app, main
from drctl.config import load_config
from drctl.context import OpsContext
from drctl.errors import DrctlError
from drctl.gap.quarantine import RerunTag, produce_to_quarantine
from drctl.kafka.records import Record
from drctl.ops.failback import FailbackResult
from drctl.ops.failover import FailoverResult
from drctl.ops.reconcile import GapOutcome, ReconcileMode, ReconcileOutcome, reconcile
from drctl.reports import render
from drctl.runbook.actions import builtin_registry
from drctl.state import FailoverMarker
from drctl.translate.model import (
    GroupResult,
    PartitionResult,
    TranslateMethod,
    TranslationReport,
)

CONFIG = """
clusters:
  primary: {bootstrap.servers: 127.0.0.1:19092}
  secondary: {bootstrap.servers: 127.0.0.1:29092}
replication:
  kind: mirrormaker2
  source: primary
  target: secondary
  connect: {url: "http://127.0.0.1:18083", source_connector: src}
state: {dir: state}
"""


def _help(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_help_lists_the_mode_choices() -> None:
    assert "copy-safe|quarantine|none" in _help("failback")
    methods = "auto|exact|timestamp|checkpoint|identity"
    assert methods in _help("translate-offsets")
    assert methods in _help("failover")


def test_bad_reconcile_mode_is_a_usage_error_without_traceback(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["failback", "--reconcile", "copy-everything", "--yes"]) == 2
    err = capsys.readouterr().err
    assert "copy-everything" in err and "Traceback" not in err


def test_enum_values_are_todays_strings() -> None:
    assert [m.value for m in ReconcileMode] == ["copy-safe", "quarantine", "none"]
    assert [m.value for m in TranslateMethod] == ["auto", "exact", "timestamp", "checkpoint",
                                                  "identity", "snapshot"]
    assert ReconcileMode.COPY_SAFE == "copy-safe" and f"{TranslateMethod.EXACT}" == "exact"


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


def _marker() -> FailoverMarker:
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    marker.groups = {"g1": {"applied": True, "skipped": None, "confidence": ["exact"]},
                     "g2": {"applied": True, "skipped": None, "confidence": ["clamped"]}}
    marker.replication_stop = "stopped"
    return marker


def _translation(apply: bool = True) -> TranslationReport:
    report = TranslationReport("secondary", "primary", TranslateMethod.EXACT, apply, True)
    report.groups = [
        GroupResult("g1", applied=True, partitions=[
            PartitionResult("g1", "t", 0, "t", 5, "exact", 5, "exact", applied=True),
            PartitionResult("g1", "t", 1, "t", 9, "exact", 7, "kept", applied=True)]),
        GroupResult("g2", skipped="active members", partitions=[
            PartitionResult("g2", "t", 0, "t", 3, "exact", 3, "exact")])]
    return report


def test_failover_result_json_and_runbook_summary_keep_their_keys() -> None:
    report = _translation()
    result = FailoverResult(_marker(), dry_run=False, plan=[{"step": "failover-point"}],
                            preflight={"source_reachable": True},
                            translation=report.as_dict(), translation_report=report)
    data = result.as_dict([Path("r.md")])
    assert list(data) == ["incident", "dry_run", "resumed", "preflight", "plan", "marker",
                          "open_risks", "translation", "reports"]
    assert data["marker"] == asdict(result.marker) and data["reports"] == ["r.md"]
    assert FailoverResult(_marker(), dry_run=True).as_dict()["marker"] is None
    summary = result.runbook_summary([Path("r.md")])
    assert list(summary) == ["incident", "marker", "replication_stop", "late_copies",
                             "groups_applied",
                             "groups_total", "groups_not_exact", "left_behind", "reports"]
    assert (summary["groups_applied"], summary["groups_total"],
            summary["groups_not_exact"]) == (1, 2, ["g2"])


def test_failback_result_json_and_runbook_summary_keep_their_keys() -> None:
    report = _translation()
    outcome = ReconcileOutcome(ReconcileMode.COPY_SAFE, copy_safe={"copied": 3, "skipped": 1},
                               quarantine={"file": "q.jsonl", "topics": ["t.q"], "count": 2})
    result = FailbackResult(_marker(), resumed=False,
                            gap={"safe": 4, "conflict": 1, "unkeyed": 1},
                            reconcile=outcome.as_dict(), reverse={"kind": "mirrormaker2"},
                            translation=report.as_dict(), translation_report=report)
    data = result.as_dict()
    assert list(data) == ["incident", "dry_run", "resumed", "plan", "gap", "reconcile",
                          "reverse", "verification", "translation", "switch_back", "audit",
                          "marker", "phase", "next_command", "reports"]
    assert data["reconcile"] == {"mode": "copy-safe", "copy_safe": {"copied": 3, "skipped": 1},
                                 "quarantine": {"file": "q.jsonl", "topics": ["t.q"],
                                                "count": 2}, "not_copied": {}}
    summary = result.runbook_summary()
    assert list(summary) == ["incident", "status", "phase", "next_command", "gap", "copied",
                             "gap_total", "quarantined",
                             "reverse", "verification", "positions", "positions_exact",
                             "positions_kept", "groups_not_applied", "positions_rewound",
                             "never_delivered", "switch_back", "audit", "audit_groups",
                             "reports"]
    assert (summary["copied"], summary["gap_total"], summary["quarantined"],
            summary["positions"], summary["positions_exact"], summary["positions_kept"],
            summary["groups_not_applied"]) == (3, 6, 2, 3, 2, 1, ["g2"])


def test_translation_runbook_summary_adds_the_groups_an_apply_skipped() -> None:
    assert _translation(apply=True).runbook_summary()["not_applied"] == ["g2"]
    dry = _translation(apply=False).runbook_summary()
    assert dry["not_applied"] == [] and dry["method"] == "exact"
    assert list(dry)[:-1] == list(_translation(apply=False).as_dict())


def test_failback_writes_its_report_unless_dry_run(tmp_path: Path) -> None:
    (tmp_path / "drctl.yaml").write_text(CONFIG)
    config = load_config(tmp_path / "drctl.yaml")
    result = FailbackResult(_marker(), resumed=False,
                            reconcile=ReconcileOutcome(ReconcileMode.NONE).as_dict())
    ctx = OpsContext(config)
    paths = result.write_reports(ctx, tmp_path / "out")
    assert {p.suffix for p in paths} == {".md", ".html", ".json"}
    assert all(p.name.startswith(f"{result.marker.incident}-failback") for p in paths)
    assert "Reconcile: none" in next(p for p in paths if p.suffix == ".md").read_text()
    result.dry_run = True
    assert result.write_reports(ctx, tmp_path / "dry") == []


def test_reconcile_none_touches_nothing(tmp_path: Path) -> None:
    outcome = reconcile(ReconcileMode.NONE, None, _marker(), GapOutcome(), tmp_path)  # type: ignore[arg-type]
    assert outcome.as_dict() == {"mode": "none", "not_copied": {"left": {}}}


# -- the quarantine producer ------------------------------------------------------------


def _record(offset: int, partition: int = 0) -> Record:
    return Record("t", partition, offset, b"k%d" % offset, b"v", 1000 + offset, 1,
                  (("app", b"1"),))


class FakeProducer:
    def __init__(self, *, full_once: bool = False, fail: str | None = None) -> None:
        self.sent: list[dict[str, Any]] = []
        self.full_once = full_once
        self.fail = fail
        self.pending: list[Any] = []

    def produce(self, topic: str, **message: Any) -> None:
        if self.full_once:
            self.full_once = False
            raise BufferError("queue full")
        self.sent.append({"topic": topic, **message})
        self.pending.append(message["on_delivery"])

    def poll(self, _timeout: float = 0) -> int:
        for callback in self.pending:
            callback(self.fail, None)
        self.pending.clear()
        return 0

    def flush(self, _timeout: float = 0) -> int:
        self.poll()
        return 0


class FakeAdmin:
    """Topics whose max.message.bytes is Kafka's default."""

    def describe_configs(self, resources: list[Any], request_timeout: float) -> dict[Any, Any]:
        from concurrent.futures import Future

        out = {}
        for r in resources:
            future: Future[Any] = Future()
            future.set_result({"max.message.bytes": type("E", (), {"value": "1048588"})()})
            out[r] = future
        return out


class FakeClients:
    name = "dc2"

    def __init__(self, producer: FakeProducer) -> None:
        self._producer = producer
        self.overrides: dict[str, Any] = {}

    def admin(self) -> FakeAdmin:
        return FakeAdmin()

    def producer(self, **overrides: Any) -> FakeProducer:
        self.overrides = overrides
        return self._producer


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {"tags": set()}
    monkeypatch.setattr(quarantine_module, "ensure_quarantine_topics",
                        lambda _clients, wanted: dict(wanted))
    monkeypatch.setattr(quarantine_module, "watermarks",
                        lambda _admin, tps: {tp: (0, 10) for tp in tps})
    monkeypatch.setattr(quarantine_module, "header_values",
                        lambda _clients, ranges, header: seen["tags"])
    return seen


def test_quarantine_keeps_records_as_they_were_and_waits_out_a_full_queue(
        no_cluster: dict[str, Any]) -> None:
    producer = FakeProducer(full_once=True)
    sent = produce_to_quarantine(FakeClients(producer), [_record(1), _record(2, partition=1)],  # type: ignore[arg-type]
                                 lambda rec: ("t.q", rec.partition), {"t.q": 2})
    assert sent == {"t.q": 2}
    assert [(m["partition"], m["key"], m["headers"], m["timestamp"]) for m in producer.sent] \
        == [(0, b"k1", [("app", b"1")], 1001), (1, b"k2", [("app", b"1")], 1002)]


def test_quarantine_with_a_tag_skips_what_an_earlier_run_wrote(
        no_cluster: dict[str, Any]) -> None:
    no_cluster["tags"] = {b"t:1"}
    producer = FakeProducer()
    tag = RerunTag("drctl-reconciled", lambda rec: f"{rec.topic}:{rec.offset}".encode())
    sent = produce_to_quarantine(FakeClients(producer), [_record(1), _record(2)],  # type: ignore[arg-type]
                                 lambda rec: ("t.q", 0), {"t.q": 1}, tag=tag)
    assert sent == {"t.q": 1}
    assert producer.sent[0]["headers"] == [("app", b"1"), ("drctl-reconciled", b"t:2")]


def test_quarantine_raises_when_a_delivery_fails(no_cluster: dict[str, Any]) -> None:
    producer = FakeProducer(fail="MSG_TIMED_OUT")
    with pytest.raises(DrctlError, match="1 of 1 quarantined records were not written to t.q "
                                         "on 'dc2': MSG_TIMED_OUT"):
        produce_to_quarantine(FakeClients(producer), [_record(1)],  # type: ignore[arg-type]
                              lambda rec: ("t.q", 0), {"t.q": 1})


def test_failback_exit_status_names_skips_and_topics_left_behind() -> None:
    result = FailbackResult(_marker(), resumed=False)
    assert result.exit_status == 0
    result.audit = {"totals": {"skipped": 2}}
    assert result.exit_status == 3
    result.audit = {"totals": {"skipped": 0}}
    result.marker.left_behind = {"topics": [{"topic": "late", "groups": []}]}
    assert result.exit_status == 3
    md = render("failback-report.md.j2", marker=asdict(result.marker), gap={}, reconcile={},
                reverse={}, verification={}, translation=None)
    assert "**Topic `late` was never mirrored**" in md


def test_the_audit_per_group_sums_its_partitions_and_a_missing_bound_is_none() -> None:
    from drctl.ops.audit import audit_by_group

    def pos(group: str, partition: int, confidence: str, exact: int | None, redelivered: int,
            skipped: int, bound: int | None) -> dict[str, Any]:
        return {"group": group, "topic": "t", "partition": partition, "applied": 10,
                "confidence": confidence, "exact": exact, "redelivered": redelivered,
                "skipped": skipped, "max_redelivered": bound, "note": None}

    audit = {"totals": {}, "positions": [
        pos("b", 0, "snapshot", 12, 2, 0, 5), pos("b", 1, "checkpoint", 40, 30, 0, 90),
        pos("a", 0, "checkpoint", None, 0, 0, None), pos("a", 1, "snapshot", 9, 0, 1, 3)]}
    assert audit_by_group(audit) == [
        {"group": "a", "positions": 2, "audited": 1, "redelivered": 0, "skipped": 1,
         "stated_bound": None, "from": "checkpoint, snapshot"},
        {"group": "b", "positions": 2, "audited": 2, "redelivered": 32, "skipped": 0,
         "stated_bound": 95, "from": "checkpoint, snapshot"}]
    assert audit_by_group({}) == []
    result = FailbackResult(_marker(), resumed=False)
    result.audit = audit
    assert result.runbook_summary()["audit_groups"] == audit_by_group(audit)

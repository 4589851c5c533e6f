"""Failback's decisions, without a cluster (fakes of the context's factories): what it
refuses, what it does for an incident already failed back, and the exit status it owes;
its result's JSON, runbook summary and report."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from drctl.config import load_config, parse_config
from drctl.context import OpsContext
from drctl.errors import ExitStatus, UsageError
from drctl.ops.one_way.failback import FailbackOptions, FailbackResult, run_failback
from drctl.ops.one_way.reconcile import ReconcileMode, ReconcileOutcome
from drctl.ops.one_way.reprotect import ReprotectOptions, run_reprotect
from drctl.replication.base import kind_named
from drctl.reports import render
from drctl.state import FailoverMarker, MarkerStore
from tests.unit.ops.support import _marker_with_groups, _translation

CONFIG = parse_config({
    "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
    "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"}})


def _no_cluster(name: str) -> Any:
    raise AssertionError(f"no cluster may be asked ({name})")


class LocalStore(MarkerStore):
    """The real marker store on a local directory: no state topic, no cluster."""

    def __init__(self, *markers: FailoverMarker, root: Any) -> None:
        super().__init__(root, "_drctl_state", None)
        for m in markers:
            self.save(m)


def _ctx(store: MarkerStore) -> OpsContext:
    return OpsContext(CONFIG, _no_cluster, lambda cluster: store,
                      kind_named("mirrormaker2"))


def _marker(*steps: str, **results: dict[str, Any]) -> FailoverMarker:
    m = FailoverMarker.new("dc1", "dc2", "mirrormaker2", planned=False)
    for step in steps:
        m.record(step, results.get(step.replace(":", "_").replace("-", "_")))
    return m


def _no_gap(*_: Any) -> Any:
    raise AssertionError("the gap analysis must not run")


def test_a_failed_back_incident_is_reported_from_its_marker_and_nothing_is_asked(
        tmp_path: Path) -> None:
    marker = _marker("failover", "failback:gap", "failback:reconcile", "failback",
                     failback_gap={"safe": 4}, failback_reconcile={"mode": "copy-safe"})
    said: list[str] = []
    ctx = _ctx(LocalStore(marker, root=tmp_path))
    ctx.notify = said.append
    result = run_failback(ctx, FailbackOptions(), _no_gap)
    assert result.resumed and result.gap == {"safe": 4}
    assert result.next_command == f"drctl reprotect --incident {marker.incident}"
    assert said == [f"Failback of incident {marker.incident} is done (failed-back); next: "
                    f"`drctl reprotect --incident {marker.incident}`"]


def test_two_open_incidents_need_one_named(tmp_path: Path) -> None:
    a, b = _marker("failover"), _marker("failover")
    with pytest.raises(UsageError) as info:
        run_failback(_ctx(LocalStore(a, b, root=tmp_path)), FailbackOptions(), _no_gap)
    assert a.incident in info.value.message and b.incident in info.value.message
    assert "--incident" in (info.value.hint or "")


def test_no_order_check_and_copy_safe_exclude_each_other_before_anything_runs() -> None:
    with pytest.raises(UsageError, match="--no-check-order cannot go with --reconcile"):
        FailbackOptions(check_order=False, reconcile=ReconcileMode.COPY_SAFE)


@pytest.mark.parametrize(("gap", "audit", "left", "taken", "status"), [
    ({}, {}, [], {}, ExitStatus.SUCCESS),
    ({}, {"totals": {"skipped": 2}}, [], {}, ExitStatus.CHECK_FAILED),
    ({}, {"totals": {"not_placed": 1}}, [], {}, ExitStatus.CHECK_FAILED),
    ({"lost": [{"topic": "t", "partition": 0, "count": 10}]}, {}, [], {},
     ExitStatus.CHECK_FAILED),
    ({}, {}, [{"topic": "young", "groups": []}], {}, ExitStatus.CHECK_FAILED),
    # Never mirrored, but taken in by failback: compared and reconciled, not a problem.
    ({}, {}, [{"topic": "young", "groups": []}], {"young": "young"}, ExitStatus.SUCCESS),
])
def test_the_exit_status_names_what_failback_could_not_make_right(
        gap: dict[str, Any], audit: dict[str, Any], left: list[dict[str, Any]],
        taken: dict[str, str], status: ExitStatus) -> None:
    marker = _marker("failover")
    marker.left_behind = {"topics": left} if left else {}
    if taken:
        marker.record("failback:unmirrored", {"topics": taken})
    assert FailbackResult(marker, resumed=False, gap=gap, audit=audit).exit_status == status


def test_reprotect_refuses_an_incident_whose_failback_is_not_done(tmp_path: Path) -> None:
    marker = _marker("failover")
    with pytest.raises(UsageError) as info:
        run_reprotect(_ctx(LocalStore(marker, root=tmp_path)), ReprotectOptions())
    assert "failed-over" in info.value.message
    assert info.value.hint == "Run `drctl failback` first."


def test_reprotect_of_a_closed_incident_asks_nothing(tmp_path: Path) -> None:
    marker = _marker("failover", "failback", "reprotect:verified", "reprotect")
    marker.status = "closed"
    result = run_reprotect(_ctx(LocalStore(marker, root=tmp_path)),
                           ReprotectOptions(incident=marker.incident))
    assert result.summary()["status"] == "closed"


CONFIG_YAML = """
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


def test_failback_result_json_and_runbook_summary_keep_their_keys() -> None:
    report = _translation()
    outcome = ReconcileOutcome(ReconcileMode.COPY_SAFE, copy_safe={"copied": 3, "skipped": 1},
                               quarantine={"file": "q.jsonl", "topics": ["t.q"], "count": 2})
    result = FailbackResult(_marker_with_groups(), resumed=False,
                            gap={"safe": 4, "conflict": 1, "unkeyed": 1},
                            reconcile=outcome.as_dict(), reverse={"kind": "mirrormaker2"},
                            translation=report.as_dict(), translation_report=report)
    data = result.as_dict()
    assert list(data) == ["incident", "dry_run", "resumed", "plan", "gap", "reconcile",
                          "reverse", "verification", "translation", "switch_back", "audit",
                          "marker", "phase", "next_command", "timing", "scorecard", "reports"]
    assert data["reconcile"] == {"mode": "copy-safe", "copy_safe": {"copied": 3, "skipped": 1},
                                 "quarantine": {"file": "q.jsonl", "topics": ["t.q"],
                                                "count": 2}, "not_copied": {}}
    summary = result.runbook_summary()
    assert list(summary) == ["incident", "status", "phase", "next_command", "gap", "copied",
                             "gap_total", "quarantined",
                             "reverse", "verification", "positions", "positions_exact",
                             "positions_kept", "groups_not_applied", "positions_rewound",
                             "never_delivered", "switch_back", "redelivery_bound", "audit",
                             "audit_groups", "phases_s", "scorecard", "reports"]
    assert (summary["copied"], summary["gap_total"], summary["quarantined"],
            summary["positions"], summary["positions_exact"], summary["positions_kept"],
            summary["groups_not_applied"]) == (3, 6, 2, 3, 2, 1, ["g2"])


def test_failback_writes_its_report_unless_dry_run(tmp_path: Path) -> None:
    (tmp_path / "drctl.yaml").write_text(CONFIG_YAML)
    config = load_config(tmp_path / "drctl.yaml")
    result = FailbackResult(_marker_with_groups(), resumed=False,
                            reconcile=ReconcileOutcome(ReconcileMode.NONE).as_dict())
    ctx = OpsContext(config)
    paths = result.write_reports(ctx, tmp_path / "out")
    assert {p.suffix for p in paths} == {".md", ".html", ".json"}
    assert all(p.name.startswith(f"{result.marker.incident}-failback") for p in paths)
    assert "Reconcile: none" in next(p for p in paths if p.suffix == ".md").read_text()
    result.dry_run = True
    assert result.write_reports(ctx, tmp_path / "dry") == []


def test_failback_exit_status_names_skips_and_topics_left_behind() -> None:
    result = FailbackResult(_marker_with_groups(), resumed=False)
    assert result.exit_status == 0
    result.audit = {"totals": {"skipped": 2}}
    assert result.exit_status == 3
    result.audit = {"totals": {"skipped": 0}}
    result.marker.left_behind = {"topics": [{"topic": "late", "groups": []}]}
    assert result.exit_status == 3
    md = render("failback-report.md.j2", marker=asdict(result.marker), gap={}, reconcile={},
                reverse={}, verification={}, translation=None)
    assert "**Topic `late` was never mirrored**" in md


class _Clusters:
    """Fake clusters that answer (or not) and log, in order, every cluster asked."""

    def __init__(self, *, up: bool = True) -> None:
        self.up = up
        self.asked: list[str] = []

    def __call__(self, name: str) -> Any:
        from tests.unit.ops.support import FakeAdmin, FakeClients

        log = self.asked

        class LoggingAdmin(FakeAdmin):
            def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
                log.append(name)
                return super().list_topics(topic, timeout)

        return FakeClients(name, LoggingAdmin(self.up, {}))


def _refuse(seen: list[dict[str, Any]]) -> Any:
    from drctl.errors import Aborted

    def refuse(preview: dict[str, Any]) -> None:
        seen.append(preview)
        raise Aborted("Aborted by the operator.")
    return refuse


def _untouched(store: MarkerStore, marker: FailoverMarker) -> None:
    (again,) = store.load_all()
    assert again.steps.keys() == marker.steps.keys() and again.status == "open"
    assert again.updated_at == marker.updated_at


def test_failback_shows_its_plan_after_the_preflight_and_a_refusal_changes_nothing(
        tmp_path: Path) -> None:
    """Both clusters answer first; then the plan; a refusal runs no gap analysis, asks
    Connect nothing (no forward stop issued again) and writes no marker."""
    from drctl.errors import Aborted

    marker = _marker("failover")
    marker.topics = {"orders": "orders"}
    marker.groups = {"billing": {"applied": True}}
    store = LocalStore(marker, root=tmp_path)
    clusters, seen = _Clusters(), []
    ctx = OpsContext(CONFIG, clusters, lambda cluster: store, kind_named("mirrormaker2"))
    with pytest.raises(Aborted):
        run_failback(ctx, FailbackOptions(reconcile=ReconcileMode.QUARANTINE, groups="b.*"),
                     _no_gap, approve=_refuse(seen))
    assert clusters.asked == ["dc2", "dc1"]  # the preflight came first
    (preview,) = seen
    assert preview == {"source": "dc1", "target": "dc2", "incident": marker.incident,
                       "phase": "failed-over", "done": [], "topics": 1, "check_order": True,
                       "reconcile": "quarantine", "groups": "b.*",
                       "groups_moved_at_failover": 1, "force": False}
    _untouched(store, marker)


def test_failback_asks_nothing_when_a_cluster_does_not_answer(tmp_path: Path) -> None:
    from drctl.errors import Unreachable

    marker = _marker("failover")
    seen: list[dict[str, Any]] = []
    ctx = OpsContext(CONFIG, _Clusters(up=False), lambda cluster: LocalStore(
        marker, root=tmp_path), kind_named("mirrormaker2"))
    with pytest.raises(Unreachable, match="Failback needs both clusters"):
        run_failback(ctx, FailbackOptions(deadline_s=0.01), _no_gap, approve=_refuse(seen))
    assert seen == []


def test_failback_dry_run_asks_nothing(tmp_path: Path) -> None:
    """A dry run changes nothing, so nothing is approved: it goes on to the gap analysis."""
    marker = _marker("failover")
    seen: list[dict[str, Any]] = []

    class Reached(Exception):
        pass

    def gap(*_: Any) -> Any:
        raise Reached

    ctx = OpsContext(CONFIG, _Clusters(), lambda cluster: LocalStore(marker, root=tmp_path),
                     kind_named("mirrormaker2"))
    with pytest.raises(Reached):
        run_failback(ctx, FailbackOptions(dry_run=True, settle_s=0), gap,
                     approve=_refuse(seen))
    assert seen == []


def test_reprotect_shows_its_plan_once_both_clusters_answer_and_a_refusal_changes_nothing(
        tmp_path: Path) -> None:
    from drctl.errors import Aborted

    marker = _marker("failover", "failback:gap", "failback")
    marker.failover_point = {"orders": {0: 5}}
    store = LocalStore(marker, root=tmp_path)
    clusters, seen = _Clusters(), []
    ctx = OpsContext(CONFIG, clusters, lambda cluster: store, kind_named("mirrormaker2"))
    with pytest.raises(Aborted):
        run_reprotect(ctx, ReprotectOptions(incident=marker.incident, settle_s=2),
                      approve=_refuse(seen))
    assert clusters.asked == ["dc1", "dc2"]
    (preview,) = seen
    assert preview == {"source": "dc1", "target": "dc2", "incident": marker.incident,
                       "phase": "failed-back", "done": [], "reverse_topics": ["orders"],
                       "connectors": [], "settle_s": 2, "force": False}
    _untouched(store, marker)

"""Which incident a failover works on (ops/steps/incident.py `incident_to_continue`): a new
outage never continues an old incident. Preflight against fakes of drctl's own types
(no Kafka), and the result's JSON and runbook summary."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from drctl.config import parse_config
from drctl.context import OpsContext
from drctl.errors import Aborted, CheckFailed, ExitStatus, Unreachable, UsageError
from drctl.ops.one_way.failover import FailoverResult, run_failover
from drctl.ops.steps.failover_point import FailoverOptions, preflight
from drctl.ops.steps.incident import incident_to_continue
from drctl.replication.base import kind_named
from drctl.state import FailoverMarker, IncidentPhase, MarkerStore
from drctl.translate.model import TranslateMethod, TranslationReport
from tests.unit.ops.support import (
    FakeAdmin,
    FakeClients,
    _config,
    _context,
    _marker_with_groups,
    _translation,
)


class FakeStore:
    """The marker store's look-ups, from a list."""

    def __init__(self, *markers: FailoverMarker) -> None:
        self.markers = list(markers)

    def open_markers(self, source: str | None = None,
                     target: str | None = None) -> list[FailoverMarker]:
        return [m for m in self.markers if m.status == "open"
                and (source is None or m.source == source)
                and (target is None or m.target == target)]

    def get(self, incident: str) -> FailoverMarker:
        for m in self.markers:
            if m.incident == incident:
                return m
        raise UsageError(f"No failover marker '{incident}'.")


REP = parse_config({
    "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
    "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"},
}).require_replication()


def _marker(*steps: str, hours_ago: float = 0.0) -> FailoverMarker:
    m = FailoverMarker.new("dc1", "dc2", "mirrormaker2", planned=False)
    m.created_at = (datetime.now(UTC) - timedelta(hours=hours_ago)).isoformat(
        timespec="seconds")
    for step in steps:
        m.record(step)
    return m


def test_phase_follows_the_steps_recorded() -> None:
    assert _marker().phase == IncidentPhase.FAILING_OVER
    assert _marker("failover-point").phase == IncidentPhase.FAILING_OVER
    assert _marker("failover").phase == IncidentPhase.FAILED_OVER
    assert _marker("failover", "failback:gap").phase == IncidentPhase.FAILING_BACK
    assert _marker("failover", "failback:gap", "failback").phase == IncidentPhase.FAILED_BACK
    m = _marker("failover", "failback", "reprotect:quiet")
    assert m.phase == IncidentPhase.REPROTECTING
    assert m.phase.next_command == "drctl reprotect"
    m.status = "closed"
    assert m.phase == IncidentPhase.CLOSED


def test_no_open_incident_opens_a_new_one() -> None:
    marker, superseded = incident_to_continue(FakeStore(), REP, FailoverOptions())
    assert marker.steps == {} and marker.kind == "mirrormaker2" and superseded == []


def test_a_recent_failing_over_incident_is_continued() -> None:
    old = _marker("stop-replication", hours_ago=1)
    marker, _ = incident_to_continue(FakeStore(old), REP, FailoverOptions())
    assert marker is old


@pytest.mark.parametrize("steps", [("failover", "failback:gap"),
                                   ("failover", "failback:gap", "failback"),
                                   ("failover", "failback", "reprotect:quiet")])
def test_an_incident_whose_failback_began_is_never_continued(steps: tuple[str, ...]) -> None:
    old = _marker(*steps)
    for opts in (FailoverOptions(), FailoverOptions(incident=old.incident)):
        with pytest.raises(UsageError) as info:
            incident_to_continue(FakeStore(old), REP, opts)
        assert old.incident in info.value.message and "failback has started" in \
            info.value.message
        assert "--new-incident" in (info.value.hint or "")


def test_an_old_incident_is_continued_only_when_named() -> None:
    old = _marker("failover", hours_ago=30)
    with pytest.raises(UsageError) as info:
        incident_to_continue(FakeStore(old), REP, FailoverOptions())
    assert "was opened 30h ago, longer than the 12h" in info.value.message
    assert f"--incident {old.incident}" in (info.value.hint
                                                                            or "")
    marker, _ = incident_to_continue(FakeStore(old), REP,
                                     FailoverOptions(incident=old.incident))
    assert marker is old


def test_two_open_incidents_of_one_flow_are_named_both() -> None:
    a, b = _marker("failover"), _marker("stop-replication")
    with pytest.raises(UsageError) as info:
        incident_to_continue(FakeStore(a, b), REP, FailoverOptions())
    assert a.incident in info.value.message and b.incident in info.value.message


def test_new_incident_supersedes_the_open_ones() -> None:
    a, b = _marker("failover", "failback"), _marker("failover", hours_ago=40)
    marker, superseded = incident_to_continue(FakeStore(a, b), REP,
                                              FailoverOptions(new_incident=True))
    assert marker.incident not in (a.incident, b.incident) and marker.steps == {}
    assert superseded == [a, b]
    with pytest.raises(UsageError):
        incident_to_continue(FakeStore(a), REP,
                             FailoverOptions(new_incident=True, incident=a.incident))


def test_preflight_maps_topics_and_lists_active_groups() -> None:
    ctx = _context(_config(), {
        "dc1": FakeAdmin(True, {"orders": 3, "__consumer_offsets": 50}),
        "dc2": FakeAdmin(True, {"orders": 3},
                         groups={"billing": 2, "audit": 0, "ignored-x": 1}),
    })
    notes: list[str] = []
    ctx.notify = notes.append
    pre = preflight(ctx, FailoverOptions())
    # Preflight changes nothing: the inventory is kept once the operator approved.
    assert pre == {"source_reachable": True, "target_cluster_id": "fake-id",
                   "topics": {"orders": "orders"}, "active_groups_on_target": ["billing"]}
    assert notes == ["Preflight: dc2 must be reachable"]
    # The preview's list is one answer: no pause for a second one in every failover.
    assert ctx.clients("dc2").fake_admin.listed == 1


def test_preflight_with_the_source_down_uses_the_target_mirrors() -> None:
    ctx = _context(_config("dc1.{topic}"), {
        "dc1": FakeAdmin(False, {}),
        "dc2": FakeAdmin(True, {"dc1.orders": 3, "local": 1}),
    })
    pre = preflight(ctx, FailoverOptions())
    assert pre["source_reachable"] is False
    assert pre["topics"] == {"orders": "dc1.orders"}
    with pytest.raises(CheckFailed, match="planned failover needs the source 'dc1'"):
        preflight(ctx, FailoverOptions(planned=True))


def test_preflight_with_the_source_down_leaves_out_mirror_makers_own_topics_of_any_separator(
        ) -> None:
    """MirrorMaker 2 with separator '_' names its checkpoints topic and the heartbeats' copy
    like copies (`dc1_checkpoints_internal`, `dc1_heartbeats`): taken for the flow's topics,
    failback waited on heartbeats written every second ("still receiving writes")."""
    ctx = _context(_config("dc1_{topic}"), {
        "dc1": FakeAdmin(False, {}),
        "dc2": FakeAdmin(True, {"dc1_orders": 3, "dc1_checkpoints_internal": 1,
                                "dc1_heartbeats": 1, "heartbeats": 1,
                                "mm2-offset-syncs_dc1_internal": 1}),
    })
    assert preflight(ctx, FailoverOptions())["topics"] == {"orders": "dc1_orders"}


def test_preflight_of_a_switchover_fails_on_a_missing_or_smaller_mirror() -> None:
    ctx = _context(_config(), {
        "dc1": FakeAdmin(True, {"orders": 3, "payments": 2}),
        "dc2": FakeAdmin(True, {"orders": 2}),
    })
    with pytest.raises(CheckFailed) as info:
        preflight(ctx, FailoverOptions(planned=True))
    assert info.value.message == ("Preflight failed: orders has 2 partitions on dc2, orders "
                                  "has 3 on dc1; payments is missing on dc2.")
    # An outage's failover refuses a smaller mirror too (its extra partitions have no F)...
    with pytest.raises(CheckFailed) as info:
        preflight(ctx, FailoverOptions())
    assert info.value.message == ("Preflight failed: orders has 2 partitions on dc2, orders "
                                  "has 3 on dc1.")


def test_preflight_of_an_outage_goes_on_without_a_topic_never_mirrored() -> None:
    """...but not a topic the replicator never mirrored: there is nothing of it on the
    target; failover goes on with the rest and names it."""
    ctx = _context(_config(), {
        "dc1": FakeAdmin(True, {"orders": 3, "payments": 2}),
        "dc2": FakeAdmin(True, {"orders": 3}),
    })
    notes: list[str] = []
    ctx.notify = notes.append
    pre = preflight(ctx, FailoverOptions())
    assert pre["topics"] == {"orders": "orders"}
    assert pre["unmirrored"] == ["payments"]
    assert "Not mirrored on dc2, left behind: payments" in notes


def test_failover_result_json_and_runbook_summary_keep_their_keys() -> None:
    report = _translation()
    result = FailoverResult(_marker_with_groups(), dry_run=False, plan=[{"step": "failover-point"}],
                            preflight={"source_reachable": True},
                            translation=report.as_dict(), translation_report=report)
    data = result.as_dict([Path("r.md")])
    assert list(data) == ["incident", "dry_run", "resumed", "preflight", "plan", "marker",
                          "open_risks", "translation", "rpo", "unreplicated", "timing",
                          "scorecard", "reports"]
    assert data["marker"] == asdict(result.marker) and data["reports"] == ["r.md"]
    assert FailoverResult(_marker_with_groups(), dry_run=True).as_dict()["marker"] is None
    summary = result.runbook_summary([Path("r.md")])
    assert list(summary) == ["incident", "marker", "replication_stop", "late_copies",
                             "groups_applied",
                             "groups_total", "groups_not_exact", "left_behind",
                             "redelivery_bound", "rpo_s", "rpo", "rto_s", "phases_s",
                             "scorecard", "reports"]
    assert (summary["groups_applied"], summary["groups_total"],
            summary["groups_not_exact"]) == (1, 2, ["g2"])


def test_the_operator_sees_the_plan_and_a_refusal_changes_nothing(tmp_path: Path) -> None:
    """The preview comes after the preflight and before any step: a refusal leaves the old
    incident open and writes no marker (the plan before the prompt, as terraform does)."""
    old = _marker("stop-replication")
    store = MarkerStore(tmp_path, "_drctl_state", None)
    store.save(old)
    admins = {"dc1": FakeAdmin(False, {}),
              "dc2": FakeAdmin(True, {"orders": 3}, groups={"billing": 1})}
    ctx = OpsContext(_config(), lambda name: FakeClients(name, admins[name]),
                     lambda cluster: store, kind_named("mirrormaker2"))
    seen: list[dict[str, object]] = []

    def refuse(preview: dict[str, object]) -> None:
        seen.append(preview)
        raise Aborted("Aborted by the operator.")

    with pytest.raises(Aborted):
        run_failover(ctx, FailoverOptions(new_incident=True), approve=refuse)
    (preview,) = seen
    assert preview["mode"] == "unplanned" and preview["source_reachable"] is False
    assert preview["topics"] == 1 and preview["supersedes"] == [old.incident]
    assert preview["active_groups_on_target"] == ["billing"]
    assert preview["incident"] != old.incident and preview["continuing"] is False
    assert [m.incident for m in store.open_markers()] == [old.incident]
    assert [m.incident for m in store.load_all()] == [old.incident]


def test_the_edge_of_an_application_is_checked_with_the_source_down(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the source gone, the groups reading both sides come from drctl's inventory (or
    MirrorMaker 2's checkpoints); unknown is refused, never "none"; --force says which group
    moves (on the application's topics only) and which does not."""
    from drctl.config import NameFilter, Scope
    from drctl.ops.steps import failover_point
    from drctl.ops.steps.failover_point import scope_preflight
    from drctl.translate.snapshots import SnapshotTopic, SourceInventory

    inventory = SourceInventory({"orders": 1, "invoices": 1},
                                {"orders-app": ["orders", "invoices"],
                                 "billing-reader": ["invoices"]}, 1_700_000_000_000)
    found = {"topic": SnapshotTopic(inventory=inventory)}
    monkeypatch.setattr(failover_point, "read_snapshot_topic", lambda *_a: found["topic"])
    monkeypatch.setattr(failover_point, "read_checkpoints", lambda *_a: {})
    notes: list[str] = []
    ctx = _context(_config(), {"dc1": FakeAdmin(False, {}), "dc2": FakeAdmin(True, {})},
                   notes.append)
    ctx.scope = Scope("orders", NameFilter(("orders",)))
    with pytest.raises(CheckFailed, match="inventory of 2023.*orders-app reads orders.*invoices"):
        scope_preflight(ctx, FailoverOptions(), {"orders": "orders"}, source_up=False)
    out = scope_preflight(ctx, FailoverOptions(force=True), {"orders": "orders"}, False)
    assert [g["group"] for g in out["straddling_groups"]] == ["orders-app"]
    assert notes == ["--force: moving orders-app on orders only; it goes on reading "
                     "invoices on dc1"]
    # A scope naming its groups: another group reading its topic is not moved, and says so.
    notes.clear()
    ctx.scope = Scope("billing", NameFilter(("invoices",)), NameFilter(("billing-.*",)))
    out = scope_preflight(ctx, FailoverOptions(force=True), {"invoices": "invoices"}, False)
    assert out["scope_groups"] == ["billing-reader"]
    assert notes == ["--force: not moving group orders-app reads invoices (in the scope) and "
                     "orders (outside it)"]
    # Nothing known of the groups: refused, and --force says it went on not knowing.
    found["topic"] = SnapshotTopic()
    with pytest.raises(CheckFailed, match="neither its inventory.*nor checkpoints"):
        scope_preflight(ctx, FailoverOptions(), {"invoices": "invoices"}, False)
    out = scope_preflight(ctx, FailoverOptions(force=True), {"invoices": "invoices"}, False)
    assert "is unknown" in out["edge_unknown"]


def test_a_failover_claims_its_topics_under_the_lock_before_anything_stops(
        tmp_path: Path) -> None:
    """Two failovers that began together: the second reads the open incidents again under
    the flow's lock — overlapping now, it is refused naming the first; the whole flow leaves
    out what the first holds; one it supersedes hands its connector entries on."""
    from drctl.config import NameFilter, Scope
    from drctl.ops.one_way.failover import claim
    from drctl.ops.steps.side_by_side import scope_among_open

    store = MarkerStore(tmp_path, "_drctl_state", None)
    ctx = OpsContext(_config(), lambda name: FakeClients(name, FakeAdmin(True, {})),
                     lambda cluster: store, kind_named("mirrormaker2"))
    billing = Scope("billing", NameFilter(("invoices",)))
    first = FailoverMarker.new("dc1", "dc2", "mirrormaker2", planned=False)
    first.scope = billing.as_dict()
    greedy = Scope("greedy", NameFilter(("invoices", "orders")))
    second = FailoverMarker.new("dc1", "dc2", "mirrormaker2", planned=False)
    second.scope = greedy.as_dict()
    # Both chose their scope before either claimed it.
    assert scope_among_open(billing, store.open_markers())[0] == billing
    assert scope_among_open(greedy, store.open_markers())[0] == greedy
    claim(ctx, first, [], {"invoices": "invoices"})
    assert [m.topics for m in store.open_markers()] == [{"invoices": "invoices"}]
    with pytest.raises(UsageError, match=f"beside open incident {first.incident}"):
        claim(ctx, second, [], {"invoices": "invoices", "orders": "orders"})
    assert [m.incident for m in store.load_all()] == [first.incident]
    # A new incident of billing's scope supersedes it and takes over its entries.
    first.edits = [{"connector": "src", "key": "topics.exclude", "wanted": ["invoices"],
                    "added": ["invoices"], "seed": None}]
    store.save(first)
    again = FailoverMarker.new("dc1", "dc2", "mirrormaker2", planned=False)
    again.scope = billing.as_dict()
    ctx.scope = billing
    claim(ctx, again, [first], {"invoices": "invoices"})
    assert again.edits == first.edits
    whole = FailoverMarker.new("dc1", "dc2", "mirrormaker2", planned=False)
    ctx.scope = Scope()
    claim(ctx, whole, [], {"invoices": "invoices", "orders": "orders"})
    assert whole.topics == {"orders": "orders"} and whole.covers.whole
    assert not whole.covers.covers_topic("invoices") and ctx.scope == whole.covers
    assert {m.incident for m in store.open_markers()} == {again.incident, whole.incident}


class _Restarting(FakeAdmin):
    """The target's admin client while its broker restarts: after `healthy` metadata
    answers, the next `drops` metadata requests fail with a transport error."""

    def __init__(self, topics: dict[str, int], *, healthy: int, drops: int) -> None:
        super().__init__(True, topics)
        self.healthy, self.drops = healthy, drops
        self.asked: list[str | None] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.asked.append(topic)
        if self.healthy < len(self.asked) <= self.healthy + self.drops:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata"))
        return super().list_topics(topic, timeout)


def _failover_ctx(tmp_path: Path, target: FakeAdmin, notes: list[str],
                  deadline_s: float = 5) -> OpsContext:
    """A failover of dc1 -> dc2 with dc1 gone, markers in `tmp_path`, under --deadline
    `deadline_s`; a run again after a dropped cluster is allowed (retry attempts), waiting
    no time."""
    config = parse_config({
        "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"},
        "retry": {"initial_s": 0, "attempts": 3}})
    store = MarkerStore(tmp_path, "_drctl_state", None)
    admins = {"dc1": FakeAdmin(False, {}), "dc2": target}
    return OpsContext(config, lambda name: FakeClients(name, admins[name],
                                                       deadline_s=deadline_s,
                                                       notify=notes.append),
                      lambda cluster: store, kind_named("mirrormaker2"), notes.append,
                      deadline_s=deadline_s)


def _no_translation(monkeypatch: pytest.MonkeyPatch) -> None:
    from drctl.ops.one_way import failover

    monkeypatch.setattr(failover, "translate_offsets",
                        lambda *_a, **_k: TranslationReport("dc1", "dc2", TranslateMethod.AUTO,
                                                            True, False))


def test_the_failover_point_is_one_metadata_answer_asked_again_while_the_broker_restarts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51, finding 9: the failover point read one raw metadata request per topic after
    replication had stopped, and a broker restarting then ended the failover. Its partitions
    come from one answer, asked again (the retry said, naming the cluster) until it comes."""
    topics = {f"t{i}": 2 for i in range(5)}
    notes: list[str] = []
    target = _Restarting(topics, healthy=10**6, drops=0)
    ctx = _failover_ctx(tmp_path, target, notes)
    _no_translation(monkeypatch)
    from drctl.ops.one_way import failover

    real_fence = failover.fence_unconfirmed_stop

    def restarting(*args: Any, **kwargs: Any) -> Any:  # right before the failover point
        target.healthy, target.drops = len(target.asked), 2
        return real_fence(*args, **kwargs)

    monkeypatch.setattr(failover, "fence_unconfirmed_stop", restarting)
    result = run_failover(ctx, FailoverOptions(), confirm=lambda _q: True)
    marker = result.marker
    assert marker.failover_point == {t: {0: 0, 1: 0} for t in topics}
    assert "failover" in marker.steps and result.exit_status == ExitStatus.SUCCESS
    # After the stop: two answers lost, then one for all five topics; never one per topic.
    assert target.asked[target.healthy:target.healthy + 3] == [None, None, None]
    assert set(target.asked) == {None}
    retries = [n for n in notes if n.startswith("dc2 (fake:9092): ")]
    assert len(retries) == 2 and "attempt 1, retrying in" in retries[0]
    assert not any("again" in n for n in notes)  # waited for inside the step, not re-run


def test_a_failover_runs_again_after_its_target_dropped_and_continues_its_incident(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51, finding 9: failover was not run again on a dropped cluster as failback is.
    A read that gave up while the target's broker restarted (after the stop was recorded)
    waits for the target, then the same failover runs again from the last step recorded:
    the same incident (even with --new-incident), each step recorded once."""
    from drctl.ops.steps import failover_point

    notes: list[str] = []
    ctx = _failover_ctx(tmp_path, FakeAdmin(True, {"orders": 3}), notes)
    _no_translation(monkeypatch)
    old = _marker("stop-replication")
    MarkerStore(tmp_path, "_drctl_state", None).save(old)
    lost = {"times": 1}
    real = failover_point.watermarks

    def watermarks(*args: Any, **kwargs: Any) -> Any:
        if lost["times"]:
            lost["times"] -= 1
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused"))
        return real(*args, **kwargs)

    monkeypatch.setattr(failover_point, "watermarks", watermarks)
    approved: list[object] = []
    result = run_failover(ctx, FailoverOptions(new_incident=True), confirm=lambda _q: True,
                          approve=approved.append)
    marker = result.marker
    assert len(approved) == 1 and not result.resumed  # asked once, for one run
    assert "failover" in marker.steps and marker.failover_point == {"orders": {0: 0, 1: 0,
                                                                               2: 0}}
    assert any(n.startswith("Failover stopped at a step: ") and "dc2 to answer" in n
               for n in notes), notes
    assert "Running failover again: it continues after the last step recorded (run 2)" \
        in notes
    store = MarkerStore(tmp_path, "_drctl_state", None)
    assert [m.incident for m in store.open_markers()] == [marker.incident]
    assert store.get(old.incident).status == "closed"  # superseded once, by this one
    runs = [r for r in marker.timings if r.get("command") == "failover"]
    assert len(runs) == 1 and runs[0]["finished"]


def test_a_failover_whose_target_stays_down_ends_with_exit_4_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The target gone mid-failover and not back within --deadline: exit 4 naming it and
    what to do, never an unnamed "a Kafka cluster did not answer"."""
    notes: list[str] = []
    target = _Restarting({"orders": 3}, healthy=10**6, drops=0)
    ctx = _failover_ctx(tmp_path, target, notes, deadline_s=1)
    _no_translation(monkeypatch)
    from drctl.ops.one_way import failover

    real_fence = failover.fence_unconfirmed_stop

    def gone(*args: Any, **kwargs: Any) -> Any:
        target.healthy, target.drops = len(target.asked), 10**6
        return real_fence(*args, **kwargs)

    monkeypatch.setattr(failover, "fence_unconfirmed_stop", gone)
    with pytest.raises(Unreachable) as raised:
        run_failover(ctx, FailoverOptions(source_deadline_s=1), confirm=lambda _q: True)
    assert raised.value.exit_status == ExitStatus.UNREACHABLE
    assert raised.value.message.startswith("Failover stopped: cluster 'dc2' at fake:9092 ")
    assert raised.value.hint is not None and raised.value.hint.startswith(
        "Bring 'dc2' back, then run it again: it continues after the last step recorded.")
    marker = MarkerStore(tmp_path, "_drctl_state", None).open_markers()[0]
    assert "stop-replication" in marker.steps and "failover-point" not in marker.steps

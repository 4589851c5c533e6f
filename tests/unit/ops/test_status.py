"""Status (drctl/ops/steps/flow_status.py) through `OpsContext`, against fakes of drctl's own types
(no Kafka): what it reads, its deadline, its verdict."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from drctl.config import parse_config
from drctl.context import OpsContext
from drctl.errors import ExitStatus
from drctl.ops.steps.flow_status import collect_status, flow_protection, status_verdict
from drctl.replication.base import FlowState, kind_named
from tests.unit.ops.support import FakeAdmin, FakeClients, _config


@dataclass
class FakeMarkers:
    cluster: str | None

    def open_markers(self) -> list[Any]:
        return []


def test_status_reads_clusters_groups_and_markers_through_the_context() -> None:
    config = _config()
    admins = {"dc1": FakeAdmin(False, {}), "dc2": FakeAdmin(True, {}, groups={"billing": 1})}
    asked: list[str | None] = []

    def markers(cluster: str | None) -> Any:
        asked.append(cluster)
        return FakeMarkers(cluster)

    ctx = OpsContext(config, lambda name: FakeClients(name, admins[name]), markers,
                     kind_named("mirrormaker2"))
    st = collect_status(ctx, deadline_s=0)
    assert st["clusters"]["dc1"]["reachable"] is False
    assert st["clusters"]["dc2"]["cluster_id"] == "fake-id"
    # The source is down: what the local state knows of the last inventory, said as such.
    inventory = st["replication"].pop("inventory")
    assert (inventory["written_ms"], inventory["wrote"]) == (None, False)
    assert inventory["summary"] == ("Source inventory: never written from here; not "
                                    "refreshed: source or target unreachable")
    protection = st["replication"].pop("protection")
    # The source is down and the target holds no heartbeat copied from it: unknown, not 0.
    rpo = st["replication"].pop("rpo")
    assert (rpo["method"], rpo["seconds"]) == ("unknown", None), rpo
    assert "dc1.heartbeats on the target holds no heartbeat" in rpo["reason"]
    assert st["replication"] == {"kind": "mirrormaker2", "source": "dc1", "target": "dc2",
                                 "connectors": {}, "lag": None,
                                 # no Connect worker answered, so MM2's settings are unknown
                                 "translation_costs": None}
    # No Connect configured: whether replication protects the source is not known.
    assert protection["state"] == "unknown" and "replication.connect" in protection["why"]
    assert asked == ["dc2"]
    assert st["groups"] == {"dc2": {"billing": {"state": "STABLE", "members": 1}}}


@dataclass
class HungKind:
    """A replication kind whose Connect worker accepts the connection and never answers."""

    release: threading.Event
    lag_asked: int = 0

    def component_states(self, rep: Any) -> dict[str, str]:
        self.release.wait(60)
        return {"never": "RUNNING"}

    def forward_state(self, rep: Any) -> Any:
        self.release.wait(60)
        return None

    lag_measured = True

    def replicated_upto(self, ctx: Any) -> None:
        self.lag_asked += 1
        return None


def test_status_answers_by_its_deadline_when_connect_hangs() -> None:
    config = parse_config({
        "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2",
                        "connect": {"url": "http://127.0.0.1:9", "source_connector": "mm2"}},
        "retry": {"initial_s": 0, "attempts": 1}})
    admins = {"dc1": FakeAdmin(True, {}), "dc2": FakeAdmin(True, {})}
    release = threading.Event()
    kind = HungKind(release)
    ctx = OpsContext(config, lambda name: FakeClients(name, admins[name]), FakeMarkers,
                     kind)  # type: ignore[arg-type]
    started = time.monotonic()
    try:
        st = collect_status(ctx, deadline_s=0.5)
    finally:
        release.set()
    assert time.monotonic() - started < 30  # the worker hangs for 60 s: it was not waited for
    assert st["replication"]["connectors"] == {"mm2": "NO ANSWER"}
    # The lag comes from the same worker: not asked after it gave no answer, and unknown.
    assert kind.lag_asked == 0
    rpo = st["replication"]["rpo"]
    assert rpo["seconds"] is None and "did not answer within 0.5 s" in rpo["reason"], rpo
    assert all(c["reachable"] for c in st["clusters"].values())
    assert st["markers_from"] == "state topic on dc2 and the local state directory"


def _status(reachable: tuple[bool, ...], stops: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"clusters": {f"c{i}": {"reachable": up} for i, up in enumerate(reachable)},
            "open_failovers": [{"incident": f"fo-{i}", "replication_stop": stop,
                                "phase": "failed-over",
                                "next_command": f"drctl failback --incident fo-{i}"}
                               for i, stop in enumerate(stops)]}


@pytest.mark.parametrize(("status", "exit_status", "says"), [
    (_status((True, True)), ExitStatus.SUCCESS, None),
    (_status((False, False)), ExitStatus.UNREACHABLE, "No cluster answered (c0, c1)."),
    (_status((False, True), ("stopped",)), ExitStatus.CHECK_FAILED,
     "1 open incident(s): fo-0 (failed-over): `drctl failback --incident fo-0`"),
    (_status((True, False), ("stopped", "pending")), ExitStatus.CHECK_FAILED,
     "Replication stop pending for fo-1"),
])
def test_status_verdict_is_not_green_when_it_sees_nothing_or_an_open_failover(
        status: dict[str, Any], exit_status: ExitStatus, says: str | None) -> None:
    verdict, why = status_verdict(status)
    assert verdict == exit_status
    assert (why is None) if says is None else (why is not None and why.startswith(says))


def test_status_verdict_is_a_config_error_when_connect_refuses_drctl() -> None:
    status = {**_status((True, True)), "replication": {"refused": {
        "message": "Kafka Connect at https://w:8083 refused drctl: GET / with 401",
        "hint": "Set replication.connect.username and password."}}}
    verdict, why = status_verdict(status)
    assert verdict == ExitStatus.USAGE
    assert why is not None and "https://w:8083" in why and "username" in why
    # Nothing answering at all is still the first thing to say.
    verdict, _ = status_verdict({**status, **_status((False, False))})
    assert verdict == ExitStatus.UNREACHABLE


def test_status_says_what_came_through_a_pending_stop() -> None:
    from drctl.ops.steps.flow_status import _late_copies_line
    from drctl.state import FailoverMarker

    m = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    assert _late_copies_line(m) is None  # the stop was confirmed at failover
    m.stop_unconfirmed = True
    assert "not counted yet" in (_late_copies_line(m) or "")
    m.late_copies = {"total": 5, "stale_keys": ["a", "b"]}
    assert _late_copies_line(m) == ("5 record(s) copied after the failover point; 2 key(s) "
                                    "got an old value after a new one")
    m.late_copies = {"total": None, "notes": ["Not checked: 'primary' is unreachable."]}
    assert _late_copies_line(m) == "not counted: Not checked: 'primary' is unreachable."


def _forward(**components: str) -> FlowState:
    """A forward flow from Connect's words per component, e.g. 'RUNNING with tasks RUNNING'."""
    copying = tuple(n for n, s in components.items() if "tasks RUNNING" in s)
    return FlowState(True, dict(components), copying=copying)


SRC, CKPT = "mm2-source", "mm2-checkpoint"


def test_every_component_copying_is_protected_with_its_lag() -> None:
    now = 1_000_000
    lag = [{"behind": 3, "oldest_unreplicated_ms": now - 4_000}, {"behind": 0}]
    out = flow_protection([], _forward(**{SRC: "RUNNING with tasks RUNNING",
                                          CKPT: "RUNNING with tasks RUNNING"}),
                          lag, [SRC, CKPT], now_ms=now)
    assert out["state"] == "protected" and out["lag_records"] == 3 and out["lag_s"] == 4.0


def test_a_stopped_or_failed_component_is_exposed() -> None:
    out = flow_protection([], _forward(**{SRC: "STOPPED", CKPT: "RUNNING with tasks RUNNING"}),
                          [{"behind": 0}], [SRC, CKPT])
    assert out["state"] == "exposed" and "mm2-source is STOPPED" in out["why"]


def test_a_connector_with_nothing_to_copy_yet_is_not_exposure() -> None:
    """MirrorMaker 2 makes no task while no topic or group matches: RUNNING with no tasks and
    nothing behind is protected; with records behind it is exposed."""
    forward = _forward(**{SRC: "RUNNING with no tasks", CKPT: "RUNNING with no tasks"})
    out = flow_protection([], forward, [], [SRC, CKPT])
    assert out["state"] == "protected" and "nothing to copy yet" in out["why"]
    behind = flow_protection([], forward, [{"behind": 5}], [SRC, CKPT])
    assert behind["state"] == "exposed"
    unknown_lag = flow_protection([], forward, None, [SRC, CKPT])
    assert unknown_lag["state"] == "exposed"


def test_an_unreadable_replicator_is_unknown() -> None:
    out = flow_protection([], TimeoutError("no answer"), [{"behind": 0}], [SRC])
    assert out["state"] == "unknown" and "did not answer" in out["why"]


def test_status_lists_each_clusters_groups_once_both_at_once(tmp_path: Any) -> None:
    """A listing compares two ListGroups answers a pause apart (kafka/groups.py
    `group_listing`): status takes one per cluster, both clusters at once, and the source
    inventory shares the source's (it used to list the source a second time)."""
    config = parse_config({
        "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"},
        "state": {"dir": str(tmp_path)},
        "retry": {"initial_s": 0, "attempts": 1}})
    # Each cluster's first answer waits until the other cluster has been asked too: listed
    # one after the other, the first would wait in vain (and fail the test).
    both_asked = threading.Barrier(2, timeout=20)
    admins = {"dc1": FakeAdmin(True, {}, groups={"billing": 0}),
              "dc2": FakeAdmin(True, {}, groups={"billing": 1})}
    for admin in admins.values():
        admin.on_list = lambda admin=admin: both_asked.wait() if admin.listed == 0 else None
    ctx = OpsContext(config, lambda name: FakeClients(name, admins[name]), FakeMarkers,
                     kind_named("mirrormaker2"))
    st = collect_status(ctx, deadline_s=5)
    assert st["groups"] == {"dc1": {"billing": {"state": "EMPTY", "members": 0}},
                            "dc2": {"billing": {"state": "STABLE", "members": 1}}}
    assert {name: admin.listed for name, admin in admins.items()} == {"dc1": 2, "dc2": 2}


def test_status_lists_the_groups_while_it_reads_the_replications_lag(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing's second answer comes LIST_PAUSE_S after its first: status reads the lag
    meanwhile instead of waiting for it. Here the source's second answer waits until the lag
    is being read: waited for first, the listing would wait in vain (and fail the test)."""
    import drctl.ops.steps.flow_status as flow_status

    config = parse_config({
        "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"},
        "state": {"dir": str(tmp_path)},
        "retry": {"initial_s": 0, "attempts": 1}})
    lag_read = threading.Event()
    admins = {"dc1": FakeAdmin(True, {}, groups={"billing": 0}),
              "dc2": FakeAdmin(True, {}, groups={})}
    source = admins["dc1"]
    source.on_list = lambda: (None if source.listed == 0
                              else lag_read.wait(20) or pytest.fail("listed before the lag"))

    def lag(ctx: OpsContext) -> dict[str, Any]:
        lag_read.set()
        return {}

    monkeypatch.setattr(flow_status, "target_lag", lag)
    ctx = OpsContext(config, lambda name: FakeClients(name, admins[name]), FakeMarkers,
                     kind_named("mirrormaker2"))
    st = collect_status(ctx, deadline_s=5)
    assert lag_read.is_set() and source.listed == 2
    assert st["groups"]["dc1"] == {"billing": {"state": "EMPTY", "members": 0}}

"""Operations run against fakes of drctl's own types through `OpsContext` (no Kafka)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from drctl.config import Config, parse_config
from drctl.context import OpsContext
from drctl.errors import CheckFailed, ExitStatus
from drctl.kafka.clients import WireLog
from drctl.ops.failover import FailoverOptions, preflight
from drctl.ops.status import collect_status, status_verdict
from drctl.replication.base import kind_named


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    if isinstance(value, Exception):
        future.set_exception(value)
    else:
        future.set_result(value)
    return future


@dataclass
class FakeAdmin:
    """The few AdminClient calls preflight makes, answered from memory."""

    up: bool
    topics: dict[str, int]  # topic -> partitions
    groups: dict[str, int] = field(default_factory=dict)  # group -> members

    def describe_cluster(self, request_timeout: float) -> Future[Any]:
        if not self.up:
            return _done(TimeoutError("unreachable"))
        return _done(SimpleNamespace(cluster_id="fake-id", nodes=[1], controller=None))

    def poll(self, timeout: float) -> int:
        return 0  # no librdkafka events to serve

    def list_topics(self, timeout: float) -> Any:
        return SimpleNamespace(topics={
            t: SimpleNamespace(partitions=dict.fromkeys(range(n)), error=None)
            for t, n in self.topics.items()})

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        return _done(SimpleNamespace(valid=[SimpleNamespace(group_id=g) for g in self.groups]))

    def describe_consumer_groups(self, groups: list[str],
                                 request_timeout: float) -> dict[str, Future[Any]]:
        return {g: _done(SimpleNamespace(state="STABLE" if self.groups[g] else "EMPTY",
                                         members=[object()] * self.groups[g]))
                for g in groups}


@dataclass
class FakeClients:
    name: str
    fake_admin: FakeAdmin
    bootstrap: str = "fake:9092"
    wire: WireLog = field(default_factory=WireLog)

    def admin(self, *, fresh: bool = False) -> FakeAdmin:
        return self.fake_admin

    def connection_errors(self) -> list[Any]:
        return []


def _config(rename: str = "{topic}") -> Config:
    return parse_config({
        "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2",
                        "rename": rename},
        "groups": {"exclude": ["ignored-.*"]},
        "retry": {"initial_s": 0, "attempts": 1},
    })


def _context(config: Config, admins: dict[str, FakeAdmin],
             notify: Any = lambda _: None) -> OpsContext:
    def clients(name: str) -> Any:
        return FakeClients(name, admins[name])

    def no_markers(cluster: str | None) -> Any:
        raise AssertionError("preflight reads no markers")

    return OpsContext(config, clients, no_markers, kind_named("mirrormaker2"), notify)


def test_preflight_maps_topics_and_lists_active_groups() -> None:
    ctx = _context(_config(), {
        "dc1": FakeAdmin(True, {"orders": 3, "__consumer_offsets": 50}),
        "dc2": FakeAdmin(True, {"orders": 3},
                         groups={"billing": 2, "audit": 0, "ignored-x": 1}),
    })
    notes: list[str] = []
    ctx.notify = notes.append
    pre = preflight(ctx, FailoverOptions())
    # The source answers: the inventory is kept (these fakes cannot write it; never fatal).
    inventory = pre.pop("inventory")
    assert inventory["error"].startswith("not refreshed: "), inventory
    assert pre == {"source_reachable": True, "target_cluster_id": "fake-id",
                   "topics": {"orders": "orders"}, "active_groups_on_target": ["billing"]}
    assert notes == ["Preflight: dc2 must be reachable", inventory["summary"]]


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


def test_from_config_builds_the_kind_and_factories() -> None:
    ctx = OpsContext.from_config(_config())
    assert ctx.kind is kind_named("mirrormaker2")
    assert ctx.require_kind() is ctx.kind
    assert ctx.clients("dc2").bootstrap == "y"


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

    def component_states(self, rep: Any) -> dict[str, str]:
        self.release.wait(60)
        return {"never": "RUNNING"}

    def forward_state(self, rep: Any) -> Any:
        self.release.wait(60)
        return None

    def replication_lag(self, rep: Any, source: Any) -> None:
        return None


def test_status_answers_by_its_deadline_when_connect_hangs() -> None:
    config = parse_config({
        "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2",
                        "connect": {"url": "http://127.0.0.1:9", "source_connector": "mm2"}},
        "retry": {"initial_s": 0, "attempts": 1}})
    admins = {"dc1": FakeAdmin(True, {}), "dc2": FakeAdmin(True, {})}
    release = threading.Event()
    ctx = OpsContext(config, lambda name: FakeClients(name, admins[name]), FakeMarkers,
                     HungKind(release))  # type: ignore[arg-type]
    started = time.monotonic()
    try:
        st = collect_status(ctx, deadline_s=0.5)
    finally:
        release.set()
    assert time.monotonic() - started < 30  # the worker hangs for 60 s: it was not waited for
    assert st["replication"]["connectors"] == {"mm2": "NO ANSWER"}
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
    from drctl.ops.status import _late_copies_line
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

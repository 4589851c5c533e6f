"""Shared by the ops tests (and tests/unit/test_context.py, translate/test_model.py):
fakes of drctl's own types answered from memory (no Kafka), a config, a marker and a
translation report."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from drctl.config import Config, Scope, parse_config
from drctl.context import OpsContext
from drctl.kafka.clients import WireLog
from drctl.kafka.coordinator import Coordinator, InProcess
from drctl.replication.base import kind_named
from drctl.state import FailoverMarker
from drctl.translate.model import GroupResult, PartitionResult, TranslateMethod, TranslationReport


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
    # ListGroups requests answered, and what each does before it answers (a test's hook).
    listed: int = 0
    on_list: Callable[[], object] = lambda: None

    def poll(self, timeout: float) -> int:
        return 0  # no librdkafka events to serve

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        if not self.up:
            raise TimeoutError("unreachable")
        return SimpleNamespace(cluster_id="fake-id", controller_id=-1,
                               brokers={1: SimpleNamespace(id=1)}, topics={
            t: SimpleNamespace(partitions=dict.fromkeys(range(n)), error=None)
            for t, n in self.topics.items()})

    def describe_configs(self, resources: list[Any], request_timeout: float
                         ) -> dict[Any, Future[Any]]:
        return {r: _done({}) for r in resources}  # every broker setting at its default

    def list_offsets(self, requests: dict[Any, Any], isolation_level: Any,
                     request_timeout: float) -> dict[Any, Future[Any]]:
        # Empty partitions: no transaction open anywhere.
        return {tp: _done(SimpleNamespace(offset=0)) for tp in requests}

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        self.on_list()
        self.listed += 1
        return _done(SimpleNamespace(valid=[SimpleNamespace(group_id=g) for g in self.groups],
                                     errors=[]))

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
    deadline_s: float = 30.0
    notify: Any = None

    @property
    def properties(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap}

    def admin(self, *, fresh: bool = False) -> FakeAdmin:
        return self.fake_admin

    def coordinator(self) -> Coordinator:
        return InProcess(self.fake_admin)

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


def _marker_with_groups() -> FailoverMarker:
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


def open_incident(scope: Scope, topics: list[str], groups: tuple[str, ...] = (),
                  steps: tuple[str, ...] = ("failover",)) -> FailoverMarker:
    """An open incident of `scope` on `topics`, its `groups` moved, `steps` recorded."""
    m = FailoverMarker.new("a", "b", "mirrormaker2", planned=False)
    if not scope.whole:
        m.scope = scope.as_dict()
    m.topics = {t: t for t in topics}
    m.groups = {g: {"applied": True} for g in groups}
    for step in steps:
        m.record(step, {})
    return m

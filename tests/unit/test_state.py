"""Failover markers (drctl/state.py): they round-trip with their steps; a newer schema
is refused; a store publishes through one producer; a publish the cluster does not
acknowledge is asked again within the deadline, then exit 4 naming the cluster."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from drctl.state import FailoverMarker, MarkerStore


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


class _Producer:
    """Acknowledges every record, but leaves the first `silent` flushes unanswered (a
    broker restarting)."""

    def __init__(self, conf: dict[str, str], silent: int = 0) -> None:
        self.conf = conf
        self.sent: list[bytes] = []
        self.silent = silent
        self.flushes = 0
        self._waiting: list[Any] = []

    def produce(self, topic: str, key: bytes, value: bytes, on_delivery: Any) -> None:
        self.sent.append(value)
        self._waiting.append(on_delivery)

    def flush(self, timeout: float) -> int:
        self.flushes += 1
        if self.flushes <= self.silent:
            return len(self._waiting)
        for answer in self._waiting:
            answer(None, None)
        self._waiting.clear()
        return 0


class _Admin:
    def __init__(self) -> None:
        self.listed = 0

    def list_topics(self, timeout: float) -> Any:
        self.listed += 1
        return SimpleNamespace(topics={"_drctl_state": object()})


class _Cluster:
    """The state topic's cluster: counts the producers a store asks for."""

    name = "secondary"
    deadline_s = 30.0
    notify = None

    def __init__(self, silent: int = 0) -> None:
        self.producers: list[_Producer] = []
        self.the_admin = _Admin()
        self.silent = silent

    def producer(self, **conf: str) -> _Producer:
        self.producers.append(_Producer(conf, self.silent))
        return self.producers[-1]

    def admin(self) -> _Admin:
        return self.the_admin


def test_a_store_publishes_every_save_through_one_producer(tmp_path: Path) -> None:
    """A command saves its marker after every step: one producer and one look at the topic
    for all of them, not a new producer (and its wait for a producer id) per save."""
    cluster = _Cluster()
    store = MarkerStore(tmp_path, "_drctl_state", cluster)  # type: ignore[arg-type]
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    for step in ("preflight", "stop-replication", "failover-point"):
        marker.record(step)
        store.save(marker)
    [producer] = cluster.producers
    assert [json.loads(v)["steps"].keys() for v in producer.sent][-1] == {
        "preflight", "stop-replication", "failover-point"}
    assert len(producer.sent) == 3 and cluster.the_admin.listed == 1
    # Each save is acknowledged before the next is sent: nothing can overtake it.
    assert producer.conf["acks"] == "all"
    assert producer.conf["max.in.flight.requests.per.connection"] == "1"


def test_what_the_returns_settled_is_each_topics_latest(tmp_path: Path) -> None:
    """Applications return apart from the whole flow: each topic's settled point comes from
    the latest return that covered it, named per topic."""
    from drctl.ops.steps.failover_point import settled_by_last_return

    store = MarkerStore(tmp_path, "_drctl_state", None)
    for incident, at, starts in (("fo-a", "2026-01-01T00:00:02+00:00", {"a1": {"0": 5}}),
                                 ("fo-w", "2026-01-01T00:00:03+00:00", {"c1": {"0": 7}}),
                                 ("fo-old", "2026-01-01T00:00:01+00:00",
                                  {"a1": {"0": 1}, "c1": {"0": 1}})):
        m = FailoverMarker.new("p", "s", "mirrormaker2", planned=False)
        m.incident, m.status = incident, "closed"
        m.record("reprotect:cut-over", {"forward_starts": starts,
                                        "target_ends": {f"m.{t}": v for t, v in starts.items()}})
        m.steps["reprotect:cut-over"].at = at
        store.save(m)
    settled = settled_by_last_return(store, "p", "s")
    assert settled["source"] == {"a1": {"0": 5}, "c1": {"0": 7}}
    assert settled["target"] == {"m.a1": {"0": 5}, "m.c1": {"0": 7}}
    assert settled["by_topic"] == {"a1": "fo-a", "c1": "fo-w"}
    assert settled["incident"] == "fo-w"
    assert settled_by_last_return(store, "p", "other") == {}


def _restarting_cluster(tmp_path: Path, silent: int, monkeypatch: pytest.MonkeyPatch,
                        retries: list[str]) -> tuple[MarkerStore, _Cluster]:
    """A store whose state topic's cluster leaves the first `silent` flushes unanswered;
    its retry lines go to `retries`."""
    from drctl.kafka.clients import ClusterClients

    fake = _Cluster(silent)
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    clients = ClusterClients("secondary", {"bootstrap.servers": f"127.0.0.1:{port}"},
                             deadline_s=1.5, notify=retries.append)
    monkeypatch.setattr(clients, "producer", fake.producer)
    monkeypatch.setattr(clients, "admin", fake.admin)
    return MarkerStore(tmp_path, "_drctl_state", clients), fake


def test_a_publish_not_acknowledged_is_sent_once_and_waited_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker restarting leaves two flushes unanswered, then acknowledges: the save
    waits for the copy it sent (each wait a line naming the cluster), never sends a
    second."""
    retries: list[str] = []
    store, fake = _restarting_cluster(tmp_path, 2, monkeypatch, retries)
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    store.save(marker)
    [producer] = fake.producers
    assert producer.flushes == 3 and len(producer.sent) == 1
    assert len(retries) == 2 and all(r.startswith("secondary (127.0.0.1:") for r in retries)


def test_a_publish_never_acknowledged_is_exit_4_naming_the_cluster(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51, finding 9: a marker the state topic's cluster never acknowledges within the
    deadline was exit 1, as if the marker were wrong; it is the cluster that did not answer
    (exit 4), named, and the marker is kept locally."""
    from drctl.errors import ExitStatus
    from drctl.kafka.clients import ClusterUnreachable

    store, fake = _restarting_cluster(tmp_path, 10**6, monkeypatch, [])
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", planned=False)
    with pytest.raises(ClusterUnreachable) as raised:
        store.save(marker)
    error = raised.value
    assert error.exit_status == ExitStatus.UNREACHABLE and error.cluster == "secondary"
    assert "Could not write the failover marker to _drctl_state: cluster 'secondary' at " \
           "127.0.0.1:" in error.message
    assert fake.producers[0].flushes > 1 and len(fake.producers[0].sent) == 1
    assert error.hint is not None and str(tmp_path / "markers") in error.hint
    assert [m.incident for m in MarkerStore(tmp_path, "_drctl_state", None).load_all()] \
        == [marker.incident]

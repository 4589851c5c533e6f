"""The one quarantine producer (drctl/gap/quarantine.py), without a cluster."""

from __future__ import annotations

from typing import Any

import pytest

import drctl.gap.quarantine as quarantine_module
from drctl.errors import DrctlError
from drctl.gap.quarantine import RerunTag, produce_to_quarantine
from drctl.kafka.records import Record


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

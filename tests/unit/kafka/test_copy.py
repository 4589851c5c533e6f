"""The one copier: records as large as the destination takes, a full queue waited out, a
re-run skipping what an earlier run wrote, and a failed delivery never called done."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from drctl.errors import DrctlError
from drctl.kafka.copy import RerunTag, copy_records
from drctl.kafka.records import Record


def _done(value: Any) -> Future[Any]:
    f: Future[Any] = Future()
    f.set_result(value)
    return f


@dataclass
class FakeProducer:
    conf: dict[str, Any]
    full_times: int = 0  # BufferError this many times first (a full local queue)
    fail: bool = False  # every delivery fails
    sent: list[dict[str, Any]] = field(default_factory=list)
    pending: list[Any] = field(default_factory=list)
    polls: int = 0

    def produce(self, topic: str, **message: Any) -> None:
        if self.full_times:
            self.full_times -= 1
            raise BufferError("Local: Queue full")
        self.sent.append({"topic": topic, **message})
        self.pending.append(message["on_delivery"])

    def poll(self, _timeout: float = 0) -> int:
        self.polls += 1
        for cb in self.pending:
            cb("KafkaError{MSG_SIZE_TOO_LARGE}" if self.fail else None, None)
        self.pending.clear()
        return 0

    def flush(self, _timeout: float = 0) -> int:
        self.poll()
        return 0


@dataclass
class FakeClients:
    max_bytes: dict[str, str]
    producer_kwargs: dict[str, Any] = field(default_factory=dict)
    made: FakeProducer | None = None
    name: str = "secondary"
    full_times: int = 0
    fail: bool = False

    def admin(self) -> Any:
        def describe_configs(resources: list[Any], request_timeout: float) -> Any:
            return {r: _done({"max.message.bytes": SimpleNamespace(
                value=self.max_bytes.get(r.name))}) for r in resources}
        return SimpleNamespace(describe_configs=describe_configs)

    def producer(self, **conf: Any) -> FakeProducer:
        self.made = FakeProducer(conf, self.full_times, self.fail)
        return self.made


def rec(i: int, size: int = 10) -> Record:
    return Record("orders", i % 2, i, f"k{i}".encode(), b"x" * size, 1000 + i, 1, (("h", b"1"),))


def test_a_topic_that_takes_larger_records_raises_the_producers_limit() -> None:
    clients = FakeClients({"orders": "5242880"})
    sent = copy_records(clients, [rec(0, 3_000_000)], lambda r: (r.topic, r.partition),
                        topics=["orders"])  # type: ignore[arg-type]
    assert sent == {"orders": 1}
    assert clients.made is not None
    assert int(clients.made.conf["message.max.bytes"]) > 5_242_880
    assert clients.made.conf["enable.idempotence"] == "true"
    # Default topics: the client's own 1 MB limit (plus a request's overhead).
    small = FakeClients({})
    copy_records(small, [rec(1)], lambda r: (r.topic, r.partition),
                 topics=["orders"])  # type: ignore[arg-type]
    assert small.made is not None
    assert 1_000_000 < int(small.made.conf["message.max.bytes"]) < 1_100_000


def test_a_full_queue_is_waited_out_and_the_record_copied_as_it_was() -> None:
    clients = FakeClients({}, full_times=3)
    copy_records(clients, [rec(0), rec(1)], lambda r: ("orders.copy", r.partition),
                 topics=["orders.copy"])  # type: ignore[arg-type]
    assert clients.made is not None
    got = clients.made.sent
    assert [(m["topic"], m["partition"], m["key"], m["timestamp"]) for m in got] == [
        ("orders.copy", 0, b"k0", 1000), ("orders.copy", 1, b"k1", 1001)]
    assert got[0]["headers"] == [("h", b"1")]
    assert clients.made.polls >= 3  # the queue drained between attempts


def test_a_rerun_skips_what_carries_a_done_tag_and_tags_the_rest() -> None:
    tag = RerunTag("drctl-reconciled", lambda r: f"{r.partition}:{r.offset}".encode())
    clients = FakeClients({})
    sent = copy_records(clients, [rec(0), rec(1), rec(2)], lambda r: (r.topic, r.partition),
                        topics=["orders"], tag=tag, done={b"1:1"})  # type: ignore[arg-type]
    assert sent == {"orders": 2}
    assert clients.made is not None
    assert [m["headers"][-1] for m in clients.made.sent] == [
        ("drctl-reconciled", b"0:0"), ("drctl-reconciled", b"0:2")]


def test_a_delivery_the_broker_refused_fails_the_copy_with_the_count() -> None:
    clients = FakeClients({}, fail=True)
    with pytest.raises(DrctlError) as raised:
        copy_records(clients, [rec(0), rec(1)], lambda r: (r.topic, r.partition),
                     topics=["orders"])  # type: ignore[arg-type]
    assert raised.value.message.startswith("2 of 2 records were not written to orders")
    assert "MSG_SIZE_TOO_LARGE" in raised.value.message

"""Copying records into a cluster as they were — same key, value, headers and timestamp, in
the order given: the one producer behind reconcile, quarantine, copy-back and the return to
protection.

A full local queue is waited out and a retriable produce error retried; every delivery is
checked (a record the broker did not take fails the copy with the count); the producer takes
records as large as the destination topics take (their `max.message.bytes`), not only the
client's 1 MB default. With a `RerunTag` each copy carries a header naming its origin, so a
re-run can tell what an earlier, interrupted run already wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from drctl.errors import DrctlError
from drctl.kafka.clients import ClusterClients
from drctl.kafka.retriable import is_retriable
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call

# Produce errors librdkafka calls retriable (a new topic's metadata not there yet, ...).
_PRODUCE_RETRY = RetryPolicy(initial_s=0.1, max_s=5.0, attempts=20, deadline_s=60.0)
_CLIENT_DEFAULT_MAX = 1_000_000  # librdkafka's message.max.bytes
_REQUEST_OVERHEAD = 64 * 1024  # a request's own bytes on top of the largest batch


class CopiedRecord(Protocol):
    """What a copy needs of a record (`kafka.records.Record` and `GapRecord` have it)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def timestamp_ms(self) -> int: ...
    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]: ...


# Where a record goes: (topic, partition).
Route = Callable[[CopiedRecord], tuple[str, int]]


@dataclass(frozen=True)
class RerunTag:
    """A header each copy carries, naming its origin, so a re-run skips what an earlier run
    wrote."""

    header: str
    of: Callable[[CopiedRecord], bytes]

    def carried_by(self, headers: Iterable[tuple[str, bytes | None]]) -> bytes | None:
        return next((v for k, v in headers if k == self.header and v), None)


def copy_records(clients: ClusterClients, records: Iterable[CopiedRecord], route: Route, *,
                 topics: Collection[str], tag: RerunTag | None = None,
                 done: Collection[bytes] = (), what: str = "records",
                 rerun_hint: str = "Run the same command again: what was copied is not "
                                   "copied twice.") -> dict[str, int]:
    """Produce `records` where `route` says (`topics`: every topic it names); a record whose
    tag is in `done` is skipped. Returns how many records went to each topic."""
    producer = clients.producer(**{
        "acks": "all",  # with idempotence: retries never duplicate
        "enable.idempotence": "true",
        "message.max.bytes": str(_request_limit(clients, topics))})
    sent: dict[str, int] = {}
    failures: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    for rec in records:
        headers = list(rec.headers)
        if tag is not None:
            origin = tag.of(rec)
            if origin in done:
                continue
            headers.append((tag.header, origin))
        topic, partition = route(rec)
        _produce(producer, topic, partition=partition, key=rec.key, value=rec.value,
                 headers=headers, timestamp=rec.timestamp_ms, on_delivery=delivered)
        sent[topic] = sent.get(topic, 0) + 1
        producer.poll(0)
    left = producer.flush(60)
    if left or failures:
        total = sum(sent.values())
        raise DrctlError(f"{left + len(failures)} of {total} {what} were not written to "
                         f"{', '.join(sorted(sent))} on '{clients.name}'"
                         + (f": {failures[0]}" if failures else " within 60 s") + ".",
                         rerun_hint)
    return sent


def _request_limit(clients: ClusterClients, topics: Collection[str]) -> int:
    """The producer's request limit: as large as the largest record a destination topic
    takes (a topic may allow more than the client's 1 MB default)."""
    largest = _CLIENT_DEFAULT_MAX
    if topics:
        admin = clients.admin()
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))]
        try:
            for future in admin.describe_configs(resources, request_timeout=30).values():
                entry = future.result(timeout=30).get("max.message.bytes")
                if entry is not None and entry.value:
                    largest = max(largest, int(entry.value))
        except KafkaException:
            pass  # a topic that does not exist yet takes the broker's default
    return min(largest + _REQUEST_OVERHEAD, 1_000_000_000)  # librdkafka's ceiling


def _produce(producer: Any, topic: str, **message: Any) -> None:
    def once() -> None:
        while True:
            try:
                producer.produce(topic, **message)
                return
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain it

    try:
        retry_call(once, _PRODUCE_RETRY, retry_on=(KafkaException,),
                   give_up=lambda exc: not is_retriable(exc), sleep=producer.poll)
    except RetriesExhausted as exc:
        raise DrctlError(f"Could not produce to '{topic}': {exc.last}.") from exc

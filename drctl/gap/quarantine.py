"""Produce gap records to quarantine topics, as they were: same key, value, headers and
timestamp, in the order given.

The one producer behind `gap-analysis --to-topic` and failback's reconcile. Topics are created
when missing and refused when too small; a full local queue is waited out and a retriable
produce error retried; every delivery is checked (a record the broker did not take fails the
run). With a `RerunTag`, each record carries a header naming its origin, and records whose tag
the topic already holds (an earlier, interrupted run) are not produced again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from drctl.errors import CheckFailed, DrctlError
from drctl.gap.result import GapResult
from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import header_values
from drctl.kafka.retriable import is_retriable
from drctl.kafka.topics import wait_for_leaders
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call

# Produce errors librdkafka calls retriable (a new topic's metadata not there yet, ...).
_PRODUCE_RETRY = RetryPolicy(initial_s=0.1, max_s=5.0, attempts=20, deadline_s=60.0)


class QuarantinedRecord(Protocol):
    """What a quarantine needs of a record (`kafka.records.Record` and `GapRecord` have it)."""

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


# Where a record goes: (quarantine topic, partition).
Route = Callable[[QuarantinedRecord], tuple[str, int]]


@dataclass(frozen=True)
class RerunTag:
    """A header each quarantined record carries so a re-run skips what an earlier run wrote."""

    header: str
    of: Callable[[QuarantinedRecord], bytes]


def quarantine_name(pattern: str, source_topic: str) -> str:
    """`{topic}` in the name stands for the source topic (one quarantine topic per topic)."""
    return pattern.replace("{topic}", source_topic)


def ensure_quarantine_topics(clients: ClusterClients, wanted: Mapping[str, int]
                             ) -> dict[str, int]:
    """Create the missing topics with the partitions they need; returns each one's partition
    count."""
    admin = clients.admin()
    existing = admin.list_topics(timeout=30).topics
    counts = dict(wanted)
    for name, partitions in wanted.items():
        if name in existing:
            counts[name] = len(existing[name].partitions)
            if counts[name] < partitions:
                raise CheckFailed(f"Quarantine topic '{name}' has {counts[name]} "
                                  f"partitions; the records need {partitions}.",
                                  "Use another --to-topic, or add partitions to it.")
    new = [NewTopic(n, num_partitions=p, replication_factor=-1)
           for n, p in wanted.items() if n not in existing]
    for name, future in (admin.create_topics(new) if new else {}).items():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise DrctlError(f"Could not create quarantine topic '{name}': {exc}.") from exc
    if wanted:
        wait_for_leaders(admin, sorted(wanted))
    return counts


def produce_to_quarantine(clients: ClusterClients, records: Iterable[QuarantinedRecord],
                          route: Route, wanted: Mapping[str, int], *,
                          tag: RerunTag | None = None) -> dict[str, int]:
    """Produce `records` to the topics `route` names (`wanted`: each topic's partitions);
    returns how many records went to each topic in this run."""
    counts = ensure_quarantine_topics(clients, wanted)
    done: set[bytes] = set()
    if tag is not None:
        ends = watermarks(clients.admin(), [(t, p) for t, n in counts.items() for p in range(n)])
        done = header_values(clients, ends, tag.header)
    producer = clients.producer(**{"acks": "all"})  # idempotent: retries never duplicate
    sent: dict[str, int] = {}
    failures: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    for rec in records:
        headers = list(rec.headers)
        if tag is not None:
            value = tag.of(rec)
            if value in done:
                continue
            headers.append((tag.header, value))
        topic, partition = route(rec)
        _produce(producer, topic, partition=partition, key=rec.key, value=rec.value,
                 headers=headers, timestamp=rec.timestamp_ms, on_delivery=delivered)
        sent[topic] = sent.get(topic, 0) + 1
        producer.poll(0)
    left = producer.flush(60)
    if left or failures:
        rerun = ("Check the target cluster, then run again: records already quarantined are "
                 "not produced twice." if tag is not None else
                 "Check the target cluster, then run again (the topic may then hold some "
                 "records twice).")
        raise DrctlError(f"{left + len(failures)} record(s) did not reach the quarantine "
                         f"topic{'s' if len(sent) > 1 else ''}"
                         + (f": {failures[0]}" if failures else "") + ".", rerun)
    return sent


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
        raise DrctlError(f"Could not produce to quarantine topic '{topic}': {exc.last}.") \
            from exc


def quarantine_gap(result: GapResult, clients: ClusterClients, pattern: str) -> dict[str, int]:
    """Every unreplicated record of `result` to `pattern` on `clients`' cluster, in its source
    partition; returns how many went to each topic."""
    wanted: dict[str, int] = {}
    for source_topic, partitions in _partition_counts(result).items():
        name = quarantine_name(pattern, source_topic)
        wanted[name] = max(wanted.get(name, 0), partitions)
    return produce_to_quarantine(
        clients, result.iter_records(),
        lambda rec: (quarantine_name(pattern, rec.topic), rec.partition), wanted)


def _partition_counts(result: GapResult) -> dict[str, int]:
    return {t["source_topic"]: max(t["partitions"]) + 1
            for t in result.plan.get("topics", []) if t["partitions"]}

"""Produce unreplicated records to a quarantine topic, as they were: same partition, key, value,
headers and timestamp, in source offset order."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from drctl.errors import CheckFailed, DrctlError
from drctl.gap.result import GapRecord, GapResult
from drctl.kafka.clients import ClusterClients


def quarantine_name(pattern: str, source_topic: str) -> str:
    """`{topic}` in the name stands for the source topic (one quarantine topic per topic)."""
    return pattern.replace("{topic}", source_topic)


def _partition_counts(result: GapResult) -> dict[str, int]:
    return {t["source_topic"]: max(t["partitions"]) + 1
            for t in result.plan.get("topics", []) if t["partitions"]}


def _ensure_topics(clients: ClusterClients, wanted: dict[str, int]) -> None:
    admin = clients.admin()
    existing = admin.list_topics(timeout=15).topics
    for name, partitions in wanted.items():
        if name in existing and len(existing[name].partitions) < partitions:
            raise CheckFailed(f"Quarantine topic '{name}' has {len(existing[name].partitions)} "
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


def quarantine(result: GapResult, clients: ClusterClients, pattern: str,
               records: Iterable[GapRecord] | None = None) -> dict[str, int]:
    """Write `records` (default: every unreplicated record) to `pattern` on `clients`' cluster;
    returns how many went to each topic."""
    wanted: dict[str, int] = {}
    for source_topic, partitions in _partition_counts(result).items():
        name = quarantine_name(pattern, source_topic)
        wanted[name] = max(wanted.get(name, 0), partitions)
    _ensure_topics(clients, wanted)
    producer = clients.producer(**{"acks": "all"})
    sent: dict[str, int] = {}
    failures: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    for rec in records if records is not None else result.iter_records():
        topic = quarantine_name(pattern, rec.topic)
        while True:
            try:
                producer.produce(topic, key=rec.key, value=rec.value,
                                 headers=list(rec.headers), partition=rec.partition,
                                 timestamp=rec.timestamp_ms, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        sent[topic] = sent.get(topic, 0) + 1
        producer.poll(0)
    left = producer.flush(60)
    if left or failures:
        raise DrctlError(f"{left + len(failures)} record(s) did not reach the quarantine "
                         f"topic{'s' if len(sent) > 1 else ''}"
                         + (f": {failures[0]}" if failures else "") + ".",
                         "Check the target cluster, then run again (the topic may then hold "
                         "some records twice).")
    return sent

"""Produce gap records to quarantine topics, as they were: same key, value, headers and
timestamp, in the order given.

Behind `gap-analysis --to-topic` and failback's reconcile. Topics are created when missing and
refused when too small; records are written by the one copier (`kafka/copy.py`). With a
`RerunTag`, records whose tag the topic already holds (an earlier, interrupted run) are not
produced again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from drctl.errors import CheckFailed, DrctlError
from drctl.gap.result import GapResult
from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.copy import CopiedRecord, RerunTag, Route, copy_records
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import header_values
from drctl.kafka.topics import wait_for_leaders


def quarantine_name(pattern: str, source_topic: str) -> str:
    """`{topic}` in the name stands for the source topic (one quarantine topic per topic)."""
    return pattern.replace("{topic}", source_topic)


def ensure_quarantine_topics(clients: ClusterClients, wanted: Mapping[str, int]
                             ) -> dict[str, int]:
    """Create the missing topics with the partitions they need; returns each one's partition
    count."""
    admin = clients.admin()
    existing = cluster_metadata(clients).topics
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
        wait_for_leaders(clients, sorted(wanted))
    return counts


def produce_to_quarantine(clients: ClusterClients, records: Iterable[CopiedRecord],
                          route: Route, wanted: Mapping[str, int], *,
                          tag: RerunTag | None = None) -> dict[str, int]:
    """Produce `records` to the topics `route` names (`wanted`: each topic's partitions);
    returns how many records went to each topic in this run."""
    counts = ensure_quarantine_topics(clients, wanted)
    done: set[bytes] = set()
    if tag is not None:
        ends = watermarks(clients.admin(), [(t, p) for t, n in counts.items() for p in range(n)])
        done = header_values(clients, ends, tag.header)
    rerun = ("Check the target cluster, then run again: records already quarantined are "
             "not produced twice." if tag is not None else
             "Check the target cluster, then run again (the topic may then hold some "
             "records twice).")
    return copy_records(clients, records, route, topics=list(counts), tag=tag, done=done,
                        what="quarantined records", rerun_hint=rerun)


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

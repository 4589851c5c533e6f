"""Topic and partition metadata: listing, leaders, internal-topic rules."""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Mapping

from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.retriable import transient

TP = tuple[str, int]  # a topic-partition


@functools.cache
def _internal(separator: str) -> re.Pattern[str]:
    # MirrorMaker 2 names its checkpoints topic and the heartbeats' copies with its
    # replication.policy.separator (`primary_checkpoints_internal`, `primary_heartbeats`).
    def either(*seps: str) -> str:
        return "|".join(re.escape(s) for s in sorted({*seps, separator}))

    return re.compile(rf"^(__.*|_drctl.*|connect-.*|mm2-.*|.*({either('.', '-')})internal|"
                      rf"heartbeats|.*({either('.')})heartbeats|.*\.drctl-quarantine)$")


def is_internal_topic(name: str, separator: str = ".") -> bool:
    """Kafka's, Connect's, MirrorMaker 2's and drctl's own topics: never user data.
    `separator`: the MirrorMaker 2 flow's (ReplicationSettings.separator), which its internal
    topics' names carry."""
    return bool(_internal(separator).match(name))


def topic_partitions(clients: ClusterClients, topics: Iterable[str] | None = None
                     ) -> dict[str, list[int]]:
    """Partitions per topic (of `topics`, those that exist; every topic by default), from
    one metadata answer (`cluster_metadata`: retried, the cluster named) however many
    topics are asked about."""
    meta = cluster_metadata(clients).topics
    names = meta if topics is None else [t for t in dict.fromkeys(topics) if t in meta]
    return {t: sorted(meta[t].partitions) for t in names}


def wait_for_leaders(clients: ClusterClients, topics: Iterable[str],
                     deadline_s: float = 30.0, *,
                     partitions: Mapping[str, int] | None = None) -> None:
    """A topic created a moment ago has no leader yet; most requests fail until it has. A
    topic grown a moment ago (`partitions`: the count each must show at least) is served
    with its old count a moment longer: the controller answers CreatePartitions when it has
    committed the change, the broker serves it once applied, and a record sent meanwhile to a
    new partition fails as unknown."""
    from drctl.retry import WaitTimedOut, wait_for

    wanted = set(topics)
    least = dict(partitions or {})

    def led() -> bool | None:
        meta = cluster_metadata(clients).topics
        return True if all(t in meta and len(meta[t].partitions) >= least.get(t, 1) and
                           all(p.leader >= 0 for p in meta[t].partitions.values())
                           for t in wanted) else None

    try:
        wait_for(led, deadline_s=deadline_s, interval_s=0.2)
    except WaitTimedOut:
        pass  # callers retry retriable errors; do not fail here


def log_append_time_topics(admin: object, topics: Iterable[str],
                           timeout_s: float = 30.0) -> frozenset[str]:
    """Those of `topics` whose broker stamps each record on append (message.timestamp.type
    LogAppendTime): a copy there carries a new timestamp, so a record and its copy compare
    without it. Topics that do not exist are left out."""
    return _topics_where(admin, topics, "message.timestamp.type",
                         lambda v: v == "LogAppendTime", timeout_s)


def compacted_topics(admin: object, topics: Iterable[str],
                     timeout_s: float = 30.0) -> frozenset[str]:
    """Those of `topics` whose cleanup.policy includes compact: their cleaner removes records
    from the middle of a partition, on each cluster on its own schedule."""
    return _topics_where(admin, topics, "cleanup.policy",
                         lambda v: "compact" in v.split(","), timeout_s)


def _topics_where(admin: object, topics: Iterable[str], name: str,
                  holds: Callable[[str], bool], timeout_s: float) -> frozenset[str]:
    """Those of `topics` whose config `name` has a value for which `holds`; topics that do
    not exist are left out."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ResourceType

    wanted = sorted(set(topics))
    if not wanted:
        return frozenset()
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in wanted]
    futures = admin.describe_configs(resources, request_timeout=timeout_s)  # type: ignore[attr-defined]
    out = set()
    for resource, future in futures.items():
        try:
            entry = future.result(timeout=timeout_s).get(name)
        except KafkaException as exc:
            if transient(exc):  # a broker restarting: unknown, never "not set"
                raise
            continue  # no such topic (yet): nothing of it to compare
        if entry is not None and entry.value is not None and holds(entry.value):
            out.add(resource.name)
    return frozenset(out)


def ensure_topics(clients: ClusterClients, wanted: Mapping[str, int],
                  config: Mapping[str, str] | None = None) -> list[str]:
    """Create those of `wanted` (topic -> partitions) that do not exist, with the cluster's
    replication factor, and wait for their leaders; returns the ones created. A topic another
    process created meanwhile counts as there."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    existing = cluster_metadata(clients).topics
    new = [NewTopic(name, num_partitions=n, replication_factor=-1, config=dict(config or {}))
           for name, n in sorted(wanted.items()) if name not in existing]
    if not new:
        return []
    for future in clients.admin().create_topics(new).values():
        try:
            future.result(30)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    wait_for_leaders(clients, [n.topic for n in new])
    return [n.topic for n in new]


def grow_topics(clients: ClusterClients, wanted: Mapping[str, int]) -> dict[str, int]:
    """Give each topic of `wanted` at least that many partitions; returns the topics grown,
    with the count they had before. A topic that has enough (or that another process grew
    meanwhile) is left alone."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewPartitions

    meta = cluster_metadata(clients).topics
    grow = {t: len(meta[t].partitions) for t, n in wanted.items()
            if t in meta and len(meta[t].partitions) < n}
    if not grow:
        return {}
    futures = clients.admin().create_partitions(
        [NewPartitions(t, wanted[t]) for t in sorted(grow)], request_timeout=30)
    for future in futures.values():
        try:
            future.result(30)
        except KafkaException as exc:
            if "INVALID_PARTITIONS" not in str(exc):
                raise
    wait_for_leaders(clients, sorted(grow), partitions={t: wanted[t] for t in grow})
    return grow


# A broker answers an alteration once the controller has committed it (KRaft), and applies it
# when its own metadata catches up: a describe right after can still show the old value. Seen
# on a loaded machine: the flow's lock topic set to LogAppendTime, then read back as not.
CONFIG_SHOWS_S = 10.0
_CONFIG_READ_EVERY_S = 0.2


def set_topic_config(admin: object, topic: str, configs: Mapping[str, str],
                     timeout_s: float = 30.0, shows_s: float = CONFIG_SHOWS_S, *,
                     clock: Callable[[], float] = time.monotonic,
                     sleep: Callable[[float], None] = time.sleep) -> bool:
    """Set `configs` on `topic`, incrementally (the topic's other configs stay), then read
    them back until every value shows (at most `shows_s`): whether they did. A refusal (not
    authorized, a policy) is the KafkaException the broker answered."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    futures = admin.incremental_alter_configs(  # type: ignore[attr-defined]
        [resource], request_timeout=timeout_s)
    for future in futures.values():
        future.result(timeout_s)
    end = clock() + shows_s
    while True:
        if _config_shows(admin, topic, configs, timeout_s):
            return True
        if clock() >= end:
            return False
        sleep(_CONFIG_READ_EVERY_S)


def _config_shows(admin: object, topic: str, configs: Mapping[str, str],
                  timeout_s: float) -> bool:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ResourceType

    futures = admin.describe_configs(  # type: ignore[attr-defined]
        [ConfigResource(ResourceType.TOPIC, topic)], request_timeout=timeout_s)
    try:
        entries = next(iter(futures.values())).result(timeout=timeout_s)
    except KafkaException as exc:
        if transient(exc):
            return False  # a broker catching up or restarting: read again
        raise
    return all(getattr(entries.get(name), "value", None) == value
               for name, value in configs.items())

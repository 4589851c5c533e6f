"""Topic and partition metadata: listing, leaders, internal-topic rules."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from confluent_kafka import Consumer, TopicPartition

TP = tuple[str, int]  # a topic-partition

_INTERNAL = re.compile(r"^(__.*|_drctl.*|connect-.*|mm2-.*|.*[\-\.]internal|heartbeats|"
                       r".*\.heartbeats|.*\.drctl-quarantine)$")


def is_internal_topic(name: str) -> bool:
    """Kafka's, Connect's, MirrorMaker 2's and drctl's own topics: never user data."""
    return bool(_INTERNAL.match(name))


def list_topic_partitions(consumer: Consumer, topic: str | None = None,
                          timeout_s: float = 10.0) -> list[TopicPartition]:
    md = consumer.list_topics(topic, timeout=timeout_s)
    out: list[TopicPartition] = []
    for name, tmeta in md.topics.items():
        if tmeta.error is not None:
            continue
        out.extend(TopicPartition(name, p) for p in sorted(tmeta.partitions))
    return sorted(out, key=lambda tp: (tp.topic, tp.partition))


def partition_count(consumer: Consumer, topic: str, timeout_s: float = 10.0) -> int | None:
    md = consumer.list_topics(topic, timeout=timeout_s)
    tmeta = md.topics.get(topic)
    if tmeta is None or tmeta.error is not None:
        return None
    return len(tmeta.partitions)


def wait_for_leaders(admin: object, topics: Iterable[str], deadline_s: float = 30.0) -> None:
    """A topic created a moment ago has no leader yet; most requests fail until it has."""
    wanted = set(topics)
    end = time.monotonic() + deadline_s
    while True:
        meta = admin.list_topics(timeout=10).topics  # type: ignore[attr-defined]
        if all(t in meta and meta[t].partitions and
               all(p.leader >= 0 for p in meta[t].partitions.values()) for t in wanted):
            return
        if time.monotonic() > end:
            return  # callers retry retriable errors; do not fail here
        time.sleep(0.2)


def log_append_time_topics(admin: object, topics: Iterable[str],
                           timeout_s: float = 30.0) -> frozenset[str]:
    """Those of `topics` whose broker stamps each record on append (message.timestamp.type
    LogAppendTime): a copy there carries a new timestamp, so a record and its copy compare
    without it. Topics that do not exist are left out."""
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
            entry = future.result(timeout=timeout_s).get("message.timestamp.type")
        except KafkaException:
            continue  # no such topic (yet): nothing of it to compare
        if entry is not None and entry.value == "LogAppendTime":
            out.add(resource.name)
    return frozenset(out)

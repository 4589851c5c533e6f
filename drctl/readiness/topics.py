"""Topic parity: every source topic the flow covers has a mirror with at least its partitions
and the settings a failover depends on.

MirrorMaker 2's default config filter never syncs `message.timestamp.type` or
`min.insync.replicas`, and a mirror created by hand drifts: after a failover producers would
run with weaker durability, or every copy would carry a new timestamp.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from drctl.config import ReplicationSettings
from drctl.findings import Area, Finding, Severity

_Alter = Callable[[str, str, str], str]  # topic, key, value -> the command that sets it

# The settings compared, each with how the target may differ without risk.
COMPARED = ("message.timestamp.type", "min.insync.replicas", "cleanup.policy", "retention.ms",
            "max.message.bytes", "compression.type")


@dataclass(frozen=True)
class TopicShape:
    partitions: int
    configs: Mapping[str, str]


def read_shapes(admin: AdminClient, topics: Mapping[str, int], timeout_s: float = 30.0
                ) -> dict[str, TopicShape]:
    """The compared settings of `topics` (name -> partitions), one DescribeConfigs for all.
    A topic whose settings cannot be read keeps its partitions and no settings."""
    if not topics:
        return {}
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics],
                                     request_timeout=timeout_s)
    out: dict[str, TopicShape] = {}
    for resource, future in futures.items():
        try:
            entries = future.result(timeout=timeout_s)
        except KafkaException:
            entries = {}
        out[resource.name] = TopicShape(
            topics[resource.name],
            {k: entries[k].value for k in COMPARED
             if k in entries and entries[k].value is not None})
    return out


def _number(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _lower_on_target(src: Mapping[str, str], dst: Mapping[str, str], key: str) -> bool:
    s, d = _number(src.get(key)), _number(dst.get(key))
    return s is not None and d is not None and d < s


def _retention_shorter(src: str | None, dst: str | None) -> bool:
    s, d = _number(src), _number(dst)
    if s is None or d is None or d < 0:
        return False  # unknown, or the target keeps forever
    return s < 0 or d < s


def compare_topics(rep: ReplicationSettings, source: Mapping[str, TopicShape],
                   target: Mapping[str, TopicShape], target_bootstrap: str) -> list[Finding]:
    """Findings for each source topic whose mirror is missing, smaller, or set differently."""
    out: list[Finding] = []

    def alter(topic: str, key: str, value: str) -> str:
        return (f"kafka-configs.sh --bootstrap-server {target_bootstrap} --alter "
                f"--entity-type topics --entity-name {topic} --add-config {key}={value}")

    for topic, shape in sorted(source.items()):
        mirror = rep.mirror_topic(topic)
        have = target.get(mirror)
        if have is None:
            out.append(Finding(
                Area.TOPICS, f"topic {topic}", f"no {mirror} on {rep.target}",
                "its records and groups are left behind by a failover with the source gone",
                "let the replicator discover it (MirrorMaker 2: refresh.topics.interval.seconds) "
                "or create the mirror"))
            continue
        if have.partitions < shape.partitions:
            out.append(Finding(
                Area.TOPICS, f"topic {mirror}",
                f"{have.partitions} partition(s) on {rep.target}, {shape.partitions} on "
                f"{rep.source}", "records of the missing partitions cannot be replicated",
                f"kafka-topics.sh --bootstrap-server {target_bootstrap} --alter --topic "
                f"{mirror} --partitions {shape.partitions}"))
        out.extend(_config_findings(rep, mirror, shape.configs, have.configs, alter))
    return out


def _config_findings(rep: ReplicationSettings, mirror: str, src: Mapping[str, str],
                     dst: Mapping[str, str], alter: _Alter) -> Iterable[Finding]:
    def diff(key: str) -> str:
        return (f"{key} {src.get(key, '?')} on {rep.source}, {dst.get(key, '?')} on "
                f"{rep.target}")

    def differs(key: str) -> bool:
        return key in src and key in dst and src[key] != dst[key]

    obj = f"topic {mirror}"
    if differs("message.timestamp.type"):
        yield Finding(Area.TOPICS, obj, diff("message.timestamp.type"),
                      "copies carry the target's own timestamps: consumers see new times and "
                      "drctl can compare records by content only",
                      alter(mirror, "message.timestamp.type", src["message.timestamp.type"]))
    if _lower_on_target(src, dst, "min.insync.replicas"):
        yield Finding(Area.TOPICS, obj, diff("min.insync.replicas"),
                      "after a failover producers with acks=all run with weaker durability",
                      alter(mirror, "min.insync.replicas", src["min.insync.replicas"]))
    if differs("cleanup.policy"):
        yield Finding(Area.TOPICS, obj, diff("cleanup.policy"),
                      "the target keeps a different history of each key (compaction or "
                      "deletion) than consumers rely on",
                      alter(mirror, "cleanup.policy", f"[{src['cleanup.policy']}]"))
    if _retention_shorter(src.get("retention.ms"), dst.get("retention.ms")):
        yield Finding(Area.TOPICS, obj, diff("retention.ms"),
                      "the target deletes records the source still keeps: a consumer behind "
                      "by more than that loses them after a failover",
                      alter(mirror, "retention.ms", src["retention.ms"]))
    if _lower_on_target(src, dst, "max.message.bytes"):
        yield Finding(Area.TOPICS, obj, diff("max.message.bytes"),
                      "a record the source accepts is refused on the target: replication "
                      "stops at it", alter(mirror, "max.message.bytes", src["max.message.bytes"]))
    if differs("compression.type"):
        yield Finding(Area.TOPICS, obj, diff("compression.type"),
                      "records are stored with another codec on the target (CPU and disk "
                      "differ; nothing is lost)",
                      alter(mirror, "compression.type", src["compression.type"]),
                      Severity.NOTE)

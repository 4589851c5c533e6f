"""Topic parity: the settings a failover depends on, compared per mirror."""

from __future__ import annotations

from drctl.config import ReplicationSettings
from drctl.findings import Severity
from drctl.readiness.topics import TopicShape, compare_topics

BASE = {"message.timestamp.type": "CreateTime", "min.insync.replicas": "2",
        "cleanup.policy": "delete", "retention.ms": "604800000",
        "max.message.bytes": "1048588", "compression.type": "producer"}


def findings(src: dict[str, str], dst: dict[str, str] | None, partitions: tuple[int, int] = (3, 3),
             rename: str = "{topic}") -> list[tuple[str, str, Severity]]:
    rep = ReplicationSettings("mirrormaker2", "primary", "secondary", rename=rename)
    target = {} if dst is None else {rep.mirror_topic("orders"): TopicShape(partitions[1], dst)}
    return [(f.object, f.difference, f.severity) for f in compare_topics(
        rep, {"orders": TopicShape(partitions[0], src)}, target, "b:9092")]


def test_identical_mirrors_have_no_finding() -> None:
    assert findings(BASE, dict(BASE)) == []


def test_each_difference_that_matters_is_a_risk_and_compression_a_note() -> None:
    dst = {**BASE, "message.timestamp.type": "LogAppendTime", "min.insync.replicas": "1",
           "cleanup.policy": "compact", "retention.ms": "3600000",
           "max.message.bytes": "1000", "compression.type": "lz4"}
    got = findings(BASE, dst)
    keys = [d.split(" ")[0] for _, d, _ in got]
    assert keys == ["message.timestamp.type", "min.insync.replicas", "cleanup.policy",
                    "retention.ms", "max.message.bytes", "compression.type"]
    assert [s for _, _, s in got] == [Severity.RISK] * 5 + [Severity.NOTE]
    assert got[1][1] == "min.insync.replicas 2 on primary, 1 on secondary"


def test_safe_directions_are_not_findings() -> None:
    # More durability, longer or infinite retention, larger records: nothing lost.
    dst = {**BASE, "min.insync.replicas": "3", "retention.ms": "-1",
           "max.message.bytes": "9999999"}
    assert findings(BASE, dst) == []
    assert findings({**BASE, "retention.ms": "-1"}, {**BASE, "retention.ms": "100"})[0][1] \
        .startswith("retention.ms -1 on primary")


def test_a_missing_or_smaller_mirror_is_named_with_its_prefixed_name() -> None:
    assert findings(BASE, None, rename="primary.{topic}") == [
        ("topic orders", "no primary.orders on secondary", Severity.RISK)]
    assert findings(BASE, dict(BASE), partitions=(4, 2))[0][1] == \
        "2 partition(s) on secondary, 4 on primary"

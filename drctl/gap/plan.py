"""The gap-analysis plan: every bound pinned to a numeric offset before Spark starts.

Plain data, JSON both ways, shared by the planner (driver, confluent-kafka) and the Spark job
(which may run under spark-submit on another machine). The plan holds the clusters' client
settings, secrets included: it is written with owner-only permissions.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

PLAN_SCHEMA = 1
DIFF = "diff"  # replicator, mirrormaker2: offsets differ, multiset difference on fingerprints
IDENTITY = "identity"  # offsets equal: the gap is [F, source end)

PartitionOffsets = dict[int, int]


class GapScope(StrEnum):
    TAIL = "tail"
    FULL = "full"

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS = {
    GapScope.TAIL: "compare from just before where replication provably stopped (default)",
    GapScope.FULL: "compare every retained record (audits; targets that may have lost data "
                   "in the middle)",
}


@dataclass
class TopicPlan:
    source_topic: str
    target_topic: str
    partitions: list[int]
    source_start: PartitionOffsets
    source_end: PartitionOffsets
    target_start: PartitionOffsets
    target_end: PartitionOffsets  # the failover point F, or the target's end when none was given
    compare_timestamps: bool
    # --check-order: the failover topic's post-failover writes [post_start, post_end)
    failover_topic: str | None = None
    post_start: PartitionOffsets | None = None
    post_end: PartitionOffsets | None = None
    # Per partition: the scope used, the proven alignment or why there is none, and what a
    # window left out (gap/alignment.py `Alignment.as_dict` plus `before_window`).
    alignment: dict[int, dict[str, Any]] = field(default_factory=dict)
    # cleanup.policy includes compact on either side: records the target compacted away after
    # copying a later version are superseded, not gap (docs/design.md §5).
    compacted: bool = False
    # Late copies (ops/one_way/late_copies.py): target offsets at or after F, [start, end) runs,
    # that the replicator copied after F. The diff reads the target up to the last of them (they are
    # copies), and the order check does not count them as post-failover writes.
    late_runs: dict[int, list[list[int]]] = field(default_factory=dict)

    def source_ranges(self) -> dict[int, tuple[int, int]]:
        return {p: (self.source_start[p], self.source_end[p]) for p in self.partitions}


@dataclass
class SparkJobSettings:
    """How drctl starts the job itself; absent when the plan is made for spark-submit."""

    master: str
    jars: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)
    conf: dict[str, str] = field(default_factory=dict)
    debug: bool = False
    driver_java_options: list[str] = field(default_factory=list)  # the class archive's


@dataclass
class GapPlan:
    kind: str  # DIFF | IDENTITY
    replication_kind: str
    source_cluster: str
    target_cluster: str
    source_kafka: dict[str, str]  # kafka.* options of Spark's Kafka source
    target_kafka: dict[str, str]
    topics: list[TopicPlan]
    out_dir: str
    temporary_out: bool = False  # out_dir was made by the planner; the result may remove it
    check_order: bool = False
    window_start_ms: int | None = None
    scope: str = "tail"  # gap/alignment.py GapScope
    created_at_ms: int = 0
    notes: list[str] = field(default_factory=list)
    # Spark Kafka source options bounding the job's own waits for a cluster by --deadline
    # (kafka_options.deadline_options); a cluster's own settings override them.
    waits: dict[str, str] = field(default_factory=dict)
    spark: SparkJobSettings | None = None
    schema: int = PLAN_SCHEMA

    def topic_index(self) -> dict[str, int]:
        return {t.source_topic: i for i, t in enumerate(self.topics)}

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> GapPlan:
        raw = json.loads(text)
        raw["topics"] = [_topic_from(t) for t in raw["topics"]]
        if raw.get("spark") is not None:
            raw["spark"] = SparkJobSettings(**raw["spark"])
        return cls(**raw)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.to_json())
        return path

    def public(self) -> dict[str, Any]:
        """The plan without client settings (they may hold credentials)."""
        data = asdict(self)
        for side in ("source_kafka", "target_kafka"):
            data[side] = {"kafka.bootstrap.servers":
                          data[side].get("kafka.bootstrap.servers", "")}
        data.pop("spark", None)
        return data


def _offsets(raw: dict[str, int] | None) -> PartitionOffsets | None:
    return None if raw is None else {int(p): int(o) for p, o in raw.items()}


def _topic_from(raw: dict[str, Any]) -> TopicPlan:
    for key in ("source_start", "source_end", "target_start", "target_end", "post_start",
                "post_end"):
        raw[key] = _offsets(raw.get(key))
    raw["alignment"] = {int(p): a for p, a in (raw.get("alignment") or {}).items()}
    raw["late_runs"] = {int(p): r for p, r in (raw.get("late_runs") or {}).items()}
    return TopicPlan(**raw)

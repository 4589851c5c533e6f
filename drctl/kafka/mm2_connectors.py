"""MirrorMaker 2 connector configurations for a Kafka Connect worker (one flow, one direction).

Used by the lab for the forward flow and by failback for the reverse flow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"

# Never replicate drctl's own state or Connect's internal topics.
TOPICS_EXCLUDE = r".*[\-\.]internal,.*\.replica,__.*,_drctl.*,connect-.*,.*\.drctl-quarantine"
# MirrorMaker 2's own default for groups.exclude (DefaultGroupFilter).
GROUPS_EXCLUDE = "console-consumer-.*,connect-.*,__.*"
# The names Kafka 3.x still reads while the new key is absent; Kafka 4.0 dropped them.
LEGACY_KEYS = {"topics.exclude": "topics.blacklist", "groups.exclude": "groups.blacklist"}


@dataclass(frozen=True)
class MirrorFlow:
    source_alias: str
    target_alias: str
    source_bootstrap: str
    target_bootstrap: str
    names_kept: bool = True
    topics: str = ".*"
    fast: bool = False  # test-speed intervals (the lab)
    offset_lag_max: int = 100
    # Java client properties (security) for each side, e.g. security.protocol, sasl.*.
    source_client: Mapping[str, str] = field(default_factory=dict)
    target_client: Mapping[str, str] = field(default_factory=dict)
    # The exclude lists under their old names (`topics.blacklist`, `groups.blacklist`), as
    # connectors set up years ago are: Kafka 3.x only.
    legacy_keys: bool = False
    # MirrorMaker 2's replication.policy.separator (prefixed names, internal topics).
    separator: str = "."

    def replicates(self, topic: str) -> bool:
        """Whether the source connector copies `topic`: its `topics` and `topics.exclude`, and
        MirrorMaker 2's cycle check — with prefixed names a topic whose name says it came from
        the target (`secondary.orders` on the primary: a retired reverse flow's copies) is
        never copied back."""
        return (any(re.fullmatch(p, topic) for p in self.topics.split(","))
                and not any(re.fullmatch(p, topic) for p in TOPICS_EXCLUDE.split(","))
                and not self._from_target(topic))

    def _from_target(self, topic: str) -> bool:
        """MirrorSourceConnector.isCycle under DefaultReplicationPolicy: the name's source
        alias, then its upstream topic's, and so on, is the target's."""
        if self.names_kept:
            return False  # IdentityReplicationPolicy: a name says nothing of its source
        source, sep, upstream = topic.partition(self.separator)
        while sep:
            if source == self.target_alias:
                return True
            source, sep, upstream = upstream.partition(self.separator)
        return False

    def _key(self, key: str) -> str:
        return LEGACY_KEYS.get(key, key) if self.legacy_keys else key

    def connector_names(self) -> dict[str, str]:
        prefix = f"mm2-{self.source_alias}-{self.target_alias}"
        return {"source": f"{prefix}-source", "checkpoint": f"{prefix}-checkpoint",
                "heartbeat": f"{prefix}-heartbeat"}

    def _common(self) -> dict[str, str]:
        common = {
            "source.cluster.alias": self.source_alias,
            "target.cluster.alias": self.target_alias,
            "source.cluster.bootstrap.servers": self.source_bootstrap,
            "target.cluster.bootstrap.servers": self.target_bootstrap,
            "replication.policy.class": IDENTITY_POLICY if self.names_kept else DEFAULT_POLICY,
            **({"replication.policy.separator": self.separator} if self.separator != "."
               else {}),
            "key.converter": BYTES,
            "value.converter": BYTES,
            "header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "tasks.max": "1",
            "replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            # The worker writes to its own cluster; pin the producer to the flow's target so a
            # worker on either cluster can run either direction.
            "producer.override.bootstrap.servers": self.target_bootstrap,
        }
        if self.fast:
            # A lab broker comes back on its own address. Kafka 4's admin clients rebootstrap
            # in a tight loop while every node of a cluster is down (about a thousand log
            # lines a second, a tenth of a core): without rebootstrap they back off.
            common["admin.metadata.recovery.strategy"] = "none"
            # Records as large as a lab topic takes (max.message.bytes), not only 1 MB.
            common["producer.override.max.request.size"] = "16777216"
        common.update({f"source.cluster.{k}": v for k, v in self.source_client.items()})
        common.update({f"target.cluster.{k}": v for k, v in self.target_client.items()})
        common.update({f"producer.override.{k}": v for k, v in self.target_client.items()})
        return common

    def source_connector(self) -> dict[str, str]:
        cfg = {
            **self._common(),
            "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "topics": self.topics,
            self._key("topics.exclude"): TOPICS_EXCLUDE,
            "sync.topic.acls.enabled": "false",
            "sync.topic.configs.enabled": "true",
            "offset.lag.max": str(self.offset_lag_max),
            # Aborted transactions must not become ordinary records on the target.
            "source.consumer.isolation.level": "read_committed",
            "source.consumer.auto.offset.reset": "earliest",
        }
        if self.fast:
            cfg["refresh.topics.interval.seconds"] = "2"
        return cfg

    def checkpoint_connector(self) -> dict[str, str]:
        cfg = {
            **self._common(),
            "connector.class": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
            "groups": ".*",
            self._key("topics.exclude"): TOPICS_EXCLUDE,
            # MirrorMaker 2's default, written out only under the old name: the key is there.
            **({LEGACY_KEYS["groups.exclude"]: GROUPS_EXCLUDE} if self.legacy_keys else {}),
            # drctl translates offsets itself; MM2 writing group offsets would race with it.
            "sync.group.offsets.enabled": "false",
            "emit.checkpoints.enabled": "true",
        }
        if self.fast:
            cfg.update({"emit.checkpoints.interval.seconds": "1",
                        "refresh.groups.interval.seconds": "2",
                        "refresh.topics.interval.seconds": "2"})
        return cfg

    def heartbeat_connector(self) -> dict[str, str]:
        cfg = {
            **self._common(),
            "connector.class": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
        }
        if self.fast:
            cfg["emit.heartbeats.interval.seconds"] = "1"
        return cfg

    def connectors(self) -> dict[str, dict[str, str]]:
        names = self.connector_names()
        return {names["source"]: self.source_connector(),
                names["checkpoint"]: self.checkpoint_connector(),
                names["heartbeat"]: self.heartbeat_connector()}

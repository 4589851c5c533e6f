"""The two flows of an active-active pair and what a topic is in each region.

A region's local topics (`orders` on primary) are written by its producers; the other
region's flow copies them there under its prefix (`secondary.orders` on primary, MirrorMaker
2's DefaultReplicationPolicy). A name a flow keeps would loop: a copy is told from an
original only by the source alias in its name, so names kept both ways are copied back and
forth without end (IdentityReplicationPolicy cannot see where a record came from).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from drctl.config import Config, NameFilter, ReplicationSettings, TopologySettings
from drctl.context import OpsContext
from drctl.errors import ConfigError, DrctlError, UsageError
from drctl.kafka.topics import is_internal_topic
from drctl.progress import Notify
from drctl.suggest import did_you_mean


class Pair:
    """An active-active pair: two regions (cluster names) and one flow out of each."""

    def __init__(self, config: Config) -> None:
        if config.topology is None:
            raise ConfigError("this command takes a region only with an active-active "
                              "topology (`topology:` in the config)",
                              path=str(config.path) if config.path else None, key="topology")
        self.config = config
        self.settings: TopologySettings = config.topology

    @property
    def regions(self) -> tuple[str, str]:
        return self.settings.regions

    def region(self, name: str | None) -> str:
        """`name` as one of the pair's regions; a usage error naming them otherwise."""
        if name in self.regions:
            return name
        raise UsageError(f"'{name}' is not a region of the pair (regions: "
                         f"{', '.join(self.regions)}).", did_you_mean(name or "", self.regions))

    def other(self, region: str) -> str:
        return self.settings.other(region)

    def flow_from(self, region: str) -> ReplicationSettings:
        """The flow copying `region`'s local topics to the other region."""
        return self.settings.flow_from(region)

    def flow_into(self, region: str) -> ReplicationSettings:
        return self.settings.flow_from(self.other(region))

    def context(self, region: str, notify: Notify = lambda _: None,
                deadline_s: float | None = None) -> OpsContext:
        """The flow out of `region` as a one-way context: `region` its source, the other its
        target (where that flow's checkpoints, guard's snapshots of `region`'s groups and a
        failover marker of `region` live)."""
        return OpsContext.from_config(self.config.for_flow(self.flow_from(region)), notify,
                                      deadline_s)

    # -- topics -----------------------------------------------------------------------

    def copy_origin(self, region: str, topic: str) -> str | None:
        """The other region's local topic whose copy `topic` is on `region`, or None."""
        return self.flow_into(region).source_topic_of(topic)

    def is_local(self, region: str, topic: str) -> bool:
        """A topic `region`'s producers write: not internal, not a copy, in its flow's filter."""
        return (not self.is_internal(region, topic) and self.copy_origin(region, topic) is None
                and self.flow_from(region).replicates(topic))

    def is_internal(self, region: str, topic: str) -> bool:
        """Kafka's, Connect's, drctl's or MirrorMaker 2's own topic on `region`: the flow
        into it names its checkpoints and the heartbeats' copies there with its separator."""
        return is_internal_topic(topic, self.flow_into(region).separator)

    def copy_name(self, region: str, topic: str) -> str:
        """The name `region`'s local `topic` has in the other region."""
        return self.flow_from(region).mirror_topic(topic)

    def prefix_into(self, region: str) -> str:
        """What the other region's copies are named with on `region` (`secondary.`)."""
        rename = self.flow_into(region).rename
        return rename.partition("{topic}")[0]

    def aggregate_regex(self, region: str, topics: Iterable[str]) -> str:
        """The anchored regex an aggregate consumer on `region` subscribes with: each local
        topic and the other region's copy of it, nothing else (`^(secondary\\.)?orders$`)."""
        names = sorted(set(topics))
        body = re.escape(names[0]) if len(names) == 1 else \
            "(" + "|".join(re.escape(n) for n in names) + ")"
        return f"^({re.escape(self.prefix_into(region))})?{body}$"

    # -- groups -----------------------------------------------------------------------

    def region_groups(self, region: str) -> NameFilter:
        """The groups `region`'s applications own, as the config names them (none named:
        every group, within `groups:`)."""
        return self.settings.region_groups.get(region, NameFilter())

    def owns_group(self, region: str, group: str) -> bool:
        return self.config.groups.matches(group) and self.region_groups(region).matches(group)

    # -- the naming loop --------------------------------------------------------------

    def naming_problem(self) -> str | None:
        """Why the config's naming cannot run both ways, or None: names kept both ways are a
        loop; a flow that keeps names copies into the other region's local topics."""
        return naming_problem(self.settings.flows,
                              [f"topology.flows[{i}]" for i in range(2)])

    def live_naming_problem(self, notify: Notify = lambda _: None) -> str | None:
        """The same, read from the connectors Kafka Connect runs (their replication policy):
        a config that says prefixed while the connectors keep names loops all the same, and
        one whose `rename` is not the connectors' (another alias or separator) names copies
        that do not exist. None when it holds or when Connect cannot say (not configured,
        not answering)."""
        from drctl.replication.connect import connect_client
        from drctl.replication.mirrormaker2 import mm2_flows

        kept: list[ReplicationSettings] = []
        names: list[str] = []
        for flow in self.settings.flows:
            client = connect_client(flow)
            if client is None or not flow.connect.source_connector:
                return None
            try:
                configs = {flow.connect.source_connector:
                           client.config(flow.connect.source_connector)}
            except DrctlError as exc:
                notify(f"The connectors' naming is unknown: {exc.message}")
                return None
            found = mm2_flows(configs)
            if not found or found[0].rename is None:
                return None
            if found[0].rename != flow.rename:
                # Copies are found by this name: another alias or separator than the
                # connector's maps every copy to a topic that does not exist.
                return (f"the config names {flow.source} -> {flow.target}'s copies "
                        f"'{flow.mirror_topic('orders')}' (rename: {flow.rename}), but "
                        f"connector {flow.connect.source_connector} writes "
                        f"'{found[0].rename.replace('{topic}', 'orders')}' (its source "
                        "alias and replication.policy.separator): set the flow's rename to "
                        f"{found[0].rename} (`drctl config init` reads it from the connectors)")
            kept.append(_with_rename(flow, found[0].rename))
            names.append(f"connector {flow.connect.source_connector}")
        return naming_problem(kept, names)


def _with_rename(flow: ReplicationSettings, rename: str) -> ReplicationSettings:
    from dataclasses import replace

    return replace(flow, rename=rename)


def naming_problem(flows: Sequence[ReplicationSettings], where: Sequence[str]) -> str | None:
    """The naming loop of two flows, one each way, in words naming it; None when both
    prefix. `where` names each flow for the reader (a config key, a connector)."""
    a, b = flows
    if a.names_kept and b.names_kept:
        return (f"topic names are kept both ways ({where[0]}: {a.source} -> {a.target}, "
                f"{where[1]}: {b.source} -> {b.target}): a loop. A record written to orders "
                f"on {a.source} is copied to orders on {a.target} and from there back to "
                f"orders on {a.source}, without end: MirrorMaker 2 tells a copy from an "
                "original only by the source alias in its name, which "
                "IdentityReplicationPolicy does not write")
    for flow, name in zip(flows, where, strict=True):
        if flow.names_kept:
            return (f"{name} ({flow.source} -> {flow.target}) keeps topic names: its copies "
                    f"land in {flow.target}'s own local topics, which the other flow copies "
                    f"back to {flow.source} as copies of copies. In an active-active pair both "
                    "flows prefix names (DefaultReplicationPolicy: "
                    f"{flow.source_alias}.orders)")
    return None

"""Apache Kafka MirrorMaker 2: Connect connectors; target offsets differ from the source's.

It leaves checkpoints on the target (translation works with the source down), reports its
lag through Connect's stored source offsets, and cannot mark its copies with a header.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from drctl.config import Config, ReplicationSettings
from drctl.errors import CheckFailed, DrctlError
from drctl.faults import crash_point
from drctl.findings import Area, Finding, Severity
from drctl.kafka.checkpoints import recent_offset_syncs
from drctl.kafka.connect_rest import ConnectClient, ConnectorMissing
from drctl.kafka.mm2_connectors import DEFAULT_POLICY, GROUPS_EXCLUDE, LEGACY_KEYS, MirrorFlow
from drctl.kafka.topic_scan import TopicNotFound
from drctl.progress import Notify
from drctl.replication.base import (
    Confirm,
    CopyPoints,
    FlowContext,
    FlowPart,
    FlowState,
    ReturnRequest,
    ReverseRequest,
)
from drctl.replication.connect import (
    ConnectControlled,
    connect_client,
    flow_state_of,
    paused,
    retire_connector,
    scoped_connector_name,
    stop_or_pause,
    stopped_for_offsets,
    wait_connector_state,
)
from drctl.replication.control import ConnectorReading
from drctl.replication.discovered import (
    ClusterLogin,
    DiscoveredFlow,
    RegexList,
    java_login_settings,
    regex_list,
)
from drctl.replication.edits import ListEdit

# The connector config key that names the incident a reverse connector was started for:
# a reverse connector left by an earlier incident is reset, never resumed as it is.
INCIDENT_KEY = "drctl.incident"


class MirrorMaker2(ConnectControlled):
    # Kafka's InsertHeader SMT fails under the byte-exact header converter MM2 needs
    # (measured on Kafka Connect 4.3.1): copies are known by content only.
    provenance_header = None
    reverse_started_by_drctl = True
    described_by_connectors = True
    # MirrorMaker 2's own defaults (DefaultTopicFilter, DefaultGroupFilter).
    exclusion_defaults = {"topics.exclude": r".*[\-\.]internal,.*\.replica,__.*",
                          "groups.exclude": GROUPS_EXCLUDE}
    # Kafka 3.x still reads the old names while the new key is absent (and ignores them
    # once it is set); Kafka 4.0 dropped them. The source connector's plugin defines
    # topics.blacklist exactly while they are read (the checkpoint connector reads
    # topics.blacklist too, through its topic filter, without listing it).
    exclusion_aliases = LEGACY_KEYS
    alias_probe = ("MirrorSourceConnector",
                   "org.apache.kafka.connect.mirror.MirrorSourceConnector", "topics.blacklist")
    aliases_until = 4

    def exclusions(self, rep: ReplicationSettings, part: FlowPart
                   ) -> dict[str, dict[str, list[str]]]:
        """An application's incident: its topics leave the source connector (nothing of
        them is copied) and the checkpoint connector, its groups the checkpoint connector —
        each as a literal Java regex in `topics.exclude` / `groups.exclude`."""
        topics = [java_literal(t) for t in part.topics]
        out: dict[str, dict[str, list[str]]] = {}
        if rep.connect.source_connector:
            out[rep.connect.source_connector] = {"topics.exclude": topics}
        if rep.connect.checkpoint_connector:
            out[rep.connect.checkpoint_connector] = {
                "topics.exclude": topics,
                **({"groups.exclude": [java_literal(g) for g in part.groups]}
                   if part.groups else {})}
        return out
    lag_measured = True

    def auto_translate_method(self, *, source_up: bool, forward: bool) -> str | None:
        if source_up:
            return "exact"
        # Checkpoints exist only on the forward flow's target.
        return "checkpoint" if forward else None

    def checkpoints_topic(self, rep: ReplicationSettings) -> str | None:
        # DefaultReplicationPolicy.checkpointsTopic
        return rep.mm2_topic(rep.source_alias, "checkpoints", "internal")

    def lag_remedy(self, rep: ReplicationSettings) -> str:
        name = rep.connect.source_connector or "<source connector>"
        client = connect_client(rep)
        url = client.url if client is not None else "<connect url>"  # without credentials
        cluster = rep.source_alias
        # Connect stores the last copied offset: the task resumes at stored + 1.
        body = ('{{"offsets":[{{"partition":{{"cluster":"' + cluster + '","topic":"{topic}",'
                '"partition":{partition}}},"offset":{{"offset":{before}}}}}]}}')
        return (f"stop {name} (curl -X PUT {url}/connectors/{name}/stop), set its position "
                f"before the first one (curl -X PATCH {url}/connectors/{name}/offsets -H "
                f"'Content-Type: application/json' -d '{body}'), resume it: it copies them "
                "again, and what follows them a second time")

    def copy_points(self, ctx: FlowContext, since_ms: int) -> CopyPoints | None:
        """The offset syncs MirrorMaker 2 wrote since `since_ms`: on the source cluster
        (offset-syncs.topic.location=source, the default), else on the target."""
        rep = ctx.rep
        topic = offset_syncs_topic(rep)
        for clients in (ctx.source, ctx.target):
            try:
                syncs, complete_from = recent_offset_syncs(clients, topic, since_ms)
            except TopicNotFound:
                continue
            except DrctlError:
                return None
            return CopyPoints({tp: [(s.upstream_offset, s.downstream_offset) for s in found]
                               for tp, found in syncs.items()}, complete_from,
                              one_for_one=not _exactly_once(rep))
        return None

    def replicated_upto(self, ctx: FlowContext) -> dict[tuple[str, int], int] | None:
        """Connect's stored source offsets of the forward source connector (the last copied
        upstream offset, + 1). Connect stores them when the connector stops — failover stops
        it — and every offset.flush.interval.ms while it runs."""
        rep = ctx.rep
        client = connect_client(rep)
        if client is None or not rep.connect.source_connector:
            return None
        try:
            stored = client.offsets(rep.connect.source_connector).get("offsets", [])
        except DrctlError:
            return None
        return copied_upto(rep, stored)

    def translation_costs(self, rep: ReplicationSettings) -> dict[str, Any] | None:
        client = connect_client(rep)
        if client is None or not rep.connect.checkpoint_connector:
            return None
        try:
            checkpoint = client.config(rep.connect.checkpoint_connector)
            source = client.config(rep.connect.source_connector) \
                if rep.connect.source_connector else {}
        except ConnectorMissing:
            return None
        return checkpoint_costs(source, checkpoint)

    def discover_flows(self, connectors: Mapping[str, Mapping[str, str]],
                       old_names_read: bool = True) -> list[DiscoveredFlow]:
        return mm2_flows(connectors, old_names_read)

    def settings_findings(self, rep: ReplicationSettings,
                          active_on_target: Sequence[str]) -> list[Finding]:
        client = connect_client(rep)
        names = {"source": rep.connect.source_connector,
                 "checkpoint": rep.connect.checkpoint_connector}
        if client is None or not all(names.values()):
            return [Finding(Area.REPLICATION, "replication.connect",
                            "no Connect URL or connector names in the config",
                            "MirrorMaker 2's settings are not read: what they disable is unknown",
                            "set replication.connect (url, source_connector, "
                            "checkpoint_connector)", Severity.NOTE)]
        configs: dict[str, dict[str, Any]] = {}
        for role, name in names.items():
            assert name is not None
            try:
                configs[role] = client.config(name)
            except ConnectorMissing:
                return [Finding(Area.REPLICATION, f"connector {name}",
                                f"not on the Connect worker {client.url}",
                                "forward replication (or its checkpoints) does not run",
                                "create the connector, or fix replication.connect in the config")]
            except DrctlError as exc:  # its message names the worker and the cause
                return [Finding(Area.REPLICATION, f"connector {name}", exc.message,
                                "MirrorMaker 2's settings are unknown",
                                exc.hint or "check the worker", Severity.BLIND)]
        return mm2_settings_findings(configs["source"], configs["checkpoint"], names,
                                     active_on_target)

    def start_reverse(self, ctx: FlowContext, request: ReverseRequest,
                      notify: Notify) -> dict[str, Any]:
        """Create the reverse source connector stopped, set its stored offsets to the failover
        point through Connect's offsets API, then start it. A reverse connector of another
        incident (or of none drctl knows) is stopped and reset first: resumed as it is, it
        would start after this incident's post-failover writes, or copy an old incident's."""
        rep = ctx.rep
        client = connect_client(rep, notify=notify)
        if client is None:
            raise DrctlError("Reverse replication needs replication.connect.url in the config.",
                             "Or start the reverse MirrorMaker 2 flow yourself from the failover "
                             "point shown in the report.")
        forward_source, forward_target = forward_client_settings(client, rep)
        # Reversed: the reverse flow reads the forward target and writes the forward source.
        flow = reverse_flow(ctx.config, sorted(request.starts), source_client=forward_target,
                            target_client=forward_source)
        name = reverse_connector_name(rep, request.part)
        cfg = reverse_connector_config(flow, request.skip_header, request.incident)
        try:
            state, _ = client.connector_state(name)
            started_for = client.config(name).get(INCIDENT_KEY)
        except ConnectorMissing:
            state, started_for = None, None
        offsets = [{"partition": {"cluster": rep.target_alias, "topic": topic, "partition": p},
                    # Connect stores the last copied offset; the task resumes at stored + 1.
                    "offset": {"offset": off - 1} if off > 0 else None}
                   for topic, parts in sorted(request.starts.items())
                   for p, off in sorted(parts.items())]
        reset = None
        if state is None:
            notify(f"Creating {name} (stopped) and setting its start to the failover point")
            client.create(name, cfg, initial_state="STOPPED")
            wait_connector_state(client, name, "STOPPED", notify=notify)
            client.alter_offsets(name, offsets)
        elif started_for != request.incident:
            reset = started_for or "unknown"
            notify(f"{name} exists from incident {reset} ({state}): stopping it and resetting "
                   f"it to incident {request.incident}'s failover point")
            stop_or_pause(client, name)
            wait_connector_state(client, name, "STOPPED", notify=notify)
            client.put_config(name, cfg)
            client.alter_offsets(name, offsets)
        elif state == "STOPPED":
            client.alter_offsets(name, offsets)
        self._refuse_cycle(rep, name, request.edits, request.part)
        notify(f"Starting {name}: {rep.target_alias} -> {rep.source_alias}, "
               "post-failover data only")
        client.resume(name)
        wait_connector_state(client, name, "RUNNING")
        out: dict[str, Any] = {"kind": rep.kind, "connector": name, "start": request.starts}
        if reset is not None:
            out["reset_from_incident"] = reset
        return out

    def _refuse_cycle(self, rep: ReplicationSettings, reverse: str,
                      edits: Sequence[ListEdit] = (), part: FlowPart | None = None) -> None:
        """With names kept, forward and reverse copying at once is a cycle that
        IdentityReplicationPolicy cannot detect: every record would go round forever —
        unless forward replication leaves out exactly what the reverse flow copies (an
        application's incident)."""
        if not rep.names_kept:
            return
        forward = self.forward_state(rep)
        if forward.copying and edits and self.edits_hold(rep, edits, part):
            return
        if forward.copying:
            raise CheckFailed(
                f"Forward replication copies ({forward.describe(forward.copying)}) and "
                f"{reverse} would copy the other way: with topic names kept the two form a "
                "cycle.", "Stop forward replication (`drctl failover` does), then run failback "
                "again.")

    def reverse_state(self, ctx: FlowContext, part: FlowPart | None = None) -> FlowState:
        rep = ctx.rep
        client = connect_client(rep)
        if client is None:
            return FlowState(False)
        name = reverse_connector_name(rep, part)
        try:
            return flow_state_of([ConnectorReading.read(client, name)])
        except DrctlError:
            return FlowState(False)

    def retire_reverse(self, ctx: FlowContext, request: ReturnRequest, notify: Notify,
                       confirm: Confirm | None = None) -> dict[str, Any]:
        rep = ctx.rep
        client = connect_client(rep, notify=notify)
        if client is None:
            raise DrctlError("Retiring the reverse flow needs replication.connect.url.",
                             "Stop and delete the reverse MirrorMaker 2 connector yourself.")
        return retire_connector(client, reverse_connector_name(rep, request.part), notify)

    def set_forward_start(self, ctx: FlowContext, request: ReturnRequest, notify: Notify,
                          confirm: Confirm | None = None, *,
                          dry_run: bool = False) -> dict[str, Any]:
        """The forward source connector's stored offsets, through Connect's offsets API."""
        rep = ctx.rep
        name = rep.connect.source_connector
        client = connect_client(rep, notify=notify)
        if client is None or not name:
            raise DrctlError(
                "Setting forward replication's start needs replication.connect.url and "
                "replication.connect.source_connector.",
                "Set them, or set the MirrorMaker 2 source connector's offsets yourself to the "
                "positions in the report.")
        offsets = [{"partition": {"cluster": rep.source_alias, "topic": topic, "partition": p},
                    "offset": {"offset": off - 1} if off > 0 else None}
                   for topic, parts in sorted(request.forward_starts.items())
                   for p, off in sorted(parts.items())]
        out = {"connector": name, "starts": request.forward_starts}
        if dry_run:
            return out
        if request.part is not None and self.edits_hold(rep, request.edits):
            # The rest of the flow copies, its part left out: stopped for the offsets
            # (seconds) and resumed right after; the part's entries come out later.
            notify(f"Setting {request.part.name}'s start in {name} (stopped for a moment "
                   "if it runs)")
            with paused(client, [name]):
                client.alter_offsets(name, offsets)
                crash_point("forward-start:paused")  # drills: a crash with it stopped
            return out
        stopped_for_offsets(client, name)
        notify(f"Setting {name}'s start to where {rep.source} stood at the cut-over")
        client.alter_offsets(name, offsets)
        return out

def reverse_flow(config: Config, topics: list[str], *,
                 source_client: Mapping[str, str] | None = None,
                 target_client: Mapping[str, str] | None = None) -> MirrorFlow:
    """The MirrorMaker 2 flow target -> source over the failover topics."""
    rep = config.require_replication()
    return MirrorFlow(rep.target_alias, rep.source_alias,
                      config.cluster(rep.target)["bootstrap.servers"],
                      config.cluster(rep.source)["bootstrap.servers"],
                      names_kept=rep.names_kept,
                      topics="|".join(t.replace(".", r"\.") for t in topics) or "^$",
                      source_client=source_client or {}, target_client=target_client or {})


# Per-side keys of a forward connector that name the cluster rather than how to log in to it.
_NOT_LOGIN = ("alias", "bootstrap.servers")


def forward_client_settings(client: ConnectClient,
                            rep: ReplicationSettings) -> tuple[dict[str, str], dict[str, str]]:
    """How the forward source connector logs in to its source and its target (security
    protocol, SASL, SSL), so the reverse flow does the same on a secured cluster. Values are
    copied as Connect returns them: `${file:...}` references stay references. Nothing without
    a forward connector."""
    name = rep.connect.source_connector
    if not name:
        return {}, {}
    try:
        forward = client.config(name)
    except ConnectorMissing:
        return {}, {}
    sides: tuple[dict[str, str], dict[str, str]] = ({}, {})
    for side, prefix in zip(sides, ("source.cluster.", "target.cluster."), strict=True):
        side.update({key[len(prefix):]: str(value) for key, value in forward.items()
                     if key.startswith(prefix) and key[len(prefix):] not in _NOT_LOGIN})
    return sides


def _exactly_once(rep: ReplicationSettings) -> bool:
    """Whether the forward source connector declares that it writes transactions (KIP-618's
    `exactly.once.support=required`); a config that cannot be read counts as yes. A worker
    with exactly.once.source.support=enabled also makes a connector left at `requested`
    transactional: that worker setting is not readable over REST (docs/design.md, limits)."""
    client = connect_client(rep)
    if client is None or not rep.connect.source_connector:
        return True
    try:
        support = client.config(rep.connect.source_connector).get("exactly.once.support")
    except DrctlError:
        return True
    return str(support or "requested").lower() == "required"


def offset_syncs_topic(rep: ReplicationSettings) -> str:
    """Where MirrorMaker 2's source connector of the flow writes its offset syncs."""
    # DefaultReplicationPolicy.offsetSyncsTopic
    return rep.mm2_topic("mm2-offset-syncs", rep.target_alias, "internal")


def reverse_connector_name(rep: ReplicationSettings, part: FlowPart | None = None) -> str:
    """The reverse flow's source connector: the flow's (as `reverse_flow` names it), with
    the application's name for an application's incident."""
    name = MirrorFlow(rep.target_alias, rep.source_alias, "", "").connector_names()["source"]
    return scoped_connector_name(name, part)


def java_literal(name: str) -> str:
    """A topic or group name as a Java regex matching it alone (names hold letters, digits,
    '.', '_' and '-'; a backslash before the others is a literal in Java too)."""
    return "".join(c if c.isalnum() or c == "_" else "\\" + c for c in name)


def reverse_connector_config(flow: MirrorFlow, skip_header: str,
                             incident: str) -> dict[str, str]:
    cfg = flow.source_connector()
    # Connect passes keys it does not know through; drctl reads this one back.
    cfg[INCIDENT_KEY] = incident
    # Records drctl copied into the target during reconcile are already on the source (they
    # are the gap's originals): never copy them back.
    cfg.update({
        "transforms": "dropReconciled",
        "transforms.dropReconciled.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.dropReconciled.predicate": "isReconciled",
        "predicates": "isReconciled",
        "predicates.isReconciled.type":
            "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        "predicates.isReconciled.name": skip_header,
        "refresh.topics.interval.seconds": "5",
    })
    return cfg


# MirrorMaker 2's defaults (MirrorCheckpointConfig, MirrorSourceConfig, MirrorConnectorConfig).
_MM2_DEFAULTS = {"emit.checkpoints.interval.seconds": 60.0,
                 "refresh.groups.interval.seconds": 600.0,
                 "refresh.topics.interval.seconds": 600.0, "offset.lag.max": 100.0}


def checkpoint_costs(source: Mapping[str, Any], checkpoint: Mapping[str, Any]
                     ) -> dict[str, Any]:
    """What MirrorMaker 2's settings cost a failover with the source gone, in numbers and in
    one line each (the connectors' configs as Connect returns them)."""
    def setting(cfg: Mapping[str, Any], name: str) -> float:
        try:
            return float(cfg.get(name, _MM2_DEFAULTS[name]))
        except (TypeError, ValueError):
            return _MM2_DEFAULTS[name]

    every = setting(checkpoint, "emit.checkpoints.interval.seconds")
    groups_every = setting(checkpoint, "refresh.groups.interval.seconds")
    topics_every = setting(source, "refresh.topics.interval.seconds")
    lag_max = int(setting(source, "offset.lag.max"))
    groups = str(checkpoint.get("groups", ".*"))
    lines = [f"Checkpoints every {every:g} s: with the source gone a group resumes where "
             f"MirrorMaker 2 last checkpointed it — up to {every:g} s of its reading again, "
             "more for a lagging group (`drctl guard` keeps exact positions).",
             f"Offset syncs at most every {lag_max} records: a checkpoint can sit up to that "
             "many records before the group's position.",
             f"New groups are found every {groups_every:g} s: a group younger than that has no "
             "checkpoint; its consumers start at auto.offset.reset.",
             f"New topics are found every {topics_every:g} s: a topic created less than that "
             "before the outage is not mirrored."]
    if groups not in (".*", ""):
        lines.append(f"Only groups matching '{groups}' are checkpointed.")
    return {"checkpoint_interval_s": every, "group_refresh_s": groups_every,
            "topic_refresh_s": topics_every, "offset_lag_max": lag_max, "groups": groups,
            "lines": lines}


def _on(cfg: Mapping[str, Any], key: str, default: bool) -> bool:
    return str(cfg.get(key, str(default))).strip().lower() == "true"


def mm2_settings_findings(source: Mapping[str, Any], checkpoint: Mapping[str, Any],
                          names: Mapping[str, str | None],
                          active_on_target: Sequence[str]) -> list[Finding]:
    """What MirrorMaker 2's connector settings silently disable that drctl relies on, and
    what the rest cost a failover with the source gone (notes, in numbers)."""
    src, cpt = f"connector {names['source']}", f"connector {names['checkpoint']}"
    out: list[Finding] = []
    if not _on(source, "emit.offset-syncs.enabled", True):
        out.append(Finding(Area.REPLICATION, src, "emit.offset-syncs.enabled=false",
                           "no offset syncs: checkpoints cannot translate positions, so a "
                           "failover with the source gone has none",
                           "set emit.offset-syncs.enabled=true"))
    if not _on(checkpoint, "emit.checkpoints.enabled", True):
        out.append(Finding(Area.REPLICATION, cpt, "emit.checkpoints.enabled=false",
                           "no checkpoints: a failover with the source gone has no group "
                           "positions", "set emit.checkpoints.enabled=true"))
    where = {role: str(cfg.get("offset-syncs.topic.location", "source"))
             for role, cfg in (("source", source), ("checkpoint", checkpoint))}
    if where["source"] != where["checkpoint"]:
        out.append(Finding(Area.REPLICATION, cpt,
                           f"offset-syncs.topic.location={where['checkpoint']}, the source "
                           f"connector writes them on the {where['source']}",
                           "the checkpoint connector reads no offset syncs: no checkpoints",
                           f"set offset-syncs.topic.location={where['source']} on both"))
    elif where["source"] == "source":
        out.append(Finding(Area.REPLICATION, src, "offset syncs on the source cluster",
                           "with the source gone, only the checkpoints already written count",
                           "offset-syncs.topic.location=target keeps them beside the "
                           "checkpoints (optional)", Severity.NOTE))
    isolation = str(source.get("source.consumer.isolation.level",
                               source.get("consumer.isolation.level", "read_uncommitted")))
    if isolation != "read_committed":
        out.append(Finding(Area.REPLICATION, src, f"source consumer isolation.level={isolation}",
                           "records of aborted transactions are copied as ordinary records, "
                           "and open ones before they commit",
                           "set source.consumer.isolation.level=read_committed"))
    if _on(checkpoint, "sync.group.offsets.enabled", False):
        if active_on_target:
            shown = ", ".join(sorted(active_on_target)[:5])
            out.append(Finding(Area.REPLICATION, cpt,
                               f"sync.group.offsets.enabled=true with group(s) active on the "
                               f"target: {shown}",
                               "MirrorMaker 2 skips active groups: their target positions are "
                               "not kept, and once they stop it overwrites what they committed",
                               "set sync.group.offsets.enabled=false (drctl moves groups at "
                               "failover), or stop those consumers"))
        else:
            out.append(Finding(Area.REPLICATION, cpt, "sync.group.offsets.enabled=true",
                               "MirrorMaker 2 commits translated positions on the target until "
                               "it is stopped; drctl's failover replaces them with exact ones",
                               "nothing to do", Severity.NOTE))
    costs = checkpoint_costs(source, checkpoint)
    out.extend(Finding(Area.REPLICATION, "MirrorMaker 2 settings", line, "-", "-",
                       Severity.NOTE) for line in costs["lines"])
    out.append(Finding(Area.REPLICATION, "Connect worker",
                       "offset.flush.interval.ms is a worker setting (not readable over REST)",
                       "a worker that dies re-copies what it copied since its last flush "
                       "(60 s by default); failback tells those late copies apart",
                       "nothing to do", Severity.NOTE))
    return out


# MirrorMaker 2's connector classes (by their simple name) and the role each plays.
_MM2_ROLES = {"MirrorSourceConnector": "source", "MirrorCheckpointConnector": "checkpoint",
              "MirrorHeartbeatConnector": "heartbeat"}
# What MirrorMaker 2 leaves out when `topics.exclude` is not set (MirrorSourceConfig).
_MM2_DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal, .*\.replica, __.*"
_MM2_DEFAULT_GROUPS_EXCLUDE = "console-consumer-.*, connect-.*, __.*"


def mm2_flows(connectors: Mapping[str, Mapping[str, str]],
              old_names_read: bool = True) -> list[DiscoveredFlow]:
    """MirrorMaker 2's flows among Connect's connectors: its source, checkpoint and heartbeat
    connectors grouped by their cluster aliases (source -> target). `old_names_read` False:
    the worker's MirrorMaker 2 ignores `topics.blacklist`/`groups.blacklist` (Kafka 4), so
    its filters are read without them."""
    grouped: dict[tuple[str, str], dict[str, list[tuple[str, Mapping[str, str]]]]] = {}
    for name, cfg in sorted(connectors.items()):
        role = _MM2_ROLES.get(cfg.get("connector.class", "").rpartition(".")[2])
        if role is not None:
            aliases = (cfg.get("source.cluster.alias", "source"),
                       cfg.get("target.cluster.alias", "target"))
            grouped.setdefault(aliases, {}).setdefault(role, []).append((name, cfg))
    return [_mm2_flow(aliases, roles, old_names_read) for aliases, roles in grouped.items()]


def _mm2_flow(aliases: tuple[str, str],
              roles: Mapping[str, list[tuple[str, Mapping[str, str]]]],
              old_names_read: bool = True) -> DiscoveredFlow:
    problems: list[str] = []
    for role, found in roles.items():
        if len(found) > 1:
            problems.append(f"several {role} connectors for {aliases[0]} -> {aliases[1]} "
                            f"({', '.join(n for n, _ in found)}): {found[0][0]} is written")
    present = [role for role in ("source", "checkpoint", "heartbeat") if role in roles]
    names = {role: roles[role][0][0] for role in present}
    configs = {role: roles[role][0][1] for role in present}
    if not old_names_read:
        # Kafka 4.0 dropped the old names: an exclusion still under one is a list the
        # operator believes in and the worker ignores.
        for role, cfg in configs.items():
            for key, old in LEGACY_KEYS.items():
                if old in cfg and key not in cfg:
                    problems.append(f"{names[role]} sets {old}: {cfg[old]}, which this "
                                    f"worker's MirrorMaker 2 no longer reads (Kafka 4.0 "
                                    f"dropped it): what it names is replicated; move it "
                                    f"to {key}")
        configs = {role: {k: v for k, v in cfg.items() if k not in LEGACY_KEYS.values()}
                   for role, cfg in configs.items()}
    source, checkpoint = configs.get("source", {}), configs.get("checkpoint", {})
    # The connector that reads the source and writes the target says most about the flow.
    main = configs[present[0]]
    rename, rename_source = _mm2_rename(main, aliases[0])
    separator = main.get("replication.policy.separator", ".")
    internal = separator if str(main.get("replication.policy.internal.topic.separator.enabled",
                                         "true")).lower() == "true" else "."
    shown = separator if rename and rename != "{topic}" else "."
    policies = {cfg.get("replication.policy.class", DEFAULT_POLICY).rpartition(".")[2]
                for cfg in configs.values()}
    if len(policies) > 1:
        problems.append(f"the connectors use different replication policies "
                        f"({', '.join(sorted(policies))}): {names.get('source', '?')}'s is "
                        "written")
    filtered = source or checkpoint
    topics = RegexList(
        regex_list(filtered.get("topics", ".*"), problems, "topics", include=True),
        regex_list(filtered.get("topics.exclude", filtered.get("topics.blacklist")), problems,
                   "topics.exclude"),
        _filter_source("topics", filtered, "topics.exclude", "topics.blacklist",
                       _MM2_DEFAULT_TOPICS_EXCLUDE))
    groups = None
    if checkpoint:
        groups = RegexList(
            regex_list(checkpoint.get("groups", ".*"), problems, "groups", include=True),
            regex_list(checkpoint.get("groups.exclude", checkpoint.get("groups.blacklist")),
                       problems, "groups.exclude"),
            _filter_source("groups", checkpoint, "groups.exclude", "groups.blacklist",
                           _MM2_DEFAULT_GROUPS_EXCLUDE))
        notes = tuple(checkpoint_costs(source, checkpoint)["lines"])
    else:
        notes = ("No checkpoint connector: with the source gone, a failover has no group "
                 "positions but what `drctl guard` keeps.",)
    return DiscoveredFlow(
        "mirrormaker2", names,
        source_bootstrap=main.get("source.cluster.bootstrap.servers", ""),
        target_bootstrap=main.get("target.cluster.bootstrap.servers", ""),
        source_alias=aliases[0], target_alias=aliases[1],
        rename=rename, rename_source=rename_source,
        internal_separator=internal if internal != shown else None, topics=topics,
        groups=groups,
        source_login=ClusterLogin.from_java(java_login_settings(main, "source.cluster.")),
        target_login=ClusterLogin.from_java(java_login_settings(main, "target.cluster.")),
        notes=notes, problems=tuple(problems), incident=main.get(INCIDENT_KEY))


def _mm2_rename(cfg: Mapping[str, str], source_alias: str) -> tuple[str | None, str]:
    """The target name of a source topic under the connector's replication policy, and
    where it comes from in words; None for a policy class drctl does not know."""
    policy = cfg.get("replication.policy.class", DEFAULT_POLICY)
    simple = policy.rpartition(".")[2]
    if simple == "IdentityReplicationPolicy":
        return "{topic}", "IdentityReplicationPolicy: topic names kept"
    if simple == "DefaultReplicationPolicy":
        separator = cfg.get("replication.policy.separator", ".")
        return (f"{source_alias}{separator}{{topic}}",
                f"DefaultReplicationPolicy, separator '{separator}': orders is mirrored to "
                f"{source_alias}{separator}orders")
    return None, f"replication.policy.class {policy}"


def _filter_source(include_key: str, cfg: Mapping[str, str], exclude_key: str,
                   old_exclude_key: str, default_exclude: str) -> str:
    """Where a filter was read from, for the comment beside it."""
    include = cfg.get(include_key, ".*")
    exclude = cfg.get(exclude_key, cfg.get(old_exclude_key))
    said = f"MirrorMaker 2's {include_key}: {include}"
    if exclude is None:
        return f"{said}; {exclude_key} not set (its default leaves out {default_exclude})"
    return f"{said}; {exclude_key}: {exclude}"


def copied_upto(rep: ReplicationSettings, stored: list[dict[str, Any]]
                ) -> dict[tuple[str, int], int]:
    """Per source partition, the next offset MirrorSourceConnector copies (its stored offset,
    the last upstream offset copied, + 1), from Connect's offsets document (`offsets`)."""
    out: dict[tuple[str, int], int] = {}
    for entry in stored:
        part, off = entry.get("partition") or {}, entry.get("offset") or {}
        if part.get("cluster", rep.source_alias) == rep.source_alias and "offset" in off:
            out[(str(part["topic"]), int(part["partition"]))] = int(off["offset"]) + 1
    return out

"""Confluent Replicator: a Connect connector; target offsets differ from the source's.

Every copy may carry the `__replicator_id` provenance header. The reverse flow resumes from
its consumer group, which drctl commits at the failover point; the operator deploys the
connector config drctl writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from drctl.codecs.confluent import PROVENANCE_HEADER
from drctl.config import ReplicationSettings
from drctl.errors import Aborted
from drctl.kafka.connect_rest import ConnectorMissing
from drctl.kafka.groups import alter_offsets
from drctl.progress import Notify
from drctl.replication.base import Confirm, FlowContext, FlowPart, ReturnRequest, ReverseRequest
from drctl.replication.connect import (
    ConnectControlled,
    connect_client,
    paused,
    retire_connector,
    scoped_connector_name,
    stopped_for_offsets,
)
from drctl.replication.discovered import (
    ClusterLogin,
    DiscoveredFlow,
    RegexList,
    java_login_settings,
)
from drctl.reports import render


class Replicator(ConnectControlled):
    provenance_header = PROVENANCE_HEADER
    described_by_connectors = True

    def discover_flows(self, connectors: Mapping[str, Mapping[str, str]],
                       old_names_read: bool = True) -> list[DiscoveredFlow]:
        return [replicator_flow(name, cfg) for name, cfg in sorted(connectors.items())
                if cfg.get("connector.class", "").rpartition(".")[2]
                == "ReplicatorSourceConnector"]

    def exclusions(self, rep: ReplicationSettings, part: FlowPart
                   ) -> dict[str, dict[str, list[str]]]:
        """An application's incident: its topics join the connector's `topic.blacklist`
        (names, not regexes: Replicator's own list)."""
        if not rep.connect.source_connector:
            return {}
        return {rep.connect.source_connector: {"topic.blacklist": list(part.topics)}}

    def start_reverse(self, ctx: FlowContext, request: ReverseRequest,
                      notify: Notify) -> dict[str, Any]:
        rep = ctx.rep
        request.out_dir.mkdir(parents=True, exist_ok=True)
        group = rep.replicator_group or reverse_connector_name(rep, request.part)
        for topic, parts in request.starts.items():
            alter_offsets(ctx.target, group, {(topic, p): off for p, off in parts.items()})
        path = request.out_dir / f"{request.incident}-replicator-reverse.json"
        path.write_text(render("replicator-connector.json.j2", ctx.config.redactor,
                               name=reverse_connector_name(rep, request.part),
                               group=group, topics=sorted(request.starts),
                               source_bootstrap=ctx.config.cluster(rep.target)["bootstrap.servers"],
                               target_bootstrap=ctx.config.cluster(rep.source)["bootstrap.servers"],
                               source_cluster=rep.target, target_cluster=rep.source))
        notify(f"Committed the reverse Replicator group '{group}' at the failover point on "
               f"{rep.target}; deploy {path}")
        return {"kind": rep.kind, "group": group, "start": request.starts, "config": str(path)}

    def replicated_upto(self, ctx: FlowContext) -> dict[tuple[str, int], int] | None:
        """The forward Replicator's consumer group commits on the source."""
        from drctl.kafka.groups import committed_offsets

        rep = ctx.rep
        try:
            group = forward_group(rep)
            return dict(committed_offsets(ctx.source, [group]).get(group, {}))
        except Exception:  # noqa: BLE001 - unknown is said as such by the caller
            return None

    def retire_reverse(self, ctx: FlowContext, request: ReturnRequest, notify: Notify,
                       confirm: Confirm | None = None) -> dict[str, Any]:
        """The reverse Replicator the operator deployed from drctl's config: retired through
        Connect when it runs on the configured worker, else confirmed by the operator."""
        rep = ctx.rep
        name = reverse_connector_name(rep, request.part)
        client = connect_client(rep, notify=notify)
        if client is not None:
            retired = retire_connector(client, name, notify)
            if retired["state"] == "deleted":
                return retired
        text = (f"Stop and delete the reverse Replicator '{name}' ({rep.target} -> "
                f"{rep.source}) wherever you deployed it, then confirm.")
        if confirm is None or not confirm(text):
            raise Aborted("The reverse Replicator was not confirmed stopped.",
                          "Stop it, then run the same command again.")
        return {"connector": name, "state": "confirmed stopped by the operator"}

    def set_forward_start(self, ctx: FlowContext, request: ReturnRequest, notify: Notify,
                          confirm: Confirm | None = None, *,
                          dry_run: bool = False) -> dict[str, Any]:
        """Replicator resumes from its consumer group on the source: commit it there."""
        rep = ctx.rep
        group = forward_group(rep)
        out = {"group": group, "starts": request.forward_starts}
        if dry_run:
            return out
        client = connect_client(rep, notify=notify)
        if client is not None and rep.connect.source_connector:
            name = rep.connect.source_connector
            if request.part is not None and self.edits_hold(rep, request.edits):
                # It copies the rest of the flow: stopped for the commit (its group must be
                # empty) and resumed right after; the part's entries come out later.
                with paused(client, [name]):
                    self._commit_forward(ctx, group, request, notify)
                return out
            stopped_for_offsets(client, name)
        self._commit_forward(ctx, group, request, notify)
        return out

    @staticmethod
    def _commit_forward(ctx: FlowContext, group: str, request: ReturnRequest,
                        notify: Notify) -> None:
        notify(f"Committing the forward Replicator group '{group}' on {ctx.rep.source} at the "
               "cut-over")
        alter_offsets(ctx.source, group,
                      {(t, p): off for t, parts in request.forward_starts.items()
                       for p, off in parts.items()})


def reverse_connector_name(rep: ReplicationSettings, part: FlowPart | None = None) -> str:
    """The reverse Replicator drctl renders a config for (and its default group); an
    application's incident has its own."""
    name = f"replicator-{rep.target_alias}-to-{rep.source_alias}"
    return scoped_connector_name(name, part)


def forward_group(rep: ReplicationSettings) -> str:
    """The forward Replicator's consumer group on the source: its `src.consumer.group.id`,
    which defaults to the connector's name."""
    client = connect_client(rep)
    name = rep.connect.source_connector or f"replicator-{rep.source_alias}-to-{rep.target_alias}"
    if client is not None and rep.connect.source_connector:
        try:
            return str(client.config(name).get("src.consumer.group.id") or name)
        except ConnectorMissing:
            pass
    return name


def _names(value: str | None) -> list[str]:
    return [n.strip() for n in (value or "").split(",") if n.strip()]


def replicator_flow(name: str, cfg: Mapping[str, str]) -> DiscoveredFlow:
    """One Replicator connector's flow. Its topics: `topic.whitelist` (names) or
    `topic.regex`, less `topic.blacklist` (names), as drctl's whole-name regexes."""
    problems: list[str] = []
    include = [re.escape(t) for t in _names(cfg.get("topic.whitelist"))]
    regex = cfg.get("topic.regex") or None
    if regex is not None:
        try:
            re.compile(regex)
            include.append(regex)
        except re.error as exc:
            problems.append(f"topic.regex: '{regex}' is not a Python regex ({exc}); left out, "
                            "write it by hand")
    if not include and regex is None:
        problems.append(f"{name} sets neither topic.whitelist nor topic.regex: it copies no "
                        "topic, and replication.topics is left open (every topic)")
    said = "; ".join(f"{key}: {cfg[key]}" for key in
                     ("topic.whitelist", "topic.regex", "topic.blacklist") if cfg.get(key))
    rename_format = cfg.get("topic.rename.format", "${topic}")
    rename: str | None = rename_format.replace("${topic}", "{topic}")
    if rename is not None and rename.count("{topic}") != 1:
        rename = None
    poll_s = _seconds(cfg.get("topic.poll.interval.ms"), 120_000)
    notes = [f"New topics are found every {poll_s:g} s (topic.poll.interval.ms): a topic created "
             "less than that before the outage is not mirrored."]
    if cfg.get("provenance.header.enable", "false").strip().lower() != "true":
        notes.append("provenance.header.enable is off: copies carry no __replicator_id header, "
                     "so failback knows late copies by their content only.")
    return DiscoveredFlow(
        "replicator", {"source": name},
        source_bootstrap=cfg.get("src.kafka.bootstrap.servers", ""),
        target_bootstrap=cfg.get("dest.kafka.bootstrap.servers", ""),
        rename=rename,
        rename_source=f"Replicator's topic.rename.format: {rename_format}",
        topics=RegexList(tuple(include), tuple(re.escape(t) for t in
                                               _names(cfg.get("topic.blacklist"))),
                         f"Replicator's {said}" if said else "Replicator sets no topics"),
        replicator_group=cfg.get("src.consumer.group.id") or name,
        source_login=ClusterLogin.from_java(java_login_settings(cfg, "src.kafka.")),
        target_login=ClusterLogin.from_java(java_login_settings(cfg, "dest.kafka.")),
        notes=tuple(notes), problems=tuple(problems))


def _seconds(ms: str | None, default_ms: int) -> float:
    try:
        return float(ms) / 1000 if ms is not None else default_ms / 1000
    except ValueError:
        return default_ms / 1000

"""Confluent Replicator: a Connect connector; target offsets differ from the source's.

Every copy may carry the `__replicator_id` provenance header. The reverse flow resumes from
its consumer group, which drctl commits at the failover point; the operator deploys the
connector config drctl writes.
"""

from __future__ import annotations

from typing import Any

from drctl.codecs.confluent import PROVENANCE_HEADER
from drctl.config import ReplicationSettings
from drctl.errors import Aborted
from drctl.kafka.connect_rest import ConnectorMissing
from drctl.kafka.groups import alter_offsets
from drctl.progress import Notify
from drctl.replication.base import Confirm, FlowContext, ReturnRequest, ReverseRequest
from drctl.replication.connect import (
    ConnectControlled,
    connect_client,
    retire_connector,
    stopped_for_offsets,
)
from drctl.reports import render


class Replicator(ConnectControlled):
    provenance_header = PROVENANCE_HEADER

    def start_reverse(self, ctx: FlowContext, request: ReverseRequest,
                      notify: Notify) -> dict[str, Any]:
        rep = ctx.rep
        request.out_dir.mkdir(parents=True, exist_ok=True)
        group = rep.replicator_group or reverse_connector_name(rep)
        admin = ctx.target.admin()
        for topic, parts in request.starts.items():
            alter_offsets(admin, group, {(topic, p): off for p, off in parts.items()})
        path = request.out_dir / f"{request.incident}-replicator-reverse.json"
        path.write_text(render("replicator-connector.json.j2", ctx.config.redactor,
                               name=reverse_connector_name(rep),
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
            admin = ctx.source.admin()
            group = forward_group(rep)
            return dict(committed_offsets(admin, [group]).get(group, {}))
        except Exception:  # noqa: BLE001 - unknown is said as such by the caller
            return None

    def retire_reverse(self, ctx: FlowContext, request: ReturnRequest, notify: Notify,
                       confirm: Confirm | None = None) -> dict[str, Any]:
        """The reverse Replicator the operator deployed from drctl's config: retired through
        Connect when it runs on the configured worker, else confirmed by the operator."""
        rep = ctx.rep
        name = reverse_connector_name(rep)
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
            stopped_for_offsets(client, rep.connect.source_connector)
        admin = ctx.source.admin()
        notify(f"Committing the forward Replicator group '{group}' on {rep.source} at the "
               "cut-over")
        alter_offsets(admin, group, {(t, p): off for t, parts in request.forward_starts.items()
                                     for p, off in parts.items()})
        return out


def reverse_connector_name(rep: ReplicationSettings) -> str:
    """The reverse Replicator drctl renders a config for (and its default group)."""
    return f"replicator-{rep.target_alias}-to-{rep.source_alias}"


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

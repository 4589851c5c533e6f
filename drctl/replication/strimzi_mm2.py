"""MirrorMaker 2 run by Strimzi: the kind's semantics (MirrorMaker2) with its connectors
controlled through the flow's KafkaMirrorMaker2 resource (`StrimziControl`), never through
Kafka Connect's REST API — the operator would put any REST change back.

`kind_for` returns this kind for a flow with `replication.strimzi`: the procedures call the
same methods and do not know who owns the connectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from drctl.config import ReplicationSettings
from drctl.errors import CheckFailed, DrctlError
from drctl.findings import Area, Finding, Severity
from drctl.kube.api import KubeRejected, KubeUnreachable
from drctl.progress import Notify
from drctl.replication.base import (
    Confirm,
    FlowContext,
    FlowPart,
    FlowState,
    ReturnRequest,
    ReverseRequest,
    StopOutcome,
)
from drctl.replication.connect import flow_state_of
from drctl.replication.control import ConnectorActivity, ConnectorOwner
from drctl.replication.mirrormaker2 import (
    INCIDENT_KEY,
    MirrorMaker2,
    checkpoint_costs,
    copied_upto,
    mm2_settings_findings,
    reverse_connector_config,
    reverse_flow,
)
from drctl.replication.strimzi import (
    PAUSE_ANNOTATION,
    OperatorUnconfirmed,
    StrimziControl,
    connector_name,
    gitops_owner,
)

# Keys Strimzi sets itself from the resource (or refuses): never written into a connector's
# config.
_DERIVED = ("name", "connector.class", "tasks.max", "source.cluster.", "target.cluster.",
            "producer.override.bootstrap.servers")


def control(rep: ReplicationSettings, notify: Notify | None = None,
            deadline_s: float | None = None,
            reach_deadline_s: float | None = None) -> StrimziControl:
    """The flow's resource, each change confirmed within `deadline_s`, else the command's
    --deadline (the context puts it in `rep.connect.reach_deadline_s`), else 60 s; an API
    server that does not answer retried for `reach_deadline_s`, else that --deadline."""
    return StrimziControl(rep, notify=notify,
                          deadline_s=deadline_s or rep.connect.reach_deadline_s or 60.0,
                          reach_deadline_s=reach_deadline_s or rep.connect.reach_deadline_s)


def named(rep: ReplicationSettings) -> ReplicationSettings:
    """The flow with its connector names as Strimzi makes them where the config names none."""
    c = rep.connect
    return replace(rep, connect=replace(
        c, source_connector=c.source_connector or connector_name(
            rep.source_alias, rep.target_alias, "sourceConnector"),
        checkpoint_connector=c.checkpoint_connector or connector_name(
            rep.source_alias, rep.target_alias, "checkpointConnector")))


class StrimziMirrorMaker2(MirrorMaker2):
    """MirrorMaker 2 whose connectors Strimzi's operator owns."""

    def ownership_warnings(self, rep: ReplicationSettings) -> list[str]:
        try:
            owner = control(rep).ownership()
        except DrctlError:
            return []  # the stop itself says what is wrong with the resource
        if owner is None:
            return []
        where = rep.strimzi.resource if rep.strimzi else ""
        return [f"KafkaMirrorMaker2 {where} is also owned by {owner}: what drctl patches now "
                "is put back at its next sync (replication resumes behind the failover) "
                "unless that sync is paused for it."]

    def stop_forward(self, rep: ReplicationSettings, *, confirm: Confirm | None = None,
                     deadline_s: float = 60.0, reach_deadline_s: float | None = None,
                     part: FlowPart | None = None) -> StopOutcome:
        """Every connector of the flow's mirror `stopped` in the resource, done when the
        operator reports each STOPPED. The API server unreachable: pending; the operator
        not confirming within the command's --deadline (`reach_deadline_s`, else
        `deadline_s`): exit 4 naming it (OperatorUnconfirmed) — the operator is the
        controller that does not answer, and the patch stays written for a re-run."""
        if part is not None:
            return self._leave_out_by_hand(rep, part, confirm)
        flow = control(rep, deadline_s=reach_deadline_s or deadline_s,
                       reach_deadline_s=reach_deadline_s)
        try:
            names = list(rep.connect.connectors) or [r.name for r in flow.readings()]
            readings = flow.set_states({n: "stopped" for n in names},
                                       what="forward replication stopped")
        except KubeUnreachable:
            return StopOutcome("pending", [], f"the Kubernetes API for "
                               f"KafkaMirrorMaker2 {flow.settings.resource} is unreachable")
        return StopOutcome("stopped", names, ", ".join(
            f"{r.name}: {r.describe()}" for r in readings) + " (Strimzi's status)")

    def restop_forward(self, rep: ReplicationSettings, names: Sequence[str],
                       deadline_s: float = 10.0) -> FlowState:
        flow = control(rep, deadline_s=deadline_s)
        try:
            flow.set_states({n: "stopped" for n in names}, what="the stop again")
        except OperatorUnconfirmed:
            pass
        except KubeUnreachable:
            return FlowState(False, restopped=tuple(names))
        return flow_state_of(flow.readings(), names)

    # -- an application's incident: the exclusions, in the resource --------------------------

    def exclusions(self, rep: ReplicationSettings, part: FlowPart
                   ) -> dict[str, dict[str, list[str]]]:
        return super().exclusions(named(rep), part)

    def owner(self, rep: ReplicationSettings, *, notify: Notify | None = None,
              changing: bool = False) -> ConnectorOwner | None:
        """The flow's KafkaMirrorMaker2: configs read from it and patched into it."""
        return control(rep, notify)

    # -- the reverse flow, a second resource ---------------------------------------------------

    def start_reverse(self, ctx: FlowContext, request: ReverseRequest,
                      notify: Notify) -> dict[str, Any]:
        """The reverse flow's KafkaMirrorMaker2 created (or found) with its source connector
        stopped, its offsets set through Strimzi's `alter` annotation, then started — each
        step confirmed by the operator's status."""
        rep = ctx.rep
        flow = control(rep, notify)
        reverse = reverse_flow(ctx.config, sorted(request.starts))
        config = {k: v for k, v in reverse_connector_config(
            reverse, request.skip_header, request.incident).items()
            if not k.startswith(_DERIVED)}
        self._refuse_cycle(rep, "the reverse flow", request.edits, request.part)
        name = flow.create_reverse(config, request.incident, request.part)
        namespace, resource = flow.reverse_where(request.part)
        mirror_of = (rep.target_alias, rep.source_alias)
        offsets = [{"partition": {"cluster": rep.target_alias, "topic": topic, "partition": p},
                    "offset": {"offset": off - 1} if off > 0 else None}
                   for topic, parts in sorted(request.starts.items())
                   for p, off in sorted(parts.items())]
        notify(f"Setting {name}'s start to the failover point (Strimzi's connector-offsets)")
        flow.alter_offsets(namespace, resource, name, offsets, mirror_of)
        notify(f"Starting {name}: {rep.target_alias} -> {rep.source_alias}, "
               "post-failover data only")
        flow.set_states({name: "running"}, what=f"{name} running", namespace=namespace,
                        name=resource, mirror_of=mirror_of)
        return {"kind": rep.kind, "connector": name, "resource": f"{namespace}/{resource}",
                "start": request.starts, INCIDENT_KEY: request.incident}

    def reverse_state(self, ctx: FlowContext, part: FlowPart | None = None) -> FlowState:
        rep = ctx.rep
        try:
            flow = control(rep)
            namespace, resource = flow.reverse_where(part)
            obj = flow.find(namespace, resource)
            if obj is None:
                return FlowState(False)
            name = connector_name(rep.target_alias, rep.source_alias, "sourceConnector")
            found = obj.readings().get(name)
            return flow_state_of([found]) if found is not None else FlowState(False)
        except DrctlError:
            return FlowState(False)

    def retire_reverse(self, ctx: FlowContext, request: ReturnRequest, notify: Notify,
                       confirm: Confirm | None = None) -> dict[str, Any]:
        """Stopped, its stored offsets listed (kept in the marker), and the resource deleted
        when drctl created it (one the operator deployed is left stopped)."""
        rep = ctx.rep
        flow = control(rep, notify)
        namespace, resource = flow.reverse_where(request.part)
        name = connector_name(rep.target_alias, rep.source_alias, "sourceConnector")
        if flow.find(namespace, resource) is None:
            return {"connector": name, "state": "absent"}
        mirror_of = (rep.target_alias, rep.source_alias)
        notify(f"Stopping {name} (KafkaMirrorMaker2 {namespace}/{resource}); its stored "
               "offsets are kept in the marker")
        flow.set_states({name: "stopped"}, what=f"{name} stopped", namespace=namespace,
                        name=resource, mirror_of=mirror_of)
        stored = flow.list_offsets(namespace, resource, name, mirror_of)
        deleted = flow.delete_reverse(request.part)
        return {"connector": name, "state": "deleted" if deleted else "stopped",
                "offsets": stored}

    def set_forward_start(self, ctx: FlowContext, request: ReturnRequest, notify: Notify,
                          confirm: Confirm | None = None, *,
                          dry_run: bool = False) -> dict[str, Any]:
        """The forward source connector's stored offsets through Strimzi's `alter`
        annotation; the connector must be stopped (it is refused while it copies)."""
        rep = named(ctx.rep)
        name = rep.connect.source_connector
        assert name is not None
        offsets = [{"partition": {"cluster": rep.source_alias, "topic": topic, "partition": p},
                    "offset": {"offset": off - 1} if off > 0 else None}
                   for topic, parts in sorted(request.forward_starts.items())
                   for p, off in sorted(parts.items())]
        out = {"connector": name, "starts": request.forward_starts}
        if dry_run:
            return out
        flow = control(rep, notify)
        mirror_of = (rep.source_alias, rep.target_alias)
        where = (flow.settings.namespace, flow.settings.name)
        if request.part is not None and self.edits_hold(rep, request.edits):
            # The rest of the flow copies, its part left out: the source connector stopped
            # for the offsets (Strimzi alters only a stopped one) and running again right
            # after; the part's exclusions come out later.
            was_stopped = flow.readings([name])[0].state == "STOPPED"
            notify(f"Setting {request.part.name}'s start in {name}"
                   + ("" if was_stopped else " (stopped for a moment)"))
            if not was_stopped:
                flow.set_states({name: "stopped"}, what=f"{name} stopped for its offsets")
            flow.alter_offsets(*where, name, offsets, mirror_of)
            if not was_stopped:
                flow.set_states({name: "running"}, what=f"{name} running again")
            return out
        reading = flow.readings([name])[0]
        if reading.activity in (ConnectorActivity.COPYING, ConnectorActivity.STOPPING):
            raise CheckFailed(
                f"Forward replication is already copying ({name} is {reading.describe()}).",
                f"Stop {name}, compare the target with the source, then run reprotect again.")
        if reading.state != "STOPPED":
            flow.set_states({name: "stopped"}, what=f"{name} stopped")
        notify(f"Setting {name}'s start to where {rep.source} stood at the cut-over")
        flow.alter_offsets(*where, name, offsets, mirror_of)
        return out

    # -- reads the REST API gave -----------------------------------------------------------

    def replicated_upto(self, ctx: FlowContext) -> dict[tuple[str, int], int] | None:
        """Strimzi lists stored offsets only of a stopped connector: unknown while it runs
        (None), read through the resource once stopped (failover stops it)."""
        rep = named(ctx.rep)
        name = rep.connect.source_connector
        assert name is not None
        try:
            flow = control(rep)
            if flow.readings([name])[0].state != "STOPPED":
                return None
            stored = flow.list_offsets(flow.settings.namespace, flow.settings.name, name,
                                       (rep.source_alias, rep.target_alias))
        except DrctlError:
            return None
        return copied_upto(rep, stored)

    def lag_remedy(self, rep: ReplicationSettings) -> str:
        where = rep.strimzi.resource if rep.strimzi else "the KafkaMirrorMaker2"
        return (f"stop the source connector in KafkaMirrorMaker2 {where} (state: stopped), set "
                "its offsets before {topic}-{partition} offset {offset} through the "
                "strimzi.io/connector-offsets=alter annotation, start it: it copies them again, "
                "and what follows them a second time")

    def translation_costs(self, rep: ReplicationSettings) -> dict[str, Any] | None:
        rep = named(rep)
        assert rep.connect.source_connector and rep.connect.checkpoint_connector
        flow = control(rep)
        return checkpoint_costs(flow.config(rep.connect.source_connector),
                                flow.config(rep.connect.checkpoint_connector))

    def settings_findings(self, rep: ReplicationSettings,
                          active_on_target: Sequence[str]) -> list[Finding]:
        """MirrorMaker 2's settings as the resource gives them, and who else owns it: a GitOps
        tool puts back whatever drctl patches unless its sync is paused."""
        rep = named(rep)
        assert rep.strimzi is not None
        where = f"KafkaMirrorMaker2 {rep.strimzi.resource}"
        try:
            flow = control(rep)
            obj = flow.read()
            names = {"source": rep.connect.source_connector,
                     "checkpoint": rep.connect.checkpoint_connector}
            configs = {role: flow.config(str(n)) for role, n in names.items()}
        except (KubeUnreachable, KubeRejected, DrctlError) as exc:
            return [Finding(Area.REPLICATION, where, exc.message,
                            "drctl cannot change or read the flow through it",
                            exc.hint or "check replication.strimzi", Severity.BLIND)]
        out = []
        owner = gitops_owner(obj.metadata)
        if owner is not None:
            out.append(Finding(Area.REPLICATION, where, f"also owned by {owner}",
                               "what drctl patches in a failover (connectors stopped, topics "
                               "left out) is put back at its next sync: replication resumes "
                               "behind the failover",
                               "pause its sync for this resource before a failover (Argo CD: "
                               "disable auto-sync; Flux: suspend the Kustomization/HelmRelease)"))
        if obj.paused:
            out.append(Finding(Area.REPLICATION, where, f"{PAUSE_ANNOTATION} is \"true\"",
                               "drctl cannot stop or start replication through it",
                               f"remove the {PAUSE_ANNOTATION} annotation"))
        return out + mm2_settings_findings(configs["source"], configs["checkpoint"],
                                           {k: str(v) for k, v in names.items()},
                                           active_on_target)

"""Replication control through Strimzi's `KafkaMirrorMaker2` resource, for a flow whose
connectors Strimzi's cluster operator owns (docs/design.md §6, "Who controls the replicator").

The operator puts back whatever is changed through Kafka Connect's REST API at its next
reconciliation, and deletes connectors no resource names: every change here is a patch of
the resource (a JSON patch guarded by a `test` of its resourceVersion, re-read and re-decided
on a conflict), and a change is done when the operator's status says so — the new
generation observed, Ready, every connector of the change in the wanted state as Connect
reports it — never when it was asked. Both layouts of the resource are read and written:
`kafka.strimzi.io/v1` (`.spec.target`, `.spec.mirrors[].source`) and `v1beta2`
(`.spec.connectCluster`, `.spec.clusters[]`, `.spec.mirrors[].sourceCluster/targetCluster`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from drctl.config import ReplicationSettings, StrimziSettings
from drctl.errors import CheckFailed, DrctlError, Unreachable
from drctl.kube.api import KUBE_RETRY, KubeClient, KubeConflict, KubeError, KubeNotFound
from drctl.kube.kubeconfig import load_login
from drctl.progress import Notify
from drctl.replication.base import FlowPart
from drctl.replication.control import ConnectorActivity, ConnectorReading
from drctl.retry import WaitTimedOut, wait_for

GROUP = "kafka.strimzi.io"
PLURAL = "kafkamirrormaker2s"
# The versions drctl speaks, newest first (Strimzi 1.0 serves v1 only).
VERSIONS = ("v1", "v1beta2")
PAUSE_ANNOTATION = "strimzi.io/pause-reconciliation"
OFFSETS_ANNOTATION = "strimzi.io/connector-offsets"
CONNECTOR_ANNOTATION = "strimzi.io/mirrormaker-connector"
# The reasons of the Warning conditions Strimzi writes for an offsets request that failed.
OFFSETS_REASONS = ("ListOffsets", "AlterOffsets", "ResetOffsets", "ManageOffsets")
# drctl marks the resources it creates (the reverse flow's), so it retires only those.
CREATED_BY = "app.kubernetes.io/managed-by"
# Connector roles as Strimzi names them: `<source alias>-><target alias>.<class>`.
ROLES = {"sourceConnector": "MirrorSourceConnector",
         "checkpointConnector": "MirrorCheckpointConnector",
         "heartbeatConnector": "MirrorHeartbeatConnector"}
STATES = ("running", "paused", "stopped")
# The connector keys a mirror's own fields set (Strimzi puts them over the connector's config).
MIRROR_PATTERNS = {"topics.exclude": "topicsExcludePattern",
                   "groups.exclude": "groupsExcludePattern"}


class Layout(StrEnum):
    V1 = "v1"
    V1BETA2 = "v1beta2"


def connector_name(source_alias: str, target_alias: str, role: str) -> str:
    """e.g. 'primary->secondary.MirrorSourceConnector'."""
    return f"{source_alias}->{target_alias}.{ROLES[role]}"


def offsets_key(connector: str) -> str:
    """The ConfigMap key Strimzi lists a KafkaMirrorMaker2 connector's offsets under and
    alters them from (KafkaMirrorMaker2AssemblyOperator; `offsets.json` is KafkaConnector's):
    'primary--secondary.MirrorSourceConnector.json'. Its value is Connect's own offsets
    document, `{"offsets": [...]}`, as GET /connectors/<name>/offsets answers it."""
    return connector.replace("->", "--") + ".json"


def gitops_owner(metadata: Mapping[str, Any]) -> str | None:
    """The GitOps tool that also owns an object, from its labels and annotations, in words;
    None when none says so. It puts back whatever drctl patches unless paused there."""
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    flux = sorted(k for k in labels if k.startswith(("kustomize.toolkit.fluxcd.io/",
                                                     "helm.toolkit.fluxcd.io/")))
    if flux:
        return "Flux (" + ", ".join(f"{k}={labels[k]}" for k in flux) + ")"
    argo = sorted(k for k in annotations if k.startswith("argocd.argoproj.io/"))
    if argo:
        return "Argo CD (" + ", ".join(argo) + ")"
    if "app.kubernetes.io/instance" in labels:
        return (f"Argo CD, or Helm (label app.kubernetes.io/instance="
                f"{labels['app.kubernetes.io/instance']})")
    return None


@dataclass(frozen=True)
class Mirror:
    """One entry of `.spec.mirrors`: which flow it is and which connectors it makes."""

    index: int
    source_alias: str
    target_alias: str
    spec: Mapping[str, Any]

    @property
    def roles(self) -> list[str]:
        """The connector roles it configures (Strimzi deploys those only)."""
        return [r for r in ROLES if isinstance(self.spec.get(r), Mapping)]

    def name(self, role: str) -> str:
        return connector_name(self.source_alias, self.target_alias, role)

    @property
    def names(self) -> dict[str, str]:
        """Role -> connector name."""
        return {r: self.name(r) for r in self.roles}

    def role_of(self, name: str) -> str | None:
        return next((r for r, n in self.names.items() if n == name), None)


@dataclass(frozen=True)
class MirrorMakerObject:
    """A `KafkaMirrorMaker2` as read: its layout told by its content (a server serving both
    versions without conversion shows either layout under either version)."""

    raw: Mapping[str, Any]

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.raw.get("metadata") or {}

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.raw.get("spec") or {}

    @property
    def status(self) -> Mapping[str, Any]:
        return self.raw.get("status") or {}

    @property
    def where(self) -> str:
        return f"{self.metadata.get('namespace')}/{self.metadata.get('name')}"

    @property
    def layout(self) -> Layout:
        if "clusters" in self.spec or "connectCluster" in self.spec:
            return Layout.V1BETA2
        return Layout.V1

    @property
    def generation(self) -> int:
        return int(self.metadata.get("generation") or 0)

    @property
    def resource_version(self) -> str:
        return str(self.metadata.get("resourceVersion") or "")

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.metadata.get("annotations") or {}

    @property
    def paused(self) -> bool:
        return str(self.annotations.get(PAUSE_ANNOTATION, "")).lower() == "true"

    @property
    def observed_generation(self) -> int:
        return int(self.status.get("observedGeneration") or 0)

    def ready(self) -> tuple[bool, str]:
        """Whether the Ready condition is True, and what the conditions say otherwise.
        Strimzi writes no Ready=False: a failed reconciliation is a `NotReady` condition
        (reason: the exception, message: what failed), a paused one `ReconciliationPaused`;
        NotReady's own words come first."""
        conditions = [c for c in self.status.get("conditions") or [] if isinstance(c, Mapping)]
        ready = next((c for c in conditions if c.get("type") == "Ready"), None)
        if ready is not None and str(ready.get("status")) == "True":
            return True, ""
        not_ready = next((c for c in conditions if c.get("type") == "NotReady"), None)
        if not_ready is not None:
            return False, (f"NotReady: {not_ready.get('message') or 'no message'}"
                           + (f" ({not_ready['reason']})" if not_ready.get("reason") else ""))
        said = "; ".join(f"{c.get('type')}={c.get('status')}"
                         + (f" ({c.get('reason')}: {c.get('message')})"
                            if c.get("reason") or c.get("message") else "")
                         for c in conditions)
        return False, said or "no conditions yet"

    def offsets_warnings(self) -> str:
        """What the operator said of an offsets request it could not carry out: Strimzi
        keeps the annotation and writes a Warning condition whose reason is ListOffsets,
        AlterOffsets, ResetOffsets or ManageOffsets ("" when there is none)."""
        return "; ".join(f"{c.get('reason')}: {c.get('message')}"
                         for c in self.status.get("conditions") or []
                         if isinstance(c, Mapping) and c.get("type") == "Warning"
                         and c.get("reason") in OFFSETS_REASONS)

    def mirrors(self) -> list[Mirror]:
        out = []
        for i, entry in enumerate(self.spec.get("mirrors") or []):
            if self.layout is Layout.V1:
                source = (entry.get("source") or {}).get("alias")
                target = (self.spec.get("target") or {}).get("alias")
            else:
                source, target = entry.get("sourceCluster"), entry.get("targetCluster")
            out.append(Mirror(i, str(source), str(target), entry))
        return out

    def mirror(self, source_alias: str, target_alias: str) -> Mirror:
        """The mirror of the flow `source_alias` -> `target_alias`."""
        for mirror in self.mirrors():
            if (mirror.source_alias, mirror.target_alias) == (source_alias, target_alias):
                return mirror
        flows = ", ".join(f"{m.source_alias} -> {m.target_alias}" for m in self.mirrors())
        raise DrctlError(f"KafkaMirrorMaker2 {self.where} has no mirror {source_alias} -> "
                         f"{target_alias} (it has: {flows or 'none'}).",
                         "Fix replication.source_alias / target_alias, or "
                         "replication.strimzi.")

    def readings(self) -> dict[str, ConnectorReading]:
        """Each connector as the operator last reported it (`.status.connectors[]`: Connect's
        own status JSON of each)."""
        out = {}
        for entry in self.status.get("connectors") or []:
            if isinstance(entry, Mapping) and entry.get("name") and entry.get("connector"):
                out[str(entry["name"])] = ConnectorReading.from_status(str(entry["name"]), entry)
        return out


def connector_configs(obj: MirrorMakerObject) -> dict[str, dict[str, str]]:
    """Each connector of the resource with the config Strimzi gives it (its own `config`,
    the classes, the clusters' aliases and addresses, the mirror's patterns), as Kafka
    Connect would list it: what `config init` reads a flow from."""
    spec = obj.spec
    clusters = {str(c.get("alias")): c for c in spec.get("clusters") or []}
    out: dict[str, dict[str, str]] = {}
    for mirror in obj.mirrors():
        if obj.layout is Layout.V1:
            source = mirror.spec.get("source") or {}
            target = spec.get("target") or {}
        else:
            source = clusters.get(mirror.source_alias, {})
            target = clusters.get(mirror.target_alias, {})
        for role, name in mirror.names.items():
            cfg = {str(k): str(v) for k, v in (mirror.spec[role].get("config") or {}).items()}
            cfg.update({"connector.class": f"org.apache.kafka.connect.mirror.{ROLES[role]}",
                        "source.cluster.alias": mirror.source_alias,
                        "target.cluster.alias": mirror.target_alias,
                        "source.cluster.bootstrap.servers": str(
                            source.get("bootstrapServers", "")),
                        "target.cluster.bootstrap.servers": str(
                            target.get("bootstrapServers", ""))})
            for key, field in (("topics", "topicsPattern"), ("groups", "groupsPattern"),
                               *MIRROR_PATTERNS.items()):
                if mirror.spec.get(field) is not None:
                    cfg[key] = str(mirror.spec[field])
            out[name] = cfg
    return out


def scoped_resource_name(base: str, part: FlowPart) -> str:
    """`<base>-<application>` as a Kubernetes name (lower-case letters, digits, '-'); a name
    that had to change to fit gets a digest of the original, so no two applications share
    one."""
    slug = re.sub(r"[^a-z0-9]+", "-", part.name.lower()).strip("-")[:40] or "app"
    if slug != part.name:
        slug += "-" + hashlib.sha256(part.name.encode()).hexdigest()[:6]
    return f"{base}-{slug}"


def _matches(reading: ConnectorReading, state: str) -> bool:
    """Connect reports `state` (a Strimzi state word) for the connector, never less. Read
    once the operator has reconciled the generation that asks it, so a stop was asked of
    Connect: it holds when no task is left (`stop_held`), as through REST — a connector whose
    source is down hangs in its own stop() and stays RUNNING with no tasks."""
    if state == "stopped":
        return reading.stop_held and reading.state != "PAUSED"
    if state == "paused":
        return reading.activity is ConnectorActivity.PAUSED
    return reading.state == "RUNNING" and all(t == "RUNNING" for t in reading.tasks)


class OperatorUnconfirmed(Unreachable):
    """Strimzi's cluster operator did not confirm a change within the command's deadline
    (slow, down, or the resource stuck). The wait is over (not transient); a run again picks
    it up where it stands, the patch being idempotent."""

    transient = False


class Reverted(CheckFailed):
    """What drctl wrote to the resource was put back while it waited (a GitOps tool)."""


class ReconciliationPaused(CheckFailed):
    """The resource carries `strimzi.io/pause-reconciliation: "true"`: nothing drctl patches
    reaches the connectors."""


Ops = list[dict[str, Any]]


class StrimziControl:
    """The connectors of a flow's `KafkaMirrorMaker2` (`replication.strimzi`), through the
    Kubernetes API. `deadline_s`: how long one change may take to be confirmed (the
    command's --deadline); `reach_deadline_s`: how long an API server that does not answer
    is retried (None: KUBE_RETRY's own bound)."""

    def __init__(self, rep: ReplicationSettings, *, client: KubeClient | None = None,
                 deadline_s: float = 60.0, reach_deadline_s: float | None = None,
                 notify: Notify | None = None, interval_s: float = 0.25) -> None:
        assert rep.strimzi is not None
        self.rep = rep
        self.settings: StrimziSettings = rep.strimzi
        self.client = client or KubeClient(
            load_login(self.settings.kubeconfig, self.settings.context),
            timeout_s=self.settings.timeout_s, notify=notify,
            policy=KUBE_RETRY.with_deadline(reach_deadline_s))
        self.deadline_s = deadline_s
        self.notify = notify or (lambda _: None)
        self.interval_s = interval_s
        self._version: str | None = None

    # -- reading --------------------------------------------------------------------------

    @property
    def owner(self) -> str:
        return f"Strimzi's cluster operator (KafkaMirrorMaker2 {self.settings.resource})"

    @property
    def version(self) -> str:
        """The API version drctl speaks to this server: v1 where served, else v1beta2."""
        if self._version is None:
            served, _ = self.client.served_versions(GROUP)
            found = next((v for v in VERSIONS if v in served), None)
            if found is None:
                raise DrctlError(f"{self.client.name} serves no {GROUP} version drctl speaks "
                                 f"({', '.join(VERSIONS)}; it serves "
                                 f"{', '.join(served) or 'none'}).",
                                 "Is Strimzi's KafkaMirrorMaker2 CRD installed there?")
            self._version = found
        return self._version

    def path(self, namespace: str, name: str | None = None, plural: str = PLURAL) -> str:
        base = (f"/api/v1/namespaces/{namespace}/{plural}" if plural == "configmaps" else
                f"/apis/{GROUP}/{self.version}/namespaces/{namespace}/{plural}")
        return f"{base}/{name}" if name else base

    def read(self, namespace: str | None = None,
             name: str | None = None) -> MirrorMakerObject:
        namespace = namespace or self.settings.namespace
        name = name or self.settings.name
        try:
            return MirrorMakerObject(self.client.get(self.path(namespace, name)))
        except KubeNotFound as exc:
            raise DrctlError(f"There is no KafkaMirrorMaker2 {namespace}/{name} "
                             f"({self.client.name}).",
                             "Fix replication.strimzi (namespace, name).") from exc

    def find(self, namespace: str, name: str) -> MirrorMakerObject | None:
        try:
            return MirrorMakerObject(self.client.get(self.path(namespace, name)))
        except KubeNotFound:
            return None

    def forward(self) -> tuple[MirrorMakerObject, Mirror]:
        obj = self.read()
        return obj, obj.mirror(self.rep.source_alias, self.rep.target_alias)

    def readings(self, names: Sequence[str] | None = None) -> list[ConnectorReading]:
        """Every connector of the forward mirror (or `names`) as the status reports it;
        MISSING when the status does not list it."""
        obj, mirror = self.forward()
        seen = obj.readings()
        wanted = list(names) if names is not None else list(mirror.names.values())
        return [seen.get(n, ConnectorReading(n, "MISSING", ())) for n in wanted]

    def ownership(self) -> str | None:
        """Who besides drctl owns the resource (a GitOps tool), in words; None: nobody."""
        return gitops_owner(self.read().metadata)

    # -- changing -------------------------------------------------------------------------

    def _refuse_paused(self, obj: MirrorMakerObject) -> None:
        if obj.paused:
            raise ReconciliationPaused(
                f"KafkaMirrorMaker2 {obj.where} has {PAUSE_ANNOTATION}: \"true\": Strimzi's "
                "operator applies no change to its connectors, so drctl cannot change the "
                "flow through it.",
                f"Remove the annotation (kubectl annotate kafkamirrormaker2 -n "
                f"{obj.metadata.get('namespace')} {obj.metadata.get('name')} "
                f"{PAUSE_ANNOTATION}-), then run the same command again.")

    def patch(self, build: Callable[[MirrorMakerObject], Ops], namespace: str | None = None,
              name: str | None = None, attempts: int = 5) -> MirrorMakerObject:
        """Apply the JSON patch `build` makes of the object as read, guarded by a `test` of
        its resourceVersion; on a conflict, read it again and build again. Nothing to patch
        (an empty build): the object as read."""
        for _ in range(attempts):
            obj = self.read(namespace, name)
            self._refuse_paused(obj)
            ops = build(obj)
            if not ops:
                return obj
            guard = {"op": "test", "path": "/metadata/resourceVersion",
                     "value": obj.resource_version}
            try:
                return MirrorMakerObject(self.client.json_patch(
                    self.path(namespace or self.settings.namespace, name or self.settings.name),
                    [guard, *ops]))
            except KubeConflict as exc:
                if exc.status == 422 and \
                        self.read(namespace, name).resource_version == obj.resource_version:
                    # Not applied, yet nothing changed: drctl's patch does not fit the object.
                    raise DrctlError(f"KafkaMirrorMaker2 {obj.where}: the API server could not "
                                     f"apply drctl's change ({exc.message}).",
                                     "Read the resource (kubectl get -o yaml): a field drctl "
                                     "expected is missing.") from exc
                continue
            except KubeError as exc:
                if exc.status == 422:  # the CRD's schema refused it: drctl's own error
                    raise DrctlError(f"KafkaMirrorMaker2 {obj.where}: the API server refused "
                                     f"drctl's change: {exc.message}") from exc
                raise
        raise DrctlError(f"KafkaMirrorMaker2 {namespace or self.settings.namespace}/"
                         f"{name or self.settings.name} changed under drctl {attempts} times "
                         "in a row.", "Something else writes it: find out what, then run the "
                         "same command again.")

    def set_states(self, wanted: Mapping[str, str], *, what: str,
                   namespace: str | None = None, name: str | None = None,
                   mirror_of: tuple[str, str] | None = None) -> list[ConnectorReading]:
        """Set each connector (name -> running|paused|stopped) and wait until Connect reports
        it so through the status; the readings then."""
        for state in wanted.values():
            assert state in STATES, state
        source, target = mirror_of or (self.rep.source_alias, self.rep.target_alias)

        def build(obj: MirrorMakerObject) -> Ops:
            mirror = obj.mirror(source, target)
            ops: Ops = []
            for connector, state in wanted.items():
                role = mirror.role_of(connector)
                if role is None:
                    raise DrctlError(f"KafkaMirrorMaker2 {obj.where} configures no connector "
                                     f"{connector} (it has {', '.join(mirror.names.values())}).",
                                     "Fix replication.connect's connector names: Strimzi names "
                                     "them <source alias>-><target alias>.<class>.")
                if (mirror.spec[role].get("state") or "running") != state:
                    ops.append({"op": "add", "path": f"/spec/mirrors/{mirror.index}/{role}/state",
                                "value": state})
            return ops

        obj = self.patch(build, namespace, name)

        def holds(current: MirrorMakerObject) -> str | None:
            mirror = current.mirror(source, target)
            moved = [f"{n} {mirror.spec[r].get('state') or 'running'}"
                     for n, s in wanted.items() if (r := mirror.role_of(n)) is not None
                     and (mirror.spec[r].get("state") or "running") != s]
            return ", ".join(moved) or None

        done = self.wait(obj.generation, wanted, what=what, holds=holds,
                         namespace=namespace, name=name)
        seen = done.readings()
        return [seen[n] for n in wanted]

    def wait(self, generation: int, wanted: Mapping[str, str], *, what: str,
             holds: Callable[[MirrorMakerObject], str | None] | None = None,
             namespace: str | None = None, name: str | None = None,
             extra: Callable[[MirrorMakerObject], str | None] | None = None
             ) -> MirrorMakerObject:
        """Until the operator has observed `generation`, says Ready, and reports each of
        `wanted` (name -> state) as Connect runs it; `holds` says what of drctl's change was
        put back (None: it holds), `extra` what else is still awaited."""
        left = ["nothing read yet"]
        last: list[MirrorMakerObject] = []

        def done() -> MirrorMakerObject | None:
            obj = self.read(namespace, name)
            last[:] = [obj]
            self._refuse_paused(obj)
            reverted = holds(obj) if holds is not None else None
            if reverted is not None:
                owner = gitops_owner(obj.metadata)
                raise Reverted(
                    f"KafkaMirrorMaker2 {obj.where} no longer holds what drctl wrote for "
                    f"{what}: it says {reverted} now"
                    + (f"; it is owned by {owner}, which puts its own spec back" if owner
                       else "; something else wrote it") + ".",
                    "Pause the GitOps sync of this resource (or write drctl's change there), "
                    "then run the same command again.")
            if obj.observed_generation < generation:
                left[0] = (f"it has not reconciled generation {generation} (observed "
                           f"{obj.observed_generation})")
                return None
            ready, said = obj.ready()
            if not ready:
                # Its status for this generation says no: the change is not done.
                left[0] = f"it is not Ready for generation {generation} ({said})"
                return None
            seen = obj.readings()
            off = [f"{n} is {seen[n].describe() if n in seen else 'not in its status'}"
                   for n, s in wanted.items() if n not in seen or not _matches(seen[n], s)]
            if off:
                left[0] = ", ".join(off)
                return None
            more = extra(obj) if extra is not None else None
            if more is not None:
                left[0] = more
                return None
            return obj

        started = time.monotonic()
        try:
            return wait_for(done, deadline_s=self.deadline_s, interval_s=self.interval_s)
        except WaitTimedOut:
            waited = time.monotonic() - started
            where = f"{namespace or self.settings.namespace}/{name or self.settings.name}"
            raise OperatorUnconfirmed(
                f"Strimzi's cluster operator did not confirm {what} on KafkaMirrorMaker2 "
                f"{where} within {self.deadline_s:g} s: {left[0]}.",
                "Is the operator running (kubectl get pods -l name=strimzi-cluster-operator) "
                "and is it reconciling this resource (its log)? The change is written to the "
                "resource: run the same command again to wait for it.").measured(
                    waited, self.deadline_s) from None

    # -- configs (topic exclusions) --------------------------------------------------------

    def config(self, connector: str) -> dict[str, Any]:
        """The connector's config as Strimzi gives it to Connect, for the keys drctl edits:
        its own `config`, with the mirror's patterns over it."""
        _, mirror = self.forward()
        role = mirror.role_of(connector)
        if role is None:
            raise DrctlError(f"KafkaMirrorMaker2 {self.settings.resource} configures no "
                             f"connector {connector}.")
        out = {k: str(v) for k, v in (mirror.spec[role].get("config") or {}).items()}
        for key, field in MIRROR_PATTERNS.items():
            if mirror.spec.get(field) is not None:
                out[key] = str(mirror.spec[field])
        return out

    def put_config(self, connector: str, new: Mapping[str, Any], *, what: str) -> bool:
        """Make the connector's config `new` (as `config` reads it): a key a mirror pattern
        sets is written there, any other into the connector's own config; then wait until
        the operator has reconciled it. False when nothing changed."""
        def build(obj: MirrorMakerObject) -> Ops:
            mirror = obj.mirror(self.rep.source_alias, self.rep.target_alias)
            role = mirror.role_of(connector)
            assert role is not None
            own = dict(mirror.spec[role].get("config") or {})
            ops: Ops = []
            base = f"/spec/mirrors/{mirror.index}"
            keys = set(own) | set(new) | {k for k, f in MIRROR_PATTERNS.items()
                                          if mirror.spec.get(f) is not None}
            for key in sorted(keys):
                field = MIRROR_PATTERNS.get(key)
                if field is not None and mirror.spec.get(field) is not None:
                    if key not in new:
                        ops.append({"op": "remove", "path": f"{base}/{field}"})
                    elif str(mirror.spec[field]) != str(new[key]):
                        ops.append({"op": "replace", "path": f"{base}/{field}",
                                    "value": str(new[key])})
                    continue
                pointer = f"{base}/{role}/config/{key.replace('~', '~0').replace('/', '~1')}"
                if key not in new and key in own:
                    ops.append({"op": "remove", "path": pointer})
                elif key in new and str(own.get(key)) != str(new[key]):
                    if "config" not in mirror.spec[role]:
                        ops.append({"op": "add", "path": f"{base}/{role}/config", "value": {}})
                        own = {}
                    ops.append({"op": "add", "path": pointer, "value": str(new[key])})
            return ops

        before = self.read()
        obj = self.patch(build)
        if obj.generation == before.generation and obj.resource_version == before.resource_version:
            return False
        self.wait(obj.generation, {}, what=what)
        return True

    def reconfigure(self, name: str, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> bool:
        """`control.ConnectorOwner`: the config `edit` makes of the connector's, patched into
        the resource and reconciled (the operator reconfigures it in place)."""
        return self.put_config(name, edit(self.config(name)), what=f"{name}'s config")

    def old_names_read(self) -> bool:
        """Strimzi 0.46+ runs Kafka 4, which reads no old key names (`topics.blacklist`)."""
        return False

    # -- offsets ---------------------------------------------------------------------------

    def _offsets_request(self, namespace: str, name: str, connector: str, action: str,
                         configmap: str, mirror_of: tuple[str, str]) -> MirrorMakerObject:
        """Ask the operator to `action` (list|alter) the stored offsets of `connector`
        through ConfigMap `configmap`, and wait until it has (it removes the annotation)."""
        field, ref = (("listOffsets", "toConfigMap") if action == "list"
                      else ("alterOffsets", "fromConfigMap"))

        def build(obj: MirrorMakerObject) -> Ops:
            mirror = obj.mirror(*mirror_of)
            role = mirror.role_of(connector)
            assert role is not None
            ops: Ops = []
            if (mirror.spec[role].get(field) or {}).get(ref, {}).get("name") != configmap:
                ops.append({"op": "add", "path": f"/spec/mirrors/{mirror.index}/{role}/{field}",
                            "value": {ref: {"name": configmap}}})
            if "annotations" not in obj.metadata:
                ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
            for key, value in ((OFFSETS_ANNOTATION, action), (CONNECTOR_ANNOTATION, connector)):
                ops.append({"op": "add",
                            "path": f"/metadata/annotations/{key.replace('/', '~1')}",
                            "value": value})
            return ops

        obj = self.patch(build, namespace, name)

        def annotation_gone(current: MirrorMakerObject) -> str | None:
            if current.annotations.get(OFFSETS_ANNOTATION):
                warned = current.offsets_warnings()
                return (f"the {OFFSETS_ANNOTATION}={action} annotation is still there"
                        + (f"; it warns: {warned}" if warned else ""))
            return None

        return self.wait(obj.generation, {connector: "stopped"},
                         what=f"the {action} of {connector}'s offsets",
                         namespace=namespace, name=name, extra=annotation_gone)

    def alter_offsets(self, namespace: str, name: str, connector: str,
                      offsets: Sequence[Mapping[str, Any]],
                      mirror_of: tuple[str, str]) -> None:
        """Set a stopped connector's stored offsets (Connect's offsets API entries) through
        a ConfigMap and the `alter` annotation (Strimzi 0.44+)."""
        configmap = f"{name}-drctl-offsets"
        self.write_configmap(namespace, configmap,
                             {offsets_key(connector): json.dumps({"offsets": list(offsets)},
                                                                 indent=1)})
        self._offsets_request(namespace, name, connector, "alter", configmap, mirror_of)

    def list_offsets(self, namespace: str, name: str, connector: str,
                     mirror_of: tuple[str, str]) -> list[dict[str, Any]]:
        """A stopped connector's stored offsets, as Strimzi lists them into a ConfigMap."""
        configmap = f"{name}-drctl-offsets-list"
        self._offsets_request(namespace, name, connector, "list", configmap, mirror_of)
        try:
            data = self.client.get(self.path(namespace, configmap, "configmaps")).get("data")
        except KubeNotFound:
            return []
        text = (data or {}).get(offsets_key(connector)) or "{}"
        return list(json.loads(text).get("offsets") or [])

    def write_configmap(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {CREATED_BY: "drctl"}},
                "data": dict(data)}
        try:
            self.client.create(self.path(namespace, plural="configmaps"), body)
        except KubeError as exc:
            if exc.status != 409:
                raise
            self.client.replace(self.path(namespace, name, "configmaps"), body)

    # -- the reverse flow ------------------------------------------------------------------

    def reverse_where(self, part: FlowPart | None = None) -> tuple[str, str]:
        """Namespace and name of the reverse flow's resource; an application's incident has
        one of its own (`<name>-<application>`): Strimzi names a mirror's connectors by the
        clusters' aliases alone, so two reverse flows the same way cannot share a resource."""
        s = self.settings
        if s.reverse_namespace is None:
            raise DrctlError("The reverse flow's KafkaMirrorMaker2 is not configured.",
                             "Set replication.strimzi.reverse_namespace (and reverse_name): "
                             "where the flow the other way lives or drctl creates it.")
        name = s.reverse_name or s.name
        return s.reverse_namespace, name if part is None else scoped_resource_name(name, part)

    def reverse_spec(self, forward: MirrorMakerObject, source_config: Mapping[str, str]
                     ) -> dict[str, Any]:
        """The forward resource's spec turned round (the target's Connect cluster and
        connection become the source's and back), with one mirror target -> source whose
        source connector is created stopped."""
        spec = copy.deepcopy(dict(forward.spec))
        mirror = forward.mirror(self.rep.source_alias, self.rep.target_alias)
        connector = {"state": "stopped", "config": dict(source_config)}
        if forward.layout is Layout.V1:
            source = copy.deepcopy(dict(mirror.spec.get("source") or {}))
            target = dict(spec.get("target") or {})
            # The connection moves; the Connect cluster's own settings (group, storage
            # topics) stay on the target they name, now the source's cluster.
            connection_keys = ("alias", "bootstrapServers", "tls", "authentication", "config")
            new_target = {k: v for k, v in target.items() if k not in connection_keys}
            new_target.update({k: v for k, v in source.items() if k in connection_keys})
            spec["target"] = new_target
            new_source = {k: v for k, v in target.items() if k in connection_keys}
            spec["mirrors"] = [{"source": new_source, "sourceConnector": connector}]
        else:
            spec["connectCluster"] = self.rep.source_alias
            spec["mirrors"] = [{"sourceCluster": self.rep.target_alias,
                                "targetCluster": self.rep.source_alias,
                                "sourceConnector": connector}]
        spec["mirrors"][0]["topicsPattern"] = str(source_config.get("topics", ".*"))
        return spec

    def create_reverse(self, source_config: Mapping[str, str], incident: str,
                       part: FlowPart | None = None) -> str:
        """Create the reverse flow's resource (`part`: an application's) with its source
        connector stopped, and wait until the operator reports it STOPPED; its connector's
        name. One that exists is used as it is (its mirror target -> source must be there)."""
        namespace, name = self.reverse_where(part)
        connector = connector_name(self.rep.target_alias, self.rep.source_alias,
                                   "sourceConnector")
        existing = self.find(namespace, name)
        if existing is None:
            forward = self.read()
            body = {"apiVersion": f"{GROUP}/{self.version}", "kind": "KafkaMirrorMaker2",
                    "metadata": {"name": name, "namespace": namespace,
                                 "labels": {CREATED_BY: "drctl"},
                                 "annotations": {"drctl.io/incident": incident}},
                    "spec": self.reverse_spec(forward, source_config)}
            self.notify(f"Creating KafkaMirrorMaker2 {namespace}/{name} with {connector} "
                        "stopped")
            created = MirrorMakerObject(self.client.create(self.path(namespace), body))
            generation = created.generation
        else:
            mirror_of = (self.rep.target_alias, self.rep.source_alias)
            self.set_states({connector: "stopped"}, what=f"{connector} stopped",
                            namespace=namespace, name=name, mirror_of=mirror_of)
            return connector
        self.wait(generation, {connector: "stopped"}, what=f"{connector} created stopped",
                  namespace=namespace, name=name)
        return connector

    def delete_reverse(self, part: FlowPart | None = None) -> bool:
        """Delete the reverse resource when drctl created it; False when it is not drctl's
        (left stopped) or gone."""
        namespace, name = self.reverse_where(part)
        obj = self.find(namespace, name)
        if obj is None or (obj.metadata.get("labels") or {}).get(CREATED_BY) != "drctl":
            return False
        self.client.delete(self.path(namespace, name))
        return True

"""The Strimzi lab's operator: the one part of the lab that stands in for a product.

Strimzi's cluster operator is not on any registry reachable here, and without a kubelet its
pods could not run anyway. This process keeps the contract Strimzi documents for a
`KafkaMirrorMaker2` resource, against the lab's real Kubernetes API server and its real Kafka
Connect worker (see docs/lab.md, "The Strimzi lab"):

- connectors named `<source alias>-><target alias>.MirrorSourceConnector` (and
  `.MirrorCheckpointConnector`; v1beta2 also `.MirrorHeartbeatConnector`), configured as
  Strimzi's KafkaMirrorMaker2Connectors builds them (both layouts: v1's `.spec.target` and
  `.spec.mirrors[].source`, v1beta2's `.spec.clusters[]` and
  `.spec.mirrors[].sourceCluster/targetCluster`);
- `.spec.mirrors[].<connector>.state` running|paused|stopped reached as Strimzi's
  AbstractConnectOperator.updateState does;
- the `strimzi.io/connector-offsets` list|alter|reset annotation with
  `strimzi.io/mirrormaker-connector`, through the ConfigMaps `listOffsets.toConfigMap` and
  `alterOffsets.fromConfigMap` name, under the key `<connector with -> as -->.json`; alter and
  reset refused (a Warning condition, the annotation kept) unless the connector is STOPPED;
- `.status.observedGeneration`, `conditions` (`Ready`; on failure `NotReady` with reason and
  message; `ReconciliationPaused` under `strimzi.io/pause-reconciliation: "true"`, which
  leaves its connectors alone) and `connectors[]` (Connect's status of each connector);
- on every pass (every `--period` seconds, and at once on a watch event) a connector edited
  through Connect's REST API is put back, and a connector no resource owns is deleted.

What it emulates beyond Strimzi: each resource's connectors run on the lab's one Connect
worker, not on a Connect cluster of the resource's own, so their records are written to the
resource's target through `producer.override.bootstrap.servers` (added when the connector
config does not set it). `--control FILE` ({"delay_s": N}) makes it act on a resource's new
generation only N seconds after it first saw it: a slow operator, for tests of drctl's
waits (`drctl lab operator slow --delay N`); `drctl lab operator stop` ends it.

Run by the lab: `python -m drctl.lab.strimzi_operator --kubeconfig K --connect-url U
--api-version v1 --control FILE`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drctl.errors import DrctlError
from drctl.kafka.connect_rest import ConnectClient, ConnectError
from drctl.kube.api import KubeClient, KubeError
from drctl.retry import RetryPolicy

GROUP = "kafka.strimzi.io"
PLURAL = "kafkamirrormaker2s"
PACKAGE = "org.apache.kafka.connect.mirror"
PAUSE = "strimzi.io/pause-reconciliation"
OFFSETS = "strimzi.io/connector-offsets"
MM2_CONNECTOR = "strimzi.io/mirrormaker-connector"
STATES = ("running", "paused", "stopped")
# Connector kind -> the mirror's key of its spec; heartbeat only in v1beta2.
KINDS = {"MirrorSourceConnector": "sourceConnector",
         "MirrorCheckpointConnector": "checkpointConnector",
         "MirrorHeartbeatConnector": "heartbeatConnector"}


class InvalidResource(Exception):
    """The resource cannot be reconciled as it is (Strimzi's InvalidResourceException)."""


@dataclass(frozen=True)
class DesiredConnector:
    name: str
    config: dict[str, str]  # what Connect's GET /connectors/<name>/config should answer
    state: str  # running | paused | stopped
    list_offsets: str | None = None  # ConfigMap names
    alter_offsets: str | None = None


def _string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _cluster_config(cluster: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """addClusterToMirrorMaker2ConnectorConfig: alias, bootstrap servers, security protocol
    (TLS and authentication are not emulated: the lab is plaintext), the cluster's config."""
    if cluster.get("tls") or cluster.get("authentication"):
        raise InvalidResource(f"The lab's operator does not emulate tls or authentication "
                              f"(cluster {cluster.get('alias')}).")
    config: dict[str, Any] = {f"{prefix}alias": cluster["alias"],
                              f"{prefix}bootstrap.servers": cluster["bootstrapServers"],
                              f"{prefix}security.protocol": "PLAINTEXT"}
    config.update({f"{prefix}{k}": v for k, v in (cluster.get("config") or {}).items()})
    return config


def _mirror_patterns(mirror: Mapping[str, Any]) -> dict[str, Any]:
    patterns: dict[str, Any] = {}
    for key, spec_key, old in (
            ("topics", "topicsPattern", None),
            ("topics.exclude", "topicsExcludePattern", "topicsBlacklistPattern"),
            ("groups", "groupsPattern", None),
            ("groups.exclude", "groupsExcludePattern", "groupsBlacklistPattern")):
        value = mirror.get(spec_key)
        if value is None and old is not None:
            value = mirror.get(old)
        if value is not None:
            patterns[key] = value
    return patterns


def desired_connectors(resource: Mapping[str, Any]) -> dict[str, DesiredConnector]:
    """The connectors a KafkaMirrorMaker2 resource asks for, by name, with the config Connect
    should hold for each (Strimzi's KafkaMirrorMaker2Connectors plus AbstractConnectOperator's
    asJson: `connector.class`, `tasks.max`, `name`)."""
    spec = resource.get("spec") or {}
    v1 = "target" in spec
    mirrors = spec.get("mirrors") or []
    clusters = {c["alias"]: c for c in spec.get("clusters") or []}
    wanted: dict[str, DesiredConnector] = {}
    for mirror in mirrors:
        if v1:
            target, source = spec["target"], mirror["source"]
        else:
            try:
                source = clusters[mirror["sourceCluster"]]
                target = clusters[mirror["targetCluster"]]
            except KeyError as exc:
                raise InvalidResource(f"Mirror names cluster {exc.args[0]}, which "
                                      ".spec.clusters does not define.") from None
        for kind, key in KINDS.items():
            connector = mirror.get(key)
            if connector is None or (v1 and kind == "MirrorHeartbeatConnector"):
                continue
            name = f"{source['alias']}->{target['alias']}.{kind}"
            clusters_config = {**_cluster_config(target, "target.cluster."),
                               **_cluster_config(source, "source.cluster.")}
            own = dict(connector.get("config") or {})
            # v1 (Strimzi 1.x): the connector's config over the clusters'; v1beta2 (0.45):
            # the clusters' over the connector's.
            config = {**clusters_config, **own} if v1 else {**own, **clusters_config}
            config.update(_mirror_patterns(mirror))
            # The lab's emulation: this resource's Connect cluster writes to its target.
            config.setdefault("producer.override.bootstrap.servers", target["bootstrapServers"])
            if connector.get("tasksMax") is not None:
                config["tasks.max"] = connector["tasksMax"]
            if connector.get("version") is not None:
                config["connector.plugin.version"] = connector["version"]
            config["connector.class"] = f"{PACKAGE}.{kind}"
            config["name"] = name
            state = connector.get("state") or ("paused" if connector.get("pause") else
                                               "running")
            wanted[name] = DesiredConnector(
                name, {k: _string(v) for k, v in config.items()}, state,
                ((connector.get("listOffsets") or {}).get("toConfigMap") or {}).get("name"),
                ((connector.get("alterOffsets") or {}).get("fromConfigMap") or {}).get("name"))
    return wanted


def offsets_key(connector: str) -> str:
    """The ConfigMap key of a connector's offsets (KafkaMirrorMaker2AssemblyOperator)."""
    return connector.replace("->", "--") + ".json"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(type_: str, *, reason: str | None = None, message: str | None = None
              ) -> dict[str, str]:
    cond = {"type": type_, "status": "True", "lastTransitionTime": now()}
    if reason is not None:
        cond["reason"] = reason
    if message is not None:
        cond["message"] = message
    return cond


def warning(reason: str, message: str) -> dict[str, str]:
    """StatusUtils.buildWarningCondition."""
    return condition("Warning", reason=reason, message=message)


def build_status(resource: Mapping[str, Any], connectors: list[dict[str, Any]],
                 error: tuple[str, str] | None, warnings: list[dict[str, str]],
                 url: str) -> dict[str, Any]:
    """The status Strimzi writes after a reconciliation (StatusUtils): observedGeneration,
    one Ready condition (NotReady with reason and message on `error`) and the warnings,
    every connector's Connect status, the REST URL and replicas."""
    ready = condition("Ready") if error is None else \
        condition("NotReady", reason=error[0], message=error[1])
    status: dict[str, Any] = {
        "observedGeneration": resource["metadata"].get("generation", 0),
        "conditions": [ready, *warnings],
        "url": url,
        "replicas": (resource.get("spec") or {}).get("replicas", 1),
    }
    if error is None or connectors:
        status["connectors"] = connectors
    return status


def paused_status(resource: Mapping[str, Any]) -> dict[str, Any]:
    """AbstractOperator under pause-reconciliation: a new status, the generation last
    observed kept, one ReconciliationPaused condition."""
    old = resource.get("status") or {}
    return {"observedGeneration": old.get("observedGeneration", 0),
            "conditions": [condition("ReconciliationPaused")]}


def same_status(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> bool:
    """Equal but for the conditions' transition times (Strimzi updates a status only when
    something else changed)."""
    def strip(status: Mapping[str, Any] | None) -> Any:
        status = dict(status or {})
        status["conditions"] = [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                                for c in status.get("conditions") or []]
        return json.dumps(status, sort_keys=True)

    return strip(a) == strip(b)


@dataclass
class Pass:
    """What one reconciliation of one resource found."""

    connectors: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    error: tuple[str, str] | None = None


class Operator:
    def __init__(self, kube: KubeClient, connect: ConnectClient, api_version: str,
                 connect_url: str, control: Path | None = None,
                 log: Any = sys.stdout) -> None:
        self.kube = kube
        self.connect = connect
        self.api_version = api_version
        self.connect_url = connect_url
        self.control = control
        self.log = log
        self.wake = threading.Event()
        # (uid, generation) -> when a pass first saw it (the control file's delay).
        self.seen: dict[tuple[str, int], float] = {}

    def say(self, text: str) -> None:
        print(f"{now()} {text}", file=self.log, flush=True)

    @property
    def collection(self) -> str:
        return f"/apis/{GROUP}/{self.api_version}/{PLURAL}"

    def path(self, resource: Mapping[str, Any]) -> str:
        meta = resource["metadata"]
        return (f"/apis/{GROUP}/{self.api_version}/namespaces/{meta['namespace']}/{PLURAL}/"
                f"{meta['name']}")

    def delay(self) -> float:
        if self.control is None:
            return 0.0
        try:
            return float(json.loads(self.control.read_text()).get("delay_s", 0))
        except (OSError, ValueError):
            return 0.0

    # -- Connect ---------------------------------------------------------------------------

    def _c(self, method: str, name: str, suffix: str = "", body: Any = None) -> Any:
        return self.connect.request(
            method, f"/connectors/{urllib.parse.quote(name, safe='')}{suffix}", body)

    # -- one pass --------------------------------------------------------------------------

    def run_pass(self) -> None:
        delay = self.delay()
        resources = self.kube.get(self.collection).get("items", [])
        owned: set[str] = set()
        for resource in resources:
            try:
                wanted = desired_connectors(resource)
            except (InvalidResource, KeyError, TypeError):
                wanted = {}
            owned.update(wanted)
        try:
            current = set(self.connect.connectors())
        except DrctlError as exc:
            self.say(f"Connect does not answer: {exc.message}")
            return
        for name in sorted(current - owned):
            self.say(f"Deleting connector {name}: no KafkaMirrorMaker2 owns it")
            self._quietly(lambda n=name: self._c("DELETE", n))
        for resource in resources:
            meta = resource["metadata"]
            first = self.seen.setdefault((meta.get("uid", ""), meta.get("generation", 0)),
                                         time.monotonic())
            if time.monotonic() - first < delay:
                continue  # slowed down: this generation waits
            try:
                self.reconcile(resource)
            except KubeError as exc:
                self.say(f"{self.path(resource)}: {exc.message}")

    def _quietly(self, call: Any) -> Any:
        try:
            return call()
        except DrctlError as exc:
            self.say(f"  {exc.message}")
            return None

    def reconcile(self, resource: dict[str, Any]) -> None:
        annotations = resource["metadata"].get("annotations") or {}
        if annotations.get(PAUSE) == "true":
            self.write_status(resource, paused_status(resource))
            return
        outcome = Pass()
        try:
            wanted = desired_connectors(resource)
            for connector in wanted.values():
                self.reconcile_connector(resource, connector, outcome)
        except InvalidResource as exc:
            outcome.error = ("InvalidResourceException", str(exc))
        except DrctlError as exc:
            outcome.error = (type(exc).__name__, exc.message)
        if outcome.error is None and any(
                (c.get("connector") or {}).get("state") == "FAILED" for c in outcome.connectors):
            outcome.error = ("Throwable", "One or more connectors are in FAILED state")
        self.write_status(resource, build_status(resource, outcome.connectors, outcome.error,
                                                 outcome.warnings, self.connect_url))

    def reconcile_connector(self, resource: dict[str, Any], want: DesiredConnector,
                            outcome: Pass) -> None:
        try:
            actual = {k: str(v) for k, v in self._c("GET", want.name, "/config").items()}
        except ConnectError as exc:
            if exc.status != 404:
                raise
            self.say(f"Creating connector {want.name} ({want.state})")
            config = {k: v for k, v in want.config.items() if k != "name"}
            self.connect.request("POST", "/connectors", {"name": want.name, "config": config,
                                                         "initial_state": want.state.upper()})
            outcome.connectors.append(self._status(want.name))
            return
        if actual != want.config:
            changed = sorted(k for k in set(actual) | set(want.config)
                             if actual.get(k) != want.config.get(k))
            self.say(f"Putting back connector {want.name}'s config ({', '.join(changed)})")
            self._c("PUT", want.name, "/config",
                    {k: v for k, v in want.config.items() if k != "name"})
        self.update_state(want, self._status(want.name))
        self.offsets(resource, want, outcome)
        outcome.connectors.append(self._status(want.name))

    def _status(self, name: str) -> dict[str, Any]:
        for _ in range(10):
            try:
                return dict(self._c("GET", name, "/status"))
            except ConnectError as exc:
                if exc.status != 404:
                    raise
                time.sleep(0.2)  # just created: its status is written a moment later
        return dict(self._c("GET", name, "/status"))

    def update_state(self, want: DesiredConnector, status: Mapping[str, Any]) -> None:
        """AbstractConnectOperator.updateState: RUNNING, PAUSED, STOPPED and FAILED moved to
        the wanted state; UNASSIGNED and RESTARTING left to settle."""
        state = (status.get("connector") or {}).get("state")
        target = want.state.upper()
        if state not in ("RUNNING", "PAUSED", "STOPPED", "FAILED") or state == target:
            return
        if state == "FAILED" and target != "STOPPED":
            return
        action = {"RUNNING": "resume", "PAUSED": "pause", "STOPPED": "stop"}[target]
        self.say(f"Connector {want.name} is {state}: {action}")
        self._c("PUT", want.name, f"/{action}")
        # Connect's status follows a moment later; the status written now should say it
        # (Strimzi reads it again with a back-off).
        for _ in range(20):
            if (self._status(want.name).get("connector") or {}).get("state") == target:
                return
            time.sleep(0.1)

    def offsets(self, resource: dict[str, Any], want: DesiredConnector, outcome: Pass) -> None:
        annotations = resource["metadata"].get("annotations") or {}
        has_op, has_conn = OFFSETS in annotations, MM2_CONNECTOR in annotations
        meta = resource["metadata"]
        if has_op != has_conn:
            missing = MM2_CONNECTOR if has_op else OFFSETS
            raise InvalidResource(f"KafkaMirrorMaker2 resource {meta['namespace']}/"
                                  f"{meta['name']} is missing annotation {missing}")
        if not has_op or annotations[MM2_CONNECTOR] != want.name:
            return
        operation = annotations[OFFSETS]
        if operation not in ("list", "alter", "reset"):
            raise InvalidResource(f"Unknown value of {OFFSETS}: {operation}")
        reason = {"list": "ListOffsets", "alter": "AlterOffsets", "reset": "ResetOffsets"}
        failed = {"list": "listing", "alter": "altering", "reset": "resetting"}[operation]
        try:
            if operation == "list":
                if not want.list_offsets:
                    outcome.warnings.append(warning(reason[operation], (
                        "Failed to list the connector offsets due to missing property "
                        "listOffsets in KafkaMirrorMaker2 CR.")))
                    return
                self._list_offsets(resource, want)
            elif operation == "alter":
                if not want.alter_offsets:
                    outcome.warnings.append(warning(reason[operation], (
                        "Failed to alter the connector offsets due to missing property "
                        "alterOffsets in KafkaMirrorMaker2 CR.")))
                    return
                self._require_stopped(want.name)
                body = self._offsets_from(resource, want)
                self.say(f"Altering offsets of connector {want.name}")
                self._c("PATCH", want.name, "/offsets", body)
            else:
                self._require_stopped(want.name)
                self.say(f"Resetting offsets of connector {want.name}")
                self._c("DELETE", want.name, "/offsets")
        except (DrctlError, ValueError, _Refused) as exc:
            message = exc.message if isinstance(exc, DrctlError) else str(exc)
            outcome.warnings.append(warning(reason[operation], (
                f"Encountered error {failed} connector offsets. {message}")))
            return
        self.kube.merge_patch(self.path(resource), {"metadata": {"annotations": {
            OFFSETS: None, MM2_CONNECTOR: None}}})
        resource["metadata"]["annotations"] = {
            k: v for k, v in annotations.items() if k not in (OFFSETS, MM2_CONNECTOR)}

    def _require_stopped(self, name: str) -> None:
        state = (self._c("GET", name, "/status").get("connector") or {}).get("state")
        if state != "STOPPED":
            raise _Refused("Connector is not in STOPPED state")

    def _list_offsets(self, resource: dict[str, Any], want: DesiredConnector) -> None:
        assert want.list_offsets is not None
        offsets = self._c("GET", want.name, "/offsets")
        meta = resource["metadata"]
        ns, name = meta["namespace"], want.list_offsets
        path = f"/api/v1/namespaces/{ns}/configmaps"
        existing = self.kube.get_or_none(f"{path}/{name}") or {}
        data = {**(existing.get("data") or {}),
                offsets_key(want.name): json.dumps(offsets, indent=2)}
        owner = {"apiVersion": f"{GROUP}/{self.api_version}", "kind": "KafkaMirrorMaker2",
                 "name": meta["name"], "uid": meta["uid"], "blockOwnerDeletion": False,
                 "controller": False}
        owners = [o for o in (existing.get("metadata") or {}).get("ownerReferences") or []
                  if not (o.get("kind") == owner["kind"] and o.get("name") == owner["name"])]
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": name, "namespace": ns, "ownerReferences": [*owners, owner],
            "labels": {"app.kubernetes.io/instance": meta["name"],
                       "app.kubernetes.io/managed-by": "strimzi-cluster-operator",
                       "app.kubernetes.io/name": "kafka-connector",
                       "strimzi.io/cluster": meta["name"], "strimzi.io/kind":
                       "KafkaMirrorMaker2"}},
            "data": data}
        self.say(f"Listing offsets of connector {want.name} into ConfigMap {ns}/{name}")
        self.kube.apply(path, body)

    def _offsets_from(self, resource: dict[str, Any], want: DesiredConnector) -> Any:
        meta = resource["metadata"]
        ns, name = meta["namespace"], want.alter_offsets
        cm = self.kube.get_or_none(f"/api/v1/namespaces/{ns}/configmaps/{name}")
        if cm is None:
            raise _Refused("Encountered error fetching offsets to use in alter operation. "
                           f"ConfigMap {ns}/{name} does not exist.")
        raw = (cm.get("data") or {}).get(offsets_key(want.name))
        if raw is None:
            raise _Refused("Encountered error fetching offsets to use in alter operation. "
                           f"Data field {offsets_key(want.name)} is missing.")
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise _Refused(f"Failed to parse contents of {offsets_key(want.name)} as JSON: "
                           f"{exc}") from None

    def write_status(self, resource: dict[str, Any], status: dict[str, Any]) -> None:
        if same_status(resource.get("status"), status):
            return
        old = resource.get("status") or {}
        patch = {k: status.get(k) for k in {*old, *status}}
        self.kube.merge_patch(self.path(resource) + "/status", {"status": patch})

    # -- the loop --------------------------------------------------------------------------

    def watch(self) -> None:
        """Wake the loop on every change of a KafkaMirrorMaker2 (a new generation, an
        annotation), as Strimzi's informers do."""
        while True:
            try:
                listed = self.kube.get(self.collection)
                version = listed["metadata"]["resourceVersion"]
                for event in self.kube.watch(self.collection, version, 60):
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        obj = event.get("object") or {}
                        # Its own status writes do not count (the generation stays).
                        if (obj.get("status") or {}).get("observedGeneration") != \
                                obj.get("metadata", {}).get("generation") or \
                                _has_offsets_request(obj) or event["type"] != "MODIFIED":
                            self.wake.set()
            except (DrctlError, OSError, ValueError, KeyError):
                time.sleep(1)

    def run(self, period_s: float) -> None:
        threading.Thread(target=self.watch, name="watch", daemon=True).start()
        self.say(f"Watching {self.collection}, a pass every {period_s:g} s")
        while True:
            self.wake.clear()
            try:
                self.run_pass()
            except (DrctlError, OSError, ValueError) as exc:
                self.say(f"Pass failed: {exc}")
            self.wake.wait(period_s)


class _Refused(Exception):
    pass


def _has_offsets_request(obj: Mapping[str, Any]) -> bool:
    return OFFSETS in ((obj.get("metadata") or {}).get("annotations") or {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m drctl.lab.strimzi_operator",
                                     description="The Strimzi lab's operator (emulated).")
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("--connect-url", required=True)
    parser.add_argument("--api-version", default="v1", choices=("v1", "v1beta2"))
    parser.add_argument("--period", type=float, default=2.0,
                        help="seconds between passes (Strimzi's default is 120)")
    parser.add_argument("--control", type=Path, default=None,
                        help='a JSON file: {"delay_s": N}: a new generation waits N seconds')
    args = parser.parse_args(argv)
    kube = KubeClient.from_kubeconfig(args.kubeconfig, policy=RetryPolicy(deadline_s=10.0))
    connect = ConnectClient(args.connect_url, timeout_s=10, policy=RetryPolicy(attempts=1))
    Operator(kube, connect, args.api_version, args.connect_url, args.control).run(args.period)
    return 0


if __name__ == "__main__":
    sys.exit(main())

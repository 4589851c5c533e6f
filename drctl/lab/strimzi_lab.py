"""The lab's Strimzi platform (`lab up --platform strimzi`): a real Kubernetes API server
(drctl/lab/kube.py) holding Strimzi's own CRDs (drctl/lab/strimzi_crds.py), a namespace per
cluster, a `KafkaMirrorMaker2` resource per flow in its target's namespace (`secondary/mm2`
for primary -> secondary), and the lab's operator (drctl/lab/strimzi_operator.py), which
reconciles them onto the lab's Connect worker instead of the connectors the plain lab creates
through REST."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from drctl.errors import LabError
from drctl.kafka.mm2_connectors import TOPICS_EXCLUDE, MirrorFlow
from drctl.kube.api import KubeClient, KubeError
from drctl.lab.kube import KubePorts, KubeServer, kube_binaries
from drctl.lab.processes import ManagedProcess, wait_until
from drctl.lab.strimzi_crds import strimzi_crds
from drctl.lab.strimzi_operator import GROUP, PLURAL
from drctl.progress import Notify

CRD_VERSIONS = ("v1", "v1beta2")
RESOURCE_NAME = "mm2"
# What Strimzi writes into every connector's config from the resource itself: left out of
# the `config:` maps the lab's resource carries.
_FROM_THE_RESOURCE = {"source.cluster.alias", "target.cluster.alias",
                      "source.cluster.bootstrap.servers", "target.cluster.bootstrap.servers",
                      "topics", "topics.exclude", "groups", "groups.exclude", "connector.class",
                      "tasks.max", "name", "producer.override.bootstrap.servers"}


def connector_names(flow: MirrorFlow, crd_version: str) -> dict[str, str]:
    """The connectors Strimzi makes for a flow, as drctl's config names them."""
    prefix = f"{flow.source_alias}->{flow.target_alias}."
    names = {"source": prefix + "MirrorSourceConnector",
             "checkpoint": prefix + "MirrorCheckpointConnector"}
    if crd_version == "v1beta2":
        names["heartbeat"] = prefix + "MirrorHeartbeatConnector"
    return names


def _own_config(config: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in config.items() if k not in _FROM_THE_RESOURCE}


def mirror_maker2_resource(flow: MirrorFlow, crd_version: str, *, kafka_version: str,
                           connect_group: str, name: str = RESOURCE_NAME) -> dict[str, Any]:
    """The KafkaMirrorMaker2 resource an estate would write for `flow`, in `crd_version`'s
    layout, its connectors configured as the plain lab configures them through REST."""
    connector = {
        "sourceConnector": {"tasksMax": 1, "state": "running",
                            "config": _own_config(flow.source_connector())},
        "checkpointConnector": {"tasksMax": 1, "state": "running",
                                "config": _own_config(flow.checkpoint_connector())},
    }
    patterns = {"topicsPattern": flow.topics, "topicsExcludePattern": TOPICS_EXCLUDE,
                "groupsPattern": ".*"}
    connect = {"group.id": connect_group, "config.storage.topic": "connect-configs.internal",
               "offset.storage.topic": "connect-offsets.internal",
               "status.storage.topic": "connect-status.internal"}
    meta = {"name": name, "namespace": flow.target_alias}
    if crd_version == "v1":
        spec: dict[str, Any] = {
            "version": kafka_version, "replicas": 1,
            "target": {"alias": flow.target_alias, "bootstrapServers": flow.target_bootstrap,
                       "groupId": connect["group.id"],
                       "configStorageTopic": connect["config.storage.topic"],
                       "offsetStorageTopic": connect["offset.storage.topic"],
                       "statusStorageTopic": connect["status.storage.topic"],
                       "config": {"config.storage.replication.factor": 1,
                                  "offset.storage.replication.factor": 1,
                                  "status.storage.replication.factor": 1}},
            "mirrors": [{"source": {"alias": flow.source_alias,
                                    "bootstrapServers": flow.source_bootstrap},
                         **patterns, **connector}],
        }
    elif crd_version == "v1beta2":
        spec = {
            "version": kafka_version, "replicas": 1, "connectCluster": flow.target_alias,
            "clusters": [{"alias": flow.source_alias, "bootstrapServers": flow.source_bootstrap},
                         {"alias": flow.target_alias, "bootstrapServers": flow.target_bootstrap,
                          "config": {**connect, "config.storage.replication.factor": 1,
                                     "offset.storage.replication.factor": 1,
                                     "status.storage.replication.factor": 1}}],
            "mirrors": [{"sourceCluster": flow.source_alias, "targetCluster": flow.target_alias,
                         **patterns, **connector,
                         "heartbeatConnector": {"tasksMax": 1, "state": "running", "config":
                                                _own_config(flow.heartbeat_connector())}}],
        }
    else:
        raise LabError(f"'{crd_version}' is no Strimzi API version the lab serves.",
                       "Use v1 or v1beta2.")
    return {"apiVersion": f"{GROUP}/{crd_version}", "kind": "KafkaMirrorMaker2",
            "metadata": meta, "spec": spec}


def reconciled(resource: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    """Whether the operator has reconciled the resource's generation and each connector of
    `wanted` (name -> RUNNING|PAUSED|STOPPED) reports that state, its tasks running when it
    runs."""
    status = resource.get("status") or {}
    if status.get("observedGeneration") != resource["metadata"].get("generation"):
        return False
    if not any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in status.get("conditions") or []):
        return False
    found = {c.get("name"): c for c in status.get("connectors") or []}
    for name, state in wanted.items():
        entry = found.get(name)
        if entry is None or (entry.get("connector") or {}).get("state") != state:
            return False
        # A running connector with no task yet is running (a source with no topic to copy).
        if state == "RUNNING" and any(t.get("state") != "RUNNING"
                                      for t in entry.get("tasks") or []):
            return False
    return True


class StrimziPlatform:
    """The Kubernetes side of one lab: API server, CRDs, namespaces, resources, operator."""

    def __init__(self, lab_dir: Path) -> None:
        self.dir = lab_dir
        self.server = KubeServer(lab_dir)

    @property
    def operator(self) -> ManagedProcess:
        workdir = self.dir / "strimzi-operator"
        return ManagedProcess("strimzi-operator", workdir, signature=str(workdir))

    @property
    def control_file(self) -> Path:
        return self.operator.workdir / "control.json"

    @property
    def kubeconfig(self) -> Path:
        return self.server.kubeconfig

    def client(self, ports: KubePorts) -> KubeClient:
        return self.server.client(ports)

    def resource_path(self, crd_version: str, namespace: str, name: str = RESOURCE_NAME
                      ) -> str:
        return f"/apis/{GROUP}/{crd_version}/namespaces/{namespace}/{PLURAL}/{name}"

    def up(self, ports: KubePorts, crd_version: str, flows: list[MirrorFlow], *,
           kafka_version: str, connect_url: str, connect_group: str, notify: Notify) -> None:
        binaries = kube_binaries(notify=notify, log_dir=self.dir)
        notify(f"Strimzi's CRDs (kafka.strimzi.io/{crd_version}) from Maven Central")
        crds = strimzi_crds(crd_version, log_dir=self.dir)
        self.server.up(ports, binaries, notify)
        client = self.client(ports)
        for path in crds.values():
            self._apply_crd(client, yaml.safe_load(path.read_text()))
        for namespace in ("primary", "secondary"):
            _create(client, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": namespace}})
        self.start_operator(crd_version, connect_url)
        for flow in flows:
            body = mirror_maker2_resource(flow, crd_version, kafka_version=kafka_version,
                                          connect_group=connect_group)
            collection = self.resource_path(crd_version, flow.target_alias).rsplit("/", 1)[0]

            # A resource already there is left as it is (drctl may have changed it). The
            # API server serves a new CRD's resources a moment after it is Established.
            def create(c: str = collection, b: dict[str, Any] = body) -> bool:
                _create(client, c, b)
                return True

            wait_until(create, deadline_s=30, what="KafkaMirrorMaker2 resource",
                       log_file=self.operator.console_file)
        for flow in flows:
            notify(f"Waiting for {flow.target_alias}/{RESOURCE_NAME} to be Ready")
            self.wait_ready(ports, crd_version, flow, None)

    def wait_ready(self, ports: KubePorts, crd_version: str, flow: MirrorFlow,
                   wanted: Mapping[str, str] | None, deadline_s: float = 120) -> None:
        client = self.client(ports)
        path = self.resource_path(crd_version, flow.target_alias)
        names = connector_names(flow, crd_version)
        want = wanted or {name: "RUNNING" for name in names.values()}
        wait_until(lambda: reconciled(client.get(path), want), deadline_s=deadline_s,
                   what=f"KafkaMirrorMaker2 {flow.target_alias}/{RESOURCE_NAME}",
                   log_file=self.operator.console_file, alive=self.operator.is_running)

    def _apply_crd(self, client: KubeClient, crd: dict[str, Any]) -> None:
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        _create(client, path, crd)
        name = crd["metadata"]["name"]

        def established() -> bool:
            conditions = (client.get(f"{path}/{name}").get("status") or {}).get("conditions")
            return any(c["type"] == "Established" and c["status"] == "True"
                       for c in conditions or [])

        wait_until(established, deadline_s=30, what=f"CRD {name}",
                   log_file=self.server.process("kube-apiserver").console_file)

    def start_operator(self, crd_version: str, connect_url: str) -> None:
        proc = self.operator
        if proc.is_running():
            return
        proc.workdir.mkdir(parents=True, exist_ok=True)
        if not self.control_file.exists():
            self.control_file.write_text(json.dumps({"delay_s": 0}))
        proc.start([sys.executable, "-u", "-m", "drctl.lab.strimzi_operator",
                    "--kubeconfig", str(self.kubeconfig), "--connect-url", connect_url,
                    "--api-version", crd_version, "--control", str(self.control_file)])

    def set_operator_delay(self, seconds: float) -> None:
        """The operator acts on a resource's new generation `seconds` after it saw it."""
        self.operator.workdir.mkdir(parents=True, exist_ok=True)
        self.control_file.write_text(json.dumps({"delay_s": seconds}))

    def down_operator(self) -> bool:
        """Stop the operator; whether it was running."""
        running = self.operator.is_running()
        if running:
            self.operator.stop(grace_s=5)
        self.operator.pid_file.unlink(missing_ok=True)
        return running

    def down(self) -> list[str]:
        stopped = ["strimzi-operator"] if self.down_operator() else []
        return stopped + self.server.down()

    def rows(self, ports: KubePorts) -> list[dict[str, Any]]:
        proc = self.operator
        running = proc.is_running()
        return [*self.server.rows(ports),
                {"name": "strimzi-operator", "pid": proc.pid() if running else None,
                 "running": running, "port": None, "rss_bytes": proc.rss_bytes(),
                 "log": str(proc.console_file)}]


def _create(client: KubeClient, collection: str, body: dict[str, Any]) -> Any:
    """Create `body` unless one of its name exists (then leave it)."""
    try:
        return client.create(collection, body)
    except KubeError as exc:
        if exc.status == 409:
            return None
        raise

"""The Strimzi lab (`lab up --platform strimzi`, issue 59): a real kube-apiserver and etcd
holding Strimzi's own CRDs, a KafkaMirrorMaker2 resource, and the lab's operator reconciling
it onto the lab's real Connect worker.

What drctl will rely on, each proven against the real API server and Connect: the resource
becomes Ready and its connectors copy records; a change made through Connect's REST API (a
pause, a config key, a connector of its own) is undone within a few passes; a state set in
the resource reaches Connect and comes back in the status with the new generation; offsets
listed and altered through Strimzi's annotations, refused while the connector runs; the
schema enforced by the server (a bad state is a 422); `strimzi.io/pause-reconciliation`; the
operator stopped or slowed (`lab operator`); and the v1beta2 layout with its heartbeat
connector, and the active-active lab's two resources.

The API server's binaries are built once per machine (`python -m drctl.lab.kube build`,
about 9 CPU-minutes): a run with lab tests starts the build in the background as it begins
(tests/conftest.py), and the fixture waits for it (or builds them when they are missing).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from drctl.kafka.connect_rest import ConnectClient, ConnectError
from drctl.kube.api import KubeClient, KubeConflict, KubeError
from drctl.lab.lab import ACTIVE_ACTIVE, STRIMZI, Lab, LabPorts
from drctl.lab.workload import create_topics
from drctl.retry import RetryPolicy
from tests.conftest import PORT_BASE, RunningLab
from tests.lab.support import keyed, produce, wait_replicated

# In the full matrix (`make test-matrix`) until a fresh-clone run of the whole per-commit
# suite with the API server's build beside it has been green (issue 59).
pytestmark = [pytest.mark.lab, pytest.mark.matrix]
# Clear of the shared labs, the Kafka 3.9 ones (+ 100, + 110) and the test files' own labs
# (+ 120 .. + 150): conftest.py. Each lab takes 9 ports (kube-apiserver + 6, etcd + 7, + 8).
V1_BASE = PORT_BASE + 160
V1BETA2_BASE = PORT_BASE + 175
AA_BASE = PORT_BASE + 190
SOURCE = "primary->secondary.MirrorSourceConnector"
CHECKPOINT = "primary->secondary.MirrorCheckpointConnector"
PATH = "/apis/kafka.strimzi.io/{v}/namespaces/secondary/kafkamirrormaker2s/mm2"


def _ports(base: int) -> LabPorts:
    return LabPorts(base, base + 2, base + 4, base + 5, base + 9, base + 6, base + 7)


class StrimziLab:
    def __init__(self, running: RunningLab, version: str) -> None:
        self.running = running
        self.lab = running.lab
        self.version = version
        self.path = PATH.format(v=version)
        self.kube = KubeClient.from_kubeconfig(self.lab.strimzi.kubeconfig)
        self.connect = ConnectClient(self.lab.connect_url(running.state),
                                     policy=RetryPolicy(attempts=1))

    def resource(self) -> dict[str, Any]:
        return dict(self.kube.get(self.path))

    def patch(self, ops: list[dict[str, Any]]) -> int:
        """A JSON patch; the generation it made."""
        return int(self.kube.json_patch(self.path, ops)["metadata"]["generation"])

    def set_state(self, state: str, connector: str = "sourceConnector") -> int:
        return self.patch([{"op": "replace", "path": f"/spec/mirrors/0/{connector}/state",
                            "value": state}])

    def annotate(self, **annotations: str | None) -> None:
        self.kube.merge_patch(self.path, {"metadata": {"annotations": annotations}})

    def status_state(self, name: str) -> str | None:
        for entry in (self.resource().get("status") or {}).get("connectors") or []:
            if entry.get("name") == name:
                return str(entry["connector"]["state"])
        return None


def _until(check: Callable[[], Any], deadline_s: float, what: str) -> Any:
    end = time.monotonic() + deadline_s
    while True:
        try:
            got = check()
        except ConnectError:
            got = None  # Connect answers 409 for a moment around a rebalance
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {deadline_s} s")
        time.sleep(0.1)


def _start(tmp: Any, base: int, version: str) -> Iterator[StrimziLab]:
    lab = Lab(tmp)
    try:
        state = lab.up(ports=_ports(base), platform=STRIMZI, crd_version=version,
                       spark_connect="none")
        running = RunningLab(lab, state)
        yield StrimziLab(running, version)
        running.close()
    finally:
        lab.down(discard=True)  # a test's lab, done with: killed, not shut down


@pytest.fixture(scope="module")
def k8s(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StrimziLab]:
    yield from _start(tmp_path_factory.mktemp("strimzi-lab"), V1_BASE, "v1")


def test_lab_up_strimzi_is_ready_and_its_connectors_copy(k8s: StrimziLab) -> None:
    resource = k8s.resource()
    status = resource["status"]
    assert status["observedGeneration"] == resource["metadata"]["generation"]
    assert [c["type"] for c in status["conditions"]] == ["Ready"]
    assert {c["name"]: c["connector"]["state"] for c in status["connectors"]} == \
        {SOURCE: "RUNNING", CHECKPOINT: "RUNNING"}
    assert sorted(k8s.connect.connectors()) == sorted([SOURCE, CHECKPOINT])
    config = yaml.safe_load(k8s.lab.config_file.read_text())["replication"]
    assert config["connect"]["source_connector"] == SOURCE
    assert "heartbeat_connector" not in config["connect"]  # v1 has none
    assert config["strimzi"] == {"kubeconfig": str(k8s.lab.strimzi.kubeconfig),
                                 "context": "lab", "namespace": "secondary", "name": "mm2",
                                 "reverse_namespace": "primary", "reverse_name": "mm2"}
    create_topics(k8s.running.primary, ("k8s-orders",), 2)
    produce(k8s.running.primary, "k8s-orders", keyed("k", 20))
    wait_replicated(k8s.running, "k8s-orders", 20)


def test_rest_edits_are_put_back_and_foreign_connectors_deleted(k8s: StrimziLab) -> None:
    k8s.connect.pause(SOURCE)
    _until(lambda: k8s.connect.connector_state(SOURCE)[0] == "PAUSED", 10, "paused")
    _until(lambda: k8s.connect.connector_state(SOURCE)[0] == "RUNNING", 10,
           "a REST pause undone")
    config = k8s.connect.config(SOURCE)
    k8s.connect.put_config(SOURCE, {**config, "topics.exclude": "k8s-orders"})
    _until(lambda: k8s.connect.config(SOURCE)["topics.exclude"] != "k8s-orders", 10,
           "a REST config change undone")
    k8s.connect.create("drctl-own-reverse", {
        "connector.class": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
        "source.cluster.alias": "secondary", "target.cluster.alias": "primary",
        "source.cluster.bootstrap.servers": k8s.lab.bootstrap(k8s.running.state, "secondary"),
        "target.cluster.bootstrap.servers": k8s.lab.bootstrap(k8s.running.state, "primary")})
    _until(lambda: "drctl-own-reverse" not in k8s.connect.connectors(), 10,
           "a connector no resource owns deleted")


def test_a_state_set_in_the_resource_reaches_connect_and_the_status(k8s: StrimziLab) -> None:
    generation = k8s.set_state("stopped")
    _until(lambda: k8s.connect.connector_state(SOURCE)[0] == "STOPPED", 15, "stopped")

    def reported() -> bool:
        resource = k8s.resource()
        return (resource["status"]["observedGeneration"] == generation
                and k8s.status_state(SOURCE) == "STOPPED")

    _until(reported, 15, "the status says STOPPED for the new generation")
    k8s.set_state("running")
    _until(lambda: k8s.status_state(SOURCE) == "RUNNING", 15, "running again")


def test_offsets_listed_and_altered_through_annotations(k8s: StrimziLab) -> None:
    create_topics(k8s.running.primary, ("k8s-offsets",), 1)
    produce(k8s.running.primary, "k8s-offsets", keyed("o", 10, 1))
    wait_replicated(k8s.running, "k8s-offsets", 10)
    k8s.patch([{"op": "add", "path": "/spec/mirrors/0/sourceConnector/listOffsets",
                "value": {"toConfigMap": {"name": "mm2-offsets"}}},
               {"op": "add", "path": "/spec/mirrors/0/sourceConnector/alterOffsets",
                "value": {"fromConfigMap": {"name": "mm2-new-offsets"}}}])
    key = "primary--secondary.MirrorSourceConnector.json"
    cm_path = "/api/v1/namespaces/secondary/configmaps"
    offsets = {"offsets": [{"partition": {"cluster": "primary", "topic": "k8s-offsets",
                                          "partition": 0}, "offset": {"offset": 3}}]}
    k8s.kube.create(cm_path, {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "mm2-new-offsets"},
                                       "data": {key: json.dumps(offsets)}})
    # Alter while the connector runs: refused, the annotation stays for the next pass.
    k8s.annotate(**{"strimzi.io/connector-offsets": "alter",
                    "strimzi.io/mirrormaker-connector": SOURCE})

    def refused() -> bool:
        conditions = (k8s.resource().get("status") or {}).get("conditions") or []
        return any(c.get("reason") == "AlterOffsets"
                   and "not in STOPPED state" in c.get("message", "") for c in conditions)

    _until(refused, 15, "alter refused on a running connector")
    assert k8s.resource()["metadata"]["annotations"]["strimzi.io/connector-offsets"] == "alter"
    k8s.annotate(**{"strimzi.io/connector-offsets": None,
                    "strimzi.io/mirrormaker-connector": None})
    k8s.set_state("stopped")
    _until(lambda: k8s.status_state(SOURCE) == "STOPPED", 15, "stopped")
    # List: Connect's offsets into the ConfigMap, under Strimzi's key; annotations removed.
    k8s.annotate(**{"strimzi.io/connector-offsets": "list",
                    "strimzi.io/mirrormaker-connector": SOURCE})
    listed = _until(lambda: k8s.kube.get_or_none(f"{cm_path}/mm2-offsets"), 15, "listed")
    copied = json.loads(listed["data"][key])["offsets"]
    assert {"partition": {"cluster": "primary", "topic": "k8s-offsets", "partition": 0},
            "offset": {"offset": 9}} in copied  # the last of 10 records copied
    assert listed["metadata"]["ownerReferences"][0]["kind"] == "KafkaMirrorMaker2"
    _until(lambda: "strimzi.io/connector-offsets" not in
           (k8s.resource()["metadata"].get("annotations") or {}), 15, "annotation removed")
    # Alter, stopped: Connect's offset is the ConfigMap's.
    k8s.annotate(**{"strimzi.io/connector-offsets": "alter",
                    "strimzi.io/mirrormaker-connector": SOURCE})

    def altered() -> bool:
        got = k8s.connect.offsets(SOURCE)["offsets"]
        return any(o["partition"].get("topic") == "k8s-offsets" and o["offset"]["offset"] == 3
                   for o in got)

    _until(altered, 15, "offsets altered")
    _until(lambda: "strimzi.io/connector-offsets" not in
           (k8s.resource()["metadata"].get("annotations") or {}), 15, "annotation removed")
    k8s.set_state("running")
    _until(lambda: k8s.status_state(SOURCE) == "RUNNING", 15, "running again")
    # From offset 3 again: records 4..9 copied a second time.
    from tests.lab.support import wait_count

    wait_count(k8s.running.secondary, "k8s-offsets", 16)


def test_the_server_enforces_strimzis_schema(k8s: StrimziLab) -> None:
    before = k8s.resource()["metadata"]["generation"]
    with pytest.raises(KubeError) as bad_state:
        k8s.set_state("halted")
    assert bad_state.value.status == 422
    assert not isinstance(bad_state.value, KubeConflict)  # a refusal, not a changed object
    assert "Unsupported value" in bad_state.value.message
    with pytest.raises(KubeError) as no_alias:
        k8s.patch([{"op": "remove", "path": "/spec/target/alias"}])
    assert no_alias.value.status == 422
    # A JSON-patch test guard that fails: drctl tells it from the server's own answer.
    with pytest.raises(KubeConflict) as stale:
        k8s.patch([{"op": "test", "path": "/metadata/generation", "value": before - 1},
                   {"op": "replace", "path": "/spec/mirrors/0/sourceConnector/state",
                    "value": "paused"}])
    assert stale.value.status == 422
    assert k8s.resource()["metadata"]["generation"] == before


def test_pause_reconciliation_leaves_the_connectors_alone(k8s: StrimziLab) -> None:
    k8s.annotate(**{"strimzi.io/pause-reconciliation": "true"})
    _until(lambda: [c["type"] for c in k8s.resource()["status"]["conditions"]]
           == ["ReconciliationPaused"], 10, "ReconciliationPaused")
    k8s.connect.pause(SOURCE)
    _until(lambda: k8s.connect.connector_state(SOURCE)[0] == "PAUSED", 10, "paused")
    time.sleep(5)  # two passes and more
    assert k8s.connect.connector_state(SOURCE)[0] == "PAUSED"
    k8s.annotate(**{"strimzi.io/pause-reconciliation": None})
    _until(lambda: k8s.connect.connector_state(SOURCE)[0] == "RUNNING", 10, "resumed")


def test_the_operator_stopped_or_slow(k8s: StrimziLab) -> None:
    assert k8s.lab.operator("stop") == "stopped"
    generation = k8s.set_state("paused")
    time.sleep(5)
    assert k8s.resource()["status"]["observedGeneration"] < generation
    assert k8s.connect.connector_state(SOURCE)[0] == "RUNNING"
    k8s.lab.operator("slow", delay_s=4)
    k8s.lab.operator("start")  # starting undoes a delay
    _until(lambda: k8s.resource()["status"]["observedGeneration"] == generation
           and k8s.status_state(SOURCE) == "PAUSED"
           and k8s.connect.connector_state(SOURCE)[0] == "PAUSED", 15,
           "paused once running again")
    k8s.lab.operator("slow", delay_s=4)
    started = time.monotonic()
    k8s.set_state("running")
    time.sleep(3)
    assert k8s.connect.connector_state(SOURCE)[0] == "PAUSED"  # not yet: slowed down
    _until(lambda: k8s.connect.connector_state(SOURCE)[0] == "RUNNING", 20, "running")
    assert time.monotonic() - started >= 4
    k8s.lab.operator("slow", delay_s=0)


@pytest.fixture(scope="module")
def k8s_v1beta2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StrimziLab]:
    yield from _start(tmp_path_factory.mktemp("strimzi-lab-v1beta2"), V1BETA2_BASE, "v1beta2")


@pytest.mark.matrix  # per commit the v1 layout (Strimzi 1.x); the unit tests cover both
def test_the_v1beta2_layout(k8s_v1beta2: StrimziLab) -> None:
    k8s = k8s_v1beta2
    heartbeat = "primary->secondary.MirrorHeartbeatConnector"
    spec = k8s.resource()["spec"]
    assert spec["connectCluster"] == "secondary" and "target" not in spec
    assert sorted(k8s.connect.connectors()) == sorted([SOURCE, CHECKPOINT, heartbeat])
    config = yaml.safe_load(k8s.lab.config_file.read_text())["replication"]["connect"]
    assert config["heartbeat_connector"] == heartbeat
    generation = k8s.set_state("paused", "heartbeatConnector")
    _until(lambda: k8s.connect.connector_state(heartbeat)[0] == "PAUSED", 15, "paused")
    _until(lambda: k8s.resource()["status"]["observedGeneration"] == generation
           and k8s.status_state(heartbeat) == "PAUSED", 15, "status says PAUSED")
    with pytest.raises(KubeError) as v1_layout:  # v1's fields are unknown to v1beta2
        k8s.patch([{"op": "add", "path": "/spec/mirrors/0/sourceConnector/state",
                    "value": "resting"}])
    assert v1_layout.value.status == 422


@pytest.mark.matrix
def test_active_active_runs_a_resource_per_target(tmp_path_factory: pytest.TempPathFactory
                                                   ) -> None:
    """`lab up --topology active-active --platform strimzi`: one KafkaMirrorMaker2 per
    target cluster, each Ready, each flow's config section naming its own."""
    lab = Lab(tmp_path_factory.mktemp("strimzi-lab-aa"))
    try:
        lab.up(ports=_ports(AA_BASE), platform=STRIMZI, topology=ACTIVE_ACTIVE,
               names_kept=False, spark_connect="none")
        kube = KubeClient.from_kubeconfig(lab.strimzi.kubeconfig)
        for target, source in (("secondary", "primary"), ("primary", "secondary")):
            resource = kube.get(f"/apis/kafka.strimzi.io/v1/namespaces/{target}/"
                                "kafkamirrormaker2s/mm2")
            assert resource["spec"]["mirrors"][0]["source"]["alias"] == source
            status = resource["status"]
            assert status["conditions"][0]["type"] == "Ready"
            assert sorted(c["name"] for c in status["connectors"]) == [
                f"{source}->{target}.MirrorCheckpointConnector",
                f"{source}->{target}.MirrorSourceConnector"]
        flows = yaml.safe_load(lab.config_file.read_text())["topology"]["flows"]
        assert [(f["strimzi"]["namespace"], f["strimzi"]["reverse_namespace"])
                for f in flows] == [("secondary", "primary"), ("primary", "secondary")]
    finally:
        lab.down(discard=True)  # a test's lab, done with: killed, not shut down

"""Replication control through Strimzi's KafkaMirrorMaker2, against an in-process Kubernetes
API and a fake operator (tests/unit/kube_fake.py), in both CRD layouts."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from drctl.config import ReplicationSettings, StrimziSettings
from drctl.errors import DrctlError, ExitStatus
from drctl.kube.api import KubeClient, patch_not_applied
from drctl.kube.kubeconfig import KubeLogin
from drctl.replication.strimzi import (
    MirrorMakerObject,
    OperatorUnconfirmed,
    ReconciliationPaused,
    Reverted,
    StrimziControl,
    gitops_owner,
    offsets_key,
)
from tests.unit.kube_fake import TOKEN, FakeKube, FakeOperator, fake_kube, mm2_v1, mm2_v1beta2

SOURCE = "primary->secondary.MirrorSourceConnector"
CHECKPOINT = "primary->secondary.MirrorCheckpointConnector"
REVERSE = "secondary->primary.MirrorSourceConnector"

LAYOUTS: dict[str, tuple[tuple[str, ...], Callable[..., dict[str, Any]]]] = {
    "v1": (("v1",), mm2_v1),
    # A Strimzi 0.4x server: v1beta2 only.
    "v1beta2": (("v1beta2",), mm2_v1beta2),
}

Lab = tuple[FakeKube, FakeOperator, StrimziControl]


def _rep() -> ReplicationSettings:
    return ReplicationSettings(
        kind="mirrormaker2", source="primary", target="secondary",
        rename="primary.{topic}", source_alias="primary", target_alias="secondary",
        strimzi=StrimziSettings("secondary", "mm2", reverse_namespace="primary"))


@pytest.fixture(params=sorted(LAYOUTS))
def lab(request: pytest.FixtureRequest) -> Iterator[Lab]:
    versions, make = LAYOUTS[request.param]
    with fake_kube(versions) as (kube, operator, url):
        kube.put("kafkamirrormaker2s", make())
        operator.settled("secondary", "mm2")
        client = KubeClient(KubeLogin(url, "test", token=TOKEN))
        yield kube, operator, StrimziControl(_rep(), client=client, deadline_s=3.0,
                                             interval_s=0.02)


def _spec(kube: FakeKube, namespace: str = "secondary") -> dict[str, Any]:
    found = kube.get("kafkamirrormaker2s", namespace, "mm2")
    assert found is not None
    return found["spec"]


def test_the_version_served_is_the_one_spoken(lab: Lab) -> None:
    kube, _, control = lab
    assert control.version == kube.versions[0]


def test_stop_is_done_when_connect_reports_stopped(lab: Lab) -> None:
    kube, _, control = lab
    readings = control.set_states({SOURCE: "stopped", CHECKPOINT: "stopped"}, what="stop")
    assert [(r.name, r.state, r.tasks) for r in readings] == [
        (SOURCE, "STOPPED", ()), (CHECKPOINT, "STOPPED", ())]
    mirror = _spec(kube)["mirrors"][0]
    assert mirror["sourceConnector"]["state"] == "stopped"
    assert mirror["checkpointConnector"]["state"] == "stopped"
    # Then running again, as Connect reports it.
    readings = control.set_states({SOURCE: "running"}, what="resume")
    assert readings[0].state == "RUNNING" and readings[0].tasks == ("RUNNING",)


def test_a_stop_that_hangs_with_no_task_left_holds_one_with_a_task_does_not(lab: Lab
                                                                              ) -> None:
    """With the source down, a MirrorSourceConnector hangs in its own stop(): RUNNING with no
    task, copying nothing — stopped, as drctl counts it through REST. A task still running is
    not."""
    _, operator, control = lab
    operator.hung_stop[SOURCE] = "connector"
    readings = control.set_states({SOURCE: "stopped"}, what="stop")
    assert [(r.state, r.tasks) for r in readings] == [("RUNNING", ())]
    control.set_states({SOURCE: "running"}, what="resume")
    operator.hung_stop[SOURCE] = "tasks"
    control.deadline_s = 0.5
    with pytest.raises(OperatorUnconfirmed) as info:
        control.set_states({SOURCE: "stopped"}, what="forward replication stopped")
    assert f"{SOURCE} is RUNNING with tasks RUNNING" in info.value.message


def test_a_state_already_written_is_not_patched_again(lab: Lab) -> None:
    kube, _, control = lab
    control.set_states({SOURCE: "stopped"}, what="stop")
    patches = len([r for r in kube.requests if r[0] == "PATCH"])
    control.set_states({SOURCE: "stopped"}, what="stop")
    assert len([r for r in kube.requests if r[0] == "PATCH"]) == patches


def test_an_operator_that_is_down_is_exit_4_naming_it(lab: Lab) -> None:
    _, operator, control = lab
    operator.mode = "down"
    control.deadline_s = 0.5
    with pytest.raises(OperatorUnconfirmed) as info:
        control.set_states({SOURCE: "stopped"}, what="forward replication stopped")
    assert info.value.exit_status is ExitStatus.UNREACHABLE
    assert "did not confirm forward replication stopped on KafkaMirrorMaker2 secondary/mm2 " \
        "within 0.5 s" in \
        info.value.message
    assert "has not reconciled generation 2 (observed 1)" in info.value.message
    # Back up: the same command again finishes (the patch is written already).
    operator.mode = "up"
    control.deadline_s = 3.0
    assert control.set_states({SOURCE: "stopped"}, what="stop")[0].state == "STOPPED"


def test_a_generation_observed_not_ready_is_not_done_and_says_notready(lab: Lab) -> None:
    """Strimzi writes NotReady (never Ready=False) when a reconciliation fails: observed,
    but not done; its message is what drctl says."""
    _, operator, control = lab
    operator.mode = "failing"
    control.deadline_s = 0.5
    with pytest.raises(OperatorUnconfirmed) as info:
        control.set_states({SOURCE: "stopped"}, what="forward replication stopped")
    assert "is not Ready for generation 2 (NotReady: PUT /connectors/x/stop returned 500 " \
        "(Internal Server Error) (ConnectRestException))" in info.value.message
    operator.mode = "up"
    control.deadline_s = 3.0
    assert control.set_states({SOURCE: "stopped"}, what="stop")[0].state == "STOPPED"


def test_a_slow_operator_within_the_deadline_is_waited_for(lab: Lab) -> None:
    _, operator, control = lab
    operator.mode, operator.delay_s = "slow", 0.4
    assert control.set_states({SOURCE: "paused"}, what="pause")[0].state == "PAUSED"


def test_a_patch_put_back_by_gitops_is_said(lab: Lab) -> None:
    kube, operator, control = lab
    obj = kube.objects[("kafkamirrormaker2s", "secondary", "mm2")]
    obj["metadata"]["labels"] = {"kustomize.toolkit.fluxcd.io/name": "dr"}
    operator.revert[("secondary", "mm2")] = copy.deepcopy(obj["spec"])
    with pytest.raises(Reverted) as info:
        control.set_states({SOURCE: "stopped"}, what="forward replication stopped")
    assert "no longer holds what drctl wrote for forward replication stopped" in \
        info.value.message
    assert f"{SOURCE} running" in info.value.message
    assert "Flux (kustomize.toolkit.fluxcd.io/name=dr)" in info.value.message


def test_paused_reconciliation_is_refused_before_any_patch(lab: Lab) -> None:
    kube, _, control = lab
    obj = kube.objects[("kafkamirrormaker2s", "secondary", "mm2")]
    obj["metadata"]["annotations"] = {"strimzi.io/pause-reconciliation": "true"}
    with pytest.raises(ReconciliationPaused) as info:
        control.set_states({SOURCE: "stopped"}, what="stop")
    assert "strimzi.io/pause-reconciliation" in info.value.message
    assert not [r for r in kube.requests if r[0] == "PATCH"]


def test_a_conflicting_write_is_read_again_and_retried(lab: Lab) -> None:
    kube, _, control = lab
    kube.interfere = True
    assert control.set_states({SOURCE: "stopped"}, what="stop")[0].state == "STOPPED"
    assert len([r for r in kube.requests if r[0] == "PATCH"]) == 2  # refused once, then done


def test_a_failed_patch_test_is_told_from_the_servers_answer_not_a_refusal() -> None:
    """kube-apiserver 1.34's answers, as the lab's server gave them: a JSON patch it cannot
    apply (a failed `test`) is a bare 422; a schema refusal names the object and its causes."""
    failed = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": "the server rejected our request due to an error in our request",
              "reason": "Invalid", "details": {}, "code": 422}
    refused = {"kind": "Status", "status": "Failure", "reason": "Invalid", "code": 422,
               "message": 'KafkaMirrorMaker2.kafka.strimzi.io "mm2" is invalid: '
                          '[spec.mirrors[0].sourceConnector.state: Unsupported value: "halted"',
               "details": {"name": "mm2", "group": "kafka.strimzi.io",
                           "kind": "KafkaMirrorMaker2",
                           "causes": [{"reason": "FieldValueNotSupported",
                                       "message": 'Unsupported value: "halted"',
                                       "field": "spec.mirrors[0].sourceConnector.state"}]}}
    older = {"kind": "Status", "reason": "Invalid", "code": 422, "message": "the server rejected "
             "our request due to an error in our request", "details": {"causes": [
                 {"reason": "UnexpectedServerResponse",
                  "message": "testing value /metadata/resourceVersion failed: test failed"}]}}
    assert patch_not_applied(failed) and patch_not_applied(older)
    assert not patch_not_applied(refused)
    assert not patch_not_applied(None)


def test_a_patch_that_does_not_apply_to_an_unchanged_object_is_said_at_once(lab: Lab) -> None:
    kube, _, control = lab
    with pytest.raises(DrctlError) as info:
        control.patch(lambda obj: [{"op": "replace", "path": "/spec/nothere", "value": 1}])
    assert "could not apply drctl's change" in info.value.message
    assert len([r for r in kube.requests if r[0] == "PATCH"]) == 1


def test_a_state_the_crd_refuses_is_drctls_error(lab: Lab) -> None:
    _, _, control = lab
    with pytest.raises(DrctlError) as info:
        control.patch(lambda obj: [{"op": "add", "path": "/spec/mirrors/0/sourceConnector/state",
                                    "value": "halted"}])
    assert "refused drctl's change" in info.value.message and "Unsupported value" in \
        info.value.message


def test_an_unknown_connector_name_says_what_strimzi_calls_them(lab: Lab) -> None:
    _, _, control = lab
    with pytest.raises(DrctlError) as info:
        control.set_states({"mm2-source": "stopped"}, what="stop")
    assert SOURCE in info.value.message


def test_topic_exclusions_go_where_strimzi_reads_them(lab: Lab) -> None:
    kube, _, control = lab
    config = control.config(SOURCE)
    v1beta2 = "clusters" in _spec(kube)
    # v1beta2 fixture sets the mirror's topicsExcludePattern: it is the effective key.
    assert config.get("topics.exclude") == ("orders-tmp" if v1beta2 else None)
    new = {**config, "topics.exclude": ",".join(filter(None, [config.get("topics.exclude"),
                                                               "orders\\.eu"]))}
    assert control.put_config(SOURCE, new, what="orders.eu left out")
    mirror = _spec(kube)["mirrors"][0]
    if v1beta2:
        assert mirror["topicsExcludePattern"] == "orders-tmp,orders\\.eu"
        assert "topics.exclude" not in mirror["sourceConnector"]["config"]
    else:
        assert mirror["sourceConnector"]["config"]["topics.exclude"] == "orders\\.eu"
    assert control.config(SOURCE)["topics.exclude"].endswith("orders\\.eu")
    assert not control.put_config(SOURCE, control.config(SOURCE), what="nothing")


def test_the_reverse_flow_is_created_stopped_at_its_offsets_then_started(lab: Lab) -> None:
    kube, operator, control = lab
    name = control.create_reverse({"topics": "orders", "drctl.incident": "inc-1"}, "inc-1")
    assert name == REVERSE
    reverse = MirrorMakerObject(kube.get("kafkamirrormaker2s", "primary", "mm2") or {})
    mirror = reverse.mirror("secondary", "primary")  # turned round, in the same layout
    assert reverse.layout == MirrorMakerObject(kube.get("kafkamirrormaker2s", "secondary",
                                                        "mm2") or {}).layout
    assert mirror.spec["sourceConnector"]["state"] == "stopped"
    assert reverse.readings()[REVERSE].state == "STOPPED"
    offsets = [{"partition": {"cluster": "secondary", "topic": "orders", "partition": 0},
                "offset": {"offset": 41}}]
    control.alter_offsets("primary", "mm2", REVERSE, offsets, ("secondary", "primary"))
    assert operator.altered[REVERSE] == offsets
    # Under the key Strimzi reads a KafkaMirrorMaker2 connector's offsets from (not
    # KafkaConnector's offsets.json), Connect's own document as its value.
    cm = kube.get("configmaps", "primary", "mm2-drctl-offsets") or {}
    assert json.loads(cm["data"]["secondary--primary.MirrorSourceConnector.json"]) == \
        {"offsets": offsets}
    assert offsets_key(REVERSE) == "secondary--primary.MirrorSourceConnector.json"
    assert "strimzi.io/connector-offsets" not in (
        (kube.get("kafkamirrormaker2s", "primary", "mm2") or {})["metadata"]["annotations"])
    started = control.set_states({REVERSE: "running"}, what="reverse started",
                                 namespace="primary", name="mm2",
                                 mirror_of=("secondary", "primary"))
    assert started[0].state == "RUNNING"
    # Retired: stopped, its offsets listed, the resource drctl made deleted.
    control.set_states({REVERSE: "stopped"}, what="reverse stopped", namespace="primary",
                       name="mm2", mirror_of=("secondary", "primary"))
    assert control.list_offsets("primary", "mm2", REVERSE, ("secondary", "primary")) == offsets
    assert control.delete_reverse()
    assert kube.get("kafkamirrormaker2s", "primary", "mm2") is None


def test_an_offsets_request_the_operator_refuses_says_its_warning(
        lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """Strimzi keeps the annotation and writes a Warning (reason AlterOffsets) when it cannot
    alter: drctl's wait ends at its deadline saying that warning, not only "still there"."""
    _, _, control = lab
    control.set_states({SOURCE: "stopped"}, what="stop")
    # A ConfigMap under KafkaConnector's key, which Strimzi does not read for this resource.
    control.write_configmap("secondary", "mm2-drctl-offsets", {"offsets.json": "{}"})
    monkeypatch.setattr(control, "write_configmap", lambda *args: None)
    control.deadline_s = 0.5
    with pytest.raises(OperatorUnconfirmed) as info:
        control.alter_offsets("secondary", "mm2", SOURCE, [], ("primary", "secondary"))
    assert "annotation is still there; it warns: AlterOffsets: Encountered error altering " \
        "connector offsets. Data field primary--secondary.MirrorSourceConnector.json is " \
        "missing." in info.value.message


def test_a_server_without_strimzi_says_so() -> None:
    with fake_kube(()) as (_, _, url):
        control = StrimziControl(_rep(), client=KubeClient(KubeLogin(url, "t", token=TOKEN)))
        with pytest.raises(DrctlError) as info:
            _ = control.version
    assert "serves no kafka.strimzi.io version" in info.value.message


@pytest.mark.parametrize("labels,annotations,owner", [
    ({}, {}, None),
    ({"helm.toolkit.fluxcd.io/name": "mm2"}, {}, "Flux (helm.toolkit.fluxcd.io/name=mm2)"),
    ({}, {"argocd.argoproj.io/tracking-id": "dr:x"}, "Argo CD (argocd.argoproj.io/tracking-id)"),
    ({"app.kubernetes.io/instance": "dr"}, {}, "Argo CD, or Helm"),
])
def test_gitops_ownership_is_named(labels: dict[str, str], annotations: dict[str, str],
                                   owner: str | None) -> None:
    found = gitops_owner({"labels": labels, "annotations": annotations})
    assert found == owner if owner is None else (found or "").startswith(owner)

"""The procedures' interface (ReplicationKind) on a flow Strimzi owns: `kind_for` picks the
resource as owner from the config, and each control call goes through the fake Kubernetes
API (tests/unit/kube_fake.py) — none through Kafka Connect's REST API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.config import Config, ReplicationSettings, parse_config
from drctl.errors import ExitStatus
from drctl.replication.base import FlowPart, ReturnRequest, ReverseRequest, kind_for
from drctl.replication.mirrormaker2 import MirrorMaker2
from drctl.replication.strimzi import OperatorUnconfirmed
from drctl.replication.strimzi_mm2 import StrimziMirrorMaker2
from tests.unit.kube_fake import TOKEN, FakeKube, FakeOperator, fake_kube, mm2_v1, mm2_v1beta2

SOURCE = "primary->secondary.MirrorSourceConnector"
CHECKPOINT = "primary->secondary.MirrorCheckpointConnector"
REVERSE = "secondary->primary.MirrorSourceConnector"


@dataclass
class Ctx:
    config: Config
    rep: ReplicationSettings
    source: Any = None
    target: Any = None


Lab = tuple[FakeKube, FakeOperator, Ctx]


def _config(tmp_path: Path, url: str, strimzi: bool = True) -> Config:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": url}}],
        "users": [{"name": "drctl", "user": {"token": TOKEN}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "drctl"}}]}))
    replication: dict[str, Any] = {
        "kind": "mirrormaker2", "source": "primary", "target": "secondary",
        "rename": "primary.{topic}",
        "connect": {"source_connector": SOURCE, "checkpoint_connector": CHECKPOINT}}
    if strimzi:
        replication["strimzi"] = {"kubeconfig": str(kubeconfig), "namespace": "secondary",
                                  "name": "mm2", "reverse_namespace": "primary"}
    return parse_config({"clusters": {"primary": {"bootstrap.servers": "primary:9092"},
                                      "secondary": {"bootstrap.servers": "secondary:9092"}},
                         "replication": replication}).under_deadline(3.0)


@pytest.fixture(params=["v1", "v1beta2"])
def lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lab]:
    make = mm2_v1 if request.param == "v1" else mm2_v1beta2
    with fake_kube((request.param,)) as (kube, operator, url):
        kube.put("kafkamirrormaker2s", make())
        operator.settled("secondary", "mm2")
        config = _config(tmp_path, url)
        yield kube, operator, Ctx(config, config.require_replication())


def test_the_owner_is_chosen_from_the_config(tmp_path: Path) -> None:
    assert isinstance(kind_for(_config(tmp_path, "http://x").require_replication()),
                      StrimziMirrorMaker2)
    plain = kind_for(_config(tmp_path, "http://x", strimzi=False).require_replication())
    assert isinstance(plain, MirrorMaker2) and not isinstance(plain, StrimziMirrorMaker2)


def test_stop_then_resume_through_the_resource(lab: Lab) -> None:
    kube, _, ctx = lab
    kind = kind_for(ctx.rep)
    outcome = kind.stop_forward(ctx.rep)
    assert outcome.state == "stopped" and SOURCE in outcome.connectors
    state = kind.forward_state(ctx.rep)
    assert state.confirmed and state.components[SOURCE] == "STOPPED"
    assert kind.component_states(ctx.rep)[CHECKPOINT] == "STOPPED"
    running = kind.resume_forward(ctx.rep, lambda _: None)
    assert running.readable and running.copying and not running.unconfirmed
    # Every request went to the Kubernetes API: none was a Connect REST path.
    assert all(path.startswith("/api") for _, path in kube.requests)


def test_an_operator_down_during_a_stop_is_exit_4(lab: Lab) -> None:
    _, operator, ctx = lab
    operator.mode = "down"
    with pytest.raises(OperatorUnconfirmed) as info:
        kind_for(ctx.rep).stop_forward(ctx.rep, deadline_s=0.5)
    assert info.value.exit_status is ExitStatus.UNREACHABLE


def test_an_operator_down_is_waited_for_within_the_commands_deadline(lab: Lab) -> None:
    """The procedures pass --deadline as `reach_deadline_s` (the stop's own wait keeps its
    default): the operator is waited for within it, not a minute."""
    _, operator, ctx = lab
    operator.mode = "down"
    started = time.monotonic()
    with pytest.raises(OperatorUnconfirmed) as info:
        kind_for(ctx.rep).stop_forward(ctx.rep, reach_deadline_s=0.5)
    assert info.value.deadline_s == 0.5 and "within 0.5 s" in info.value.message
    assert time.monotonic() - started < 10


def test_an_unreachable_api_leaves_the_stop_pending(tmp_path: Path) -> None:
    rep = _config(tmp_path, "http://127.0.0.1:9").require_replication()
    outcome = kind_for(rep).stop_forward(rep, reach_deadline_s=0.5, deadline_s=0.5)
    assert outcome.state == "pending" and "unreachable" in outcome.detail


def test_an_application_is_left_out_and_taken_back_in_the_resource(lab: Lab) -> None:
    kube, _, ctx = lab
    kind = kind_for(ctx.rep)
    part = FlowPart("payments", ("payments",), ("payments-app",))
    edits = kind.plan_leave_out(ctx.rep, part)
    assert edits is not None
    assert kind.write_edits(ctx.rep, edits)
    assert kind.edits_hold(ctx.rep, edits, part)
    kind.write_edits(ctx.rep, edits, undo=True)
    assert not kind.edits_hold(ctx.rep, edits)
    spec = (kube.get("kafkamirrormaker2s", "secondary", "mm2") or {})["spec"]["mirrors"][0]
    # Back as it was: v1beta2's own pattern kept, v1's key gone again.
    assert spec.get("topicsExcludePattern") == ("orders-tmp" if "clusters" in
        (kube.get("kafkamirrormaker2s", "secondary", "mm2") or {})["spec"] else None)


def test_the_reverse_flow_cycle(lab: Lab, tmp_path: Path) -> None:
    kube, operator, ctx = lab
    kind = kind_for(ctx.rep)
    kind.stop_forward(ctx.rep)
    out = kind.start_reverse(ctx, ReverseRequest("inc-1", {"orders": {0: 42, 1: 0}},
                                                 "drctl.reconciled", tmp_path), lambda _: None)
    assert out["connector"] == REVERSE and out["resource"] == "primary/mm2"
    assert operator.altered[REVERSE] == [
        {"partition": {"cluster": "secondary", "topic": "orders", "partition": 0},
         "offset": {"offset": 41}},
        {"partition": {"cluster": "secondary", "topic": "orders", "partition": 1},
         "offset": None}]
    assert kind.reverse_state(ctx).copying == (REVERSE,)
    request = ReturnRequest("inc-1", ["orders"], {"orders": {0: 100}}, tmp_path)
    retired = kind.retire_reverse(ctx, request, lambda _: None)
    assert retired["state"] == "deleted" and retired["offsets"]
    assert kube.get("kafkamirrormaker2s", "primary", "mm2") is None
    kind.set_forward_start(ctx, request, lambda _: None)
    assert operator.altered[SOURCE] == [
        {"partition": {"cluster": "primary", "topic": "orders", "partition": 0},
         "offset": {"offset": 99}}]


def test_an_applications_reverse_flow_is_a_resource_of_its_own(lab: Lab, tmp_path: Path
                                                                ) -> None:
    """An application's incident: its reverse flow in a resource of its own (Strimzi names
    connectors by aliases alone, so it cannot share the region's); the forward source
    connector, copying the rest, stopped for its offsets only and running again after."""
    kube, operator, ctx = lab
    kind = kind_for(ctx.rep)
    part = FlowPart("Pay Ments", ("orders",), ("orders-app",))
    edits = kind.plan_leave_out(ctx.rep, part)
    assert edits is not None and kind.write_edits(ctx.rep, edits)
    out = kind.start_reverse(ctx, ReverseRequest("inc-2", {"orders": {0: 5}}, "drctl.reconciled",
                                                 tmp_path, part, tuple(edits)), lambda _: None)
    resource = out["resource"]
    assert resource.startswith("primary/mm2-pay-ments-") and resource != "primary/mm2", out
    assert kube.get("kafkamirrormaker2s", "primary", "mm2") is None
    assert kind.reverse_state(ctx, part).copying == (REVERSE,)
    assert not kind.reverse_state(ctx).readable  # the region's reverse flow: none
    request = ReturnRequest("inc-2", ["orders"], {"orders": {0: 7}}, tmp_path, part,
                            tuple(edits))
    assert kind.retire_reverse(ctx, request, lambda _: None)["state"] == "deleted"
    assert kube.get("kafkamirrormaker2s", *resource.split("/")) is None
    kind.set_forward_start(ctx, request, lambda _: None)
    assert operator.altered[SOURCE] == [
        {"partition": {"cluster": "primary", "topic": "orders", "partition": 0},
         "offset": {"offset": 6}}]
    mirror = (kube.get("kafkamirrormaker2s", "secondary", "mm2") or {})["spec"]["mirrors"][0]
    assert mirror["sourceConnector"]["state"] == "running"  # the rest copies again
    assert mirror["checkpointConnector"].get("state", "running") == "running"


def test_gitops_ownership_is_said_before_a_failover_and_in_check(lab: Lab) -> None:
    kube, _, ctx = lab
    obj = kube.objects[("kafkamirrormaker2s", "secondary", "mm2")]
    obj["metadata"]["annotations"] = {"argocd.argoproj.io/tracking-id": "dr:kafka/x"}
    kind = kind_for(ctx.rep)
    assert "also owned by Argo CD" in kind.ownership_warnings(ctx.rep)[0]
    findings = kind.settings_findings(ctx.rep, [])
    assert any("also owned by Argo CD" in f.difference for f in findings)


def test_active_active_failback_resumes_a_strimzi_flow_through_its_resource(lab: Lab) -> None:
    """The pair's failback resumes both flows; one Strimzi owns is resumed through its
    resource (no Connect worker is drctl's to write to)."""
    from types import SimpleNamespace

    from drctl.ops.active_active import failback

    kube, _, ctx = lab
    kind_for(ctx.rep).stop_forward(ctx.rep)
    flow = SimpleNamespace(rep=ctx.rep, notify=lambda _: None)
    opts = SimpleNamespace(deadline_s=3.0, dry_run=False, timeout_s=3.0)
    out = failback._flows_running(flow, flow, opts)  # type: ignore[arg-type]
    assert out["primary -> secondary"]["state"] == "copying"
    mirror = (kube.get("kafkamirrormaker2s", "secondary", "mm2") or {})["spec"]["mirrors"][0]
    assert mirror["sourceConnector"]["state"] == "running"

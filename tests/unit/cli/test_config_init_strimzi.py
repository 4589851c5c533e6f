"""`drctl config init --strimzi NAMESPACE/NAME`: the flow read from a KafkaMirrorMaker2
(either layout) through the Kubernetes API, written so that drctl controls it there."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from drctl.cli.app import main
from drctl.config import load_config
from drctl.errors import ExitStatus
from tests.unit.kube_fake import TOKEN, fake_kube, mm2_v1, mm2_v1beta2

A, B = "kafka-a:9092", "kafka-b:9092"


def _kubeconfig(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": url}}],
        "users": [{"name": "drctl", "user": {"token": TOKEN}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "drctl"}}]}))
    return path


@pytest.mark.parametrize("version", ["v1", "v1beta2"])
def test_written_from_the_resource(tmp_path: Path, version: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with fake_kube((version,)) as (kube, _, url):
        kube.put("kafkamirrormaker2s", (mm2_v1 if version == "v1" else mm2_v1beta2)())
        out = tmp_path / "drctl.yaml"
        assert main(["config", "init", "--primary-bootstrap", A, "--secondary-bootstrap", B,
                     "--strimzi", "secondary/mm2", "--kubeconfig",
                     str(_kubeconfig(tmp_path, url)), "--out", str(out), "--no-check"]) == 0
    raw = yaml.safe_load(out.read_text())
    rep = raw["replication"]
    assert (rep["kind"], rep["source"], rep["target"]) == ("mirrormaker2", "primary",
                                                           "secondary")
    assert rep["rename"] == "primary.{topic}"  # Strimzi's default policy, default separator
    assert rep["connect"]["source_connector"] == "primary->secondary.MirrorSourceConnector"
    assert rep["connect"]["checkpoint_connector"] == \
        "primary->secondary.MirrorCheckpointConnector"
    assert "url" not in rep["connect"]  # nothing goes through Connect's REST API
    assert rep["strimzi"]["namespace"] == "secondary" and rep["strimzi"]["name"] == "mm2"
    assert rep["topics"]["include"] == ["orders.*"]
    if version == "v1beta2":
        assert rep["connect"]["heartbeat_connector"] == \
            "primary->secondary.MirrorHeartbeatConnector"
        assert "orders-tmp" in rep["topics"]["exclude"]
    # What it wrote parses, and names the resource as its owner.
    strimzi = load_config(out).require_replication().strimzi
    assert strimzi is not None and strimzi.resource == "secondary/mm2"


def test_a_resource_that_is_not_there_is_exit_2(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with fake_kube(("v1",)) as (_, _, url):
        status = main(["config", "init", "--primary-bootstrap", A, "--secondary-bootstrap", B,
                       "--strimzi", "secondary/nope", "--kubeconfig",
                       str(_kubeconfig(tmp_path, url)), "--out", str(tmp_path / "x.yaml"),
                       "--no-check"])
    assert status == ExitStatus.USAGE
    assert "There is no KafkaMirrorMaker2 secondary/nope" in " ".join(
        capsys.readouterr().err.split())

"""`replication.strimzi`: the flow's KafkaMirrorMaker2 resource, parsed and validated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drctl.config import config_as_data, parse_config
from drctl.errors import ConfigError


def _raw(strimzi: Any, kind: str = "mirrormaker2") -> dict[str, Any]:
    return {"clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
            "replication": {"kind": kind, "source": "a", "target": "b", "strimzi": strimzi}}


def test_strimzi_section_is_parsed_and_shown(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\n")
    cfg = parse_config(_raw({"namespace": "secondary", "name": "mm2",
                             "reverse_namespace": "primary", "kubeconfig": str(kubeconfig),
                             "context": "lab"}))
    strimzi = cfg.require_replication().strimzi
    assert strimzi is not None
    assert strimzi.resource == "secondary/mm2"
    assert strimzi.reverse_resource == "primary/mm2"  # the reverse name defaults to the name
    assert strimzi.kubeconfig == str(kubeconfig) and strimzi.context == "lab"
    assert config_as_data(cfg)["replication"]["strimzi"]["namespace"] == "secondary"


def test_without_strimzi_the_flow_is_connect_controlled() -> None:
    raw = _raw(None)
    del raw["replication"]["strimzi"]
    assert parse_config(raw).require_replication().strimzi is None
    assert "strimzi" not in config_as_data(parse_config(raw))["replication"]


@pytest.mark.parametrize("strimzi,key,words", [
    ({"name": "mm2"}, "replication.strimzi.namespace", "required key is missing"),
    ({"namespace": "Secondary", "name": "mm2"}, "replication.strimzi.namespace",
     "not a Kubernetes namespace"),
    ({"namespace": "s", "name": "mm2_x"}, "replication.strimzi.name", "not a Kubernetes object"),
    ({"namespace": "s", "name": "mm2", "reverse_name": "r"}, "replication.strimzi.reverse_name",
     "reverse_namespace"),
    ({"namespace": "s", "name": "mm2", "kubeconfig": "/no/such/kubeconfig"},
     "replication.strimzi.kubeconfig", "no such file"),
    ({"namespace": "s", "name": "mm2", "contxt": "lab"}, "replication.strimzi.contxt",
     "unknown key"),
])
def test_bad_strimzi_section_names_its_key(strimzi: dict[str, Any], key: str,
                                           words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_raw(strimzi))
    assert key in str(info.value) and words in str(info.value)


def test_strimzi_runs_mirrormaker2_only() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(_raw({"namespace": "s", "name": "mm2"}, kind="replicator"))
    assert "Strimzi runs MirrorMaker 2, not replicator" in str(info.value)

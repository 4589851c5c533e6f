"""The Strimzi lab's pure parts: the wrapper module that builds kube-apiserver, the
KafkaMirrorMaker2 resources the lab writes (both layouts), the connector configs the lab's
operator derives from them as Strimzi does, and the status it writes."""

from __future__ import annotations

from typing import Any

import pytest

from drctl.kafka.mm2_connectors import TOPICS_EXCLUDE, MirrorFlow
from drctl.lab.kube import wrapper_go_mod
from drctl.lab.strimzi_lab import connector_names, mirror_maker2_resource, reconciled
from drctl.lab.strimzi_operator import (
    InvalidResource,
    build_status,
    desired_connectors,
    offsets_key,
    paused_status,
    same_status,
    warning,
)

FLOW = MirrorFlow("primary", "secondary", "127.0.0.1:1", "127.0.0.1:2", fast=True)

K8S_GO_MOD = """module k8s.io/kubernetes

go 1.24.0

require (
	k8s.io/api v0.0.0
	github.com/x/y v1.2.3
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	k8s.io/kms => ./staging/src/k8s.io/kms
)
"""


def test_the_wrapper_replaces_every_staging_module_by_its_published_version() -> None:
    mod = wrapper_go_mod(K8S_GO_MOD, "1.34.4")
    assert "require k8s.io/kubernetes v1.34.4" in mod
    assert "\tk8s.io/api => k8s.io/api v0.34.4" in mod
    assert "\tk8s.io/client-go => k8s.io/client-go v0.34.4" in mod
    assert "\tk8s.io/kms => k8s.io/kms v0.34.4" in mod
    assert "github.com/x/y" not in mod  # only the staging modules are replaced


def test_a_go_mod_without_staging_modules_is_refused() -> None:
    from drctl.errors import LabError

    with pytest.raises(LabError, match="no staging module"):
        wrapper_go_mod("module k8s.io/kubernetes\n", "1.34.4")


@pytest.mark.parametrize("version", ["v1", "v1beta2"])
def test_the_operator_builds_the_labs_connectors_from_the_resource(version: str) -> None:
    """Each connector's config from the lab's resource is the plain lab's (REST) config plus
    what Strimzi adds: security.protocol per cluster, the mirror's patterns, its name."""
    resource = mirror_maker2_resource(FLOW, version, kafka_version="4.3.1",
                                      connect_group="g")
    resource["metadata"]["generation"] = 1
    wanted = desired_connectors(resource)
    names = connector_names(FLOW, version)
    assert sorted(wanted) == sorted(names.values())
    plain = {names["source"]: FLOW.source_connector(),
             names["checkpoint"]: FLOW.checkpoint_connector(),
             **({names["heartbeat"]: FLOW.heartbeat_connector()} if "heartbeat" in names
                else {})}
    spec = resource["spec"]
    target = spec["target"] if version == "v1" else spec["clusters"][1]
    # Strimzi gives every connector its clusters' `config:` too, prefixed.
    from_target = {f"target.cluster.{k}": str(v) for k, v in target["config"].items()}
    for name, config in plain.items():
        got = wanted[name].config
        assert wanted[name].state == "running"
        assert got["name"] == name
        assert got["source.cluster.security.protocol"] == "PLAINTEXT"
        assert got["target.cluster.security.protocol"] == "PLAINTEXT"
        assert got["topics.exclude"] == TOPICS_EXCLUDE and got["groups"] == ".*"
        extra = {"name", "source.cluster.security.protocol",
                 "target.cluster.security.protocol", "topics", "topics.exclude", "groups"}
        assert {k: v for k, v in got.items() if k not in extra} == \
            {**{k: v for k, v in config.items() if k not in extra}, **from_target}


def test_v1_has_no_heartbeat_connector_and_v1beta2_has_one() -> None:
    assert "heartbeat" not in connector_names(FLOW, "v1")
    assert connector_names(FLOW, "v1beta2")["heartbeat"] == \
        "primary->secondary.MirrorHeartbeatConnector"
    v1 = mirror_maker2_resource(FLOW, "v1", kafka_version="4.3.1", connect_group="g")
    v1["spec"]["mirrors"][0]["heartbeatConnector"] = {"config": {}}  # not in v1: ignored
    assert len(desired_connectors(v1)) == 2


def _v1(**mirror: Any) -> dict[str, Any]:
    return {"metadata": {"name": "mm2", "namespace": "secondary", "generation": 3},
            "spec": {"replicas": 1,
                     "target": {"alias": "dr", "bootstrapServers": "t:9092",
                                "config": {"client.id": "target-side"}},
                     "mirrors": [{"source": {"alias": "prod", "bootstrapServers": "s:9092"},
                                  **mirror}]}}


def test_v1_connector_config_overrides_the_clusters_and_patterns_override_both() -> None:
    resource = _v1(topicsPattern="orders|payments", topicsExcludePattern="secret.*",
                   groupsExcludePattern="tmp-.*",
                   sourceConnector={"tasksMax": 2, "state": "stopped", "config": {
                       "target.cluster.client.id": "mine", "topics": "ignored",
                       "sync.topic.configs.enabled": False, "offset.lag.max": 10}})
    source = desired_connectors(resource)["prod->dr.MirrorSourceConnector"]
    assert source.state == "stopped"
    assert source.config["target.cluster.client.id"] == "mine"  # connector over cluster
    assert source.config["topics"] == "orders|payments"  # the mirror's pattern wins
    assert source.config["topics.exclude"] == "secret.*"
    assert source.config["groups.exclude"] == "tmp-.*"
    assert source.config["tasks.max"] == "2"
    assert source.config["sync.topic.configs.enabled"] == "false"  # Java's spelling
    assert source.config["offset.lag.max"] == "10"
    assert source.config["producer.override.bootstrap.servers"] == "t:9092"
    assert source.config["connector.class"] == \
        "org.apache.kafka.connect.mirror.MirrorSourceConnector"


def test_v1beta2_clusters_override_the_connector_config_and_old_names_still_read() -> None:
    resource = {"metadata": {"name": "mm2", "namespace": "secondary", "generation": 1},
                "spec": {"connectCluster": "dr",
                         "clusters": [{"alias": "prod", "bootstrapServers": "s:9092"},
                                      {"alias": "dr", "bootstrapServers": "t:9092",
                                       "config": {"client.id": "target-side"}}],
                         "mirrors": [{"sourceCluster": "prod", "targetCluster": "dr",
                                      "topicsBlacklistPattern": "old.*",
                                      "sourceConnector": {"pause": True, "config": {
                                          "target.cluster.client.id": "mine"}},
                                      "heartbeatConnector": {}}]}}
    wanted = desired_connectors(resource)
    assert sorted(wanted) == ["prod->dr.MirrorHeartbeatConnector",
                              "prod->dr.MirrorSourceConnector"]
    source = wanted["prod->dr.MirrorSourceConnector"]
    assert source.config["target.cluster.client.id"] == "target-side"  # cluster over connector
    assert source.config["topics.exclude"] == "old.*"
    assert source.state == "paused"  # the deprecated `pause: true`


def test_a_mirror_naming_an_undefined_cluster_is_invalid() -> None:
    resource = {"metadata": {"name": "mm2", "namespace": "s"},
                "spec": {"clusters": [{"alias": "a", "bootstrapServers": "x"}],
                         "mirrors": [{"sourceCluster": "a", "targetCluster": "nowhere",
                                      "sourceConnector": {}}]}}
    with pytest.raises(InvalidResource, match="nowhere"):
        desired_connectors(resource)


def test_the_offsets_key_is_strimzis() -> None:
    assert offsets_key("prod->dr.MirrorSourceConnector") == "prod--dr.MirrorSourceConnector.json"


def test_status_ready_notready_and_paused() -> None:
    resource = _v1(sourceConnector={})
    entry = {"name": "prod->dr.MirrorSourceConnector", "connector": {"state": "RUNNING"},
             "tasks": [{"id": 0, "state": "RUNNING"}]}
    ok = build_status(resource, [entry], None, [], "http://c")
    assert ok["observedGeneration"] == 3
    assert [c["type"] for c in ok["conditions"]] == ["Ready"]
    assert ok["connectors"] == [entry]
    bad = build_status(resource, [], ("InvalidResourceException", "no"), [], "http://c")
    assert bad["conditions"][0]["type"] == "NotReady"
    assert bad["conditions"][0]["reason"] == "InvalidResourceException"
    assert "connectors" not in bad
    resource["status"] = ok
    paused = paused_status(resource)
    assert paused["observedGeneration"] == 3
    assert [c["type"] for c in paused["conditions"]] == ["ReconciliationPaused"]
    later = build_status(resource, [entry], None, [], "http://c")
    later["conditions"][0]["lastTransitionTime"] = "2099-01-01T00:00:00Z"
    assert same_status(ok, later)  # a transition time alone is no change
    assert not same_status(ok, bad)


def test_reconciled_needs_the_generation_ready_and_each_wanted_state() -> None:
    resource = _v1(sourceConnector={})
    name = "prod->dr.MirrorSourceConnector"
    entry = {"name": name, "connector": {"state": "RUNNING"}, "tasks": []}
    resource["status"] = build_status(resource, [entry], None, [], "u")
    assert reconciled(resource, {name: "RUNNING"})
    assert not reconciled(resource, {name: "STOPPED"})
    resource["metadata"]["generation"] = 4  # a change the operator has not seen yet
    assert not reconciled(resource, {name: "RUNNING"})
    resource["metadata"]["generation"] = 3
    entry["tasks"] = [{"id": 0, "state": "FAILED"}]
    assert not reconciled(resource, {name: "RUNNING"})


def test_a_refused_offsets_request_is_a_warning_condition() -> None:
    cond = warning("AlterOffsets", "Connector is not in STOPPED state")
    assert (cond["type"], cond["status"], cond["reason"]) == ("Warning", "True", "AlterOffsets")

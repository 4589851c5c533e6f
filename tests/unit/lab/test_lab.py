"""The lab's state and config (drctl/lab/lab.py): lab.json files written by older drctl
versions still load, the config `lab up` writes points at the lab's Spark cluster when it has
one, and MirrorMaker 2's old key names only on a Kafka that reads them."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from drctl.config import load_config
from drctl.errors import LabError
from drctl.lab.lab import NO_SERVER, OWN_SERVER, Lab, LabPorts, LabState


def test_old_lab_json_loads_as_not_secure(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    lab.save_state(LabState(LabPorts(1, 3, 5), "4.3.1", "/lib", "maven", True, {"primary": "x"}))
    raw = json.loads(lab.state_file.read_text())
    del raw["secure"]  # written before --secure existed
    lab.state_file.write_text(json.dumps(raw))
    state = lab.load_state()
    assert state.secure is False
    assert lab.client_properties(state, "primary") == {"bootstrap.servers": "127.0.0.1:1"}


def _state(tmp_path: Path, workers: int) -> LabState:
    return LabState(LabPorts(25100, 25102, 25104, 25105), "4.3.1", str(tmp_path / "lib"),
                    "maven", names_kept=True, cluster_ids={}, spark_workers=workers)


def test_config_points_at_the_cluster(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    config = load_config(lab.write_config(_state(tmp_path, 2)))
    assert config.spark.master == "spark://127.0.0.1:25105"
    assert config.spark.conf["spark.driver.host"] == "127.0.0.1"
    assert config.spark.conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert config.spark.conf["spark.executor.memory"] == "512m"


def test_config_without_a_cluster_is_local(tmp_path: Path) -> None:
    config = load_config(Lab(tmp_path).write_config(_state(tmp_path, 0)))
    assert config.spark.master == "local[2]"
    assert not config.spark.conf


def test_lab_json_from_before_spark_still_loads_and_keeps_local_jobs(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    old = asdict(_state(tmp_path, 0))
    for key in ("spark_workers", "spark_connect"):
        del old[key]
        del old["ports"][key.replace("workers", "master")]
    lab.state_file.write_text(json.dumps(old))
    state = lab.load_state()
    assert (state.spark_workers, state.spark_connect) == (0, NO_SERVER)
    assert state.ports.spark_master == LabPorts().spark_master
    assert load_config(lab.write_config(state)).spark.remote is None


def test_config_points_at_the_labs_spark_connect_server_or_a_shared_one(
        tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    own = replace(_state(tmp_path, 0), ports=LabPorts(1, 3, 5, 7, 9), spark_connect=OWN_SERVER)
    assert load_config(lab.write_config(own)).spark.remote == "sc://127.0.0.1:9"
    shared = replace(own, spark_connect="sc://127.0.0.1:23190")
    assert load_config(lab.write_config(shared)).spark.remote == "sc://127.0.0.1:23190"
    # A Spark cluster takes the gap jobs instead.
    config = load_config(lab.write_config(replace(own, spark_workers=2)))
    assert (config.spark.remote, config.spark.master) == (None, "spark://127.0.0.1:7")


def test_old_key_names_on_kafka_4_are_refused_before_anything_starts(tmp_path: Path) -> None:
    """`lab up --legacy-keys` on a Kafka 4 lab: 4.0 dropped topics.blacklist, so its
    connectors would copy what the lab leaves out; refused, the lab as it was."""
    lab = Lab(tmp_path)
    lab.save_state(_state(tmp_path, 0))
    with pytest.raises(LabError, match="Kafka 4.3.1 no longer reads topics.blacklist"):
        lab.up(ports=LabPorts(25100, 25102, 25104, 25105), legacy_keys=True)
    assert lab.load_state().legacy_keys is False
    assert not any(lab.process(c).is_running() for c in ("primary", "secondary", "connect"))


def test_lab_json_from_before_legacy_keys_loads_with_the_new_names(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    old = asdict(_state(tmp_path, 0))
    del old["legacy_keys"]
    lab.state_file.write_text(json.dumps(old))
    state = lab.load_state()
    assert state.legacy_keys is False
    assert "topics.exclude" in lab.flow(state).source_connector()
    assert "topics.blacklist" in lab.flow(replace(state, legacy_keys=True)).source_connector()

"""The lab's state and config (drctl/lab/lab.py): lab.json files written by older drctl
versions still load, and the config `lab up` writes points at the lab's Spark cluster
when it has one."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from drctl.config import load_config
from drctl.lab.lab import Lab, LabPorts, LabState


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


def test_lab_json_from_before_spark_still_loads(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    old = asdict(_state(tmp_path, 0))
    del old["spark_workers"]
    del old["ports"]["spark_master"]
    lab.state_file.write_text(json.dumps(old))
    state = lab.load_state()
    assert state.spark_workers == 0
    assert state.ports.spark_master == LabPorts().spark_master

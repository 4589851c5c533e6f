"""The lab's Spark cluster without starting it: port layout, the config `lab up` writes, old
lab.json files, and the note a non-local master adds to a gap plan."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from drctl.config import load_config
from drctl.gap.plan import DIFF, GapPlan
from drctl.gap.runner import note_shared_output
from drctl.lab.lab import Lab, LabPorts, LabState
from drctl.lab.spark_cluster import SparkCluster, SparkClusterPorts, alive_workers


def test_ports_master_then_uis_one_per_worker() -> None:
    ports = SparkClusterPorts(25105)
    assert ports.master_ui == 25106
    assert ports.fixed(2) == [25105, 25106, 25107, 25108]
    assert ports.fixed(0) == [25105, 25106]
    # The test fixture's lab i uses base+10i .. base+10i+4 for Kafka: two workers stay below
    # the next lab's ports.
    assert max(ports.fixed(2)) < 25100 + 10


def test_default_spark_ports_clear_of_the_kafka_defaults() -> None:
    defaults = LabPorts()
    kafka = {defaults.primary, defaults.controller(defaults.primary), defaults.secondary,
             defaults.controller(defaults.secondary), defaults.connect}
    assert not kafka & set(SparkClusterPorts(defaults.spark_master).fixed(8))


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


def test_down_finds_workers_by_directory(tmp_path: Path) -> None:
    for name in ("spark-worker-1", "spark-worker-3", "spark-worker-x", "primary"):
        (tmp_path / name).mkdir()
    cluster = SparkCluster(tmp_path, SparkClusterPorts(25105))
    assert cluster.known_workers() == [1, 3]
    assert [p.name for p in cluster.processes()] == ["spark-master", "spark-worker-1",
                                                      "spark-worker-3"]
    assert cluster.down() == []  # nothing running: nothing stopped, no error


def test_alive_workers_counts_only_alive() -> None:
    assert alive_workers({"workers": [{"state": "ALIVE"}, {"state": "DEAD"},
                                      {"state": "ALIVE"}]}) == 2
    assert alive_workers({}) == 0


def _plan(out_dir: str) -> GapPlan:
    return GapPlan(kind=DIFF, replication_kind="mirrormaker2", source_cluster="primary",
                   target_cluster="secondary", source_kafka={}, target_kafka={}, topics=[],
                   out_dir=out_dir)


def test_a_cluster_master_notes_shared_output_once() -> None:
    plan = _plan("/data/gap")
    told: list[str] = []
    note_shared_output(plan, "spark://10.0.0.1:7077", told.append)
    note_shared_output(plan, "spark://10.0.0.1:7077", told.append)
    assert len(plan.notes) == 1 and told == plan.notes
    assert "/data/gap" in plan.notes[0] and "driver reads" in plan.notes[0]


def test_local_masters_add_no_note() -> None:
    plan = _plan("/data/gap")
    for master in ("local", "local[2]", "local[*]"):
        note_shared_output(plan, master)
    assert plan.notes == []

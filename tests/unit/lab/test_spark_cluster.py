"""The lab's Spark cluster without starting it (drctl/lab/spark_cluster.py): port
layout, workers found by directory, alive workers counted."""

from __future__ import annotations

from pathlib import Path

from drctl.lab.lab import LabPorts
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

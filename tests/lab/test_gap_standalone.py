"""The gap job on a Spark standalone cluster (`lab up --spark-workers 2`): executors in their own
JVMs read Kafka with the connector jars drctl ships them and write where the driver reads. The
same plan gives, record by record, what local mode gives and what the test produced."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from drctl.config import load_config
from drctl.context import OpsContext
from drctl.gap.planner import plan_gap_analysis
from drctl.gap.runner import run_gap_analysis
from drctl.lab.spark_cluster import APP_NAME
from tests.conftest import RunningLab
from tests.lab.test_gap_e2e import check, ident, scenario

pytestmark = [pytest.mark.lab, pytest.mark.spark]


def test_gap_on_a_standalone_cluster_equals_local_mode(lab_spark: RunningLab, ns: str,
                                                       tmp_path: Path) -> None:
    lab = lab_spark
    cluster = lab.lab.spark_cluster(lab.state.ports)
    status = cluster.status()
    assert status is not None and status["aliveworkers"] == 2, status
    config = load_config(lab.config_file)
    assert config.spark.master == f"spark://127.0.0.1:{lab.state.ports.spark_master}"
    try:
        topic, gap, f_point, _ = scenario(lab, ns, failover_topic_offsets=False)
        plan = plan_gap_analysis(OpsContext.from_config(config), [topic],
                                 target_end={topic: f_point}, check_order=True,
                                 out_dir=tmp_path / "cluster")
        local_plan = dataclasses.replace(plan, out_dir=str(tmp_path / "local"),
                                         notes=list(plan.notes))
        on_cluster = run_gap_analysis(plan, config.spark)
        local = run_gap_analysis(local_plan,
                                 dataclasses.replace(config.spark, master="local[2]", conf={}))
    finally:
        lab.lab.heal("replication")

    check(on_cluster, gap)
    check(local, gap)
    rows = [(ident(r), r.classification, r.flagged) for r in on_cluster.iter_records()]
    assert rows == [(ident(r), r.classification, r.flagged) for r in local.iter_records()]
    assert on_cluster.partitions == local.partitions
    # Only the cluster run says where the results must live.
    summary = json.loads((tmp_path / "cluster" / "summary.json").read_text())
    shared = [n for n in summary["notes"] if "executors write the results" in n]
    assert len(shared) == 1 and str(tmp_path / "cluster") in shared[0]
    assert local.notes == [n for n in on_cluster.notes if n not in shared]

    # It really ran on the cluster: the master lists the finished application, and each
    # worker ran an executor for it (the worker's work dir holds its logs).
    status = cluster.status()
    assert status is not None
    apps = [a for a in status["completedapps"] if a["name"] == APP_NAME]
    assert len(apps) == 1, status["completedapps"]
    for index in (1, 2):
        logs = list((cluster.worker(index).workdir / "work" / apps[0]["id"]).glob("*/stderr"))
        assert logs, f"worker {index} ran no executor for {apps[0]['id']}"

"""The gap job's plan by size (drctl/gap/job.py): the SQL settings a session gets for a small
plan and for a large one, without Spark."""

from __future__ import annotations

from typing import Any

import pytest

from drctl.gap import job
from drctl.gap.plan import GapPlan, TopicPlan


def _plan(records_per_side: int) -> GapPlan:
    half = records_per_side // 2
    topic = TopicPlan("orders", "orders", [0, 1], {0: 0, 1: 0}, {0: half, 1: half},
                      {0: 0, 1: 0}, {0: half, 1: half}, True)
    return GapPlan("diff", "mirrormaker2", "primary", "secondary", {}, {}, [topic], "/nowhere")


class _Conf:
    def __init__(self) -> None:
        self.set_to: dict[str, str] = {}
        self.conf = self

    def set(self, key: str, value: str) -> None:
        self.set_to[key] = value


@pytest.fixture
def no_cores_asked(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    asked: list[Any] = []

    def parallelism(spark: Any) -> int:
        asked.append(spark)
        return 2

    monkeypatch.setattr(job, "default_parallelism", parallelism)
    return asked


def test_a_small_plan_runs_interpreted_without_asking_the_server_for_its_cores(
        no_cores_asked: list[Any]) -> None:
    spark = _Conf()
    small = _plan(job.SMALL_PLAN_ROWS // 2 - 10)  # both sides: just under the threshold
    assert job.small_plan(small)
    job.plan_session(spark, small, {"spark.sql.adaptive.enabled": "true"})  # type: ignore[arg-type]
    assert spark.set_to["spark.sql.codegen.wholeStage"] == "false"
    assert spark.set_to["spark.sql.codegen.factoryMode"] == "NO_CODEGEN"
    assert spark.set_to["spark.sql.constraintPropagation.enabled"] == "false"
    assert spark.set_to["spark.sql.shuffle.partitions"] == "2"
    assert "spark.sql.adaptive.enabled" not in spark.set_to  # the config's own setting stays
    assert no_cores_asked == []


def test_a_large_plan_gets_every_setting_back_on_a_session_a_small_one_used(
        no_cores_asked: list[Any]) -> None:
    spark = _Conf()
    large = _plan(job.SMALL_PLAN_ROWS + 10)
    assert not job.small_plan(large)
    job.plan_session(spark, large, {})  # type: ignore[arg-type]
    assert spark.set_to["spark.sql.codegen.wholeStage"] == "true"
    assert spark.set_to["spark.sql.codegen.factoryMode"] == "FALLBACK"
    assert spark.set_to["spark.sql.constraintPropagation.enabled"] == "true"
    assert spark.set_to["spark.sql.adaptive.enabled"] == "true"
    assert spark.set_to["spark.sql.shuffle.partitions"] == "8"  # 4 a core
    assert no_cores_asked == [spark]

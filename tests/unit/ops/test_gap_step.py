"""The gap step's Spark phases become lines (drctl/ops/one_way/gap_step.py); a cluster lost mid-job
is failback's to wait out (tests/unit/test_rerun.py)."""

from __future__ import annotations

from drctl.gap.runner import GapJobLostKafka
from drctl.ops.one_way.gap_step import PhaseLines
from drctl.progress import Ticker
from drctl.rerun import dropped
from tests.unit.support import FakeClock


def test_a_gap_job_that_lost_kafka_is_a_dropped_cluster() -> None:
    lost = GapJobLostKafka("The gap-analysis Spark job lost Kafka cluster 'secondary' "
                           "mid-job (TimeoutException).", None, ("secondary",))
    assert dropped(lost)


def test_spark_phases_become_lines() -> None:
    clock, lines = FakeClock(), []
    phases = PhaseLines(lines.append, Ticker(first_s=10, clock=clock))
    phases.update(description="Starting Spark", completed=0, total=None)
    phases.update(description="Comparing fingerprints", completed=0, total=None)
    phases.update(description="Comparing fingerprints (Spark tasks)", completed=3, total=40)
    clock.now = 11
    phases.update(description="Comparing fingerprints (Spark tasks)", completed=30, total=40)
    phases.update(description="Comparing fingerprints (Spark tasks)", completed=31, total=40)
    assert lines == ["Spark: Starting Spark", "Spark: Comparing fingerprints",
                     "Spark: Comparing fingerprints (Spark tasks): 30 of 40 task(s)"]

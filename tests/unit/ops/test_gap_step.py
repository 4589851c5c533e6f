"""The gap step's Spark job (drctl/ops/gap_step.py): it runs again when a cluster dropped
mid-job, within its timeout (the job runner is a fake function), and its phases become
lines."""

from __future__ import annotations

import pytest

from drctl.errors import ExitStatus, TimedOut, Unreachable
from drctl.gap.runner import GapJobFailed, GapJobLostKafka
from drctl.ops.gap_step import PhaseLines, run_job_with_retries
from drctl.progress import Ticker
from drctl.retry import RetryPolicy
from tests.unit.support import FakeClock


def _lost(cluster: str = "secondary") -> GapJobLostKafka:
    return GapJobLostKafka(f"The gap-analysis Spark job lost Kafka cluster '{cluster}' "
                           "mid-job (TimeoutException).", None, (cluster,))


def test_the_gap_job_runs_again_after_a_cluster_dropped() -> None:
    clock, lines, given = FakeClock(), [], []

    def job(left: float) -> str:
        given.append(left)
        clock.now += 20  # each run takes 20 s
        if len(given) < 3:
            raise _lost()
        return "result"

    assert run_job_with_retries(job, RetryPolicy(), 600, ("primary", "secondary"),
                                lines.append, sleep=clock.sleep, clock=clock) == "result"
    assert clock.slept == [1.0, 2.0]  # the policy's backoff
    assert given == [600, 579, 557]  # each run gets what is left of --timeout
    assert len(lines) == 2 and "lost Kafka cluster 'secondary'" in lines[0]
    assert "again in 1s (attempt 2 of 16)" in lines[0]


def test_a_job_that_keeps_losing_its_cluster_is_exit_4_naming_it() -> None:
    clock = FakeClock()

    def job(_: float) -> str:
        clock.now += 10
        raise _lost()

    with pytest.raises(Unreachable) as info:
        run_job_with_retries(job, RetryPolicy(attempts=3), 600, ("primary", "secondary"),
                             lambda _: None, sleep=clock.sleep, clock=clock)
    assert info.value.exit_status == ExitStatus.UNREACHABLE
    assert "lost Kafka ('secondary') 3 time(s)" in info.value.message
    assert "Bring 'secondary' back" in (info.value.hint or "")


def test_retries_stay_within_the_timeout() -> None:
    clock, runs = FakeClock(), []

    def job(left: float) -> str:
        runs.append((clock.now, left))
        clock.now += 50
        raise _lost()

    with pytest.raises(Unreachable):
        run_job_with_retries(job, RetryPolicy(), 120, ("primary", "secondary"),
                             lambda _: None, sleep=clock.sleep, clock=clock)
    # The third run gets the 17 s left; a fourth would start past 120 s.
    assert runs == [(0, 120), (51, 69), (103, 17)]


@pytest.mark.parametrize("error", [
    GapJobFailed("The gap-analysis Spark job failed: KeyError: 'topics'"),
    TimedOut("The gap-analysis Spark job did not finish in 30m"),
])
def test_other_failures_are_not_retried(error: Exception) -> None:
    calls = []

    def job(_: float) -> str:
        calls.append(1)
        raise error

    with pytest.raises(type(error)):
        run_job_with_retries(job, RetryPolicy(), 600, ("primary", "secondary"),
                             lambda _: None, sleep=lambda _: None)
    assert calls == [1]


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

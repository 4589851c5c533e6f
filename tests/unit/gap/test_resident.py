"""Which gap jobs the resident driver takes (the driver itself runs in tests/lab/test_gap_e2e)."""

from __future__ import annotations

import os

import pytest

from drctl.gap.plan import SparkJobSettings
from drctl.gap.resident import ENV_SWITCH, ResidentDriver, wanted


@pytest.mark.parametrize("value, on", [("1", True), ("on", True), ("0", False), ("", False)])
def test_the_switch(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    monkeypatch.setenv(ENV_SWITCH, value)
    assert wanted(SparkJobSettings(master="local[2]"), recording=False) is on


def test_only_local_quiet_jobs_with_the_class_archive_settled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SWITCH, "1")
    assert wanted(SparkJobSettings(master="local[*]"), recording=False)
    # A cluster's executors are shared; --debug streams Spark's output to the operator; the
    # class archive is written as the recording JVM exits.
    assert not wanted(SparkJobSettings(master="spark://127.0.0.1:7077"), recording=False)
    assert not wanted(SparkJobSettings(master="local[2]", debug=True), recording=False)
    assert not wanted(SparkJobSettings(master="local[2]"), recording=True)


def test_off_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    assert not wanted(SparkJobSettings(master="local[2]"), recording=False)


def test_a_driver_whose_drctl_is_gone_removes_its_home() -> None:
    # A killed drctl closes the driver's stdin and cannot clean up: the driver does (no job
    # was sent, so no JVM starts).
    driver = ResidentDriver(SparkJobSettings(master="local[2]"), dict(os.environ))
    try:
        assert driver.home.is_dir()
        assert driver.proc.stdin is not None
        driver.proc.stdin.close()
        assert driver.proc.wait(timeout=60) == 0
        assert not driver.home.exists()
    finally:
        driver.kill()
        driver.stop()

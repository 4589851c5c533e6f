"""Work started in the background hands back its result, or its error, to whoever waits."""

from __future__ import annotations

import threading

import pytest

from drctl.background import in_background


def test_the_result_is_handed_back_and_the_work_ran_on_another_thread() -> None:
    ran_on: list[str] = []

    def work() -> int:
        ran_on.append(threading.current_thread().name)
        return 42

    wait = in_background(work, name="drctl-test-work")
    assert wait() == 42
    assert ran_on == ["drctl-test-work"]


def test_an_error_is_raised_to_the_caller_when_it_waits() -> None:
    def work() -> int:
        raise ValueError("the cluster said no")

    wait = in_background(work)
    with pytest.raises(ValueError, match="the cluster said no"):
        wait()

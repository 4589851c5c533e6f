"""The one wait loop (`wait_for`): it returns what the poll found, says where it stands
between polls, and times out on the clock it is given."""

from __future__ import annotations

import pytest

from drctl.retry import WaitTimedOut, wait_for


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_wait_for_returns_the_first_answer_and_reports_between_polls() -> None:
    answers = iter([None, None, "done"])
    waits: list[float] = []
    clock = Clock()
    assert wait_for(lambda: next(answers), deadline_s=10, interval_s=2,
                    on_wait=lambda: waits.append(clock()), sleep=clock.sleep,
                    clock=clock) == "done"
    assert waits == [0.0, 2.0] and clock.now == 4.0


def test_wait_for_times_out_after_its_deadline_and_says_how_long() -> None:
    clock = Clock()
    polls: list[float] = []

    def never() -> None:
        polls.append(clock())
        return None

    with pytest.raises(WaitTimedOut) as info:
        wait_for(never, deadline_s=5, interval_s=2, sleep=clock.sleep, clock=clock)
    assert polls == [0.0, 2.0, 4.0, 6.0] and info.value.waited_s == 6.0


def test_a_false_answer_is_an_answer() -> None:
    assert wait_for(lambda: False, deadline_s=1) is False

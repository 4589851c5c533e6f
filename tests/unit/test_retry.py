"""drctl/retry.py: the retry policy (Debezium's backoff, bounded by a deadline) and the
one wait loop (`wait_for`): it returns what the poll found, says where it stands between
polls, and times out on the clock it is given."""

from __future__ import annotations

import pytest

from drctl.retry import RetriesExhausted, RetryPolicy, WaitTimedOut, retry_call, wait_for
from tests.unit.support import FakeClock


def test_default_policy_is_debeziums() -> None:
    delays = list(RetryPolicy().delays())
    assert len(delays) == 15  # 16 attempts
    assert delays[:8] == [1, 2, 4, 8, 16, 32, 64, 120] and set(delays[7:]) == {120}


def test_retry_succeeds_after_failures_with_backoff() -> None:
    calls, slept = [], []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("down")
        return "up"

    assert retry_call(flaky, RetryPolicy(initial_s=0.5), sleep=slept.append) == "up"
    assert slept == [0.5, 1.0]


def test_retry_gives_up_at_deadline() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    def sleep(s: float) -> None:
        now[0] += s

    def down() -> None:
        raise ConnectionError("down")

    with pytest.raises(RetriesExhausted) as info:
        retry_call(down, RetryPolicy(deadline_s=10), sleep=sleep, clock=clock)
    # 1 + 2 + 4 = 7 s slept; the next wait (8 s) would pass the 10 s deadline: cut to the
    # 3 s left, so that one last attempt sees what is back by the deadline.
    assert info.value.attempts == 5 and now[0] == 10
    # What it measured, and under which deadline: the error a command ends on reports both.
    assert (info.value.elapsed_s, info.value.deadline_s) == (10, 10)


def test_the_wait_cut_at_the_deadline_is_in_tenths_and_none_when_too_short() -> None:
    now, slept = [0.0], []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    def down() -> None:
        now[0] += 0.37  # each attempt takes a while
        raise ConnectionError("down")

    with pytest.raises(RetriesExhausted):
        retry_call(down, RetryPolicy(deadline_s=2), sleep=sleep, clock=lambda: now[0])
    assert slept == [1.0, 0.2]  # 0.37 + 1 + 0.37 = 1.74: 0.26 left, cut to 0.2


def test_wait_for_returns_the_first_answer_and_reports_between_polls() -> None:
    answers = iter([None, None, "done"])
    waits: list[float] = []
    clock = FakeClock()
    assert wait_for(lambda: next(answers), deadline_s=10, interval_s=2,
                    on_wait=lambda: waits.append(clock()), sleep=clock.sleep,
                    clock=clock) == "done"
    assert waits == [0.0, 2.0] and clock.now == 4.0


def test_wait_for_times_out_after_its_deadline_and_says_how_long() -> None:
    clock = FakeClock()
    polls: list[float] = []

    def never() -> None:
        polls.append(clock())
        return None

    with pytest.raises(WaitTimedOut) as info:
        wait_for(never, deadline_s=5, interval_s=2, sleep=clock.sleep, clock=clock)
    assert polls == [0.0, 2.0, 4.0, 6.0] and info.value.waited_s == 6.0


def test_a_false_answer_is_an_answer() -> None:
    assert wait_for(lambda: False, deadline_s=1) is False


def test_under_a_deadline_attempts_do_not_end_the_retries_before_it() -> None:
    """--deadline is how long to retry: a fast policy's 16 attempts (1 s waits) would end
    after 15 s of a 20 s deadline, and miss a broker back at 18 s."""
    policy = RetryPolicy(initial_s=0.2, max_s=1.0).with_deadline(20)
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    def down() -> None:
        if now[0] < 18:
            raise ConnectionError("down")

    retry_call(down, policy, sleep=sleep, clock=lambda: now[0])
    assert 18 <= now[0] <= 19
    assert RetryPolicy(attempts=3).with_deadline(1).attempts == 3  # never fewer
    # Waits of no time fill no deadline: the attempts decide (and the sum ends).
    assert RetryPolicy(initial_s=0, attempts=2).with_deadline(30).attempts == 2

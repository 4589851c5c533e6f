"""One retry policy for everything that talks to a cluster or a Connect worker.

Exponential backoff with a cap, a maximum number of attempts and an optional overall deadline
(for interactive use, where 16 doublings up to 120 s would be half an hour).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

# However long a deadline, a policy under it makes at most this many attempts.
_MAX_ATTEMPTS = 10_000


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff; defaults after Debezium's reconnect policy (1 s doubling to 120 s,
    16 attempts)."""

    initial_s: float = 1.0
    multiplier: float = 2.0
    max_s: float = 120.0
    attempts: int = 16
    deadline_s: float | None = None

    def with_deadline(self, deadline_s: float | None) -> RetryPolicy:
        """The same policy under another overall deadline (None keeps this one's). The
        deadline is what the operator chose (a command's --deadline): attempts do not end
        the retries before it — there are as many as its waits fill."""
        if deadline_s is None:
            return self
        attempts, waited = 1, 0.0
        # Waits of no time (tests run policies with 0 s) fill no deadline: attempts decide.
        for delay in RetryPolicy(self.initial_s, self.multiplier, self.max_s,
                                 attempts=_MAX_ATTEMPTS).delays():
            if waited >= deadline_s or delay <= 0:
                break
            waited += delay
            attempts += 1
        return RetryPolicy(self.initial_s, self.multiplier, self.max_s,
                           max(self.attempts, attempts), deadline_s)

    def delays(self) -> Iterator[float]:
        """The waits between attempts: attempts - 1 of them."""
        delay = self.initial_s
        for _ in range(self.attempts - 1):
            yield min(delay, self.max_s)
            delay *= self.multiplier

    def scaled(self, factor: float) -> RetryPolicy:
        """The same shape with every duration multiplied (tests run it fast)."""
        return RetryPolicy(self.initial_s * factor, self.multiplier, self.max_s * factor,
                           self.attempts,
                           None if self.deadline_s is None else self.deadline_s * factor)


# A wait shorter than this before the deadline is not worth one more attempt.
_LAST_WAIT_S = 0.1


def time_left(policy: RetryPolicy, started: float, clock: Callable[[], float] = time.monotonic,
              *, cap_s: float) -> float:
    """How long one attempt may take: `cap_s`, or less when the policy's deadline (counted
    from `started`) comes first — never under a second, so that an attempt can answer."""
    if policy.deadline_s is None:
        return cap_s
    return max(1.0, min(cap_s, policy.deadline_s - (clock() - started)))


class RetriesExhausted(Exception):
    def __init__(self, last: BaseException, attempts: int, elapsed_s: float,
                 deadline_s: float | None = None) -> None:
        super().__init__(f"gave up after {attempts} attempt(s) in {elapsed_s:.1f} s: {last}")
        self.last = last
        self.attempts = attempts
        self.elapsed_s = elapsed_s
        self.deadline_s = deadline_s  # the policy's, when it had one


def retry_call(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
    on_retry: Callable[[int, BaseException, float], None] | None = None,
    give_up: Callable[[BaseException], bool] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Call `fn` until it succeeds; raise `RetriesExhausted` when attempts or deadline run out
    or `give_up` says the error is not worth another try. The last wait is cut to end at the
    deadline: something back by then is seen by one last attempt."""
    started = clock()
    delays = policy.delays()
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except retry_on as exc:
            if give_up is not None and give_up(exc):
                raise RetriesExhausted(exc, attempt, clock() - started,
                                       policy.deadline_s) from exc
            delay = next(delays, None)
            elapsed = clock() - started
            if delay is not None and policy.deadline_s is not None:
                left = policy.deadline_s - elapsed
                # In tenths: the line that announces the wait says "retrying in 0.8s".
                delay = None if left < _LAST_WAIT_S else min(delay, int(left * 10) / 10)
            if delay is None:
                raise RetriesExhausted(exc, attempt, elapsed, policy.deadline_s) from exc
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            sleep(delay)


class WaitTimedOut(Exception):
    """`wait_for` ran out of time; `last` is what the last poll returned (None, or the value
    it rejected), for the caller's error message."""

    def __init__(self, waited_s: float) -> None:
        super().__init__(f"not done after {waited_s:.1f} s")
        self.waited_s = waited_s


def wait_for(poll: Callable[[], T | None], *, deadline_s: float, interval_s: float = 0.5,
             on_wait: Callable[[], object] | None = None,
             sleep: Callable[[float], None] = time.sleep,
             clock: Callable[[], float] = time.monotonic) -> T:
    """Call `poll` until it returns something other than None, and return that; between
    polls sleep `interval_s` and call `on_wait` (which says where the wait stands, when it
    wants to). `WaitTimedOut` once `deadline_s` has passed: the caller says what was left.
    The one wait-until-a-condition loop of drctl, beside `retry_call`'s backoff."""
    started = clock()
    while True:
        found = poll()
        if found is not None:
            return found
        if clock() - started > deadline_s:
            raise WaitTimedOut(clock() - started)
        if on_wait is not None:
            on_wait()
        sleep(interval_s)

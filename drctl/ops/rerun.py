"""Running a procedure again when a cluster drops in the middle of it.

Failback and the return to protection record every step in the failover marker, so running
them again continues where they stopped — that is how an operator recovers by hand. A broker
restart, a leader moving, a network blip are common during an incident: instead of failing
with a raw read timeout, the procedure is run again under the retry policy, within its
`--timeout`, saying on stderr which cluster stopped answering. When the cluster does not come
back in time the error names it (exit 4).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

from drctl.context import OpsContext
from drctl.errors import Unreachable
from drctl.kafka.clients import NoAnswer, describe
from drctl.kafka.records import ReadTimeout
from drctl.kafka.retriable import is_retriable
from drctl.retry import RetriesExhausted, retry_call
from drctl.timeparse import format_duration

T = TypeVar("T")

# Errors that mean "a cluster did not answer", not "this cannot work": another run may pass.
# Beside them, every broker answer that passes once a leader or coordinator moved
# (kafka/retriable.py: a restarted broker's leader epochs among them).
_DROPPED = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
            KafkaError.REQUEST_TIMED_OUT, KafkaError._MSG_TIMED_OUT, KafkaError._WAIT_COORD}


class ClusterDropped(Exception):
    """A cluster stopped answering mid-procedure; `silent` names the ones that do not answer
    now (empty: they answer again)."""

    def __init__(self, cause: BaseException, silent: Sequence[str]) -> None:
        who = " and ".join(f"'{c}'" for c in silent) or "a cluster"
        super().__init__(f"{who} stopped answering ({_short(cause)})")
        self.cause = cause
        self.silent = tuple(silent)


def dropped(exc: BaseException) -> bool:
    """Whether `exc` says a cluster did not answer (worth running the procedure again)."""
    if isinstance(exc, ReadTimeout | Unreachable | TimeoutError):
        return True
    if isinstance(exc, KafkaException) and exc.args:
        err = exc.args[0]
        return isinstance(err, KafkaError) and (err.code() in _DROPPED or is_retriable(exc))
    return False


def silent_clusters(ctx: OpsContext, clusters: Sequence[str]) -> list[str]:
    """The clusters among `clusters` that do not answer one metadata request now."""
    out = []
    for name in clusters:
        try:
            describe(ctx.clients(name), timeout_s=5.0)
        except (KafkaException, TimeoutError, NoAnswer):
            out.append(name)
    return out


def rerun_while_dropped(run: Callable[[], T], ctx: OpsContext, clusters: Sequence[str],
                        timeout_s: float, what: str, *,
                        started: Callable[[], bool] = lambda: True,
                        sleep: Callable[[float], None] = time.sleep,
                        clock: Callable[[], float] = time.monotonic) -> T:
    """`run()` until it succeeds; after a failure that says a cluster dropped, again under
    the retry policy within `timeout_s`. Other failures end it at once, and so does any
    failure before `started()` says the procedure got going: a cluster down when it begins
    is the operator's to bring back, not a blip to wait out."""
    def once() -> T:
        try:
            return run()
        except Exception as exc:
            if not dropped(exc) or not started():
                raise
            ctx.reconnect()
            raise ClusterDropped(exc, silent_clusters(ctx, clusters)) from exc

    def on_retry(attempt: int, exc: BaseException, delay: float) -> None:
        ctx.notify(f"{exc}; running {what} again in {format_duration(delay)} (it continues after "
               f"the last step recorded; attempt {attempt + 1})")

    try:
        return retry_call(once, ctx.config.retry.with_deadline(timeout_s),
                          retry_on=(ClusterDropped,), on_retry=on_retry, sleep=sleep,
                          clock=clock)
    except RetriesExhausted as exc:
        last = exc.last
        assert isinstance(last, ClusterDropped)
        silent = last.silent or tuple(clusters)
        who = " and ".join(f"'{c}'" for c in silent)
        raise Unreachable(
            f"{what.capitalize()} stopped: {who} did not answer ({_short(last.cause)}), "
            f"{exc.attempts} attempt(s) in {format_duration(exc.elapsed_s)}.",
            f"Bring {who} back, then run it again: it continues after the last step "
            "recorded.") from None


def _short(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return text if len(text) <= 200 else text[:200] + "…"

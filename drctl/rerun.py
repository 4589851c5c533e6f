"""Running a command again when a cluster drops in the middle of it.

Failover, failback and the return to protection record every step in the failover marker,
so running them again continues where they stopped — that is how an operator recovers by
hand; translate-offsets reads every position again and commits the same ones (a group's
commit is atomic, and one already made stays). A broker restart, a leader moving, a network
blip are common during an incident: instead of failing with a raw read timeout, the command
waits for its clusters to answer again — each retried within the command's `--deadline`,
every retry one stderr line naming the cluster and its address — and runs again. A cluster
that does not answer within `--deadline` ends it (exit 4) with what to do: bring it back,
run it again. `--timeout` is not this wait's bound: it bounds work that progresses (the
Spark job, a catch-up), never a cluster that does not answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from drctl.context import OpsContext
from drctl.errors import DrctlError, Unreachable
from drctl.kafka.clients import ClusterUnreachable, cause_of, describe_with_retry
from drctl.kafka.connect_rest import ConnectUnreachable
from drctl.kafka.records import ReadTimeout
from drctl.kafka.retriable import transient
from drctl.timeparse import format_duration

T = TypeVar("T")

# A wait for the clusters shorter than this saw no outage: they answered at once (a leader
# moved, a read timed out), so the run again waits the retry policy's next backoff first.
_AT_ONCE_S = 1.0


def dropped(exc: BaseException) -> bool:
    """Whether `exc` says a cluster did not answer (worth running the procedure again once
    it answers): drctl/kafka/retriable.py's one rule — the gap job's lost Kafka among them."""
    return transient(exc)


# What running a procedure again does, said to the operator (a command may say its own).
RESUMES = "it continues after the last step recorded"


def await_clusters(ctx: OpsContext, clusters: Sequence[str], deadline_s: float, what: str,
                   *, clock: Callable[[], float] = time.monotonic, resumes: str = RESUMES
                   ) -> None:
    """Every cluster in `clusters` answering a metadata request, all within one `deadline_s`
    from now (each retry said through the context's notify). The first that does not ends
    `what`: Unreachable (exit 4) naming it, its address and the cause, and what to do."""
    started = clock()
    for name in clusters:
        left = max(0.1, deadline_s - (clock() - started))
        try:
            describe_with_retry(ctx.clients(name), ctx.config.retry.with_deadline(left),
                                notify=ctx.notify)
        except Unreachable as exc:
            raise Unreachable(f"{what.capitalize()} stopped: {exc.message}",
                              _bring_back(f"'{name}'", resumes),
                              detail=exc.detail).measured_as(exc) from None


def _bring_back(what: str, resumes: str) -> str:
    return f"Bring {what} back, then run it again: {resumes}."


def rerun_while_dropped(run: Callable[[], T], ctx: OpsContext, clusters: Sequence[str],
                        deadline_s: float, what: str, *,
                        started: Callable[[], bool] = lambda: True,
                        await_back: Callable[[], None] | None = None,
                        sleep: Callable[[float], None] = time.sleep,
                        clock: Callable[[], float] = time.monotonic,
                        resumes: str = RESUMES) -> T:
    """`run()` until it succeeds. After a failure that says a cluster dropped, the clusters
    must answer again within `deadline_s` (`await_back`; by default `await_clusters`), then
    `run()` again: a broker back within the deadline lets the same command finish. A step
    that itself retried a cluster for the deadline (ClusterUnreachable) ends it at once. Other
    failures end it at once, and so does any failure before `started()` says the procedure
    got going: a cluster down when it begins is the operator's to bring back, not a blip to
    wait out. A procedure that keeps dropping while its clusters answer is run again at most
    the retry policy's attempts, its backoff between runs."""
    wait_back = await_back or (lambda: await_clusters(ctx, clusters, deadline_s, what,
                                                      clock=clock, resumes=resumes))
    backoff = ctx.config.retry.delays()
    runs = 1
    while True:
        try:
            return run()
        except (ClusterUnreachable, ConnectUnreachable) as exc:
            if not started():
                raise
            # The step itself waited for that cluster or Connect worker for the deadline:
            # not a second time.
            back = f"'{exc.cluster}'" if isinstance(exc, ClusterUnreachable) else \
                f"the Kafka Connect worker ({exc.url})"
            raise Unreachable(f"{what.capitalize()} stopped: {exc.message}",
                              _bring_back(back, resumes),
                              detail=exc.detail).measured_as(exc) from None
        except Exception as exc:
            if not dropped(exc) or not started():
                raise
            failure = exc
        ctx.reconnect()  # a client that lived through a broker restart can keep failing
        ctx.notify(f"{what.capitalize()} stopped at a step: {_cause(failure)}; waiting up "
                   f"to {format_duration(deadline_s)} for {' and '.join(clusters)} to answer")
        waited_from = clock()
        wait_back()
        pause = next(backoff, None)
        if pause is None:
            raise Unreachable(
                f"{what.capitalize()} stopped: a step failed {runs} times with the clusters "
                f"answering again each time; last: {_cause(failure)}.",
                f"Run it again: {resumes} (--debug shows each failure).",
                detail=_detail(failure)) from None
        if clock() - waited_from < _AT_ONCE_S:
            sleep(pause)
        runs += 1
        ctx.notify(f"Running {what} again: {resumes} (run {runs})")


def _cause(exc: BaseException) -> str:
    """A dropped step's failure in a few words: the error's own message when it is drctl's
    (it names the cluster), else the cause librdkafka's error stands for."""
    if isinstance(exc, DrctlError):
        return exc.message.rstrip(".")
    if isinstance(exc, ReadTimeout):
        return f"a read timed out ({exc})"
    return str(cause_of(exc))


def _detail(exc: BaseException) -> str:
    text = getattr(exc, "detail", None) or str(exc)
    return text if len(text) <= 500 else text[:500] + "…"

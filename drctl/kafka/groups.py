"""Consumer groups in batches: one admin request per group, never a client per partition,
and at most IN_FLIGHT of them outstanding at once."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from drctl.errors import Unreachable
from drctl.kafka.inflight import windows
from drctl.kafka.retriable import is_retriable
from drctl.kafka.topics import TP
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call


def _not_answered(what: str, timed_out: int, sent: int, timeout_s: float) -> Unreachable:
    return Unreachable(f"The group coordinator did not answer {timed_out:,} of {sent:,} "
                       f"{what} request(s) within {timeout_s:.0f} s.",
                       "Check the brokers (load, GC pauses, network) and run the command "
                       "again.")


def _error_code(exc: BaseException) -> int | None:
    err = exc.args[0] if exc.args else None
    return err.code() if isinstance(err, KafkaError) else None


def _unanswered(exc: BaseException) -> bool:
    """librdkafka's request timeout, or our wait for its future when that ended first."""
    return isinstance(exc, TimeoutError) or _error_code(exc) == KafkaError._TIMED_OUT


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str  # EMPTY, STABLE, DEAD, ...
    members: int

    @property
    def active(self) -> bool:
        return self.members > 0 or self.state in ("STABLE", "PREPARING_REBALANCE",
                                                  "COMPLETING_REBALANCE")


# A broker that did not answer its ListGroups: asked again a few times (a busy or just
# restarted broker answers the next one).
LIST_RETRY = RetryPolicy(initial_s=0.5, max_s=2, attempts=4)


def list_groups(admin: AdminClient, timeout_s: float = 30.0, *,
                policy: RetryPolicy = LIST_RETRY) -> list[str]:
    """Every consumer group the cluster knows. librdkafka asks each broker for its groups
    and returns the answers it got beside the brokers that failed (`errors`): the groups of a
    broker that failed are missing, which is not "no group there". Asked again; still
    failing: Unreachable (exit 4), never a shorter list."""
    def ask() -> list[str]:
        result = admin.list_consumer_groups(request_timeout=timeout_s).result(timeout=timeout_s)
        if result.errors:
            first = result.errors[0]
            raise first if isinstance(first, KafkaException) else KafkaException(first)
        return sorted(g.group_id for g in result.valid)

    try:
        return retry_call(ask, policy, retry_on=(KafkaException,))
    except RetriesExhausted as exc:
        raise Unreachable(f"A broker did not list its consumer groups: {_cause(exc.last)}",
                          "Check the brokers (load, GC pauses, network, DESCRIBE on the "
                          "cluster) and run the command again.") from None


def _cause(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    return err.str() if isinstance(err, KafkaError) else str(exc)


# Answers that say a group's coordinator is not serving it (yet): still loading after a
# broker's restart, or moved with its __consumer_offsets partition.
_COORDINATOR_NOT_READY = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                          KafkaError.COORDINATOR_LOAD_IN_PROGRESS}


def _coordinators_ready(admin: AdminClient, window: Sequence[str], timeout_s: float) -> None:
    """Return once every group of the window has had a DescribeGroups answered by its
    coordinator. librdkafka (2.16, issue #5040) crashes the whole process when an admin
    client's OffsetFetch is answered NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE: it asks
    the consumer-group handle an admin client does not have to find the coordinator again.
    DescribeGroups gets the same answer safely, so an OffsetFetch goes only to a coordinator
    that has just served the group. A coordinator that moves between the two requests can
    still crash it (a window of one round trip, not the seconds a restarted broker loads)."""
    timed_out = 0
    for future in admin.describe_consumer_groups(
            list(window), request_timeout=timeout_s).values():
        try:
            future.result(timeout=timeout_s)
        except (KafkaException, TimeoutError) as exc:
            if _unanswered(exc):
                timed_out += 1
            elif _error_code(exc) in _COORDINATOR_NOT_READY:
                raise  # retriable: committed_offsets asks again
            # Any other answer (GROUP_ID_NOT_FOUND for a group never seen, ...) came from the
            # coordinator serving the group: its OffsetFetch is safe and says the rest.
    if timed_out:
        raise _not_answered("DescribeGroups", timed_out, len(window), timeout_s)


# A broker that just came back answers COORDINATOR_LOAD_IN_PROGRESS (or NOT_COORDINATOR)
# until it has read __consumer_offsets (the audit runs right when the source returns).
COORDINATOR_RETRY = RetryPolicy(initial_s=0.2, max_s=2, attempts=12)


def committed_offsets(admin: AdminClient, groups: Iterable[str], timeout_s: float = 60.0, *,
                      policy: RetryPolicy = COORDINATOR_RETRY) -> dict[str, dict[TP, int]]:
    """Committed offsets of many groups, IN_FLIGHT requests at a time. A coordinator that
    does not answer in `timeout_s` is Unreachable (exit 4), naming how many went unanswered."""
    groups = list(groups)

    def ask() -> dict[str, dict[TP, int]]:
        out: dict[str, dict[TP, int]] = {}
        for window in windows(groups):
            _coordinators_ready(admin, window, timeout_s)
            futures = {}
            for group in window:
                futures.update(admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group)], request_timeout=timeout_s))
            timed_out = 0
            for group, future in futures.items():
                try:
                    result = future.result(timeout=timeout_s)
                except (KafkaException, TimeoutError) as exc:
                    if not _unanswered(exc):
                        raise
                    timed_out += 1
                    continue
                out[group] = {(tp.topic, tp.partition): tp.offset
                              for tp in result.topic_partitions or [] if tp.offset >= 0}
            if timed_out:  # the next window would only wait as long again
                raise _not_answered("OffsetFetch", timed_out, len(window), timeout_s)
        return out

    try:
        return retry_call(ask, policy,
                          retry_on=(KafkaException,), give_up=lambda exc: not is_retriable(exc))
    except RetriesExhausted as exc:
        raise exc.last from None


def group_states(admin: AdminClient, groups: Iterable[str],
                 timeout_s: float = 30.0) -> dict[str, GroupState]:
    groups = list(groups)
    out = {}
    for window in windows(groups):
        for group, future in admin.describe_consumer_groups(
                list(window), request_timeout=timeout_s).items():
            try:
                desc = future.result(timeout=timeout_s)
            except KafkaException:
                out[group] = GroupState(group, "UNKNOWN", 0)
                continue
            state = (desc.state.name if isinstance(desc.state, ConsumerGroupState)
                     else str(desc.state))
            out[group] = GroupState(group, state, len(desc.members or []))
    return out


def alter_offsets(admin: AdminClient, group: str, offsets: Mapping[TP, int],
                  timeout_s: float = 30.0) -> None:
    """One atomic commit for the whole group (retried while its coordinator moves)."""
    failed = alter_offsets_many(admin, {group: offsets}, timeout_s=timeout_s)
    if group in failed:
        raise failed[group]


def alter_offsets_many(admin: AdminClient, commits: Mapping[str, Mapping[TP, int]], *,
                       timeout_s: float = 30.0,
                       policy: RetryPolicy = RetryPolicy(initial_s=0.2, max_s=2, attempts=12)
                       ) -> dict[str, KafkaException]:
    """One atomic commit per group, every group's request in flight at once; the groups whose
    commit failed with a retriable error (a coordinator moving) are retried together. Returns
    the groups that could not be committed, with the last error of each."""
    failed: dict[str, KafkaException] = {}
    pending = list(commits)
    delays = policy.delays()
    while pending:
        retry: dict[str, KafkaException] = {}
        for window in windows(pending):
            futures = {}
            for group in window:
                request = ConsumerGroupTopicPartitions(group, [
                    TopicPartition(t, p, o) for (t, p), o in sorted(commits[group].items())])
                [futures[group]] = admin.alter_consumer_group_offsets(
                    [request], request_timeout=timeout_s).values()
            for group, future in futures.items():
                try:
                    result = future.result(timeout=timeout_s)
                    for tp in result.topic_partitions or []:
                        if tp.error is not None:
                            raise KafkaException(tp.error)
                except KafkaException as exc:
                    (retry if is_retriable(exc) else failed)[group] = exc
        delay = next(delays, None) if retry else None
        if retry and delay is None:
            failed.update(retry)
            break
        if delay is not None:
            time.sleep(delay)
        pending = list(retry)
    return failed

"""Consumer groups and offsets in batches: one admin request per group or per offset spec,
never a client per partition."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from drctl.kafka.retry import RetriesExhausted, RetryPolicy, retry_call

TP = tuple[str, int]


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str  # EMPTY, STABLE, DEAD, ...
    members: int

    @property
    def active(self) -> bool:
        return self.members > 0 or self.state in ("STABLE", "PREPARING_REBALANCE",
                                                  "COMPLETING_REBALANCE")


def list_groups(admin: AdminClient, timeout_s: float = 30.0) -> list[str]:
    result = admin.list_consumer_groups(request_timeout=timeout_s).result(timeout=timeout_s)
    return sorted(g.group_id for g in result.valid)


def committed_offsets(admin: AdminClient, groups: Iterable[str],
                      timeout_s: float = 60.0) -> dict[str, dict[TP, int]]:
    """Committed offsets of many groups; all requests are in flight at once."""
    futures = {}
    for group in groups:
        futures.update(admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=timeout_s))
    out: dict[str, dict[TP, int]] = {}
    for group, future in futures.items():
        result = future.result(timeout=timeout_s)
        out[group] = {(tp.topic, tp.partition): tp.offset
                      for tp in result.topic_partitions or [] if tp.offset >= 0}
    return out


def group_states(admin: AdminClient, groups: Iterable[str],
                 timeout_s: float = 30.0) -> dict[str, GroupState]:
    groups = list(groups)
    if not groups:
        return {}
    out = {}
    for group, future in admin.describe_consumer_groups(groups,
                                                        request_timeout=timeout_s).items():
        try:
            desc = future.result(timeout=timeout_s)
        except KafkaException:
            out[group] = GroupState(group, "UNKNOWN", 0)
            continue
        state = desc.state.name if isinstance(desc.state, ConsumerGroupState) else str(desc.state)
        out[group] = GroupState(group, state, len(desc.members or []))
    return out


_RETRIABLE = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
              KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.REBALANCE_IN_PROGRESS,
              KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError.UNKNOWN_TOPIC_OR_PART}  # the last: a topic created a moment ago


def _is_retriable(exc: BaseException) -> bool:
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and (err.code() in _RETRIABLE or err.retriable())


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
        futures = {}
        for group in pending:
            request = ConsumerGroupTopicPartitions(
                group, [TopicPartition(t, p, o) for (t, p), o in sorted(commits[group].items())])
            [futures[group]] = admin.alter_consumer_group_offsets(
                [request], request_timeout=timeout_s).values()
        retry: dict[str, KafkaException] = {}
        for group, future in futures.items():
            try:
                result = future.result(timeout=timeout_s)
                for tp in result.topic_partitions or []:
                    if tp.error is not None:
                        raise KafkaException(tp.error)
            except KafkaException as exc:
                (retry if _is_retriable(exc) else failed)[group] = exc
        delay = next(delays, None) if retry else None
        if retry and delay is None:
            failed.update(retry)
            break
        if delay is not None:
            time.sleep(delay)
        pending = list(retry)
    return failed


def list_offsets(admin: AdminClient, specs: Mapping[TP, OffsetSpec], *,
                 read_committed: bool = True, timeout_s: float = 60.0) -> dict[TP, int]:
    """ListOffsets for many partitions in one request (per broker)."""
    return list_offsets_many(admin, [specs], read_committed=read_committed,
                             timeout_s=timeout_s)[0]


def list_offsets_many(admin: AdminClient, batches: Sequence[Mapping[TP, OffsetSpec]], *,
                      read_committed: bool = True, timeout_s: float = 60.0
                      ) -> list[dict[TP, int]]:
    """Several ListOffsets requests (a request may name a partition once): all are sent
    before any answer is awaited."""
    isolation = IsolationLevel.READ_COMMITTED if read_committed else \
        IsolationLevel.READ_UNCOMMITTED

    def ask() -> list[dict[TP, int]]:
        pending = [admin.list_offsets({TopicPartition(t, p): spec
                                       for (t, p), spec in b.items()},
                                      isolation_level=isolation, request_timeout=timeout_s)
                   if b else {} for b in batches]
        return [{(tp.topic, tp.partition): fut.result(timeout=timeout_s).offset
                 for tp, fut in futures.items()} for futures in pending]

    # Right after a broker restart leadership can lag what metadata says: retry that.
    try:
        return retry_call(ask, RetryPolicy(initial_s=0.2, max_s=2, attempts=10),
                          retry_on=(KafkaException,),
                          give_up=lambda exc: not _is_retriable(exc))
    except RetriesExhausted as exc:
        raise exc.last from None


def watermarks(admin: AdminClient, partitions: Iterable[TP], *,
               read_committed: bool = True) -> dict[TP, tuple[int, int]]:
    """(low, end) per partition; with read_committed the end is the last stable offset."""
    parts = list(partitions)
    lows = list_offsets(admin, {tp: OffsetSpec.earliest() for tp in parts},
                        read_committed=read_committed)
    highs = list_offsets(admin, {tp: OffsetSpec.latest() for tp in parts},
                         read_committed=read_committed)
    return {tp: (lows[tp], highs[tp]) for tp in parts}


def offsets_for_times(admin: AdminClient, queries: Mapping[TP, int]) -> dict[TP, int]:
    """First offset whose timestamp is >= the given ms, per partition; -1 when none."""
    return list_offsets(admin, {tp: OffsetSpec.for_timestamp(ts) for tp, ts in queries.items()})

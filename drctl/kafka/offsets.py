"""ListOffsets in batches: watermarks, last stable offsets and timestamp look-ups for many
partitions per request, retried while leaders move."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from confluent_kafka import (
    OFFSET_INVALID,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from drctl.kafka.inflight import windows
from drctl.kafka.retriable import is_retriable, is_stale_metadata
from drctl.kafka.topics import TP
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call


def offset_runs(offsets: Iterable[int]) -> list[list[int]]:
    """Offsets as sorted [start, end) runs: how markers and reports keep offset sets small."""
    runs: list[list[int]] = []
    for o in sorted(set(offsets)):
        if runs and runs[-1][1] == o:
            runs[-1][1] = o + 1
        else:
            runs.append([o, o + 1])
    return runs


def list_offsets(admin: AdminClient, specs: Mapping[TP, OffsetSpec], *,
                 read_committed: bool = True, timeout_s: float = 60.0) -> dict[TP, int]:
    """ListOffsets for many partitions in one request (per broker)."""
    return list_offsets_many(admin, [specs], read_committed=read_committed,
                             timeout_s=timeout_s)[0]


def list_offsets_many(admin: AdminClient, batches: Sequence[Mapping[TP, OffsetSpec]], *,
                      read_committed: bool = True, timeout_s: float = 60.0
                      ) -> list[dict[TP, int]]:
    """Several ListOffsets requests (a request may name a partition once), IN_FLIGHT of
    them sent before their answers are awaited."""
    isolation = IsolationLevel.READ_COMMITTED if read_committed else \
        IsolationLevel.READ_UNCOMMITTED

    def ask() -> list[dict[TP, int]]:
        out: list[dict[TP, int]] = []
        for window in windows(batches):
            pending = [admin.list_offsets({TopicPartition(t, p): spec
                                           for (t, p), spec in b.items()},
                                          isolation_level=isolation, request_timeout=timeout_s)
                       if b else {} for b in window]
            out += [{(tp.topic, tp.partition): _answered(tp, fut.result(timeout=timeout_s).offset)
                     for tp, fut in futures.items()} for futures in pending]
        return out

    def refresh(_attempt: int, exc: BaseException, _delay: float) -> None:
        # A restarted broker bumps leader epochs; this (maybe long-lived) admin client keeps
        # asking with the old ones until its metadata for these topics is read again.
        if is_stale_metadata(exc):
            for topic in sorted({t for b in batches for t, _ in b}):
                try:
                    admin.list_topics(topic=topic, timeout=min(timeout_s, 10.0))
                except KafkaException:
                    pass  # the retry says what is wrong

    # Right after a broker restart leadership can lag what metadata says: retry that.
    try:
        return retry_call(ask, RetryPolicy(initial_s=0.2, max_s=2, attempts=10),
                          retry_on=(KafkaException,), on_retry=refresh,
                          give_up=lambda exc: not (is_retriable(exc)
                                                   or is_stale_metadata(exc)))
    except RetriesExhausted as exc:
        raise exc.last from None


def _answered(tp: TopicPartition, offset: int) -> int:
    """An offset ListOffsets answered, or a retriable error where it answered none.
    librdkafka 2.16 hands back OFFSET_INVALID (-1001) without an error for a partition whose
    request went to a broker that was restarting (measured: once per restart, on `earliest`);
    taken as an offset it became a start of -1001 - N, and the read's assign() failed with
    _INVALID_ARG. -1 stays: it is the answer "no record at or after that time"."""
    if offset == OFFSET_INVALID:
        raise KafkaException(KafkaError(
            KafkaError.LEADER_NOT_AVAILABLE,
            f"ListOffsets answered no offset for {tp.topic}[{tp.partition}] (a broker "
            "restarting)", retriable=True))
    return offset


def watermarks(admin: AdminClient, partitions: Iterable[TP], *,
               read_committed: bool = True) -> dict[TP, tuple[int, int]]:
    """(low, end) per partition; with read_committed the end is the last stable offset."""
    parts = list(partitions)
    lows = list_offsets(admin, {tp: OffsetSpec.earliest() for tp in parts},
                        read_committed=read_committed)
    highs = list_offsets(admin, {tp: OffsetSpec.latest() for tp in parts},
                         read_committed=read_committed)
    return {tp: (lows[tp], highs[tp]) for tp in parts}

"""MirrorMaker 2's checkpoints and offset syncs, read whole from their internal topics for
offset translation. Records that do not decode are skipped (`drctl dump-consumer-timestamps`
shows them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from confluent_kafka.admin import OffsetSpec

from drctl.codecs.mm2 import Checkpoint, OffsetSync, decode_checkpoint, decode_offset_sync
from drctl.errors import DecodeError
from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import list_offsets
from drctl.kafka.topic_scan import read_batches, replaces, topic_ranges
from drctl.retry import RetryPolicy

MISSING_MM2_TOPIC_HINT = ("Is MirrorMaker 2 running with these cluster aliases "
                          "(replication.source_alias/target_alias)? Otherwise pass "
                          "--cluster/--internal-topic.")

_Item = TypeVar("_Item")


def read_checkpoints(clients: ClusterClients, topic: str, *,
                     policy: RetryPolicy = RetryPolicy(attempts=1),
                     ) -> dict[tuple[str, str, int], Checkpoint]:
    """The latest checkpoint per (group, target topic, partition)."""
    return {key: cp for key, (cp, _) in timed_checkpoints(clients, topic, policy=policy).items()}


def timed_checkpoints(clients: ClusterClients, topic: str, *,
                      policy: RetryPolicy = RetryPolicy(attempts=1),
                      ) -> dict[tuple[str, str, int], tuple[Checkpoint, int]]:
    """The latest checkpoint per (group, target topic, partition), with the time (ms) it
    was written: how old the position a failover with the source gone would use is."""
    latest: dict[tuple[str, str, int], tuple[Checkpoint, int, int]] = {}
    for cp, partition, ts in _decoded(clients, topic, policy, decode_checkpoint):
        key = (cp.group, cp.topic, cp.partition)
        prev = latest.get(key)
        if prev is None or replaces(prev[1], prev[2], partition, ts):
            latest[key] = (cp, partition, ts)
    return {key: (latest[key][0], latest[key][2]) for key in sorted(latest)}


def read_offset_syncs(clients: ClusterClients, topic: str, *,
                      policy: RetryPolicy = RetryPolicy(attempts=1),
                      ) -> dict[tuple[str, int], list[OffsetSync]]:
    """Every offset sync per (source topic, partition), sorted by upstream offset; syncs with
    equal upstream offsets keep the order they were written in (the last is the newest)."""
    out: dict[tuple[str, int], list[OffsetSync]] = {}
    for sync, _, _ in _decoded(clients, topic, policy, decode_offset_sync):
        out.setdefault((sync.topic, sync.partition), []).append(sync)
    for syncs in out.values():
        syncs.sort(key=lambda s: s.upstream_offset)
    return out


# At most this many of the newest offset syncs are read to measure lag (status and check run
# often); older ones are not looked at.
RECENT_SYNCS_MAX = 200_000


def recent_offset_syncs(clients: ClusterClients, topic: str, since_ms: int, *,
                        max_records: int = RECENT_SYNCS_MAX,
                        policy: RetryPolicy = RetryPolicy(attempts=1),
                        ) -> tuple[dict[tuple[str, int], list[OffsetSync]], int]:
    """The offset syncs written since `since_ms` (at most the newest `max_records`), per
    source partition in the order MirrorMaker 2 wrote them, and the time (ms) from which
    they are complete: `since_ms`, or later when the cap cut older ones off."""
    ranges = topic_ranges(clients, topic, policy=policy, missing_hint=MISSING_MM2_TOPIC_HINT)
    starts = list_offsets(clients.admin(), {(topic, p): OffsetSpec.for_timestamp(since_ms)
                                            for p in ranges})
    bounded: dict[int, tuple[int, int]] = {}
    capped = False
    for p, (low, end) in ranges.items():
        at = starts[(topic, p)]
        start = max(low, end if at < 0 else at)
        if end - start > max_records:
            start, capped = end - max_records, True
        bounded[p] = (start, end)
    out: dict[tuple[str, int], list[OffsetSync]] = {}
    complete_from = since_ms
    first = True
    for batch in read_batches(clients, topic, bounded):
        for msg in batch:
            if capped and first:
                complete_from = max(since_ms, int(msg.timestamp()[1]))
            first = False
            try:
                sync = decode_offset_sync(msg.key(), msg.value())
            except DecodeError:
                continue
            out.setdefault((sync.topic, sync.partition), []).append(sync)
    return out, complete_from


def _decoded(clients: ClusterClients, topic: str, policy: RetryPolicy,
             decode: Callable[[bytes | None, bytes | None], _Item],
             ) -> Iterator[tuple[_Item, int, int]]:
    """(decoded value, record partition, record timestamp ms) in read order."""
    ranges = topic_ranges(clients, topic, policy=policy, missing_hint=MISSING_MM2_TOPIC_HINT)
    for batch in read_batches(clients, topic, ranges):
        msg: Any
        for msg in batch:
            try:
                item = decode(msg.key(), msg.value())
            except DecodeError:
                continue
            yield item, msg.partition(), msg.timestamp()[1]

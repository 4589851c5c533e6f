"""MirrorMaker 2's checkpoints and offset syncs, read whole from their internal topics for
offset translation. Records that do not decode are skipped (`drctl dump-consumer-timestamps`
shows them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from drctl.codecs.mm2 import Checkpoint, OffsetSync, decode_checkpoint, decode_offset_sync
from drctl.errors import DecodeError
from drctl.kafka.clients import ClusterClients
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

"""MirrorMaker 2's checkpoints, latest per (group, target topic, partition)."""

from __future__ import annotations

from typing import Any

from drctl.errors import DecodeError
from drctl.kafka.clients import ClusterClients
from drctl.kafka.records import read_all


def latest_checkpoints(target: ClusterClients, topic: str) -> dict[tuple[str, str, int], Any]:
    """The checkpoints topic is compacted and single-partition: the last record per key wins."""
    from drctl.codecs.mm2 import decode_checkpoint

    latest: dict[tuple[str, str, int], Any] = {}
    for rec in read_all(target, topic):
        if rec.key is None or rec.value is None:
            continue
        try:
            cp = decode_checkpoint(rec.key, rec.value)
        except DecodeError:
            continue  # not a checkpoint this drctl understands: never fatal
        latest[(cp.group, cp.topic, cp.partition)] = cp
    return latest

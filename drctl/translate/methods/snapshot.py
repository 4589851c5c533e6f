"""`snapshot`: drctl guard's exact positions on the target (and MirrorMaker 2's checkpoints
where newer), for a failover with the source gone; each position states the most records it
can re-deliver."""

from __future__ import annotations

import time

from drctl.kafka.clients import ClusterClients
from drctl.kafka.topics import TP
from drctl.translate.methods import Placing
from drctl.translate.model import Confidence, PartitionResult
from drctl.translate.snapshots import OffsetSnapshot, settle_ahead


def place(placing: Placing, todo: list[PartitionResult]) -> None:
    settled = _settle_snapshots(placing.dst, todo, placing.snapshots, placing.dst_marks)
    _by_snapshot(todo, placing.snapshots, placing.checkpoints, placing.dst_marks, settled)


def _settle_snapshots(dst: ClusterClients, todo: list[PartitionResult],
                      snapshots: dict[tuple[str, str, int], OffsetSnapshot],
                      dst_marks: dict[TP, tuple[int, int]]
                      ) -> dict[tuple[str, str, int], tuple[int, str]]:
    """Snapshots taken while their group was ahead of replication, settled on the target
    (the copies arrived since): (group, source topic, partition) -> (target offset, how)."""
    later = [p for p in todo if (s := snapshots.get((p.group, p.topic, p.partition)))
             and s.settles_later and (p.target_topic, p.partition) in dst_marks]
    if not later:
        return {}
    found = settle_ahead(dst, [(snapshots[(p.group, p.topic, p.partition)],
                                (p.target_topic, p.partition)) for p in later], dst_marks)
    return {(p.group, p.topic, p.partition): f for p, f in zip(later, found, strict=True)
            if f is not None}


def _by_snapshot(todo: list[PartitionResult],
                 snapshots: dict[tuple[str, str, int], OffsetSnapshot], checkpoints: dict,
                 dst_marks: dict[TP, tuple[int, int]],
                 settled: dict[tuple[str, str, int], tuple[int, str]] | None = None
                 ) -> None:
    """The later of the snapshot's exact position and the checkpoint's: both lie at or before
    the group's true position (groups commit forwards), so neither skips a record. A snapshot
    taken while the group was ahead of replication counts where it was `settled`. The bound:
    the group cannot have read more of the target than lies past the position."""
    now_ms = int(time.time() * 1000)
    settled = settled or {}
    for p in todo:
        snap = snapshots.get((p.group, p.topic, p.partition))
        cp = checkpoints.get((p.group, p.target_topic, p.partition))
        low, end = dst_marks[(p.target_topic, p.partition)]
        snap_offset = snap.target_offset if snap else None
        if snap is not None and (found := settled.get((p.group, p.topic, p.partition))):
            snap_offset = found[0]
            p.note = (f"guard's snapshot was ahead of replication by {snap.ahead} records; "
                      f"settled on the target at {found[1]}")
        options = ([(snap_offset, "snapshot")] if snap_offset is not None else []) + \
            ([(cp.downstream_offset, "checkpoint")] if cp else [])
        if not options:
            p.confidence = Confidence.NO_SNAPSHOT
            p.note = "neither a guard snapshot nor a checkpoint for this group and partition"
            continue
        offset, source = max(options)
        p.target_offset = min(max(offset, low), end)
        p.confidence = source
        p.max_redelivered = end - p.target_offset
        if snap is not None:
            p.age_s = round((now_ms - snap.seen_ms) / 1000, 1)

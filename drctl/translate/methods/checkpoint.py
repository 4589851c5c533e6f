"""`checkpoint` (MirrorMaker 2): the group's latest checkpoint on the target; works with the
source gone. With the source up the re-delivery it causes is measured against `exact`."""

from __future__ import annotations

from drctl.kafka.topics import TP
from drctl.translate.methods import Placing
from drctl.translate.methods.exact import by_exact
from drctl.translate.model import Confidence, PartitionResult


def place(placing: Placing, todo: list[PartitionResult]) -> None:
    _by_checkpoint(todo, placing.checkpoints, placing.dst_marks)
    if not placing.source_up:
        return
    # Measure the re-delivery the checkpoints cause against the exact answer.
    exact = [PartitionResult(p.group, p.topic, p.partition, p.target_topic, p.source_offset,
                             "exact", None, "") for p in todo]
    by_exact(placing.src, placing.dst, exact, placing.dst_marks, timestamp_only=False,
             max_scan=placing.max_scan)
    for p, e in zip(todo, exact, strict=True):
        if p.target_offset is not None and e.target_offset is not None \
                and e.confidence == Confidence.EXACT:
            p.redelivered = max(0, e.target_offset - p.target_offset)
            if p.confidence == Confidence.CHECKPOINT:
                p.confidence = Confidence.CHECKPOINT_LAG.of(p.redelivered)


def _by_checkpoint(todo: list[PartitionResult], checkpoints: dict,
                   dst_marks: dict[TP, tuple[int, int]]) -> None:
    for p in todo:
        cp = checkpoints.get((p.group, p.target_topic, p.partition))
        if cp is None:
            p.confidence = Confidence.NO_CHECKPOINT
            p.note = "MirrorMaker 2 emitted no checkpoint for this group and partition"
            continue
        low, end = dst_marks[(p.target_topic, p.partition)]
        p.target_offset = min(max(cp.downstream_offset, low), end)
        p.confidence = Confidence.CHECKPOINT
        p.max_redelivered = end - p.target_offset  # it cannot have read more than is there
        if cp.upstream_offset != p.source_offset:
            p.note = (f"latest checkpoint is for source offset {cp.upstream_offset}; the group "
                      f"is at {p.source_offset}")

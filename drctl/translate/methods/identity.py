"""`identity`: offset-preserving mirrors — the same offset, clamped into the target's range."""

from __future__ import annotations

from drctl.translate.methods import Placing
from drctl.translate.model import Confidence, PartitionResult


def place(placing: Placing, todo: list[PartitionResult]) -> None:
    for p in todo:
        low, end = placing.dst_marks[(p.target_topic, p.partition)]
        p.target_offset = min(max(p.source_offset, low), end)
        p.confidence = Confidence.EXACT if p.target_offset == p.source_offset \
            else Confidence.CLAMPED

"""`timestamp` (Replicator-style): ListOffsets by the timestamp of the last record read, with
how many target records share that timestamp (the ambiguity) and what is read again."""

from __future__ import annotations

from drctl.translate.methods import Placing
from drctl.translate.methods.exact import by_exact
from drctl.translate.model import PartitionResult


def place(placing: Placing, todo: list[PartitionResult]) -> None:
    by_exact(placing.src, placing.dst, todo, placing.dst_marks, timestamp_only=True,
             max_scan=placing.max_scan, own_copy_header=placing.own_copy_header)

"""The snapshot translation method (drctl/translate/methods/snapshot.py): the later of
snapshot and checkpoint wins, a settled position is used, and each is bounded."""

from __future__ import annotations

from drctl.codecs.mm2 import Checkpoint
from drctl.translate.methods.snapshot import _by_snapshot
from drctl.translate.model import PartitionResult
from tests.unit.translate.support import _snap


def _part(source_offset: int) -> PartitionResult:
    return PartitionResult("g", "orders", 0, "primary.orders", source_offset, "snapshot", None,
                           "")


def test_the_later_of_snapshot_and_checkpoint_wins_with_a_bound() -> None:
    marks = {("primary.orders", 0): (0, 500)}
    # The checkpoint is older (and coarse): the snapshot's exact position wins.
    p = _part(120)
    _by_snapshot([p], {("g", "orders", 0): _snap(120, 118)},
                 {("g", "primary.orders", 0): Checkpoint("g", "primary.orders", 0, 100, 90)},
                 marks)
    assert (p.target_offset, p.confidence, p.max_redelivered) == (118, "snapshot", 382)
    assert p.age_s is not None and 2 <= p.age_s <= 10
    # The group moved on after the snapshot and MM2 checkpointed it further on.
    p = _part(300)
    _by_snapshot([p], {("g", "orders", 0): _snap(120, 118)},
                 {("g", "primary.orders", 0): Checkpoint("g", "primary.orders", 0, 300, 260)},
                 marks)
    assert (p.target_offset, p.confidence, p.max_redelivered) == (260, "checkpoint", 240)
    # Never past the target's end; nothing known: said so, no position.
    p = _part(900)
    _by_snapshot([p], {("g", "orders", 0): _snap(900, 880)}, {}, marks)
    assert (p.target_offset, p.max_redelivered) == (500, 0)
    p = _part(5)
    _by_snapshot([p], {}, {}, marks)
    assert (p.target_offset, p.confidence) == (None, "no-snapshot")


def test_the_snapshot_method_uses_a_settled_position_and_bounds_it() -> None:
    marks = {("primary.orders", 0): (0, 500)}
    p = _part(300)
    _by_snapshot([p], {("g", "orders", 0): _snap(300, 200)},
                 {("g", "primary.orders", 0): Checkpoint("g", "primary.orders", 0, 250, 240)},
                 marks, {("g", "orders", 0): (290, "the copy of the last record it read")})
    assert (p.target_offset, p.confidence, p.max_redelivered) == (290, "snapshot", 210)
    assert p.note is not None and "settled on the target" in p.note

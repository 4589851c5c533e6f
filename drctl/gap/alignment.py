"""Tail scope: where replication stopped, proved per partition (docs/design.md §5).

A time window is an assumption about the replicator's lag; an alignment is a fact. The last
record the target holds before the failover point F (target offset Y−1) is located on the
source with the exact locator `translate-offsets --method exact` uses (timestamp anchor,
fingerprint, k-th identical copy): source offset X−1. An in-order replicator copied every
source record before X−1 before it copied X−1, so what can be missing is a tail. The
comparison starts `margin` records before X on the source and twice that before Y on the
target: the target may hold re-copies (at-least-once), and the extra target records only
ever match, never invent a gap. When no proof is found the partition is compared in full,
and the summary says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka.admin import AdminClient

from drctl.gap.plan import GapScope
from drctl.kafka.clients import ClusterClients
from drctl.translate.locate import MatchQuery, Side, last_records, match_records

DEFAULT_MARGIN = 5_000  # records per partition before the proven alignment
# How far the source is scanned from the timestamp anchor for the copy of the target's last
# record; past it the partition is compared in full.
MAX_SCAN = 200_000


@dataclass(frozen=True)
class Alignment:
    """Where the comparison of one partition starts, and why there."""

    scope: str  # GapScope value actually used for this partition
    source_start: int
    target_start: int
    # The proof, when there is one: source offset X−1 is target offset Y−1.
    source_aligned: int | None = None
    target_aligned: int | None = None
    reason: str = ""  # why a tail was not proved (the partition is compared in full)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def full_alignment(source_low: int, target_low: int, reason: str = "") -> Alignment:
    return Alignment(GapScope.FULL, source_low, target_low, reason=reason)


def identity_tail(low: int, f_point: int, margin: int) -> Alignment:
    """Offsets preserved: the gap is [F, end); the overlap just before F is the proof the job
    checks offset by offset."""
    start = max(low, f_point - margin)
    return Alignment(GapScope.TAIL, start, start)


def prove_tails(src: ClusterClients, dst: ClusterClients, src_admin: AdminClient,
                dst_admin: AdminClient, source_topic: str, target_topic: str,
                partitions: Sequence[int], *, source_marks: Mapping[int, tuple[int, int]],
                target_marks: Mapping[int, tuple[int, int]], f_point: Mapping[int, int],
                margin: int = DEFAULT_MARGIN) -> dict[int, Alignment]:
    """Per partition: the proven alignment and the comparison's starts (see module doc).

    `*_marks` are (low, end) per partition; the target's end is capped at F by the caller's
    `f_point`."""
    out: dict[int, Alignment] = {}
    src_side = Side.of(src, src_admin, {(source_topic, p): source_marks[p] for p in partitions})
    dst_side = Side.of(dst, dst_admin,
                       {(target_topic, p): (target_marks[p][0], f_point[p]) for p in partitions})
    ask = [p for p in partitions if f_point[p] > target_marks[p][0]]
    for p in partitions:
        if p not in ask:
            out[p] = full_alignment(source_marks[p][0], target_marks[p][0],
                                    "the target holds no record before the failover point")
    if not ask:
        return out
    lasts = last_records(dst_side, [((target_topic, p), f_point[p]) for p in ask])
    queries: list[tuple[int, MatchQuery]] = []
    for p, (last, _) in zip(ask, lasts, strict=True):
        if last is None:  # only aborted transactions or control records before F
            out[p] = full_alignment(source_marks[p][0], target_marks[p][0],
                                    "the target holds no visible record before the failover "
                                    "point")
        else:
            queries.append((p, MatchQuery(last, (source_topic, p))))
    results = match_records(dst_side, src_side, [q for _, q in queries], max_scan=MAX_SCAN)
    for (p, query), res in zip(queries, results, strict=True):
        found = res.offset if res.offset is not None else res.last_copy
        s_low, t_low = source_marks[p][0], target_marks[p][0]
        if found is None:
            why = ("the scan limit was reached" if res.reason == "bound"
                   else "it is not on the source (retention, or a truncated source)")
            out[p] = full_alignment(s_low, t_low, f"the target's last record before the "
                                                  f"failover point, offset "
                                                  f"{query.record.offset}, was not located on "
                                                  f"the source: {why}")
            continue
        y = query.record.offset
        out[p] = Alignment(GapScope.TAIL, source_start=max(s_low, found + 1 - margin),
                           target_start=max(t_low, y + 1 - 2 * margin),
                           source_aligned=found, target_aligned=y)
    return out

"""What the target lacks, judged from what each step read (ops/steps/target_lag.py): the claim
of copy points and stored position, the target's last record found on the source, and the
skips between copy points."""

from __future__ import annotations

import time

from drctl.kafka.records import Record
from drctl.ops.steps.flow_status import flow_protection
from drctl.ops.steps.rpo import flow_rpo
from drctl.ops.steps.target_lag import (
    Marks,
    PartitionFacts,
    PartitionLag,
    Skip,
    TargetLag,
    claimed_next,
    judge,
    needs_content,
    skips,
)

NOW = int(time.time() * 1000)
TP = ("orders", 0)


def facts(source: tuple[int, int], target_end: int, stored: int | None,
          points: tuple[tuple[int, int], ...] = (), settled: int = 0) -> PartitionFacts:
    """Source (log start, end) without an open transaction, the mirror from offset 0."""
    low, end = source
    return PartitionFacts(TP, TP, Marks(low, end, end), Marks(0, target_end, target_end),
                          stored, points, settled)


def rec(offset: int, ts: int = NOW - 60_000) -> Record:
    return Record("orders", 0, offset, b"k", b"v", ts, 1, ())


def visible(start: int, end: int) -> list[Record]:
    return [rec(o, NOW - 600_000 + o) for o in range(start, end)]


def test_copy_points_and_stored_position_at_the_end_prove_the_tail_without_a_read() -> None:
    f = facts((0, 160), 110, 160, ((0, 0), (150, 100)))
    assert claimed_next(f) == (160, False)
    assert not needs_content(f)
    lag = judge(f, None, None)
    assert (lag.behind, lag.lost, lag.unknown) == (0, False, None)
    assert lag.how == "the newest copy point and the mirror's end"


def test_a_stored_position_that_trails_the_copies_costs_no_read() -> None:
    """Connect flushes the stored position now and then: it trails what the copy point and
    the mirror's end prove. Only a replicator writing transactions (its markers take target
    offsets) has its copy points capped by it."""
    f = facts((0, 160), 110, 140, ((0, 0), (150, 100)))
    assert claimed_next(f) == (160, False) and not needs_content(f)
    eos = PartitionFacts(TP, TP, f.source, f.target, 140, f.points, points_one_for_one=False)
    assert claimed_next(eos) == (140, False) and needs_content(eos)


def test_a_stored_position_moved_past_records_never_copied_is_missing() -> None:
    """Connect's offsets moved from 100 to 150 while 50 records waited: the target's copies
    reach 100 (its last record's original is 99); the replicator resumes at 150."""
    f = facts((0, 150), 100, 150, ((0, 0),))
    claim, suspect = claimed_next(f)
    assert (claim, suspect) == (100, False)  # the copy points say 100, the position 150
    assert needs_content(f)
    lag = judge(f, 100, rec(100, NOW - 42_000))
    assert (lag.behind, lag.missing, lag.missing_from) == (50, 50, 100)
    assert lag.oldest_ms == NOW - 42_000 and lag.lost
    # Without proof by content only the tail is counted: the stored position is not trusted
    # to say what was passed over.
    assert judge(f, None, rec(100)).missing == 0
    assert judge(f, None, rec(100)).behind == 50


def test_records_passed_over_before_new_copies_are_found_between_copy_points() -> None:
    """Then 10 new records were copied: the tail is caught up, the copy points skip 50
    source offsets no target offset matches."""
    f = facts((0, 160), 110, 160, ((0, 0), (150, 100)))
    [skip] = skips(f)
    assert skip == Skip(start=100, end=150, count_from=1, slots=99)
    lag = judge(f, None, None, [(skip, visible(1, 150))])
    assert (lag.behind, lag.missing, lag.missing_from) == (50, 50, 100)
    assert lag.oldest_ms == visible(100, 101)[0].timestamp_ms


def test_transaction_markers_and_compaction_skip_offsets_without_missing_anything() -> None:
    f = facts((0, 40), 38, 40, ((0, 0), (11, 10), (22, 20), (30, 27)))
    found = skips(f)
    assert [(s.start, s.end) for s in found] == [(10, 11), (21, 22), (29, 30)]
    # Counted: as many visible records as the target has slots (compaction took 2 at 28-29).
    counted = [(found[0], visible(1, 11)[:9]), (found[1], visible(12, 21)), (found[2],
                                                                              visible(23, 27))]
    assert judge(f, None, None, counted).behind == 0
    # A rewind (the replicator copied again after a restart) skips nothing.
    assert skips(facts((0, 40), 60, 40, ((0, 0), (30, 30), (10, 40)))) == []


def test_a_target_that_lost_copies_is_found_by_its_tail_and_by_later_copy_points() -> None:
    # Truncated to 80 after copying 100: the newest copy point lies past the target's end.
    f = facts((0, 100), 80, 100, ((0, 0), (99, 99)))
    assert claimed_next(f) == (100, True) and needs_content(f)
    lag = judge(f, 80, rec(80))
    assert (lag.behind, lag.missing, lag.missing_from) == (20, 20, 80)
    # Found on neither side: unknown, never 0.
    assert "past the target's end" in (judge(f, None, None).unknown or "")
    # The replicator copied on, at 80 again: the copy point pair says what was lost.
    f = facts((0, 110), 90, 110, ((0, 0), (99, 99), (100, 80)))
    [skip] = skips(f)
    assert skip == Skip(80, 100, 80, 0, truncated=True)
    lag = judge(f, None, None, [(skip, visible(80, 100))])
    assert (lag.missing, lag.missing_from) == (20, 80)


def test_retention_that_deleted_records_before_they_were_copied_is_a_loss() -> None:
    f = facts((200, 200), 100, 100, ((0, 0),))
    lag = judge(f, 100, None)
    assert (lag.deleted, lag.behind, lag.lost) == (100, 0, True)
    # Records all expired on both sides after they were copied: nothing lost.
    done = facts((200, 200), 200, 200, ((0, 0),))
    assert not needs_content(done) and not judge(done, None, None).lost
    # An empty target that never held anything lacks what the source holds, nothing more.
    never = facts((50, 80), 0, None)
    lag = judge(never, None, rec(50))
    assert (lag.start, lag.behind, lag.deleted, lag.missing) == (50, 30, 0, 0)
    # One emptied (recreated) while the replicator's position says all was copied: the
    # replicator will never copy them again.
    emptied = facts((50, 80), 0, 80)
    lag = judge(emptied, None, rec(50))
    assert (lag.behind, lag.missing, lag.missing_from) == (30, 30, 50)


def test_an_earlier_incident_settled_what_lies_below_its_return() -> None:
    """After a return to protection the forward flow restarts at the cut-over: the copy
    points straddling it skip what the incident reconciled and carried back."""
    f = facts((0, 300), 150, 300, ((0, 0), (250, 100)), settled=250)
    assert skips(f) == []
    assert judge(f, 240, None).start == 250


def test_the_rpo_is_unknown_never_0_when_lost_or_unmeasurable_or_from_the_future() -> None:
    def rows(*parts: PartitionLag) -> list[dict[str, object]]:
        return TargetLag(list(parts), {("orders", p.tp[1]): 10 for p in parts}).rows()

    missing = PartitionLag(("orders", 0), 0, 5, NOW - 30_000, missing=5, missing_from=0)
    rpo = flow_rpo(object(), object(), "primary", rows(missing), NOW)  # type: ignore[arg-type]
    assert rpo.seconds == 30.0
    future = PartitionLag(("orders", 0), 0, 5, NOW + 3_600_000)
    rpo = flow_rpo(object(), object(), "primary", rows(future), NOW)  # type: ignore[arg-type]
    assert rpo.seconds is None and "in the future" in (rpo.reason or "")
    deleted = PartitionLag(("orders", 0), 10, deleted=7)
    rpo = flow_rpo(object(), object(), "primary", rows(deleted), NOW)  # type: ignore[arg-type]
    assert rpo.seconds is None and "retention deleted up to 7" in (rpo.reason or "")
    unknown = PartitionLag(("orders", 0), unknown="why")
    rpo = flow_rpo(object(), object(), "primary", rows(unknown), NOW)  # type: ignore[arg-type]
    assert rpo.seconds is None and "orders-0 lacks cannot be measured: why" in (rpo.reason or "")


def test_a_flow_whose_target_lacks_records_it_will_never_get_is_exposed() -> None:
    from drctl.replication.base import FlowState

    copying = FlowState(True, {"mm2": "RUNNING"}, copying=("mm2",))
    caught_up = TargetLag([PartitionLag(("orders", 0), 160)], {("orders", 0): 160}).rows()
    assert flow_protection([], copying, caught_up, ["mm2"], NOW)["state"] == "protected"
    lost = TargetLag([PartitionLag(("orders", 0), 100, 50, NOW - 1000, missing=50,
                                   missing_from=100)], {("orders", 0): 150}).rows()
    state = flow_protection([], copying, lost, ["mm2"], NOW)
    assert state["state"] == "exposed", state
    assert state["lost"] == ["orders-0: 50 record(s) passed over from offset 100"]
    # A missing record stamped in the future: its age is unknown, not 0.
    ahead = TargetLag([PartitionLag(("orders", 0), 100, 3, NOW + 60_000)],
                      {("orders", 0): 103}).rows()
    assert flow_protection([], copying, ahead, ["mm2"], NOW)["lag_s"] is None

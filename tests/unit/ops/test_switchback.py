"""The switch-back rule (ops/one_way/switchback.py): a group's position on the source is never past
a gap record it has not read; what it reads again is counted."""

from __future__ import annotations

from drctl.kafka.offsets import offset_runs
from drctl.ops.one_way.switchback import (
    GapPlacement,
    GroupSwitchBack,
    PartitionSwitchBack,
    SwitchBack,
    not_delivered,
    redelivered,
    resume_position,
)
from drctl.reports import render

# Source partition: 300 records read before the outage (0..299), a gap at 300..309, the
# reverse copies of 50 post-failover writes at 310..359. Target: 0..299 replicated, the 50
# writes at 300..349 (F = 300), the reconciled copies of the 8 safe gap records at 350..357;
# source 302 and 305 were conflicts, quarantined.
SAFE = [300, 301, 303, 304, 306, 307, 308, 309]
PLACED = GapPlacement("orders", tuple((350 + i, s) for i, s in enumerate(SAFE)),
                      quarantined=(302, 305))


def test_a_group_that_read_every_post_failover_write_but_no_copy_is_rewound() -> None:
    r = resume_position(360, 300, 350, PLACED)
    assert (r.position, r.rewound) == (300, True)
    assert r.unread == tuple(SAFE) and r.quarantined_missed == ()
    assert r.quarantined_read == (302, 305)
    # It reads 300..359 again: the 8 gap records and 2 quarantined ones are new to it, the 50
    # reverse copies are re-delivered.
    assert redelivered(range(300, 360), r) == 50
    assert not_delivered(r.unread, r.position) == 0


def test_a_group_that_read_some_writes_is_rewound_to_the_first_gap_record() -> None:
    r = resume_position(330, 300, 320, PLACED)  # read 20 of the 50 writes
    assert r.position == 300 and redelivered(range(300, 330), r) == 20


def test_a_group_that_read_nothing_after_the_failover_point_moves_exactly() -> None:
    r = resume_position(300, 300, 300, PLACED)
    assert (r.position, r.rewound) == (300, False)
    assert len(r.unread) == 8 and not_delivered(r.unread, 300) == 0


def test_a_drained_group_is_not_rewound_and_misses_no_copy() -> None:
    r = resume_position(360, 300, 358, PLACED)  # read every copy on the target
    assert (r.position, r.rewound, r.unread) == (360, False, ())
    assert r.quarantined_missed == (302, 305)  # delivered to no group: listed


def test_half_read_copies_resume_at_the_first_unread_one() -> None:
    r = resume_position(360, 300, 354, PLACED)  # copies of 300, 301, 303, 304 read
    assert r.position == 306 and r.unread == (306, 307, 308, 309)
    assert r.quarantined_missed == (302, 305)
    # 306..359: 4 unread gap records, 50 reverse copies read again.
    assert redelivered(range(306, 360), r) == 50


def test_gap_records_read_on_the_source_before_the_outage_are_not_read_again() -> None:
    r = resume_position(360, 304, 350, PLACED)  # it had read up to 303 on the primary
    assert r.position == 304 and r.unread[0] == 304 and r.quarantined_missed == ()
    assert r.quarantined_read == (305,)


def test_records_left_on_the_source_and_a_group_new_to_the_copy_topic() -> None:
    left = GapPlacement("orders", left=(300, 301))
    assert resume_position(360, 300, 350, left).position == 300
    assert resume_position(360, None, None, PLACED).position == 300
    # A position already before the gap stays.
    assert resume_position(290, 280, 290, PLACED) .position == 290


def test_not_delivered_counts_unread_records_before_a_committed_position() -> None:
    assert not_delivered([300, 301, 303], 302) == 2
    assert not_delivered([300, 301], None) == 0
    assert offset_runs([5, 3, 4, 9, 4]) == [[3, 6], [9, 10]]


def test_switch_back_status_and_report() -> None:
    moved = GroupSwitchBack("a", "Empty", True, None, [PartitionSwitchBack(
        "orders", 0, 300, 360, 300, "rewound", redelivered=50, unread_gap=8,
        quarantined_missed=[[302, 303]], proof={"last_read": {"topic": "orders", "offset": 349},
                                                "copy": {"topic": "orders", "offset": 359}})])
    waiting = GroupSwitchBack("b", "Stable", False, "group is active on primary", [])
    sb = SwitchBack([moved], applied=True)
    assert sb.exit_status == 0 and sb.summary()["redelivered"] == 50
    assert sb.summary()["quarantined_missed"] == 1
    sb.groups.append(waiting)
    assert sb.exit_status == 3 and sb.summary()["waiting"] == ["b"]
    # A position no translation could prove leaves the group where it was: never exit 0.
    lost = GroupSwitchBack("c", "Empty", True, None, [PartitionSwitchBack(
        "orders", 1, 40, None, 40, "unproven", note="not placed")])
    alone = SwitchBack([moved, lost], applied=True)
    assert alone.exit_status == 3 and alone.summary()["unplaced"] == ["c orders[1]"]
    md = render("failback-report.md.j2", marker={"incident": "i", "source": "primary",
                                                 "target": "secondary", "status": "open",
                                                 "fence": {}, "steps": {}},
                gap={}, reconcile={}, reverse={}, verification={}, translation=None,
                switch_back=sb.as_dict())
    assert "| a | orders[0] | 300 | 300 | 50 | 8 | 302 | 0 | orders@349 → orders@359 |" in md
    assert "**Not moved (consumers still active on secondary):** b" in md


def test_a_group_that_read_the_copies_elsewhere_steps_over_them() -> None:
    # Prefixed names: the mirror topic ends where replication stopped (translation 300), the
    # copies sat in the failover topic at 50..57.
    prefixed = GapPlacement("orders", tuple((50 + i, s) for i, s in enumerate(SAFE)),
                            quarantined=(302, 305))
    r = resume_position(300, 300, 58, prefixed)  # read them all: past the gap, nothing again
    assert (r.position, r.rewound, r.unread, r.copies_read_again) == (310, False, (), ())
    assert r.quarantined_missed == (302, 305) and r.quarantined_read == ()
    # Read the first four: it stops at the first it did not read, nothing read twice.
    r = resume_position(300, 300, 54, prefixed)
    assert (r.position, r.unread, r.copies_read_again) == (306, (306, 307, 308, 309), ())
    assert r.quarantined_missed == (302, 305)
    # A record between them that is no gap record stops the step-over: the rest is counted.
    holed = GapPlacement("orders", ((50, 300), (51, 302)))
    r = resume_position(300, 300, 52, holed)
    assert (r.position, r.copies_read_again) == (301, (302,))
    assert resume_position(360, 300, 358, PLACED).copies_read_again == ()  # kept, drained

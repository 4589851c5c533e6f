"""Offset snapshots and the source inventory (drctl/translate/snapshots.py): round trips,
and settling a snapshot that was ahead of replication."""

from __future__ import annotations

import time

from drctl.fingerprint import record_fingerprint
from drctl.kafka.records import Record
from drctl.translate.snapshots import OffsetSnapshot, settle_one
from tests.unit.translate.support import _snap


def test_a_snapshot_round_trips_and_keys_its_position() -> None:
    snap = _snap(120, 118)
    assert OffsetSnapshot.decode(snap.encode()) == snap
    assert snap.key == b"g\x00orders\x000"


def test_the_inventory_round_trips_with_its_unread_groups() -> None:
    from drctl.translate.snapshots import SourceInventory

    inv = SourceInventory({"orders": 4}, {"billing": ["orders"]}, 1_700_000_000_000, ["new"])
    assert SourceInventory.decode(inv.encode()) == inv
    # One written before `unread` existed reads as having none.
    assert SourceInventory.decode(b'{"topics": {}, "groups": {}, "written_ms": 5}').unread == []


def _rec(offset: int, value: bytes, ts: int = 1_700_000_000_000) -> Record:
    return Record("primary.orders", 0, offset, b"k", value, ts, 1, ())


def _ahead(target: int, ahead: int, last: Record, occurrence: int = 1) -> OffsetSnapshot:
    now = int(time.time() * 1000)
    return OffsetSnapshot("g", "orders", 0, 500, target, "clamped",
                          record_fingerprint(last).hex(), now, now, ahead=ahead,
                          occurrence=occurrence)


def test_a_snapshot_ahead_of_replication_settles_on_the_copy_that_arrived_since() -> None:
    last = _rec(0, b"v-last")  # the last record the group read, as guard saw it on the source
    target = [_rec(100 + i, b"v%d" % i) for i in range(4)] + [_rec(104, b"v-last"),
                                                             _rec(105, b"after")]
    assert settle_one(_ahead(100, 5, last), target, 0, 106)[0] == 105  # type: ignore[index]
    # The 2nd identical record since the snapshot: the 2nd copy, not the first.
    twin = target[:2] + [_rec(102, b"v-last")] + target[3:]
    assert settle_one(_ahead(100, 5, last, occurrence=2), twin, 0, 106)[0] == 105  # type: ignore[index]
    assert settle_one(_ahead(100, 5, last, occurrence=1), twin, 0, 106)[0] == 103  # type: ignore[index]


def test_a_snapshot_ahead_of_replication_never_settles_past_what_the_target_proves() -> None:
    last = _rec(0, b"v-last")
    partial = [_rec(100 + i, b"v%d" % i) for i in range(3)]
    # The copy never arrived and the target holds no more than the group had read: its end.
    assert settle_one(_ahead(100, 5, last), partial, 0, 103) == (
        103, "the target's end (the rest of what it read was never copied)")
    # More records than the group could have read, yet no copy: not settled (offset stands).
    longer = [_rec(100 + i, b"v%d" % i) for i in range(8)]
    assert settle_one(_ahead(100, 5, last), longer, 0, 108) is None
    # Retention took the snapshot's offset: copies may be gone, so nothing is counted.
    assert settle_one(_ahead(100, 5, last), partial, 101, 103) is None
    # An exact snapshot has nothing to settle.
    exact = _snap(120, 118)
    assert settle_one(exact, partial, 0, 103) is None

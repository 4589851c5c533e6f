"""A loaded partition answers range reads and timestamp look-ups as the broker would."""

from __future__ import annotations

import random

from drctl.kafka.records import Record
from drctl.translate.reader import _LoadedPartition


def rec(offset: int, ts: int) -> Record:
    return Record("t", 0, offset, None, b"v", ts, 1, ())


def broker_answer(records: list[Record], ts: int) -> int:
    """ListOffsets(T): the first record (in offset order) whose timestamp is >= T."""
    return next((r.offset for r in records if r.timestamp_ms >= ts), -1)


def test_timestamp_lookup_matches_list_offsets_on_non_monotonic_timestamps() -> None:
    rng = random.Random(7)
    offset = 100
    records = []
    for _ in range(500):
        offset += rng.choice((1, 1, 1, 3))  # gaps: markers and aborted records
        records.append(rec(offset, 1_000 + rng.randrange(0, 200)))  # out of order, repeats
    part = _LoadedPartition(100, offset + 1, records)
    for ts in range(950, 1_260):
        assert part.first_at_or_after(ts) == broker_answer(records, ts), ts


def test_slices_follow_offsets_not_positions() -> None:
    records = [rec(o, o) for o in (5, 6, 9, 10, 14)]
    part = _LoadedPartition(5, 15, records)
    assert [r.offset for r in part.slice(6, 10)] == [6, 9]
    assert [r.offset for r in part.slice(7, 9)] == []
    assert [r.offset for r in part.slice(0, 100)] == [5, 6, 9, 10, 14]
    assert part.covers(5, 15) and part.covers(7, 9)
    assert not part.covers(4, 9) and not part.covers(6, 16)
    assert part.first_at_or_after(15) == -1

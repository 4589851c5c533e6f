"""Requests go out in windows (drctl/kafka/inflight.py): every item once, in order."""

from __future__ import annotations

from drctl.kafka.inflight import windows


def test_windows_cover_every_item_once_in_order() -> None:
    items = list(range(1234))
    got = list(windows(items, 500))
    assert [len(w) for w in got] == [500, 500, 234]
    assert [x for w in got for x in w] == items
    assert list(windows([], 500)) == []

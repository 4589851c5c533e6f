"""The ticker that paces progress lines of a long wait (drctl/progress.py)."""

from __future__ import annotations

from drctl.progress import Ticker
from tests.unit.support import FakeClock


def test_ticker_waits_a_little_then_ticks_every_ten_seconds() -> None:
    clock = FakeClock()
    ticker = Ticker(clock=clock)
    ticks = []
    for _ in range(30):
        ticks.append(ticker.due())
        clock.now += 1
    assert [i for i, t in enumerate(ticks) if t] == [2, 12, 22]

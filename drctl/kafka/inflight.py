"""How many admin requests drctl keeps outstanding at once on one client.

With 10,000 OffsetFetch requests in flight on one connection librdkafka 2.16 stalled it: after
some 30,000 requests every later one timed out, and the process aborted at exit (measured on
the lab, several runs). Windows of 500 never stalled, and were faster.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

IN_FLIGHT = 500
T = TypeVar("T")


def windows(items: Sequence[T], size: int = IN_FLIGHT) -> Iterator[Sequence[T]]:
    """`items` in consecutive slices of at most `size`: send one, await its answers, go on."""
    for i in range(0, len(items), size):
        yield items[i:i + size]

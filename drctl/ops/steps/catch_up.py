"""How far a replication flow still has to go, for the catch-up waits (planned failover,
failback's reverse replication): records left per partition, said every few seconds, and
the error when the wait runs out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from drctl.errors import TimedOut
from drctl.timeparse import format_duration
from drctl.translate.locate import MatchQuery, Side, last_records, match_records

TP = tuple[str, int]
SHOWN = 5  # partitions named in one line; the rest are counted


def records_left(a: Side, b: Side, pairs: Sequence[tuple[TP, TP]]) -> dict[TP, int | None]:
    """Per A partition of `pairs` (A partition, B partition it is copied to): how many of its
    records up to A's end (`a.marks`) are not on B yet — A's end minus the position after
    the A record that B's last record copies. All of A's when B's partition is empty; None
    when B's last record is no copy of an A record (writes of its own): no count is honest."""
    tails = last_records(b, [(tp_b, b.marks[tp_b][1]) for _, tp_b in pairs])
    left: dict[TP, int | None] = {}
    queries: list[MatchQuery] = []
    asked: list[TP] = []
    for (tp_a, _), (last, _) in zip(pairs, tails, strict=True):
        low, end = a.marks[tp_a]
        if last is None:
            left[tp_a] = end - low
        else:
            queries.append(MatchQuery(last, tp_a))
            asked.append(tp_a)
    for tp_a, match in zip(asked, match_records(b, a, queries), strict=True):
        left[tp_a] = None if match.offset is None else max(0, a.marks[tp_a][1] - match.offset - 1)
    return left


def describe_left(left: Mapping[TP, int | None]) -> str:
    """`1,200 record(s) left in 3 partition(s): orders[0] 1,000, orders[2] 150, …`."""
    known = sum(n for n in left.values() if n)
    behind = {tp: n for tp, n in left.items() if n is None or n > 0}
    ranked = sorted(behind.items(), key=lambda item: (-(item[1] or 0), item[0]))
    shown = ", ".join(f"{t}[{p}] {'?' if n is None else f'{n:,}'}"
                      for (t, p), n in ranked[:SHOWN])
    more = f" and {len(ranked) - SHOWN} more" if len(ranked) > SHOWN else ""
    unknown = " (? = not countable: the copy holds writes of its own)" \
        if any(n is None for n in behind.values()) else ""
    return (f"{known:,} record(s) left in {len(behind)} partition(s): {shown}{more}{unknown}"
            if behind else "no records left")


def catch_up_timed_out(what: str, timeout_s: float, left: Mapping[TP, int | None],
                       hint: str) -> TimedOut:
    """The error of a catch-up that did not finish in `timeout_s`: what was left."""
    return TimedOut(f"{what} did not catch up in {format_duration(timeout_s)}: "
                    f"{describe_left(left)}.", hint)


"""Whether the target's failover topics are quiet: no producer writes there any more.

Failback's order check classifies the gap against the post-failover writes it reads when the
plan is made, and the return to protection retires the reverse flow that carries those writes
back: both need the producers off the target. A reading is the failover topics' ends; two
readings some seconds apart say who still writes, and how fast.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from drctl.context import OpsContext
from drctl.kafka.offsets import watermarks
from drctl.kafka.topics import TP
from drctl.kafka.transactions import OpenTransaction, open_transactions
from drctl.ops.one_way.reverse import failover_starts
from drctl.progress import Ticker
from drctl.retry import WaitTimedOut, wait_for
from drctl.state import FailoverMarker
from drctl.timeparse import format_duration


@dataclass(frozen=True)
class Ends:
    """The failover topics' end offsets at one moment."""

    at: float  # time.monotonic()
    ends: dict[TP, int]

    @classmethod
    def read(cls, ctx: OpsContext, marker: FailoverMarker) -> Ends:
        tps = [(t, p) for t, parts in failover_starts(ctx.rep, marker).items() for p in parts]
        marks = watermarks(ctx.target.admin(), tps) if tps else {}
        return cls(time.monotonic(), {tp: end for tp, (_, end) in marks.items()})

    def by_topic(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (t, p), end in sorted(self.ends.items()):
            out.setdefault(t, {})[str(p)] = end
        return out


@dataclass(frozen=True)
class Writes:
    """What the failover topics received between two readings."""

    per_partition: dict[TP, int]
    seconds: float

    @classmethod
    def between(cls, before: Ends, after: Ends) -> Writes:
        moved = {tp: after.ends[tp] - end for tp, end in before.ends.items()
                 if after.ends.get(tp, end) > end}
        return cls(moved, max(after.at - before.at, 0.001))

    def __bool__(self) -> bool:
        return bool(self.per_partition)

    def describe(self) -> str:
        """e.g. `orders +120 (12.0/s), payments +3 (0.3/s)`."""
        per_topic: Counter[str] = Counter()
        for (t, _), n in self.per_partition.items():
            per_topic[t] += n
        return ", ".join(f"{t} +{n:,} ({n / self.seconds:.1f}/s)"
                         for t, n in sorted(per_topic.items()))

    def as_dict(self) -> dict[str, int]:
        return {f"{t}[{p}]": n for (t, p), n in sorted(self.per_partition.items())}


def wait_transactions_closed(ctx: OpsContext, marker: FailoverMarker,
                             timeout_s: float) -> list[OpenTransaction]:
    """Until no transaction is open on the failover topics (their writes would land after
    whatever reads them now), at most `timeout_s`, saying what it waits for; those still
    open then."""
    tps = [(t, p) for t, parts in failover_starts(ctx.rep, marker).items() for p in parts]
    found: list[OpenTransaction] = []
    ticker = Ticker(first_s=0.0)  # said at once: the operator may need to abort it

    def closed() -> bool | None:
        found[:] = open_transactions(ctx.target, tps)
        if found and ticker.due():
            ctx.notify("Waiting for open transaction(s) on "
                       + ", ".join(f"{t.topic}[{t.partition}] (stable at {t.stable}, end "
                                   f"{t.end})" for t in found[:5])
                       + f" to commit or abort (at most {format_duration(timeout_s)})")
        return True if not found else None

    try:
        wait_for(closed, deadline_s=timeout_s, interval_s=1.0)
    except WaitTimedOut:
        pass
    return found

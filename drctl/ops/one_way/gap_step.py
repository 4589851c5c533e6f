"""Failback's gap step: the Spark gap analysis (with --check-order unless told not to),
bounded by the marker and by --timeout, its Spark phases said as it goes. A cluster that
does not answer for --deadline mid-job stops the job (interrupted on the Spark Connect
server) and ends the step naming it (ClusterUnreachable); one that the job lost and that
answers again (GapJobLostKafka) makes failback run again from the last step recorded
(drctl/rerun.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from drctl.context import OpsContext
from drctl.gap.plan import GapScope
from drctl.gap.result import GapRecord
from drctl.kafka.records import Record
from drctl.progress import Notify, Ticker
from drctl.state import FailoverMarker


@dataclass
class GapOutcome:
    """What the gap analysis found, classified (docs/design.md §5); without the order check
    (`--no-check-order`) every record is `unclassified`, and none counts as safe."""

    safe: list[Record] = field(default_factory=list)
    conflict: list[Record] = field(default_factory=list)
    unkeyed: list[Record] = field(default_factory=list)
    unclassified: list[Record] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.safe) + len(self.conflict) + len(self.unkeyed) + len(self.unclassified)


# (context, marker, check_order): the gap, classified when check_order is set.
GapFinder = Callable[[OpsContext, FailoverMarker, bool], GapOutcome]


def _as_record(rec: GapRecord) -> Record:
    return Record(rec.topic, rec.partition, rec.offset, rec.key, rec.value, rec.timestamp_ms,
                  rec.timestamp_type, tuple(rec.headers))


class PhaseLines:
    """The Spark job's progress as lines for `notify`: each phase as it starts, its tasks
    done every ten seconds (failback has no progress bar of its own)."""

    def __init__(self, notify: Notify, ticker: Ticker | None = None) -> None:
        self._notify = notify
        self._ticker = ticker or Ticker(first_s=10.0)
        self._phase = ""

    def update(self, **fields: Any) -> None:
        description = fields.get("description") or self._phase
        total, done = fields.get("total"), fields.get("completed")
        if description != self._phase and not description.endswith("(Spark tasks)"):
            self._phase = description
            self._notify(f"Spark: {description}")
        elif total and done is not None and self._ticker.due():
            self._notify(f"Spark: {description}: {done:,} of {total:,} task(s)")


def gap_finder(lookback_s: float | None = None, debug: bool = False,
               scope: GapScope = GapScope.TAIL, *, timeout_s: float = 1800.0) -> GapFinder:
    """No time window unless one is given: the proven tail (gap/alignment.py) decides where
    each partition's comparison starts, however long before the failover replication broke."""
    def find_gap(ctx: OpsContext, marker: FailoverMarker, check_order: bool) -> GapOutcome:
        from drctl.gap.planner import (
            Window,
            bounds_from_marker,
            plan_gap_analysis,
            window_from,
        )
        from drctl.gap.result import lost_to_retention, scope_statement
        from drctl.gap.runner import ClusterWatch, run_gap_analysis

        config, notify = ctx.config, ctx.notify
        window = (Window() if lookback_s is None
                  else window_from(None, int(lookback_s * 1000), marker.failover_time_ms))
        if scope == GapScope.TAIL:
            notify("Proving where replication stopped in each partition")
        plan = plan_gap_analysis(
            ctx, sorted(marker.topics), **bounds_from_marker(marker), window=window,
            check_order=check_order, scope=scope,
            out_dir=config.state.dir / "gap" / marker.incident,
            deadline_s=ctx.reach_deadline_s)
        notify(f"Gap analysis (Spark, {config.spark.where}) of {len(marker.topics)} topic(s)")
        # A cluster that does not answer for --deadline while the job runs stops it
        # (ClusterUnreachable: failback ends, exit 4, naming it); one the job itself lost and
        # that answers again (GapJobLostKafka) is failback's to run again (drctl/rerun.py).
        # --timeout bounds the job while it works.
        watch = ClusterWatch((ctx.source, ctx.target),
                             config.retry.with_deadline(ctx.reach_deadline_s), notify)
        result = run_gap_analysis(plan, config.spark, PhaseLines(notify), debug=debug,
                                  notify=notify, timeout_s=timeout_s,
                                  deadline_s=ctx.reach_deadline_s, watch=watch)
        by_class: dict[str, list[Record]] = {"safe": [], "conflict": [], "unkeyed": [],
                                             "unclassified": []}
        for rec in result.iter_records():
            # Without the order check the job classifies nothing: no record is called safe.
            by_class[(rec.classification or "safe") if check_order else "unclassified"].append(
                _as_record(rec))
        return GapOutcome(safe=by_class["safe"], conflict=by_class["conflict"],
                          unkeyed=by_class["unkeyed"], unclassified=by_class["unclassified"],
                          summary={"out_dir": plan.out_dir, **result.totals,
                                   "scope": result.scope,
                                   "lost": lost_to_retention(result.partitions),
                                   "verified": [{"topic": row["topic"],
                                                 "partition": row["partition"],
                                                 "scope": row.get("scope", "full"),
                                                 "verified_from": row.get("verified_from"),
                                                 # Where the comparison ended: the return
                                                 # to protection starts forward copying
                                                 # from here (ops/one_way/reprotect.py).
                                                 "source_end": row.get("source_end"),
                                                 "lost": row.get("lost"),
                                                 "statement": scope_statement(row)}
                                                for row in result.partitions]})

    return find_gap

"""Failback's gap step: the Spark gap analysis (with --check-order unless told not to),
bounded by the marker."""

from __future__ import annotations

from drctl.config import Config
from drctl.gap.plan import GapScope
from drctl.kafka.records import Record
from drctl.ops.failback import GapFinder
from drctl.ops.reconcile import GapOutcome
from drctl.progress import Notify
from drctl.state import FailoverMarker


def _as_record(rec: object) -> Record:
    # Spark says 0 for CreateTime where Kafka clients say 1.
    return Record(rec.topic, rec.partition, rec.offset,  # type: ignore[attr-defined]
                  rec.key, rec.value, rec.timestamp_ms,  # type: ignore[attr-defined]
                  1 if rec.timestamp_type == 0 else 2,  # type: ignore[attr-defined]
                  tuple(rec.headers))  # type: ignore[attr-defined]


def gap_finder(lookback_s: float | None = None, debug: bool = False,
               scope: GapScope = GapScope.TAIL) -> GapFinder:
    """No time window unless one is given: the proven tail (gap/alignment.py) decides where
    each partition's comparison starts, however long before the failover replication broke."""
    def find_gap(config: Config, marker: FailoverMarker, check_order: bool,
                 notify: Notify) -> GapOutcome:
        from drctl.gap.planner import Window, plan_gap_analysis, window_from
        from drctl.gap.result import scope_statement
        from drctl.gap.runner import run_gap_analysis

        rep = config.require_replication()
        window = (Window() if lookback_s is None
                  else window_from(None, int(lookback_s * 1000), marker.failover_time_ms))
        if scope == GapScope.TAIL:
            notify("Proving where replication stopped in each partition")
        plan = plan_gap_analysis(
            config, sorted(marker.topics), target_end=marker.failover_point,
            post_failover_start=None if rep.names_kept else marker.failover_topics_end,
            window=window, check_order=check_order, scope=scope,
            late_runs={t: {int(p): part.get("runs", []) for p, part in parts.items()}
                       for t, parts in (marker.late_copies.get("partitions") or {}).items()},
            out_dir=config.state.dir / "gap" / marker.incident)
        notify(f"Gap analysis (Spark, {config.spark.master}) of {len(marker.topics)} topic(s)")
        result = run_gap_analysis(plan, config.spark, debug=debug, notify=notify)
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
                                   "verified": [{"topic": row["topic"],
                                                 "partition": row["partition"],
                                                 "scope": row.get("scope", "full"),
                                                 "verified_from": row.get("verified_from"),
                                                 "statement": scope_statement(row)}
                                                for row in result.partitions]})

    return find_gap

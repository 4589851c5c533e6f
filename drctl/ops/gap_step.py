"""Failback's gap step: the Spark gap analysis with --check-order, bounded by the marker."""

from __future__ import annotations

from drctl.config import Config
from drctl.kafka.records import Record
from drctl.ops.failback import GapFinder
from drctl.ops.reconcile import GapOutcome
from drctl.progress import Notify
from drctl.state import FailoverMarker

DEFAULT_LOOKBACK_S = 3600.0  # covers any replicator lag worth a failover


def _as_record(rec: object) -> Record:
    # Spark says 0 for CreateTime where Kafka clients say 1.
    return Record(rec.topic, rec.partition, rec.offset,  # type: ignore[attr-defined]
                  rec.key, rec.value, rec.timestamp_ms,  # type: ignore[attr-defined]
                  1 if rec.timestamp_type == 0 else 2,  # type: ignore[attr-defined]
                  tuple(rec.headers))  # type: ignore[attr-defined]


def gap_finder(lookback_s: float = DEFAULT_LOOKBACK_S, debug: bool = False) -> GapFinder:
    def find_gap(config: Config, marker: FailoverMarker, notify: Notify) -> GapOutcome:
        from drctl.gap.planner import plan_gap_analysis, window_from
        from drctl.gap.runner import run_gap_analysis

        rep = config.require_replication()
        window = window_from(None, int(lookback_s * 1000), marker.failover_time_ms)
        plan = plan_gap_analysis(
            config, sorted(marker.topics), target_end=marker.failover_point,
            post_failover_start=None if rep.names_kept else marker.failover_topics_end,
            window=window, check_order=True,
            out_dir=config.state.dir / "gap" / marker.incident)
        notify(f"Gap analysis (Spark, {config.spark.master}) of {len(marker.topics)} topic(s)")
        result = run_gap_analysis(plan, config.spark, debug=debug, notify=notify)
        by_class: dict[str, list[Record]] = {"safe": [], "conflict": [], "unkeyed": []}
        for rec in result.iter_records():
            by_class[rec.classification or "safe"].append(_as_record(rec))
        return GapOutcome(safe=by_class["safe"], conflict=by_class["conflict"],
                          unkeyed=by_class["unkeyed"],
                          summary={"out_dir": plan.out_dir, **result.totals})

    return find_gap

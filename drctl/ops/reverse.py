"""Reverse replication (target -> source) that starts at the failover point: only
post-failover data flows back, never what was already replicated (the Replicator guide's
second failback prerequisite)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from drctl.config import Config
from drctl.errors import DrctlError
from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import watermarks
from drctl.progress import Notify
from drctl.replication.base import ReplicationKind, ReverseRequest
from drctl.state import FailoverMarker, Offsets
from drctl.translate.locate import MatchQuery, Side, last_records, match_records
from drctl.translate.reader import BatchReader

RECONCILED_HEADER = "drctl-reconciled"


def start_points(config: Config, marker: FailoverMarker) -> Offsets:
    """Where reverse replication starts: the failover topics' ends at failover."""
    rep = config.require_replication()
    if rep.names_kept:
        return {t: dict(parts) for t, parts in marker.failover_point.items()}
    return {t: dict(parts) for t, parts in marker.failover_topics_end.items()}


def reverse_topic(config: Config, failover_topic: str) -> str:
    """Where a failover topic's records land on the source cluster."""
    rep = config.require_replication()
    return failover_topic if rep.names_kept else f"{rep.target_alias}.{failover_topic}"


def start_reverse_replication(config: Config, kind: ReplicationKind, marker: FailoverMarker,
                              out_dir: Path, notify: Notify = lambda _: None) -> dict[str, Any]:
    request = ReverseRequest(marker.incident, start_points(config, marker), RECONCILED_HEADER,
                             out_dir)
    return kind.start_reverse(config, request, notify)


def wait_reverse_caught_up(config: Config, kind: ReplicationKind, marker: FailoverMarker, *,
                           deadline_s: float = 300, notify: Notify = lambda _: None) -> None:
    """Until the last record of every failover topic partition is on the source."""
    if not kind.reverse_started_by_drctl:
        return
    rep = config.require_replication()
    tgt = ClusterClients.for_cluster(config, rep.target)
    src = ClusterClients.for_cluster(config, rep.source)
    tgt_admin, src_admin = tgt.admin(), src.admin()
    tps = [(t, p) for t, parts in start_points(config, marker).items() for p in parts]
    notify("Waiting for reverse replication to catch up")
    end = time.monotonic() + deadline_s
    while True:
        marks = watermarks(tgt_admin, tps)
        a = Side(BatchReader(tgt), tgt_admin, marks)
        tails = last_records(a, [(tp, marks[tp][1]) for tp in tps])
        queries = [MatchQuery(last, (reverse_topic(config, tp[0]), tp[1]))
                   for tp, (last, _) in zip(tps, tails, strict=True)
                   if last is not None and last.offset >= _start(marker, config, tp)
                   and not any(k == RECONCILED_HEADER for k, _ in last.headers)]
        existing = src_admin.list_topics(timeout=30).topics
        if all(q.tp_b[0] in existing for q in queries):
            b_tps = [q.tp_b for q in queries]
            b = Side(BatchReader(src), src_admin, watermarks(src_admin, b_tps))
            if all(m.offset is not None for m in match_records(a, b, queries)):
                return
        if time.monotonic() > end:
            raise DrctlError("Reverse replication did not catch up in time.",
                             "Check the reverse connector's status and the Connect log.")
        time.sleep(1)


def _start(marker: FailoverMarker, config: Config, tp: tuple[str, int]) -> int:
    return start_points(config, marker).get(tp[0], {}).get(tp[1], 0)

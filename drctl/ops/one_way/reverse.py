"""Reverse replication (target -> source) that starts at the failover point: only
post-failover data flows back, never what was already replicated (the Replicator guide's
second failback prerequisite)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from drctl.config import ReplicationSettings
from drctl.context import OpsContext
from drctl.fingerprint import RECONCILED_HEADER, is_reconciled
from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.copy import copy_records
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import Record, read_ranges
from drctl.kafka.topics import TP, log_append_time_topics
from drctl.ops.one_way.copies import copy_fingerprint, timestamps_kept
from drctl.ops.steps.catch_up import catch_up_timed_out, describe_left, records_left
from drctl.ops.steps.scope import flow_part
from drctl.ops.steps.side_by_side import recorded_edits
from drctl.progress import Ticker
from drctl.replication.base import ReverseRequest
from drctl.retry import WaitTimedOut, wait_for
from drctl.state import FailoverMarker, Offsets
from drctl.translate.locate import (
    MatchQuery,
    Side,
    last_records,
    match_records,
)


def failover_starts(rep: ReplicationSettings, marker: FailoverMarker) -> Offsets:
    """Where the post-failover writes begin: the failover topics' ends at failover."""
    if rep.names_kept:
        return {t: dict(parts) for t, parts in marker.failover_point.items()}
    return {t: dict(parts) for t, parts in marker.failover_topics_end.items()}


def late_copy_offsets(marker: FailoverMarker) -> dict[tuple[str, int], set[int]]:
    """Late copies (ops/one_way/late_copies.py) per target (topic, partition)."""
    out: dict[tuple[str, int], set[int]] = {}
    for topic, parts in (marker.late_copies.get("partitions") or {}).items():
        for p, part in parts.items():
            offsets = {o for start, end in part.get("runs", []) for o in range(start, end)}
            if offsets:
                out[(topic, int(p))] = offsets
    return out


def start_points(rep: ReplicationSettings, marker: FailoverMarker) -> Offsets:
    """Where reverse replication starts: the failover topics' ends at failover — or, where
    the replicator's late copies sit among the post-failover writes (names kept), right after
    the last of them: drctl copies the writes before it itself (`copy_back`)."""
    starts = failover_starts(rep, marker)
    for (topic, p), offsets in late_copy_offsets(marker).items():
        if topic in starts and p in starts[topic]:
            starts[topic][p] = max(starts[topic][p], max(offsets) + 1)
    return starts


def copy_back(ctx: OpsContext, marker: FailoverMarker, source_start: Offsets) -> dict[str, Any]:
    """Copy the post-failover writes that lie before the last late copy to the source (same
    partition, key, value, headers, timestamp), skipping the late copies and drctl's own
    reconciled copies; reverse replication continues after them. Idempotent: what an earlier
    run already appended since `source_start` is not copied again."""
    late = late_copy_offsets(marker)
    starts, resume = failover_starts(ctx.rep, marker), start_points(ctx.rep, marker)
    ranges = {(t, p): (starts[t][p], resume[t][p]) for (t, p) in late
              if t in starts and resume[t][p] > starts[t][p]}
    if not ranges:
        return {"copied": 0, "skipped": 0}
    ctx.notify(f"Copying {sum(e - s for s, e in ranges.values())} offset(s) of post-failover "
           "writes around the replicator's late copies back to the source")
    return carry_to_source(ctx, ranges, source_start, skip=late,
                           timestamps=timestamps_kept(ctx, marker))


def carry_to_source(ctx: OpsContext, ranges: Mapping[TP, tuple[int, int]],
                    source_start: Offsets, *, timestamps: bool,
                    skip: Mapping[TP, Collection[int]] | None = None) -> dict[str, Any]:
    """Copy the target's post-failover writes in `ranges` (failover topic partitions) to
    their reverse topics on the source, as they were — never drctl's reconciled copies nor
    the offsets in `skip`. Idempotent: a record the source already holds since
    `source_start` (as many times) is not copied again. Where the source's retention removed
    part of what it received since `source_start`, as many of the oldest writes not found
    there are taken for the copies it removed (copies arrive in order), not copied again."""
    rep, src, dst = ctx.rep, ctx.source, ctx.target
    already: dict[TP, Counter[bytes]] = defaultdict(Counter)
    src_marks = watermarks(src.admin(), [(rep.reverse_topic(t), p) for t, p in ranges])
    removed: dict[TP, int] = {}
    removed_on_source: dict[str, int] = {}
    consumer = src.consumer(**{"enable.partition.eof": "true"})
    try:
        appended = {tp: (source_start.get(tp[0], {}).get(tp[1], mark[1]), mark[1])
                    for tp, mark in src_marks.items()}
        for rec in read_ranges(consumer, {tp: r for tp, r in appended.items() if r[1] > r[0]},
                               below_log_start=removed):
            already[(rec.topic, rec.partition)][copy_fingerprint(rec, timestamps)] += 1
    finally:
        consumer.close()
    removed_on_source = {f"{t}[{p}]": n for (t, p), n in removed.items()}
    removed_on_target: dict[TP, int] = {}
    skipped = 0
    wanted: list[Record] = []
    consumer = dst.consumer(**{"enable.partition.eof": "true"})
    try:
        for rec in read_ranges(consumer, ranges, below_log_start=removed_on_target):
            if rec.offset in (skip or {}).get((rec.topic, rec.partition), ()) \
                    or is_reconciled(rec.headers):
                continue
            target = (rep.reverse_topic(rec.topic), rec.partition)
            fp = copy_fingerprint(rec, timestamps)
            if already[target][fp] > 0:
                already[target][fp] -= 1
                skipped += 1
                continue
            if removed.get(target, 0) > 0:
                removed[target] -= 1
                skipped += 1
                continue
            wanted.append(rec)
    finally:
        consumer.close()
    sent = copy_records(src, wanted, lambda r: (rep.reverse_topic(r.topic), r.partition),
                        topics=sorted({rep.reverse_topic(t) for t, _ in ranges}),
                        what="post-failover writes",
                        rerun_hint="Run the same command again: it copies only what is "
                                   "missing.")
    out: dict[str, Any] = {"copied": sum(sent.values()), "skipped": skipped}
    if removed_on_source or removed_on_target:  # what retention took before it was read
        out["retention"] = {"source": removed_on_source,
                            "target": {f"{t}[{p}]": n for (t, p), n in removed_on_target.items()}}
    return out


def start_reverse_replication(ctx: OpsContext, marker: FailoverMarker,
                              out_dir: Path) -> dict[str, Any]:
    request = ReverseRequest(marker.incident, start_points(ctx.rep, marker), RECONCILED_HEADER,
                             out_dir, flow_part(marker), tuple(recorded_edits(ctx, marker)))
    return ctx.require_kind().start_reverse(ctx, request, ctx.notify)


def wait_reverse_caught_up(ctx: OpsContext, marker: FailoverMarker, *,
                           deadline_s: float = 1800) -> dict[str, list[int]]:
    """Until the last record of every failover topic partition is on the source; every ten
    seconds, the records left per partition. Returns, per failover topic partition
    (`topic[p]`), what was carried at that moment: [the target's end, the source position
    after that end's copy] — a snapshot both sides agree on while writes go on."""
    rep, tgt, src, notify = ctx.rep, ctx.target, ctx.source, ctx.notify
    tgt_admin, src_admin = tgt.admin(), src.admin()
    tps = [(t, p) for t, parts in start_points(rep, marker).items() for p in parts]
    notify("Waiting for reverse replication to catch up")
    tgt_append = log_append_time_topics(tgt_admin, {t for t, _ in tps})
    src_append = log_append_time_topics(src_admin, {rep.reverse_topic(t) for t, _ in tps})
    state: dict[str, Any] = {}

    def caught_up() -> dict[str, list[int]] | None:
        marks = watermarks(tgt_admin, tps)
        a = Side.of(tgt, tgt_admin, marks, tgt_append)
        # The last record the reverse flow carries: drctl's reconciled copies are the
        # source's own records and never go back.
        tails = last_records(a, [(tp, marks[tp][1]) for tp in tps],
                             skip=lambda r: is_reconciled(r.headers))
        queries = [MatchQuery(last, (rep.reverse_topic(tp[0]), tp[1]))
                   for tp, (last, _) in zip(tps, tails, strict=True)
                   if last is not None and last.offset >= _start(marker, rep, tp)]
        existing = cluster_metadata(src).topics
        state.update(marks=marks, a=a, b=None, behind=queries)
        if all(q.tp_b[0] in existing for q in queries):
            b = Side.of(src, src_admin, watermarks(src_admin, [q.tp_b for q in queries]),
                        src_append)
            found = match_records(a, b, queries)
            state.update(b=b, behind=[q for q, m in zip(queries, found, strict=True)
                                      if m.offset is None])
            if not state["behind"]:
                return _carried(src, rep, tps, marks, queries, found)
        return None

    def left() -> dict[TP, int | None]:
        # Before the reverse topics exist nothing has arrived: all of it is left.
        pairs = [((q.record.topic, q.record.partition), q.tp_b) for q in state["behind"]]
        if state["b"] is None:
            return {tp: state["marks"][tp][1] - _start(marker, rep, tp) for tp, _ in pairs}
        return records_left(state["a"], state["b"], pairs)

    ticker = Ticker()
    try:
        return wait_for(caught_up, deadline_s=deadline_s, interval_s=1.0,
                        on_wait=lambda: ticker.due() and notify(
                            f"Reverse catch-up: {describe_left(left())}"))
    except WaitTimedOut:
        raise catch_up_timed_out(
            "Reverse replication", deadline_s, left(),
            "Check the reverse connector's status and the Connect log; run failback "
            "again (with a longer --timeout): it continues with this wait.") from None


def _carried(src: ClusterClients, rep: ReplicationSettings, tps: list[TP],
             marks: Mapping[TP, tuple[int, int]], queries: list[MatchQuery],
             found: list[Any]) -> dict[str, list[int]]:
    copies = {(q.record.topic, q.record.partition): m.offset + 1
              for q, m in zip(queries, found, strict=True)}
    rest = [(rep.reverse_topic(t), p) for t, p in tps if (t, p) not in copies]
    existing = cluster_metadata(src).topics
    src_ends = watermarks(src.admin(), [tp for tp in rest if tp[0] in existing])
    return {f"{t}[{p}]": [marks[(t, p)][1],
                          copies.get((t, p),
                                     src_ends.get((rep.reverse_topic(t), p), (0, 0))[1])]
            for t, p in tps}


def _start(marker: FailoverMarker, rep: ReplicationSettings, tp: tuple[str, int]) -> int:
    return start_points(rep, marker).get(tp[0], {}).get(tp[1], 0)

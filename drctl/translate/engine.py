"""translate-offsets: move consumer-group positions from one cluster to the other.

Every method ends in the same rules (docs/design.md §3): never past the target's end (report
what the target lacks), never backwards without `allow_rewind`, apply only to groups with no
active members on the target, one atomic commit per group.
"""

from __future__ import annotations

import functools
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from drctl.config import Config
from drctl.context import OpsContext
from drctl.errors import UsageError
from drctl.kafka.checkpoints import read_checkpoints
from drctl.kafka.clients import ClusterClients, describe_with_retry
from drctl.kafka.groups import alter_offsets_many, committed_offsets, group_states, list_groups
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import Record
from drctl.kafka.topics import TP, is_internal_topic
from drctl.replication.base import kind_for
from drctl.retry import RetryPolicy
from drctl.translate.locate import (
    MatchQuery,
    Side,
    last_records,
    match_records,
)
from drctl.translate.model import (
    GroupResult,
    PartitionResult,
    TranslateMethod,
    TranslationReport,
)
from drctl.translate.reader import RangeRequest
from drctl.translate.snapshots import OffsetSnapshot, read_snapshots, settle_ahead

# Groups that belong to Kafka Connect, MirrorMaker 2 or drctl, never to an application.
_INTERNAL_GROUP = re.compile(r"^(connect-.*|__.*|drctl-.*|_.*)$")


@dataclass(frozen=True)
class TranslateRequest:
    source: str  # cluster name the groups consumed on
    target: str  # cluster name they move to
    groups: str = ".*"  # regex on group ids
    method: TranslateMethod = TranslateMethod.AUTO
    apply: bool = False
    allow_rewind: bool = False
    max_scan: int = 100_000
    source_deadline_s: float | None = 30.0  # how long to retry an unreachable source
    # Records carrying this header were written by drctl itself (reconciled gap copies): a
    # group that read one read no replicated record there, so it never anchors a position.
    own_copy_header: str | None = None
    # Positions given by the caller (group -> {source (topic, partition): offset}) instead
    # of the groups' commits: `drctl guard` translates only what moved.
    positions: dict[str, dict[TP, int]] | None = None
    # Where the replicated records end on the target (failover: F, keyed by target topic):
    # no position goes past it, even when the target has grown since (a re-run after a
    # crash finds post-failover writes there that no group has read).
    target_ends: dict[str, dict[int, int]] | None = None


def _topic_mapper(config: Config, source: str, target: str) -> Callable[[str], str | None]:
    rep = config.require_replication()
    # Cached: it is asked once per position (160,000 at 10,000 groups x 16 partitions), and
    # each answer runs the topic filter's regexes.
    if (source, target) == (rep.source, rep.target):
        @functools.cache
        def forward(topic: str) -> str | None:
            if is_internal_topic(topic) or not rep.topics.matches(topic):
                return None
            return rep.mirror_topic(topic)
        return forward
    if (source, target) == (rep.target, rep.source):
        @functools.cache
        def backward(topic: str) -> str | None:
            if is_internal_topic(topic):
                return None
            original = rep.source_topic_of(topic)
            if original is not None:  # a mirror topic: back to the topic it mirrors
                return original if rep.topics.matches(original) else None
            # A failover topic (MM2 prefixed names): the reverse flow names its copy
            # <target alias>.<topic> on the source.
            return f"{rep.target_alias}.{topic}" if rep.topics.matches(topic) else None
        return backward
    raise UsageError(f"No replication flow between '{source}' and '{target}' in the config.",
                     f"The configured flow is {rep.source} -> {rep.target}; translate in either "
                     "direction of it.")


def translate_offsets(ctx: OpsContext, req: TranslateRequest) -> TranslationReport:
    """Translate the groups' positions of `req` (module docstring); progress goes to the
    context's notify."""
    config, notify = ctx.config, ctx.notify
    if req.method not in set(TranslateMethod):  # library callers may pass plain text
        raise UsageError(f"Unknown method '{req.method}'.",
                         f"Use one of {', '.join(TranslateMethod)}.")
    rep = config.require_replication()
    try:
        group_re = re.compile(req.groups)
    except re.error as exc:
        raise UsageError(f"--groups is not a valid regex: {exc}") from exc
    to_topic = _topic_mapper(config, req.source, req.target)
    src, dst = ctx.clients(req.source), ctx.clients(req.target)
    describe_with_retry(dst, config.retry.with_deadline(req.source_deadline_s))
    source_up = _reachable(src, config.retry.with_deadline(req.source_deadline_s),
                           required=req.method in ("exact", "timestamp"))
    method = str(req.method)  # plain text in the report and its JSON
    report = TranslationReport(req.source, req.target, method, req.apply, source_up)
    kind = kind_for(rep)
    forward = (req.source, req.target) == (rep.source, rep.target)
    snapshots: dict[tuple[str, str, int], OffsetSnapshot] | None = None
    if method == "snapshot" and not forward:
        raise UsageError("Snapshots exist only on the forward flow's target.",
                         f"Translate {rep.source} -> {rep.target} with --method snapshot.")
    if method == "snapshot" or (method == "auto" and not source_up and forward):
        snapshots = read_snapshots(dst, config.state.snapshots_topic)
        if method == "auto" and snapshots:
            method = "snapshot"
            report.notes.append(f"{req.source} is unreachable: using drctl guard's offset "
                                "snapshots (and MirrorMaker 2 checkpoints where newer); "
                                "max_redelivered bounds each position's re-delivery.")
    if method == "auto":
        chosen = kind.auto_translate_method(
            source_up=source_up, forward=(req.source, req.target) == (rep.source, rep.target))
        if chosen is None:
            raise _source_down(req.source, src.bootstrap)
        method = chosen
        if method == "checkpoint":
            report.notes.append(f"{req.source} is unreachable: using MirrorMaker 2 checkpoints, "
                                "which may re-deliver records (see checkpoint-lag).")
    elif not source_up and method in ("exact", "timestamp"):
        raise _source_down(req.source, src.bootstrap)

    dst_admin = dst.admin()
    checkpoints = None
    if method == "checkpoint":
        checkpoints_topic = kind.checkpoints_topic(rep)
        if checkpoints_topic is None:
            raise UsageError("The checkpoint method needs MirrorMaker 2 (replication.kind).")
        checkpoints = read_checkpoints(dst, checkpoints_topic)
    elif method == "snapshot" and kind.checkpoints_topic(rep) is not None:
        checkpoints = read_checkpoints(dst, kind.checkpoints_topic(rep) or "")
    notify("Reading consumer groups")
    if req.positions is not None:
        positions = {g: {tp: o for tp, o in offs.items() if to_topic(tp[0])}
                     for g, offs in req.positions.items()}
    elif method == "snapshot":
        positions = _snapshot_positions(snapshots or {}, checkpoints, group_re, config,
                                        to_topic)
    else:
        positions = _source_positions(src if source_up else None, checkpoints, group_re,
                                      config, to_topic)
    all_target_tps = {(to_topic(t) or "", p) for offs in positions.values() for (t, p) in offs}
    existing = {(t, p) for t, meta in dst_admin.list_topics(timeout=30).topics.items()
                for p in meta.partitions}
    dst_marks = _capped(watermarks(dst_admin, sorted(all_target_tps & existing)),
                        req.target_ends)
    current = committed_offsets(dst_admin, positions)
    states = group_states(dst_admin, positions)

    results: dict[str, GroupResult] = {}
    for group, offsets in sorted(positions.items()):
        gr = GroupResult(group)
        st = states.get(group)
        if st is not None:
            gr.state, gr.active = st.state, st.active
        for (topic, partition), offset in sorted(offsets.items()):
            target_topic = to_topic(topic) or ""
            pr = PartitionResult(group, topic, partition, target_topic, offset, method, None,
                                 "", current_target_offset=current.get(group, {}).get(
                                     (target_topic, partition)))
            if (target_topic, partition) not in dst_marks:
                pr.confidence = "missing-topic"
                pr.note = f"{target_topic}[{partition}] does not exist on {req.target}"
            gr.partitions.append(pr)
        results[group] = gr
    report.groups = list(results.values())

    todo = [p for p in report.partitions if not p.confidence]
    notify(f"Translating {len(todo)} positions of {len(report.groups)} groups ({method})")
    if method == "identity":
        for p in todo:
            low, end = dst_marks[(p.target_topic, p.partition)]
            p.target_offset = min(max(p.source_offset, low), end)
            p.confidence = "exact" if p.target_offset == p.source_offset else "clamped"
    elif method == "checkpoint":
        _by_checkpoint(todo, checkpoints or {}, dst_marks)
    elif method == "snapshot":
        settled = _settle_snapshots(dst, todo, snapshots or {}, dst_marks)
        _by_snapshot(todo, snapshots or {}, checkpoints or {}, dst_marks, settled)
    else:
        _by_exact(src, dst, todo, dst_marks, timestamp_only=method == "timestamp",
                  max_scan=req.max_scan, own_copy_header=req.own_copy_header)
    if source_up and method == "checkpoint":
        # Measure the re-delivery the checkpoints cause against the exact answer.
        exact = [PartitionResult(p.group, p.topic, p.partition, p.target_topic,
                                 p.source_offset, "exact", None, "") for p in todo]
        _by_exact(src, dst, exact, dst_marks, timestamp_only=False, max_scan=req.max_scan)
        for p, e in zip(todo, exact, strict=True):
            if p.target_offset is not None and e.target_offset is not None \
                    and e.confidence == "exact":
                p.redelivered = max(0, e.target_offset - p.target_offset)
                if p.confidence == "checkpoint":
                    p.confidence = f"checkpoint-lag:{p.redelivered}"

    _rewind_rule(report, req.allow_rewind)
    if req.apply:
        apply_positions(dst_admin, report)
    return report


def _capped(marks: dict[TP, tuple[int, int]], ends: dict[str, dict[int, int]] | None
            ) -> dict[TP, tuple[int, int]]:
    """Each partition's (low, end), the end no later than `ends` says."""
    if not ends:
        return marks
    out = {}
    for (t, p), (low, end) in marks.items():
        cap = ends.get(t, {}).get(p)
        out[(t, p)] = (low, end if cap is None else max(low, min(end, cap)))
    return out


def _reachable(clients: ClusterClients, policy: RetryPolicy, *, required: bool) -> bool:
    from drctl.errors import Unreachable

    try:
        describe_with_retry(clients, policy)
        return True
    except Unreachable:
        if required:
            raise
        return False


def _source_down(name: str, bootstrap: str) -> Exception:
    from drctl.errors import Unreachable

    return Unreachable(f"Source cluster '{name}' ({bootstrap}) is unreachable and no method that "
                       "works without it applies.",
                       "Use --method checkpoint (MirrorMaker 2) or bring the source back.")


def _source_positions(src: ClusterClients | None, checkpoints: dict | None,
                      group_re: re.Pattern[str], config: Config,
                      to_topic: Callable[[str], str | None]) -> dict[str, dict[TP, int]]:
    def wanted(group: str) -> bool:
        return wanted_group(config, group_re, group)

    out: dict[str, dict[TP, int]] = {}
    if src is not None:
        admin = src.admin()
        groups = [g for g in list_groups(admin) if wanted(g)]
        for group, offsets in committed_offsets(admin, groups).items():
            kept = {tp: o for tp, o in offsets.items() if to_topic(tp[0])}
            if kept:
                out[group] = kept
        return out
    rep = config.require_replication()
    for (group, target_topic, partition), cp in (checkpoints or {}).items():
        source_topic = rep.source_topic_of(target_topic)
        if source_topic and wanted(group) and to_topic(source_topic):
            out.setdefault(group, {})[(source_topic, partition)] = cp.upstream_offset
    return out


def wanted_group(config: Config, groups: str | re.Pattern[str], group: str) -> bool:
    """A group in scope: it matches the request's regex and the config's filter, and it
    belongs to an application (not Connect, MirrorMaker 2 or drctl)."""
    pattern = re.compile(groups) if isinstance(groups, str) else groups
    return bool(pattern.fullmatch(group)) and config.groups.matches(group) \
        and not _INTERNAL_GROUP.match(group)


def _snapshot_positions(snapshots: dict[tuple[str, str, int], OffsetSnapshot],
                        checkpoints: dict | None, group_re: re.Pattern[str], config: Config,
                        to_topic: Callable[[str], str | None]) -> dict[str, dict[TP, int]]:
    """Each group's newest known source position: guard's snapshot or, where MirrorMaker 2
    checkpointed a later one, the checkpoint's."""
    out = _source_positions(None, checkpoints, group_re, config, to_topic)
    for (group, topic, partition), snap in snapshots.items():
        if not (wanted_group(config, group_re, group) and to_topic(topic)):
            continue
        have = out.setdefault(group, {})
        have[(topic, partition)] = max(have.get((topic, partition), -1), snap.source_offset)
    return out


def _settle_snapshots(dst: ClusterClients, todo: list[PartitionResult],
                      snapshots: dict[tuple[str, str, int], OffsetSnapshot],
                      dst_marks: dict[TP, tuple[int, int]]
                      ) -> dict[tuple[str, str, int], tuple[int, str]]:
    """Snapshots taken while their group was ahead of replication, settled on the target
    (the copies arrived since): (group, source topic, partition) -> (target offset, how)."""
    later = [p for p in todo if (s := snapshots.get((p.group, p.topic, p.partition)))
             and s.settles_later and (p.target_topic, p.partition) in dst_marks]
    if not later:
        return {}
    found = settle_ahead(dst, [(snapshots[(p.group, p.topic, p.partition)],
                                (p.target_topic, p.partition)) for p in later], dst_marks)
    return {(p.group, p.topic, p.partition): f for p, f in zip(later, found, strict=True)
            if f is not None}


def _by_snapshot(todo: list[PartitionResult],
                 snapshots: dict[tuple[str, str, int], OffsetSnapshot], checkpoints: dict,
                 dst_marks: dict[TP, tuple[int, int]],
                 settled: dict[tuple[str, str, int], tuple[int, str]] | None = None
                 ) -> None:
    """The later of the snapshot's exact position and the checkpoint's: both lie at or before
    the group's true position (groups commit forwards), so neither skips a record. A snapshot
    taken while the group was ahead of replication counts where it was `settled`. The bound:
    the group cannot have read more of the target than lies past the position."""
    now_ms = int(time.time() * 1000)
    settled = settled or {}
    for p in todo:
        snap = snapshots.get((p.group, p.topic, p.partition))
        cp = checkpoints.get((p.group, p.target_topic, p.partition))
        low, end = dst_marks[(p.target_topic, p.partition)]
        snap_offset = snap.target_offset if snap else None
        if snap is not None and (found := settled.get((p.group, p.topic, p.partition))):
            snap_offset = found[0]
            p.note = (f"guard's snapshot was ahead of replication by {snap.ahead} records; "
                      f"settled on the target at {found[1]}")
        options = ([(snap_offset, "snapshot")] if snap_offset is not None else []) + \
            ([(cp.downstream_offset, "checkpoint")] if cp else [])
        if not options:
            p.confidence = "no-snapshot"
            p.note = "neither a guard snapshot nor a checkpoint for this group and partition"
            continue
        offset, source = max(options)
        p.target_offset = min(max(offset, low), end)
        p.confidence = source
        p.max_redelivered = end - p.target_offset
        if snap is not None:
            p.age_s = round((now_ms - snap.seen_ms) / 1000, 1)


def _by_checkpoint(todo: list[PartitionResult], checkpoints: dict,
                   dst_marks: dict[TP, tuple[int, int]]) -> None:
    for p in todo:
        cp = checkpoints.get((p.group, p.target_topic, p.partition))
        if cp is None:
            p.confidence = "no-checkpoint"
            p.note = "MirrorMaker 2 emitted no checkpoint for this group and partition"
            continue
        low, end = dst_marks[(p.target_topic, p.partition)]
        p.target_offset = min(max(cp.downstream_offset, low), end)
        p.confidence = "checkpoint"
        p.max_redelivered = end - p.target_offset  # it cannot have read more than is there
        if cp.upstream_offset != p.source_offset:
            p.note = (f"latest checkpoint is for source offset {cp.upstream_offset}; the group "
                      f"is at {p.source_offset}")


def _by_exact(src: ClusterClients, dst: ClusterClients, todo: list[PartitionResult],
              dst_marks: dict[TP, tuple[int, int]], *, timestamp_only: bool,
              max_scan: int, own_copy_header: str | None = None) -> None:
    if not todo:
        return
    src_admin, dst_admin = src.admin(), dst.admin()
    src_marks = watermarks(src_admin, sorted({(p.topic, p.partition) for p in todo}))
    a = Side.of(src, src_admin, src_marks)
    b = Side.of(dst, dst_admin, dst_marks)
    # Distinct source positions: many groups often sit at the same offset.
    keys = sorted({(p.topic, p.partition, min(p.source_offset, src_marks[(p.topic,
                                                                            p.partition)][1]))
                   for p in todo})
    target_of = {(p.topic, p.partition): p.target_topic for p in todo}
    # Many positions on one partition: read it whole once on each side.
    a.load_busy_partitions(Counter((t, q) for t, q, _ in keys))
    b.load_busy_partitions(Counter((target_of[(t, q)], q) for t, q, _ in keys))
    def own_copy(rec: Record) -> bool:
        return any(k == own_copy_header for k, _ in rec.headers)

    around = dict(zip(keys, last_records(a, [((t, q), o) for t, q, o in keys],
                                         skip=own_copy if own_copy_header else None),
                      strict=True))
    queries, query_keys = [], []
    for key in keys:
        last, _ = around[key]
        if last is not None:
            t, q, _o = key
            queries.append(MatchQuery(last, (target_of[(t, q)], q)))
            query_keys.append(key)
    matches = dict(zip(query_keys, match_records(a, b, queries, max_scan=max_scan),
                       strict=True))
    # Groups ahead of replication: where does the target's last record sit on the source?
    ahead = [k for k in query_keys if matches[k].reason == "end"]
    missing = _missing_counts(a, b, todo, ahead, around, max_scan)
    # Not provably ahead (the target's last record is a copy of one at or after the group's
    # last read, or is not found on the source): the copy is there but does not match — the
    # target compacted it away, or rewrote its timestamp. Never clamp such a group to the
    # end: the last record before it that the target does hold decides.
    unproven = [k for k in ahead if not _provably_ahead(missing.get(k), around[k][0])]
    walked = _walk_back(a, b, unproven, around, target_of, max_scan)
    duplicates = _next_is_consumed(a, b, matches, around, max_scan)

    for p in todo:
        tp_src, tp_dst = (p.topic, p.partition), (p.target_topic, p.partition)
        key = (p.topic, p.partition, min(p.source_offset, src_marks[tp_src][1]))
        low, end = dst_marks[tp_dst]
        last, successor = around[key]
        if last is None:
            # Nothing consumed that still exists: start where the target starts.
            p.target_offset = low
            p.confidence = "exact" if src_marks[tp_src][0] == 0 and low == 0 else "start"
            continue
        m = matches[key]
        if key in walked or key in unproven:
            found = walked.get(key)
            if found is None:
                p.target_offset = None
                p.confidence = "unproven"
                p.note = ("the record the group read last is not on the target as it is on "
                          "the source (compacted away, or its timestamp rewritten) and no "
                          f"earlier one within {max_scan} records was found: not placed")
                continue
            copy, unmatched = found
            p.target_offset = copy + 1
            p.confidence = "exact" if unmatched == 0 else f"walked-back:{unmatched}"
            p.max_redelivered = unmatched
            p.note = (f"the group's last {unmatched + 1} record(s) read are not on the target "
                      "as they are on the source (compacted away, or timestamps rewritten): "
                      "placed after the last one it holds; at most "
                      f"{unmatched} record(s) re-delivered")
            continue
        if m.reason == "end":
            p.target_offset = end
            p.confidence = "clamped"
            lacking = missing.get(key)
            p.missing = lacking.records if lacking else None
            p.note = "the group consumed records that never reached the target"
            if lacking is not None and lacking.anchored:
                # What resolves this position later, once the copies arrive, with no source:
                # the k-th copy of the last record read, at most `ahead` records past `end`.
                p.proof = {"last_read": last.offset, "fingerprint": a.fingerprint(last).hex(),
                           "fingerprint_ts": last.timestamp_type == 1,
                           "ahead": lacking.records, "occurrence": lacking.occurrence}
            continue
        if m.reason == "bound" or m.offset is None:
            p.target_offset = max(low, m.anchor_b or low)
            p.confidence = "scan-bound"
            p.note = f"no match within {max_scan} records; positioned at the timestamp"
            continue
        exact_offset = m.offset + 1
        if timestamp_only:
            anchor = max(low, m.anchor_b if m.anchor_b is not None else low)
            shared = sum(r.timestamp_ms == last.timestamp_ms for r in m.scanned)
            p.target_offset = anchor
            p.redelivered = sum(1 for r in m.scanned if r.offset < exact_offset)
            p.confidence = "exact" if p.redelivered == 0 else f"ambiguous:{shared}"
            continue
        p.target_offset = exact_offset
        p.confidence = "exact"
        p.proof = {"last_read": last.offset, "copy": m.offset,
                   "fingerprint": a.fingerprint(last).hex()}
        if key in duplicates:
            p.confidence = "unverified"
            p.note = ("the target's next record is a copy of a record the group already "
                      "consumed (a replicator re-copied records?)")


def _next_is_consumed(a: Side, b: Side, matches: dict, around: dict,
                      max_scan: int) -> set:
    """Positions where the target's record after the match is a copy of a record the group
    already consumed on the source — the one way an exact match could still deliver twice.
    When the next records are the same on both sides this is settled without a look-up;
    otherwise the target's next record is located on the source. A different next record
    that is not a consumed one (the gap, or writes after a failover) is fine."""

    suspects = [k for k, m in matches.items() if m.offset is not None and m.after is not None
                and (around[k][1] is None
                     or a.fingerprint(around[k][1]) != b.fingerprint(m.after))]
    if not suspects:
        return set()
    queries = [MatchQuery(matches[k].after, (k[0], k[1])) for k in suspects]
    found = match_records(b, a, queries, max_scan=max_scan)
    return {k for k, f in zip(suspects, found, strict=True)
            if f.offset is not None and f.offset < k[2]}


@dataclass(frozen=True)
class _Ahead:
    """A group ahead of replication: the records it consumed that the target lacks, and
    which copy of its last record (k-th identical since the target's end) marks its place."""

    records: int
    occurrence: int
    anchored: bool  # the target's last record was found on the source: `records` is exact
    copy: int | None = None  # the source offset of the target's last record


def _provably_ahead(lacking: _Ahead | None, last: Record | None) -> bool:
    """The group read past what was replicated: the target's last record is a copy of one
    the source holds before the group's last read."""
    return (lacking is not None and lacking.copy is not None and last is not None
            and lacking.copy < last.offset)


# Records looked at before the group's last read, in rounds of growing size.
_WALK_ROUNDS = (16, 256, 4096)


def _walk_back(a: Side, b: Side, keys: list, around: dict, target_of: dict,
               max_scan: int) -> dict[tuple[str, int, int], tuple[int, int] | None]:
    """For each key: the target offset of the copy of the latest source record before the
    group's last read that the target holds, and how many source records from there to the
    last read it does not hold (the most the group can re-read: only their copies, if any
    survive unmatched, lie after the position). None when none is found within the bound."""
    out: dict[tuple[str, int, int], tuple[int, int] | None] = {}
    pending = {k: around[k][0].offset for k in keys if around[k][0] is not None}
    for k in keys:
        if around[k][0] is None:
            out[k] = None
    looked = 0
    for size in _WALK_ROUNDS:
        if not pending or looked >= max_scan:
            break
        reqs = [RangeRequest((t, q), max(a.marks[(t, q)][0], upto - size), upto)
                for (t, q, _), upto in pending.items()]
        batches = a.reader.read(reqs)
        queries, owners = [], []
        for key, recs in zip(list(pending), batches, strict=True):
            for rec in recs:
                queries.append(MatchQuery(rec, (target_of[(key[0], key[1])], key[1])))
                owners.append((key, rec.offset))
        found: dict[tuple[str, int, int], tuple[int, int]] = {}
        for (key, offset), res in zip(owners, match_records(a, b, queries, max_scan=max_scan),
                                      strict=True):
            if res.offset is not None and (key not in found or offset > found[key][1]):
                found[key] = (res.offset, offset)
        for key in list(pending):
            last = around[key][0]
            if key in found:
                copy, src_offset = found[key]
                unmatched = sum(1 for o in range(src_offset + 1, last.offset + 1)
                                if o < a.marks[(key[0], key[1])][1])
                out[key] = (copy, unmatched)
                del pending[key]
            elif pending[key] - size <= a.marks[(key[0], key[1])][0]:
                out[key] = None  # the source's start reached: nothing held
                del pending[key]
            else:
                pending[key] -= size
        looked += size
    for key in pending:
        out[key] = None
    return out


def _missing_counts(a: Side, b: Side, todo: list[PartitionResult], ahead: list,
                    around: dict, max_scan: int) -> dict[tuple[str, int, int], _Ahead]:
    """Records a group consumed on the source that the target lacks."""
    if not ahead:
        return {}
    target_of = {(p.topic, p.partition): (p.target_topic, p.partition) for p in todo}
    tails = last_records(b, [(target_of[(t, q)], b.marks[target_of[(t, q)]][1])
                             for t, q, _ in ahead])
    queries, keys = [], []
    for key, (tail, _) in zip(ahead, tails, strict=True):
        if tail is not None:
            queries.append(MatchQuery(tail, (key[0], key[1])))
            keys.append(key)
    located = dict(zip(keys, match_records(b, a, queries, max_scan=max_scan), strict=True))

    reqs, anchored = [], []
    for t, q, off in ahead:
        m = located.get((t, q, off))
        copy = m.offset if m is not None else None  # of the target's last record, on A
        start = copy + 1 if copy is not None else a.marks[(t, q)][0]
        reqs.append(RangeRequest((t, q), max(start, off - max_scan), off))
        anchored.append(copy is not None and start >= off - max_scan)
    out = {}
    for key, recs, is_anchored in zip(ahead, a.reader.read(reqs), anchored, strict=True):
        last = around[key][0]
        occurrence = 0
        if last is not None:
            ts = last.timestamp_type == 1
            fp = a.fingerprint(last, ts)
            occurrence = sum(1 for r in recs if r.offset <= last.offset
                             and a.fingerprint(r, ts) == fp)
        m = located.get(key)
        out[key] = _Ahead(len(recs), occurrence,
                          is_anchored and last is not None and occurrence > 0,
                          m.offset if m is not None else None)
    return out


def _rewind_rule(report: TranslationReport, allow_rewind: bool) -> None:
    for p in report.partitions:
        if (p.target_offset is not None and p.current_target_offset is not None
                and p.target_offset < p.current_target_offset and not allow_rewind):
            p.note = (f"would move the group back from {p.current_target_offset} to "
                      f"{p.target_offset}; kept (use --allow-rewind)")
            p.target_offset = p.current_target_offset
            p.confidence = "kept"


def apply_positions(admin: AdminClient, report: TranslationReport,
                    skip_groups: frozenset[str] = frozenset()) -> None:
    """Commit the report's positions: one atomic commit per group, never to a group with
    active members on the target, never a `kept` position; `skip_groups` are left alone."""
    commits: dict[str, dict[TP, int]] = {}
    for g in report.groups:
        if g.group in skip_groups:
            continue
        if g.active:
            g.skipped = f"group is active on {report.target} ({g.state}); stop its consumers"
            continue
        offsets = {(p.target_topic, p.partition): p.target_offset for p in g.partitions
                   if p.target_offset is not None and p.confidence != "kept"}
        # Every position kept (the group already stands further on): nothing to do, which is
        # not a failure to apply.
        if offsets:
            commits[g.group] = offsets
    failed = alter_offsets_many(admin, commits)
    for g in report.groups:
        if g.group not in commits:
            continue
        if g.group in failed:
            g.skipped = f"commit failed: {failed[g.group]}"
            continue
        g.applied = True
        for p in g.partitions:
            p.applied = (p.target_topic, p.partition) in commits[g.group]

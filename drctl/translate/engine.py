"""translate-offsets: move consumer-group positions from one cluster to the other.

Every method ends in the same rules (docs/design.md §3): never past the target's end (report
what the target lacks), never backwards without `allow_rewind`, apply only to groups with no
active members on the target, one atomic commit per group.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from drctl.background import in_background
from drctl.config import Config, Scope
from drctl.context import OpsContext
from drctl.errors import Unreachable, UsageError
from drctl.kafka.checkpoints import read_checkpoints
from drctl.kafka.clients import ClusterClients, cluster_metadata, describe_with_retry
from drctl.kafka.groups import UNNAMEABLE, alter_offsets_many, committed_offsets, group_states
from drctl.kafka.offsets import watermarks
from drctl.kafka.topics import TP, is_internal_topic
from drctl.replication.base import kind_for
from drctl.rerun import rerun_while_dropped
from drctl.retry import RetryPolicy
from drctl.translate.inventory import IN_CHECKPOINTS, source_groups, wanted_group
from drctl.translate.methods import Placing, method_for
from drctl.translate.model import (
    Confidence,
    GroupResult,
    PartitionResult,
    TranslateMethod,
    TranslationReport,
)
from drctl.translate.snapshots import OffsetSnapshot, read_snapshots

# Methods that read the source: without it they cannot run.
_NEED_SOURCE = (TranslateMethod.EXACT, TranslateMethod.TIMESTAMP)


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
    # False: the caller found the source unreachable already (failover's preflight waited
    # out the deadline); a method that can do without it is not made to wait a second time.
    source_reachable: bool | None = None
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


def _topic_mapper(config: Config, source: str, target: str,
                  scope: Scope | None = None) -> Callable[[str], str | None]:
    rep = config.require_replication()
    scope = scope or Scope()

    def covered(source_topic: str) -> bool:
        # A reverse copy belongs to the scope of the topic it copies back.
        return scope.covers_topic(rep.reverse_copy_origin(source_topic) or source_topic)

    # Cached: it is asked once per position (160,000 at 10,000 groups x 16 partitions), and
    # each answer runs the topic filter's regexes.
    if (source, target) == (rep.source, rep.target):
        @functools.cache
        def forward(topic: str) -> str | None:
            if is_internal_topic(topic, rep.separator) or not covered(topic):
                return None
            origin = rep.reverse_copy_origin(topic)
            if origin is not None:
                # A copy the flow the other way made (a reverse flow's of an earlier
                # incident, or the other region's in an active-active pair): its records are
                # the original's on the target, where the group goes on reading — whatever
                # this flow's own topic filter says of the copy's name (`orders.*` never
                # takes `secondary.orders`).
                return origin
            return rep.mirror_topic(topic) if rep.topics.matches(topic) else None
        return forward
    if (source, target) == (rep.target, rep.source):
        @functools.cache
        def backward(topic: str) -> str | None:
            if is_internal_topic(topic, rep.separator):
                return None
            original = rep.source_topic_of(topic)
            if original is not None:  # a mirror topic: back to the topic it mirrors
                return original if rep.topics.matches(original) and covered(original) \
                    else None
            # A failover topic (MM2 prefixed names): the reverse flow names its copy
            # <target alias>.<topic> on the source.
            return rep.reverse_topic(topic) if rep.topics.matches(topic) and covered(topic) \
                else None
        return backward
    raise UsageError(f"No replication flow between '{source}' and '{target}' in the config.",
                     f"The configured flow is {rep.source} -> {rep.target}; translate in either "
                     "direction of it.")


def translate_offsets(ctx: OpsContext, req: TranslateRequest,
                      approve: Callable[[TranslationReport], None] | None = None
                      ) -> TranslationReport:
    """Translate the groups' positions of `req` (module docstring); progress goes to the
    context's notify. With `req.apply`, `approve` sees the positions before anything is
    committed and may refuse by raising (drctl.errors.Aborted)."""
    config, notify = ctx.config, ctx.notify
    if req.method not in set(TranslateMethod):  # library callers may pass plain text
        raise UsageError(f"Unknown method '{req.method}'.",
                         f"Use one of {', '.join(TranslateMethod)}.")
    rep = config.require_replication()
    try:
        group_re = re.compile(req.groups)
    except re.error as exc:
        raise UsageError(f"--groups is not a valid regex: {exc}") from exc
    to_topic = _topic_mapper(config, req.source, req.target, ctx.scope)

    def wanted(group: str) -> bool:
        return wanted_group(config, group_re, group) and ctx.scope.covers_group(group)

    src, dst = ctx.clients(req.source), ctx.clients(req.target)
    describe_with_retry(dst, config.retry.with_deadline(req.source_deadline_s), notify=notify)
    source_up = source_answers(req, src, config.retry, notify)
    method = TranslateMethod(req.method)
    report = TranslationReport(req.source, req.target, method.value, req.apply, source_up)
    kind = kind_for(rep)
    forward = (req.source, req.target) == (rep.source, rep.target)
    snapshots: dict[tuple[str, str, int], OffsetSnapshot] | None = None
    if method == TranslateMethod.SNAPSHOT and not forward:
        raise UsageError("Snapshots exist only on the forward flow's target.",
                         f"Translate {rep.source} -> {rep.target} with --method snapshot.")
    if method == TranslateMethod.SNAPSHOT or (method == TranslateMethod.AUTO and not source_up
                                              and forward):
        snapshots = read_snapshots(dst, config.state.snapshots_topic)
        if method == TranslateMethod.AUTO and snapshots:
            method = TranslateMethod.SNAPSHOT
            report.notes.append(f"{req.source} is unreachable: using drctl guard's offset "
                                "snapshots (and MirrorMaker 2 checkpoints where newer); "
                                "max_redelivered bounds each position's re-delivery.")
    if method == TranslateMethod.AUTO:
        chosen = kind.auto_translate_method(
            source_up=source_up, forward=(req.source, req.target) == (rep.source, rep.target))
        if chosen is None:
            raise _source_down(req.source, src.bootstrap)
        method = TranslateMethod(chosen)
        if method == TranslateMethod.CHECKPOINT:
            report.notes.append(f"{req.source} is unreachable: using MirrorMaker 2 checkpoints, "
                                "which may re-deliver records (see checkpoint-lag).")
    elif not source_up and method in _NEED_SOURCE:
        raise _source_down(req.source, src.bootstrap)

    dst_admin = dst.admin()
    checkpoints = None
    if method == TranslateMethod.CHECKPOINT:
        checkpoints_topic = kind.checkpoints_topic(rep)
        if checkpoints_topic is None:
            raise UsageError("The checkpoint method needs MirrorMaker 2 (replication.kind).")
        checkpoints = read_checkpoints(dst, checkpoints_topic)
    elif method == TranslateMethod.SNAPSHOT and kind.checkpoints_topic(rep) is not None:
        checkpoints = read_checkpoints(dst, kind.checkpoints_topic(rep) or "")
    notify("Reading consumer groups")
    if req.positions is not None:
        positions = {g: {tp: o for tp, o in offs.items() if to_topic(tp[0])}
                     for g, offs in req.positions.items()}
    elif method == TranslateMethod.SNAPSHOT:
        positions = _snapshot_positions(snapshots or {}, checkpoints, wanted, config,
                                        to_topic)
    elif source_up:
        # The source's groups: those it lists, and those the list left out that drctl knew
        # of (its inventory, the checkpoints when read) — named in the report's notes.
        found = source_groups(config, src, wanted, known=dict.fromkeys(
            {g for g, _, _ in checkpoints or {}}, IN_CHECKPOINTS))
        report.notes.extend(found.notes())
        positions = _commit_positions(found.commits, to_topic)
    else:
        positions = _checkpoint_positions(checkpoints, wanted, config, to_topic)
    if not source_up:  # the group "" in the checkpoints or snapshots: named, not moved
        seen = {g for g, _, _ in checkpoints or {}} | {g for g, _, _ in snapshots or {}}
        report.notes.extend(f"{req.source}: {why}; skipped" for group, why in UNNAMEABLE.items()
                            if group in seen)
    all_target_tps = {(to_topic(t) or "", p) for offs in positions.values() for (t, p) in offs}
    existing = {(t, p) for t, meta in cluster_metadata(dst).topics.items()
                for p in meta.partitions}
    dst_marks = _capped(watermarks(dst_admin, sorted(all_target_tps & existing)),
                        req.target_ends)
    # The groups' states and commits on the target are read (by the target's group
    # requests' child process) while the positions are placed: waiting for their answers
    # overlaps the placement's work. The rewind rule and applying need them; placing does not.
    states_of = in_background(functools.partial(group_states, dst, positions),
                              name="drctl-group-states")
    current_of = in_background(functools.partial(committed_offsets, dst, positions),
                               name="drctl-target-commits")
    report.groups = _group_results(positions, dst_marks, to_topic, method, req.target)
    todo = [p for p in report.partitions if not p.confidence]
    notify(f"Translating {len(todo)} positions of {len(report.groups)} groups ({method})")
    method_for(method)(Placing(src, dst, dst_marks, source_up, req.max_scan,
                               req.own_copy_header, snapshots or {}, checkpoints or {}), todo)
    current = current_of()
    for p in report.partitions:
        p.current_target_offset = current.get(p.group, {}).get((p.target_topic, p.partition))
    states = states_of()
    for gr in report.groups:
        st = states.get(gr.group)
        if st is not None:
            gr.state, gr.active = st.state, st.active

    _rewind_rule(report, req.allow_rewind)
    if req.apply:
        if approve is not None:
            approve(report)
        apply_positions(dst, report)
    return report


def run_translation(ctx: OpsContext, req: TranslateRequest,
                    approve: Callable[[TranslationReport], None] | None = None
                    ) -> TranslationReport:
    """`translate_offsets` as the command runs it on its own: a cluster that drops mid-way
    (a broker restarting under a describe or a read) is waited for within the request's
    deadline and the translation runs again from the start (drctl/rerun.py) — the same
    positions, the commits already made kept. The procedures that translate within their
    own steps call `translate_offsets`: they run again themselves."""
    deadline_s = req.source_deadline_s if req.source_deadline_s is not None else 30.0
    # A method that can do without the source waits for the target only: the run again
    # asks the source once more itself, and translates without it if it stays down.
    clusters = (req.source, req.target) if req.method in _NEED_SOURCE else (req.target,)
    return rerun_while_dropped(lambda: translate_offsets(ctx, req, approve), ctx, clusters,
                               deadline_s, "the translation", resumes=_READS_AGAIN)


_READS_AGAIN = "it reads every position again; the commits already made stay"


def _group_results(positions: dict[str, dict[TP, int]],
                   dst_marks: dict[TP, tuple[int, int]], to_topic: Callable[[str], str | None],
                   method: TranslateMethod, target: str) -> list[GroupResult]:
    """One result per group, a partition result per position, its target still to place
    (a missing target partition is named, not placed)."""
    results: dict[str, GroupResult] = {}
    for group, offsets in sorted(positions.items()):
        gr = GroupResult(group)
        for (topic, partition), offset in sorted(offsets.items()):
            target_topic = to_topic(topic) or ""
            pr = PartitionResult(group, topic, partition, target_topic, offset, method.value,
                                 None, "")
            if (target_topic, partition) not in dst_marks:
                pr.confidence = Confidence.MISSING_TOPIC
                pr.note = f"{target_topic}[{partition}] does not exist on {target}"
            gr.partitions.append(pr)
        results[group] = gr
    return list(results.values())


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


def source_answers(req: TranslateRequest, src: ClusterClients, policy: RetryPolicy,
                   notify: Callable[[str], object] | None = None) -> bool:
    """Whether the source answers within the request's deadline; a method that needs it
    raises Unreachable. A source the caller found down already is not waited for again
    when the method can do without it."""
    required = req.method in _NEED_SOURCE
    if req.source_reachable is False and not required:
        return False
    return _reachable(src, policy.with_deadline(req.source_deadline_s), required=required,
                      notify=notify)


def _reachable(clients: ClusterClients, policy: RetryPolicy, *, required: bool,
               notify: Callable[[str], object] | None = None) -> bool:
    try:
        describe_with_retry(clients, policy, notify=notify)
        return True
    except Unreachable:
        if required:
            raise
        return False


class SourceDown(Unreachable):
    """The source did not answer within the deadline and no method works without it. Its
    wait is over: the translation is not run again for it (drctl/rerun.py)."""

    transient = False


def _source_down(name: str, bootstrap: str) -> Exception:
    return SourceDown(f"Source cluster '{name}' ({bootstrap}) is unreachable and no method that "
                       "works without it applies.",
                       "Use --method checkpoint (MirrorMaker 2) or bring the source back.")


def _commit_positions(commits: dict[str, dict[TP, int]], to_topic: Callable[[str], str | None]
                      ) -> dict[str, dict[TP, int]]:
    """The groups' commits on the topics translated."""
    out: dict[str, dict[TP, int]] = {}
    for group, offsets in commits.items():
        kept = {tp: o for tp, o in offsets.items() if to_topic(tp[0])}
        if kept:
            out[group] = kept
    return out


def _checkpoint_positions(checkpoints: dict | None, wanted: Callable[[str], bool],
                          config: Config, to_topic: Callable[[str], str | None]
                          ) -> dict[str, dict[TP, int]]:
    """The groups' positions as the replicator's checkpoints have them (the source gone)."""
    out: dict[str, dict[TP, int]] = {}
    rep = config.require_replication()
    for (group, target_topic, partition), cp in (checkpoints or {}).items():
        source_topic = rep.source_topic_of(target_topic)
        if source_topic and wanted(group) and to_topic(source_topic):
            out.setdefault(group, {})[(source_topic, partition)] = cp.upstream_offset
    return out


def _snapshot_positions(snapshots: dict[tuple[str, str, int], OffsetSnapshot],
                        checkpoints: dict | None, wanted: Callable[[str], bool],
                        config: Config, to_topic: Callable[[str], str | None]
                        ) -> dict[str, dict[TP, int]]:
    """Each group's newest known source position: guard's snapshot or, where MirrorMaker 2
    checkpointed a later one, the checkpoint's."""
    out = _checkpoint_positions(checkpoints, wanted, config, to_topic)
    for (group, topic, partition), snap in snapshots.items():
        if not (wanted(group) and to_topic(topic)):
            continue
        have = out.setdefault(group, {})
        have[(topic, partition)] = max(have.get((topic, partition), -1), snap.source_offset)
    return out


def _rewind_rule(report: TranslationReport, allow_rewind: bool) -> None:
    for p in report.partitions:
        if (p.target_offset is not None and p.current_target_offset is not None
                and p.target_offset < p.current_target_offset and not allow_rewind):
            p.note = (f"would move the group back from {p.current_target_offset} to "
                      f"{p.target_offset}; kept (use --allow-rewind)")
            p.target_offset = p.current_target_offset
            p.confidence = Confidence.KEPT


def apply_positions(clients: ClusterClients, report: TranslationReport,
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
                   if p.target_offset is not None and p.confidence != Confidence.KEPT}
        # Every position kept (the group already stands further on): nothing to do, which is
        # not a failure to apply.
        if offsets:
            commits[g.group] = offsets
    failed = alter_offsets_many(clients, commits)
    for g in report.groups:
        if g.group not in commits:
            continue
        if g.group in failed:
            g.skipped = f"commit failed: {failed[g.group]}"
            continue
        g.applied = True
        for p in g.partitions:
            p.applied = (p.target_topic, p.partition) in commits[g.group]

"""`drctl check`: would a failover of this flow work now, and how much would it lose?

Each area reads what it needs once (topic configs and ACLs in one request per cluster,
commits 500 groups a request, the checkpoint and snapshot topics whole) and turns it into
findings; a cluster or worker that does not answer makes the areas that need it blind
(exit 4), never clean.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException

from drctl.background import in_background
from drctl.context import OpsContext
from drctl.errors import DrctlError, Unreachable
from drctl.findings import Area, Finding, Readiness, Severity
from drctl.kafka.checkpoints import timed_checkpoints
from drctl.kafka.clients import ClusterUnreachable, cluster_metadata, describe_with_retry
from drctl.kafka.groups import group_states, list_groups
from drctl.kafka.records import ReadTimeout
from drctl.kafka.retriable import transient
from drctl.kafka.topics import is_internal_topic
from drctl.kafka.transactions import hanging_on
from drctl.ops.steps.reverse_copies import read_reverse_copies, reverse_copy_findings
from drctl.ops.steps.rpo import flow_rpo
from drctl.ops.steps.schemas import flow_parity, mirrored_topics
from drctl.ops.steps.scope import straddlers
from drctl.ops.steps.target_lag import target_lag
from drctl.readiness.acls import AclScope, acl_parity
from drctl.readiness.positions import guard_findings, position_findings
from drctl.readiness.schemas import parity_findings
from drctl.readiness.topics import compare_topics, read_shapes
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call
from drctl.timeparse import format_duration
from drctl.translate.inventory import (
    IN_CHECKPOINTS,
    SourceGroups,
    source_groups,
    source_topics_in_scope,
    wanted_group,
)
from drctl.translate.snapshots import OffsetSnapshot, read_snapshot_topic


@dataclass(frozen=True)
class CheckOptions:
    topics: str = ".*"  # narrows the flow's topics (regex, whole names)
    groups: str = ".*"  # narrows the config's groups (regex, whole names)
    # A group position (checkpoint, snapshot) behind its commit and older than this is stale.
    stale_after_s: float = 300.0
    # An open transaction older than this is hanging; None: the brokers'
    # transaction.max.timeout.ms (no live producer holds one longer).
    transaction_age_s: float | None = None
    deadline_s: float = 10.0  # for reaching each cluster


def run_check(ctx: OpsContext, opts: CheckOptions) -> Readiness:
    started = time.monotonic()
    rep = ctx.rep
    kind = ctx.require_kind()
    out = Readiness(rep.source, rep.target)
    policy = ctx.config.retry.with_deadline(opts.deadline_s)
    up: dict[str, bool] = {}
    with ThreadPoolExecutor(2) as pool:  # both clusters asked at once
        asked = {name: pool.submit(describe_with_retry, ctx.clients(name), policy,
                                   notify=ctx.notify)
                 for name in (rep.source, rep.target)}
        for name, future in asked.items():
            try:
                future.result()
                up[name] = True
            except DrctlError as exc:
                up[name] = False
                # The address and the cause, once; the hint follows the cause.
                seen = (f"{exc.cause} at {exc.address}" if isinstance(exc, ClusterUnreachable)
                        else exc.message)
                out.add(Finding(Area.TOPICS, f"cluster {name}", seen,
                                "what a failover needs of it is unknown",
                                exc.hint or "check the cluster, or drctl's access to it",
                                Severity.BLIND))
            ctx.notify(f"{name}: {'answered' if up[name] else 'no answer'}")
    topic_re, group_re = re.compile(opts.topics), re.compile(opts.groups)
    # Which groups are active on the target (MirrorMaker 2's settings are judged by them):
    # read by the target's group requests' child process while the rest is checked.
    active_on_target = in_background(
        lambda: sorted(g for g, st in group_states(ctx.target, [
            g for g in list_groups(ctx.target) if wanted_group(ctx.config, group_re, g)
        ]).items() if st.active), name="drctl-target-groups") if up[rep.target] else None
    now_ms = int(time.time() * 1000)
    src_topics: dict[str, int] = {}
    if up[rep.source]:
        src_topics = {t: n for t, n in source_topics_in_scope(ctx.config, ctx.source).items()
                      if topic_re.fullmatch(t) and ctx.scope.covers_topic(t)}
    # The RPO reading and the open-transaction scans ask for other answers than the topic,
    # ACL and position areas (offsets, Connect's, the copy points): read beside them.
    rpo = in_background(lambda: rpo_now(ctx, src_topics, up, now_ms), name="drctl-rpo") \
        if up[rep.target] else None
    transactions = in_background(lambda: _transactions(ctx, up, src_topics, opts),
                                 name="drctl-transactions")
    # The snapshot topic, read once: guard's positions and its last round.
    kept = read_snapshot_topic(ctx.target, ctx.config.state.snapshots_topic) \
        if up[rep.target] else None
    if up[rep.source] and kept is not None:
        _topics(ctx, out, src_topics)
        _acls(ctx, out, src_topics, group_re, policy)
        if kind.offsets_preserved:
            out.add(Finding(Area.POSITIONS, "groups", "offsets are preserved by the mirror",
                            "none: groups keep their offsets", "nothing to do", Severity.NOTE))
        else:
            _positions(ctx, out, src_topics, group_re, now_ms, opts, kept.snapshots)
    found, looked = transactions()
    out.add(*found)
    out.checked[Area.TRANSACTIONS.value] = looked
    _schemas(ctx, out, up, src_topics)
    if kept is not None and rpo is not None:  # both: the target answered
        out.rpo, out.lag = rpo()
        out.add(*lag_findings(rep.source, rep.target, out.lag,
                              ctx.require_kind().lag_remedy(rep)))
        ctx.notify("Reading MirrorMaker 2's settings and guard's last round")
        assert active_on_target is not None  # the target answered: kept was read there
        out.add(*kind.settings_findings(rep, active_on_target()))
        out.add(*guard_findings(kept.guard_round, now_ms, opts.stale_after_s, rep.target))
    out.seconds = time.monotonic() - started
    return out


def _topics(ctx: OpsContext, out: Readiness, src_topics: dict[str, int]) -> None:
    rep = ctx.rep
    ctx.notify(f"Comparing {len(src_topics)} topic(s) with their mirrors")
    target_meta = cluster_metadata(ctx.target).topics
    mirrors = {rep.mirror_topic(t): len(target_meta[rep.mirror_topic(t)].partitions)
               for t in src_topics if rep.mirror_topic(t) in target_meta}
    with ThreadPoolExecutor(2) as pool:
        source = pool.submit(read_shapes, ctx.source.admin(), src_topics)
        target = pool.submit(read_shapes, ctx.target.admin(), mirrors)
        out.add(*compare_topics(rep, source.result(), target.result(), ctx.target.bootstrap))
    out.checked[Area.TOPICS.value] = len(src_topics)


def _acls(ctx: OpsContext, out: Readiness, src_topics: dict[str, int],
          group_re: re.Pattern[str], policy: RetryPolicy) -> None:
    rep = ctx.rep
    ctx.notify("Comparing ACLs")
    scope = AclScope(rep.source, rep.target, ctx.target.bootstrap, sorted(src_topics),
                     lambda t: t in src_topics, lambda g: wanted_group(ctx.config, group_re, g),
                     rep.failover_topic, rep.mirror_topic, rep.names_kept, rep.principal)
    # A broker restarting drops an ACL request: asked again within --deadline, then exit 4
    # naming the cluster that did not answer.
    try:
        findings, compared = retry_call(
            lambda: acl_parity(scope, ctx.source.admin(), ctx.target.admin()), policy,
            retry_on=(Unreachable,), give_up=lambda exc: not transient(exc),
            on_retry=lambda n, exc, delay: ctx.notify(
                f"ACLs: attempt {n} failed ({getattr(exc, 'message', exc)}); retrying in "
                f"{delay:.1f}s"))
    except RetriesExhausted as exc:
        raise exc.last from None
    out.add(*findings)
    out.checked[Area.ACLS.value] = compared


def _positions(ctx: OpsContext, out: Readiness, src_topics: dict[str, int],
               group_re: re.Pattern[str], now_ms: int, opts: CheckOptions,
               snapshots: Mapping[tuple[str, str, int], OffsetSnapshot]) -> None:
    rep = ctx.rep
    checkpoints_topic = ctx.require_kind().checkpoints_topic(rep)
    # Read while the source's commits are (those by a child process, kafka/groups.py).
    read_checkpoints = in_background(functools.partial(
        timed_checkpoints, ctx.target, checkpoints_topic), name="drctl-checkpoints") \
        if checkpoints_topic else None
    ctx.notify(f"Reading the groups of {rep.source} and their commits")

    def wanted(group: str) -> bool:
        return wanted_group(ctx.config, group_re, group)

    found = source_groups(ctx.config, ctx.source, wanted)
    checkpoints: dict[Any, Any] = {}
    if read_checkpoints is not None:
        ctx.notify(f"Reading {checkpoints_topic}")
        try:
            checkpoints = read_checkpoints()
        except DrctlError as exc:
            out.add(Finding(Area.POSITIONS, f"topic {checkpoints_topic}",
                            f"cannot be read on {rep.target}: {exc.message}",
                            "with the source gone, no group has a checkpoint",
                            "check that MirrorMaker 2's checkpoint connector runs"))
    # A group the replicator checkpoints is one a failover moves: the source's list leaving
    # it out (it can, with no error) must not leave it unchecked.
    found.also(ctx.source, dict.fromkeys({g for g, _, _ in checkpoints}, IN_CHECKPOINTS),
               wanted)
    out.add(*group_list_findings(found, rep.target))
    every_commit = found.commits
    if not ctx.scope.whole:
        _scope(ctx, out, src_topics, every_commit)
    commits = {g: {tp: o for tp, o in offs.items() if tp[0] in src_topics}
               for g, offs in every_commit.items() if ctx.scope.covers_group(g)}
    out.add(*reverse_copy_findings(read_reverse_copies(rep, ctx.source, every_commit),
                                   rep.source, rep.target, ctx.source.bootstrap))
    findings, looked = position_findings(rep, commits, checkpoints, snapshots, now_ms,
                                         opts.stale_after_s)
    out.add(*findings)
    out.checked[Area.POSITIONS.value] = looked


def group_list_findings(found: SourceGroups, target: str) -> list[Finding]:
    """A note per group the source listed that no request can name (the group ""), and per
    group its list left out that drctl took in from elsewhere (checked all the same)."""
    out = [Finding(Area.POSITIONS, f'group "{group}"', f"listed by {found.source}: {why}",
                   f"a failover leaves it where it is: its consumers start on {target} at "
                   "auto.offset.reset", "give its consumers a group.id", Severity.NOTE)
           for group, why in found.skipped.items()]
    out += [Finding(Area.POSITIONS, f"group {group}",
                    f"left out of {found.source}'s group list (ListGroups) but committing "
                    f"there; known from {where}, checked all the same",
                    "none: drctl takes it in (a __consumer_offsets partition moving "
                    "leaves its groups out of the list, with no error)",
                    "nothing; seen often, look at the brokers' group coordinators "
                    "(__consumer_offsets leaders moving)", Severity.NOTE)
            for group, where in sorted(found.unlisted.items())]
    return out


def _scope(ctx: OpsContext, out: Readiness, src_topics: Mapping[str, int],
           commits: Mapping[str, Mapping[Any, int]]) -> None:
    """What the application resolves to — its topics, its groups, the topics those groups
    read outside it — and a finding per group reading topics on both sides of its edge."""
    rep, scope = ctx.rep, ctx.scope
    in_flow = {t: rep.replicates(t) for offs in commits.values() for t, _ in offs}
    if scope.groups_given:
        members = sorted(g for g in commits if scope.covers_group(g))
    else:
        members = sorted(g for g, offs in commits.items()
                         if any(t in src_topics for t, _ in offs))
    found = straddlers(scope, commits, in_flow)
    out.scope = {"name": scope.name, "topics": sorted(src_topics), "groups": members,
                 "read_outside": sorted({t for f in found for t in f.outside}),
                 "straddling": [f.as_dict() for f in found]}
    for f in found:
        out.add(Finding(Area.SCOPE, f"group {f.group}", f.describe(),
                        f"a failover of {scope.describe()} moves the group's reading of one "
                        "side only: it stays on one cluster while the other's records go on "
                        "elsewhere", f"take {', '.join(f.outside or f.inside)} into the "
                        "application, or the group out of it"))
    out.checked[Area.SCOPE.value] = len(commits)


def _schemas(ctx: OpsContext, out: Readiness, up: dict[str, bool],
             src_topics: dict[str, int]) -> None:
    """Whether the schema ids in the mirrored records mean the same schema on the target's
    registry (nothing to check without a registry in the config)."""
    rep = ctx.rep
    if up[rep.source]:
        topics = {t: rep.mirror_topic(t) for t in src_topics}
    else:  # the source is gone: what the target mirrors of the flow
        topics = mirrored_topics(ctx, False) if up[rep.target] else {}
    parity = flow_parity(ctx, topics, source_up=up[rep.source], target_up=up[rep.target])
    if parity is None:
        return
    out.add(*parity_findings(parity))
    out.schemas = parity.as_dict()
    out.checked[Area.SCHEMAS.value] = len(parity.ids)


def _transactions(ctx: OpsContext, up: dict[str, bool], src_topics: dict[str, int],
                  opts: CheckOptions) -> tuple[list[Finding], int]:
    """Findings for open transactions on both clusters, and how many partitions were looked
    at (one cluster after the other: both record their sightings in one file)."""
    rep = ctx.rep
    out: list[Finding] = []
    looked = 0
    for name in (rep.source, rep.target):
        if not up[name]:
            continue
        clients = ctx.clients(name)
        if name == rep.source:
            wanted = set(src_topics)
        elif src_topics:  # the mirrors and the failover topics: where F is taken
            wanted = {rep.mirror_topic(t) for t in src_topics} \
                | {rep.failover_topic(t) for t in src_topics}
        else:  # the source is gone: what the target mirrors of the flow
            wanted = {t for t in cluster_metadata(clients).topics
                      if not is_internal_topic(t, rep.separator)
                      and (origin := rep.source_topic_of(t))
                      and rep.topics.matches(origin)}
        ctx.notify(f"{name}: looking for open transactions on {len(wanted)} topic(s)")
        found, young, parts, limit = hanging_on(clients, wanted, opts.transaction_age_s,
                                                ctx.pinned_sightings)
        looked += parts
        for t in found:
            out.append(Finding(
                Area.TRANSACTIONS, f"partition {t.topic}-{t.partition} on {name}",
                f"last stable offset {t.stable} held below the end {t.end} by a transaction "
                f"seen open for {format_duration(round(t.open_s))} (longer than "
                f"{format_duration(limit or 0)})",
                "read_committed consumers stall there, and a failover point or gap read "
                "taken now stops at it", t.abort_commands(clients.bootstrap)))
        for t in young:
            out.append(Finding(
                Area.TRANSACTIONS, f"partition {t.topic}-{t.partition} on {name}",
                f"an open transaction holds the last stable offset at {t.stable}, end "
                f"{t.end} (seen open for {format_duration(round(t.open_s))}; hanging after "
                f"{format_duration(limit or 0)})",
                "a planned switchover waits for it; an unplanned failover now leaves the "
                f"{t.held_back} offset(s) behind it on {name}",
                "let its producer commit or abort; if the producer is gone: "
                + t.abort_commands(clients.bootstrap), Severity.NOTE))
    return out, looked


def lag_findings(source: str, target: str, lag: list[dict[str, Any]] | None,
                 remedy: str) -> list[Finding]:
    """Per partition whose lag rows (ops/steps/target_lag.py) show records no waiting brings —
    passed over by the replicator, deleted by retention before they were copied — a risk; one
    that cannot be measured, or whose skips were not all read, a note."""
    out = []
    for row in lag or ():
        for part in row.get("by_partition", []):
            name = f"partition {row['topic']}-{part['partition']} on {source}"
            if part.get("missing"):
                out.append(Finding(
                    Area.RPO, name,
                    f"{target} lacks {part['missing']} record(s) from offset "
                    f"{part['missing_from']} that the replicator passed without copying",
                    "a failover loses them: the replicator will never copy them",
                    remedy.format(topic=row["topic"], partition=part["partition"],
                                  offset=part["missing_from"],
                                  before=part["missing_from"] - 1)))
            if part.get("deleted"):
                out.append(Finding(
                    Area.RPO, name,
                    f"retention deleted up to {part['deleted']} offset(s) before they were "
                    f"copied to {target}",
                    "those records are lost on both clusters",
                    "nothing brings them back: find who produced them; keep the source's "
                    "retention longer than the replicator can lag"))
            if part.get("unknown"):
                out.append(Finding(Area.RPO, name, f"what {target} lacks cannot be measured: "
                                   f"{part['unknown']}", "the RPO is unknown",
                                   "check the replicator and the mirror topic", Severity.NOTE))
            if part.get("unverified"):
                out.append(Finding(Area.RPO, name, part["unverified"],
                                   "records skipped there would not be seen",
                                   "run check again (each run reads the smallest skips first)",
                                   Severity.NOTE))
    return out


def rpo_now(ctx: OpsContext, topics: dict[str, int], up: dict[str, bool], now_ms: int
            ) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """How much a failover now would lose, in seconds (ops/steps/rpo.py), with the lag rows it came
    from: per partition of the flow's topics the age of the oldest source record the target
    lacks, measured against the target (ops/steps/target_lag.py); with the source gone, the newest
    heartbeat copied from it; unknown otherwise."""
    rep = ctx.rep
    lag: list[dict[str, Any]] | None = None
    error = None
    if up[rep.source]:
        try:
            lag = target_lag(ctx, topics)
        except (DrctlError, ReadTimeout, KafkaException) as exc:
            error = "what the target lacks cannot be read: " + (
                exc.message if isinstance(exc, DrctlError) else str(exc))
    rpo = flow_rpo(ctx.source if up[rep.source] else None, ctx.target, rep.source_alias, lag,
                   now_ms, lag_error=error)
    behind = sum(int(p["behind"]) for row in lag or () for p in row.get("by_partition", []))
    return {**rpo.as_dict(), "behind": behind if lag is not None else None}, lag

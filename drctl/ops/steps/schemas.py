"""Schema-id parity for the flow's commands (the rules: drctl/registry/parity.py).

What each command samples, per direction:
- check, status and the failover preflight: the newest records of the source topics and of
  their mirrors, which the target's consumers decode after a failover (writer: the source);
- failback, before reconcile copies anything: the post-failover writes on the target's
  failover topics, which the reverse flow carries to the source's consumers (writer: the
  target), and the source's newest records — the gap — which reconcile copies to the target.

A result with a risk stops failover and failback unless --force; a registry that does not
answer stops failback (both clusters are back: nothing is urgent) but never a failover (an
outage takes the source's registry with it): it says so and goes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from drctl.context import OpsContext
from drctl.errors import CheckFailed, Unreachable
from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.topics import is_internal_topic, topic_partitions
from drctl.registry.client import RegistryClient
from drctl.registry.parity import (
    SAMPLE_PER_PARTITION,
    Parity,
    Read,
    check_parity,
    newest_ranges,
)
from drctl.state import FailoverMarker
from drctl.translate.inventory import source_topics_in_scope

MIRRORED = "mirrored records"
POST_FAILOVER = "post-failover writes"
GAP = "gap records"


def registries_configured(ctx: OpsContext) -> bool:
    """Whether either cluster of the flow names a schema registry (else nothing to check)."""
    rep = ctx.rep
    return any(c in ctx.config.schema_registries for c in (rep.source, rep.target))


def _registry(ctx: OpsContext, cluster: str) -> RegistryClient | None:
    return RegistryClient.for_cluster(ctx.config, cluster, ctx.deadline_s, ctx.notify)


def _partitions(clients: ClusterClients, topics: Iterable[str]) -> list[tuple[str, int]]:
    return [(t, p) for t, parts in topic_partitions(clients, sorted(set(topics))).items()
            for p in parts]


def mirrored_topics(ctx: OpsContext, source_up: bool) -> dict[str, str]:
    """The scope's source topics and their mirrors: from the source, or with the source
    gone from what the target mirrors of the flow."""
    rep = ctx.rep
    if source_up:
        return {t: rep.mirror_topic(t) for t in source_topics_in_scope(ctx.config, ctx.source)
                if ctx.scope.covers_topic(t)}
    return {origin: t for t in cluster_metadata(ctx.target).topics
            if not is_internal_topic(t, rep.separator) and (origin := rep.source_topic_of(t))
            and ctx.in_scope(origin)}


def flow_parity(ctx: OpsContext, topics: Mapping[str, str], *, source_up: bool,
                target_up: bool = True,
                per_partition: int = SAMPLE_PER_PARTITION) -> Parity | None:
    """`topics` (source topic -> mirror) as the target's consumers will read them: the
    newest `per_partition` records of each partition, on the source when `source_up` and on
    the target's mirrors when `target_up`; None when neither cluster has a registry."""
    if not registries_configured(ctx):
        return None
    rep = ctx.rep
    reads: list[Read] = []
    if source_up and topics:
        ctx.notify(f"Sampling schema ids of {len(topics)} topic(s) on {rep.source}")
        reads.append((ctx.source, newest_ranges(ctx.source, _partitions(ctx.source, topics),
                                                per_partition), {}))
    if target_up and topics:
        mirrors = {mirror: source for source, mirror in topics.items()}
        reads.append((ctx.target, newest_ranges(ctx.target, _partitions(ctx.target, mirrors),
                                                per_partition), mirrors))
    return check_parity(MIRRORED, rep.source, rep.target, _registry(ctx, rep.source),
                        _registry(ctx, rep.target), reads)


def failback_parity(ctx: OpsContext, marker: FailoverMarker) -> list[Parity]:
    """The post-failover writes (target -> source) and the gap records (source -> target)
    of the incident's topics; nothing when neither cluster has a registry."""
    if not registries_configured(ctx):
        return []
    rep = ctx.rep
    written = {rep.failover_topic(t): t for t in marker.topics}
    ends = marker.ends_at_failover
    floors = {(t, int(p)): o for t in written for p, o in ends.get(t, {}).items()}
    ctx.notify(f"Sampling schema ids of the post-failover writes on {rep.target} and the "
               f"newest records on {rep.source}")
    target_ranges = newest_ranges(ctx.target, _partitions(ctx.target, written), floors=floors)
    source_ranges = newest_ranges(ctx.source, _partitions(ctx.source, marker.topics))
    target_reads: list[Read] = [(ctx.target, target_ranges, written)]
    source_reads: list[Read] = [(ctx.source, source_ranges, {})]
    source_registry, target_registry = _registry(ctx, rep.source), _registry(ctx, rep.target)
    return [check_parity(POST_FAILOVER, rep.target, rep.source, target_registry,
                         source_registry, target_reads),
            # Reconcile copies these to the target; no producer moves there now.
            check_parity(GAP, rep.source, rep.target, source_registry, target_registry,
                         source_reads, producers_move=False)]


def refuse_unless_forced(results: Sequence[Parity], *, force: bool, operation: str,
                         ctx: OpsContext, unknown_refuses: bool) -> None:
    """Refuse `operation` (exit 3) while ids mean different schemas on the two registries,
    naming each, unless `force`; with `unknown_refuses`, refuse (exit 4) while parity is
    unknown too. What is passed over is said through notify and kept in the report."""
    risky = [r for r in results if r.risks]
    unknown = [r for r in results if r.unknown and not r.risks]
    for result in results:
        if result not in unknown:
            ctx.notify(result.describe())
    if risky and not force:
        named = "; ".join(i.detail for r in risky for i in r.risks[:6])
        readers = " and ".join(sorted({r.reader for r in risky}))
        raise CheckFailed(
            f"Preflight failed: schema ids do not mean the same schema on both registries: "
            f"{named}. Consumers on {readers} would fail to decode these records, or decode "
            "them as another schema.",
            " | ".join(r.fix() for r in risky)
            + f" — or run again with --force to {operation} anyway (the report names them).")
    if unknown and unknown_refuses and not force:
        raise Unreachable(
            "Preflight failed: schema parity is unknown: "
            + "; ".join(f"{r.what} ({r.writer} -> {r.reader}): {r.unknown}" for r in unknown),
            (unknown[0].unknown_hint or "Check the registries") + " — or run again with "
            f"--force to {operation} without knowing.")
    for result in risky if force else ():
        ctx.notify(f"--force: going on with {result.describe()}")
    for result in unknown if not unknown_refuses or force else ():
        ctx.notify(f"Schema parity of the {result.what} ({result.writer} -> {result.reader}) "
                   f"unknown, going on: {result.unknown}")

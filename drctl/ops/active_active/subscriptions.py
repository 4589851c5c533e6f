"""Aggregate subscriptions in an active-active pair (`drctl check`): a group that reads a
region's local topic and the other region's copy of another reads both of each — or it
misses what the other region's producers write (`secondary.orders` read without `orders`, or
the reverse). A group that reads names its pattern was not meant to take — `preorders` beside
`orders`, as `.*orders` takes it — over-matches; `orders.retry` or `orders-dlq` beside
`orders` is a topic of its own the application reads on purpose, never an over-match. Each
finding gives the anchored regex to subscribe with (`^(secondary\\.)?orders$`), which keeps
every topic the group reads that is not an over-match.

A group's topics are those it committed on (history: a group subscribed to a copy that never
held a record has no commit there, so a copy without records is never called missed).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from drctl.findings import Area, Finding
from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.groups import committed_offsets, list_groups
from drctl.kafka.offsets import watermarks
from drctl.kafka.topics import TP
from drctl.ops.active_active.pair import Pair
from drctl.translate.engine import wanted_group


def subscription_findings(pair: Pair, cluster: str, clients: ClusterClients,
                          groups: str = ".*",
                          snapshots: Collection[tuple[str, str, int]] | None = None
                          ) -> tuple[list[Finding], int]:
    """Findings for the groups committing on `cluster`, and how many groups were looked at.
    With `snapshots` (the keys guard kept on the other region for `cluster`'s groups): each
    group whose position on a copy it reads guard never kept."""
    listed = [g for g in list_groups(clients) if wanted_group(pair.config, groups, g)]
    commits = committed_offsets(clients, listed)
    topics = cluster_metadata(clients).topics
    holding = _topics_with_records(clients, {t: len(m.partitions) for t, m in topics.items()
                                             if not pair.is_internal(cluster, t)})
    found = read_findings(pair, cluster, commits, holding)
    if snapshots is not None:
        found += unguarded_copy_findings(pair, cluster, commits, snapshots)
    return found, len(commits)


def unguarded_copy_findings(pair: Pair, cluster: str, commits: Mapping[str, Mapping[TP, int]],
                            snapshots: Collection[tuple[str, str, int]]) -> list[Finding]:
    """A group that reads a copy on `cluster` (`secondary.orders` on primary) and whose
    position there guard never kept: MirrorMaker 2 never checkpoints a copy back
    (KAFKA-12635), so a failover of `cluster` with it down has no position for the group on
    the original and leaves it behind (exit 3)."""
    kept = set(snapshots)
    out: list[Finding] = []
    for group, offsets in sorted(commits.items()):
        unkept = sorted({t for (t, p), o in offsets.items()
                         if o >= 0 and pair.copy_origin(cluster, t)
                         and (group, t, p) not in kept})
        if unkept:
            out.append(Finding(
                Area.POSITIONS, f"group {group} on {cluster}",
                f"guard has never kept its position on {', '.join(unkept)}",
                f"a failover of {cluster} with it down leaves the group behind (exit 3): "
                "MirrorMaker 2 never checkpoints a copy back (KAFKA-12635)",
                f"run `drctl guard` (both flows) while the group reads {', '.join(unkept)}"))
    return out


def _topics_with_records(clients: ClusterClients, partitions: Mapping[str, int]) -> set[str]:
    tps = [(t, p) for t, n in partitions.items() for p in range(n)]
    if not tps:
        return set()
    marks = watermarks(clients.admin(), tps)
    return {t for (t, _), (low, end) in marks.items() if end > low}


def _glued_on(name: str, other: str) -> bool:
    """Whether `name` is `other` with a prefix glued on, no separator between
    (`preorders`, `orders`): what an unanchored `.*orders` takes by mistake.

    drctl cannot see a consumer's pattern, so only this is taken as evidence: a name that
    carries `other` after a '.', '-' or '_' (`eu.orders`), or `other` with a suffix
    (`orders.retry`), is a topic named on purpose and the group reads it as one."""
    if len(name) <= len(other) or not name.endswith(other):
        return False
    return name[-len(other) - 1].isalnum()


def read_findings(pair: Pair, cluster: str, commits: Mapping[str, Mapping[TP, int]],
                  holding: set[str]) -> list[Finding]:
    """The findings from each group's topics on `cluster` (`holding`: the topics there that
    hold records)."""
    prefix = pair.prefix_into(cluster)
    out: list[Finding] = []
    for group, offsets in sorted(commits.items()):
        read = {t for t, _ in offsets if not pair.is_internal(cluster, t)}
        copies = {t: origin for t in read if (origin := pair.copy_origin(cluster, t))}
        if not copies:
            continue  # a group of one region's topics: local-only, nothing to pair
        bases = {copies.get(t, t) for t in read}
        wide = {b for b in bases if any(_glued_on(b, o) for o in bases)}
        meant = sorted(bases - wide)
        regex = pair.aggregate_regex(cluster, meant)
        missing = sorted(t for b in meant for t in (b, f"{prefix}{b}")
                         if t not in read and t in holding)
        where = f"group {group} on {cluster}"
        if missing:
            out.append(Finding(
                Area.POSITIONS, where,
                f"reads {', '.join(sorted(read))} but not {', '.join(missing)}",
                "an aggregate consumer that misses a topic: the records of one region's "
                "producers never reach it (after a failover, of both)",
                f"subscribe with {regex}"))
        if wide:
            taken = sorted(t for t in read if copies.get(t, t) in wide)
            out.append(Finding(
                Area.POSITIONS, where,
                f"reads {', '.join(taken)} beside {', '.join(meant)}: its pattern "
                "over-matches (an unanchored .*name takes every name ending so)",
                "it reads topics its application was not written for, and a failover moves "
                "its positions on them too",
                f"subscribe with {regex} (or list those topics if it means them)"))
    return out

"""The failover point F and what leads to it, the same for every failover: the one flow's
(ops/one_way/failover.py) and a region's of an active-active pair
(ops/active_active/failover.py).

- `FailoverOptions`: what a failover is asked;
- `preflight`: the target must answer, the source may not; the topics mirrored, the groups
  active on the target, and an application's edge (`scope_preflight`);
- `wait_quiet_and_caught_up`: a planned switchover waits for a quiet source, its open
  transactions closed, and replication caught up to its last record;
- `read_ends`: the ends at F, from one metadata answer; `ensure_failover_topics`: the plain
  topics producers switch to with prefixed names;
- `marker_positions`, `left_behind`, `describe_left_behind`: the positions applied, as the
  marker keeps them, and what failover could not take along;
- `settled_by_last_return`: where the flow's last return to protection started copying
  forward (the target lag of status and check reads it too).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drctl.context import OpsContext
from drctl.errors import CheckFailed, Unreachable
from drctl.kafka.checkpoints import read_checkpoints
from drctl.kafka.clients import ClusterClients, cluster_metadata, describe_with_retry
from drctl.kafka.groups import group_states, list_groups
from drctl.kafka.offsets import watermarks
from drctl.kafka.topics import (
    TP,
    ensure_topics,
    is_internal_topic,
    log_append_time_topics,
    topic_partitions,
)
from drctl.kafka.transactions import OpenTransaction, open_transactions
from drctl.ops.steps.catch_up import catch_up_timed_out, describe_left, records_left
from drctl.ops.steps.scope import straddlers
from drctl.progress import Ticker
from drctl.retry import WaitTimedOut, wait_for
from drctl.state import FailoverMarker, MarkerStore, Offsets
from drctl.timeparse import format_duration
from drctl.translate.engine import wanted_group
from drctl.translate.inventory import source_groups, source_topics_in_scope
from drctl.translate.locate import MatchQuery, Side, last_records, match_records
from drctl.translate.model import GroupResult, TranslateMethod, TranslationReport
from drctl.translate.snapshots import read_snapshot_topic


@dataclass(frozen=True)
class FailoverOptions:
    planned: bool = False
    dry_run: bool = False
    groups: str = ".*"
    method: TranslateMethod = TranslateMethod.AUTO
    incident: str | None = None  # continue this one (default: the open one, if any)
    new_incident: bool = False  # open a new incident; open ones of this flow are superseded
    # An open incident older than this is not continued without --incident (a new outage
    # must never reuse an old failover point).
    continue_within_s: float = 12 * 3600.0
    source_deadline_s: float = 20.0
    quiesce_s: float = 2.0  # planned: source ends must not move for this long
    catch_up_deadline_s: float = 1800.0  # planned: --timeout of the catch-up wait
    # Take the failover point even behind a hanging transaction (its records stay unread).
    force: bool = False
    # An open transaction older than this is hanging; None: the brokers'
    # transaction.max.timeout.ms.
    transaction_age_s: float | None = None


def preflight(ctx: OpsContext, opts: FailoverOptions) -> dict[str, Any]:
    config = ctx.config
    rep = ctx.rep
    src = ctx.clients(rep.source)
    dst = ctx.clients(rep.target)
    policy = config.retry.with_deadline(opts.source_deadline_s)
    ctx.notify(f"Preflight: {rep.target} must be reachable")
    target_info = describe_with_retry(dst, policy, notify=ctx.notify)
    try:
        describe_with_retry(src, policy, notify=ctx.notify)
        source_up = True
    except Unreachable:
        if opts.planned:
            raise CheckFailed(f"A planned failover needs the source '{rep.source}', which is "
                              "unreachable.",
                              "Run an unplanned failover (without --planned).") from None
        source_up = False
    target_topics = cluster_metadata(dst).topics
    problems: list[str] = []
    topics: dict[str, str] = {}
    unmirrored: list[str] = []  # source topics without a mirror (the replicator has not
    # discovered them yet: MM2 looks every 10 minutes by default)
    if source_up:
        for topic, partitions in sorted(source_topics_in_scope(config, src).items()):
            if not ctx.scope.covers_topic(topic):
                continue
            mirror = rep.mirror_topic(topic)
            meta = target_topics.get(mirror)
            if meta is None:
                unmirrored.append(topic)
                if opts.planned:
                    problems.append(f"{mirror} is missing on {rep.target}")
                continue
            if len(meta.partitions) < partitions:
                problems.append(f"{mirror} has {len(meta.partitions)} partitions on "
                                f"{rep.target}, {topic} has {partitions} on {rep.source}")
            topics[topic] = mirror
    else:
        # The source is gone: what the target mirrors is all we know.
        for mirror in sorted(target_topics):
            original = rep.source_topic_of(mirror)
            if original and not is_internal_topic(mirror, rep.separator) and ctx.in_scope(original):
                topics[original] = mirror
    if problems:
        # A planned switchover moves everything or nothing. An outage's failover goes on
        # without a topic that was never mirrored (there is nothing of it on the target to
        # switch to) and names it, with its groups, as left behind (exit 3).
        raise CheckFailed("Preflight failed: " + "; ".join(problems) + ".",
                          "Create or grow the topics on the target, then run again.")
    # For the approval's preview only ("already active on the target"): one answer. Which
    # groups are active is asked again where it counts, by translation, which never moves
    # one (a group a coordinator's hand-over hid here is still left alone there); the
    # second answer a second later cost every failover a second of its RTO.
    groups = [g for g in list_groups(dst, once=True) if config.groups.matches(g)
              and ctx.scope.covers_group(g)]
    active = sorted(g for g, st in group_states(dst, groups).items() if st.active)
    out: dict[str, Any] = {"source_reachable": source_up,
                           "target_cluster_id": target_info.cluster_id, "topics": topics,
                           "active_groups_on_target": active}
    if not ctx.scope.whole:
        out.update(scope_preflight(ctx, opts, topics, source_up))
    if unmirrored:
        out["unmirrored"] = unmirrored
        ctx.notify(f"Not mirrored on {rep.target}, left behind: {', '.join(unmirrored)}")
    return out


def scope_preflight(ctx: OpsContext, opts: FailoverOptions, topics: Mapping[str, str],
                    source_up: bool) -> dict[str, Any]:
    """An application's failover: its groups (when it names them), and the groups that read
    topics on both sides of its edge — from their commits on the source, or with the source
    gone from what drctl last knew (its inventory, else the replicator's checkpoints) —
    refused (exit 3) before anything moves, unless --force: then they are named with what
    happens to each (the application's own groups move on its topics only, the others stay
    where they are)."""
    config, rep, scope = ctx.config, ctx.rep, ctx.scope
    out: dict[str, Any] = {"scope": scope.as_dict()}
    if not topics:
        raise CheckFailed(f"No topic of {scope.describe()} is replicated {rep.source} -> "
                          f"{rep.target}: nothing to fail over.",
                          "Check the application's topics in the config "
                          "(`drctl check --app NAME` shows what it resolves to).")
    if source_up:
        listed = source_groups(config, ctx.source, lambda g: wanted_group(config, ".*", g))
        for line in listed.notes():
            ctx.notify(line)
        if scope.groups_given:
            out["scope_groups"] = sorted(g for g in listed.commits if scope.covers_group(g))
        commits: Mapping[str, Iterable[TP]] = listed.commits
        seen_in = f"their commits on {rep.source}"
    else:
        known, seen_in = _commits_known_without_source(ctx)
        if known is None:
            why = (f"{rep.source} is unreachable and drctl has neither its inventory (`drctl "
                   "guard`) nor checkpoints of the groups: which groups read topics on both "
                   f"sides of the edge of {scope.describe()} is unknown")
            if not opts.force:
                raise CheckFailed(f"Preflight failed: {why}.",
                                  "Run again with --force to fail over without knowing "
                                  "(groups reading both sides are then not named).")
            ctx.notify(f"--force: {why}")
            out["edge_unknown"] = why
            return out
        commits = known
        if scope.groups_given:
            out["scope_groups"] = sorted(g for g in commits if wanted_group(config, ".*", g)
                                         and scope.covers_group(g))
    found = straddlers(scope, commits, {t: rep.replicates(t) for offs in commits.values()
                                        for t, _ in offs})
    if found:
        out["straddling_groups"] = [f.as_dict() for f in found]
        said = "; ".join(f.describe() for f in found[:5])
        if not opts.force:
            raise CheckFailed(
                f"Preflight failed: {len(found)} group(s) read topics on both sides of the "
                f"edge of {scope.describe()} ({seen_in}): {said}. A group follows one "
                "cluster; failing over part of what it reads leaves it reading the rest on "
                "the other.",
                "Widen the application to take them in (or take them out of its groups), or "
                "run again with --force to fail over naming them.")
        for f in found:
            if not scope.groups_given or scope.covers_group(f.group):
                ctx.notify(f"--force: moving {f.group} on {', '.join(f.inside)} only; it "
                           f"goes on reading {', '.join(f.outside)} on {rep.source}")
            else:
                ctx.notify(f"--force: not moving {f.describe()}")
    return out


def _commits_known_without_source(ctx: OpsContext
                                  ) -> tuple[dict[str, list[TP]] | None, str]:
    """With the source gone: the topics each group read, from drctl's inventory of the
    source (guard, status and failover keep it), else from the replicator's checkpoints on
    the target; None when neither says."""
    rep = ctx.rep
    inventory = read_snapshot_topic(ctx.target, ctx.config.state.snapshots_topic).inventory
    if inventory is not None and inventory.groups:
        seen = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(inventory.written_ms / 1000))
        return ({g: [(t, 0) for t in ts] for g, ts in inventory.groups.items()},
                f"drctl's inventory of {seen}")
    topic = ctx.require_kind().checkpoints_topic(rep)
    if topic is None:
        return None, ""
    try:
        checkpoints = read_checkpoints(ctx.target, topic)
    except Exception:  # noqa: BLE001 - unknown, and said so by the caller
        return None, ""
    commits: dict[str, list[TP]] = {}
    for group, mirror, partition in checkpoints:
        source = rep.source_topic_of(mirror)
        if source is not None:
            commits.setdefault(group, []).append((source, partition))
    return (commits or None), f"the checkpoints in {topic}"


# What a planned failover advises when a wait runs out; another command waiting the same
# way (a region's failback) says its own (`otherwise`).
_FAILOVER_OTHERWISE = ("Stop the producers first, or run an unplanned failover.",
                       "Check the replicator; run failover --planned again with a longer "
                       "--timeout, or run an unplanned failover.")


def wait_quiet_and_caught_up(ctx: OpsContext, topics: dict[str, str], opts: FailoverOptions,
                             otherwise: tuple[str, str] = _FAILOVER_OTHERWISE
                             ) -> dict[str, int]:
    """Planned switchover: producers are stopped; wait for the source to stop moving and for
    replication to copy its last record of every partition. `otherwise`: what to do when the
    source keeps moving, and when replication does not catch up."""
    rep = ctx.rep
    src = ctx.clients(rep.source)
    dst = ctx.clients(rep.target)
    src_admin, dst_admin = src.admin(), dst.admin()
    src_tps = sorted((t, p) for t, parts in topic_partitions(src, topics).items() for p in parts)
    ctx.notify("Waiting for the source's end offsets to stop moving (producers stopped?)")
    # The high watermarks, not the last stable offsets: records written behind an open
    # transaction move the end while the LSO stands still.
    seen = {"before": watermarks(src_admin, src_tps, read_committed=False)}

    def quiet() -> dict[TP, tuple[int, int]] | None:
        after = watermarks(src_admin, src_tps, read_committed=False)
        if after == seen["before"]:
            return after
        seen["before"] = after
        return None

    time.sleep(opts.quiesce_s)
    try:
        after = wait_for(quiet, deadline_s=opts.catch_up_deadline_s, interval_s=opts.quiesce_s)
    except WaitTimedOut:
        raise CheckFailed("The source is still receiving writes after "
                          f"{format_duration(opts.catch_up_deadline_s)}.",
                          otherwise[0]) from None
    after = _wait_transactions_closed(ctx, src, src_tps, after, opts)
    ctx.notify("Waiting for replication to catch up")
    dst_tps = [(topics[t], p) for t, p in src_tps]
    a = Side.of(src, src_admin, after)
    dst_append = log_append_time_topics(dst_admin, {t for t, _ in dst_tps})
    state: dict[str, Any] = {}

    def caught_up() -> dict[str, int] | None:
        b = Side.of(dst, dst_admin, watermarks(dst_admin, dst_tps), dst_append)
        tails = last_records(a, [(tp, after[tp][1]) for tp in src_tps])
        queries = [MatchQuery(last, (topics[tp[0]], tp[1]))
                   for tp, (last, _) in zip(src_tps, tails, strict=True) if last is not None]
        state.update(b=b, behind=[q for q, m in zip(queries, match_records(a, b, queries),
                                                    strict=True) if m.offset is None])
        if not state["behind"]:
            return {f"{t}[{p}]": after[(t, p)][1] for t, p in src_tps}
        return None

    def left() -> dict[TP, int | None]:
        return records_left(a, state["b"], [((q.record.topic, q.record.partition), q.tp_b)
                                            for q in state["behind"]])

    ticker = Ticker()
    try:
        return wait_for(caught_up, deadline_s=opts.catch_up_deadline_s, interval_s=1.0,
                        on_wait=lambda: ticker.due() and ctx.notify(
                            f"Catch-up: {describe_left(left())}"))
    except WaitTimedOut:
        raise catch_up_timed_out("Replication", opts.catch_up_deadline_s, left(),
                                 otherwise[1]) from None


def _wait_transactions_closed(ctx: OpsContext, src: ClusterClients, src_tps: list[TP],
                              ends: dict[TP, tuple[int, int]], opts: FailoverOptions
                              ) -> dict[TP, tuple[int, int]]:
    """Producers have stopped, yet a transaction still open pins a partition's last stable
    offset below its end: its records and every record written after it are invisible to
    read_committed readers, MirrorMaker 2 among them, so the target lacks them all. Wait
    until each such transaction ends (its producer commits or aborts it, or an operator
    aborts it), bounded by --timeout; refuse naming the partition and its LSO when one does
    not. With --force, switch over without those records (the RPO counts them). Returns the
    source's (low, end) once no transaction holds any partition back."""
    src_admin = src.admin()

    def still_open() -> list[OpenTransaction]:
        # Producers are stopped: an LSO below the end now is a transaction, no race.
        return open_transactions(src, src_tps, confirm_s=0)

    held = still_open()
    if not held:
        return ends
    if opts.force:
        ctx.notify("--force: switching over without what open transactions hold back: "
                   + "; ".join(t.describe() for t in held))
        return ends
    aborts = " | ".join(t.abort_commands(src.bootstrap) for t in held[:3])
    ctx.notify(f"Waiting for {len(held)} open transaction(s) on {ctx.rep.source} to end "
               f"(up to {format_duration(opts.catch_up_deadline_s)}): "
               + "; ".join(t.describe() for t in held)
               + ". If the producer is gone, abort it: " + aborts)
    state = {"held": held}

    def closed() -> bool | None:
        state["held"] = still_open()
        return True if not state["held"] else None

    ticker = Ticker()
    try:
        wait_for(closed, deadline_s=opts.catch_up_deadline_s, interval_s=1.0,
                 on_wait=lambda: ticker.due() and ctx.notify(
                     "Still open: " + "; ".join(t.describe() for t in state["held"])))
    except WaitTimedOut:
        left = state["held"]
        raise CheckFailed(
            f"Open transaction(s) still hold {len(left)} partition(s) of {ctx.rep.source} "
            f"after {format_duration(opts.catch_up_deadline_s)}: "
            + "; ".join(t.describe() for t in left) + ". MirrorMaker 2 copies nothing at or "
            "after a last stable offset: a switchover now leaves those records on the "
            "source only.",
            "Let the producer commit or abort; if it is gone, abort it: "
            + " | ".join(t.abort_commands(src.bootstrap) for t in left[:3])
            + " — then run failover --planned again (or with --force to switch over "
            "without them).") from None
    ctx.notify("No open transaction holds the source back any more")
    return watermarks(src_admin, src_tps, read_committed=False)


def read_ends(clients: ClusterClients, topics: list[str], *, read_committed: bool = True
              ) -> Offsets:
    """End offsets per topic and partition, the partitions from one metadata answer (it was
    one raw request per topic, after replication had stopped): the last stable offsets, or
    with `read_committed=False` the high watermarks."""
    tps = sorted((t, p) for t, parts in topic_partitions(clients, topics).items()
                 for p in parts)
    out: Offsets = {}
    for (t, p), (_, end) in watermarks(clients.admin(), tps,
                                       read_committed=read_committed).items():
        out.setdefault(t, {})[p] = end
    return out


def ensure_failover_topics(ctx: OpsContext, topics: dict[str, str],
                           dry_run: bool) -> list[str]:
    """With MM2's prefixed names producers switch to the plain topic on the target; it must
    exist with the mirror's partition count before they do."""
    rep = ctx.rep
    if rep.names_kept:
        return []
    dst = ctx.clients(rep.target)
    existing = cluster_metadata(dst).topics
    wanted = {rep.failover_topic(t): len(existing[m].partitions) for t, m in topics.items()
              if rep.failover_topic(t) not in existing and m in existing}
    if dry_run:
        return sorted(wanted)
    return ensure_topics(dst, wanted)


def marker_positions(group: GroupResult) -> dict[str, dict[str, dict[str, Any]]]:
    """The positions applied to a group, per target topic and partition, as the marker keeps
    them (ops/steps/audit.py `applied_positions` reads them back)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for p in group.partitions:
        if p.applied and p.target_offset is not None:
            out.setdefault(p.target_topic, {})[str(p.partition)] = {
                "offset": p.target_offset, "confidence": p.confidence,
                "max_redelivered": p.max_redelivered}
    return out


def left_behind(ctx: OpsContext, report: TranslationReport, source_up: bool,
                topics: dict[str, str], groups_pattern: str = ".*",
                unmirrored: Sequence[str] = (),
                failover_point: Mapping[str, Mapping[int, int]] | None = None
                ) -> dict[str, Any]:
    """Every topic and group failover could not take along, and why — so none is left
    silently. With the source up, preflight found the `unmirrored` topics; with it gone,
    what drctl last saw on it (the inventory guard, status, translate-offsets and failover
    keep) says which topics and groups exist beyond what the target mirrors and checkpoints —
    those this failover is about: the groups it was asked to move (`groups_pattern` within the
    config's filter) reading topics replication covers. Another team's failover of other
    groups must not be named here."""
    config = ctx.config
    rep = ctx.rep
    groups: dict[str, str] = {}
    for g in report.groups:
        unplaced = [f"{p.target_topic}[{p.partition}]" for p in g.partitions
                    if p.target_offset is None]
        if not source_up and failover_point:
            # With the source gone a partition without checkpoint or snapshot has no
            # position at all, not even an empty one: name the ones of every topic the
            # group reads that it may have committed on.
            have = {(p.target_topic, p.partition) for p in g.partitions}
            for mirror in sorted({p.target_topic for p in g.partitions}):
                unplaced += [f"{mirror}[{q}] (no checkpoint or snapshot)"
                             for q in sorted(failover_point.get(mirror, {}))
                             if (mirror, q) not in have]
        if g.skipped:
            groups[g.group] = f"not moved: {g.skipped}"
        elif g.partitions and all(p.target_offset is None for p in g.partitions):
            groups[g.group] = ("no position anywhere (" + ", ".join(sorted(
                {p.confidence for p in g.partitions})) + "): its consumers start at "
                "auto.offset.reset (earliest re-reads everything, latest skips what is unread)")
        elif unplaced:
            groups[g.group] = (f"no position for {', '.join(unplaced)}: its consumers start "
                               "there at auto.offset.reset")
    missing_topics: list[dict[str, Any]] = [
        {"topic": topic, "groups": sorted(g.group for g in report.groups
                                          if any(p.topic == topic for p in g.partitions))}
        for topic in unmirrored]
    inventory = None
    if not source_up:
        inventory = read_snapshot_topic(ctx.clients(rep.target),
                                        config.state.snapshots_topic).inventory
    if inventory is not None:
        translated = {g.group for g in report.groups}
        for topic in sorted(inventory.topics):
            if topic not in topics and ctx.in_scope(topic):
                readers = sorted(g for g, ts in inventory.groups.items() if topic in ts)
                missing_topics.append({"topic": topic, "groups": readers})
        seen = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(inventory.written_ms / 1000))
        unread = {g: ["?"] for g in inventory.unread}  # topics unknown: named all the same
        for group, consumed in sorted({**inventory.groups, **unread}.items()):
            in_scope = [t for t in consumed if t == "?" or ctx.in_scope(t)]
            if group in translated or group in groups or not in_scope \
                    or not wanted_group(config, groups_pattern, group):
                continue
            how = "listed" if group in unread else "committed"
            groups[group] = (f"{how} on the source (drctl's inventory of {seen}), but no "
                             "snapshot or checkpoint: its consumers start at "
                             "auto.offset.reset (earliest re-reads everything, latest skips "
                             "what is unread)")
    out: dict[str, Any] = {}
    if missing_topics:
        out["topics"] = missing_topics
    if groups:
        out["groups"] = [{"group": g, "reason": r} for g, r in sorted(groups.items())]
    if inventory is not None:
        out["inventory_age_s"] = round(time.time() - inventory.written_ms / 1000, 1)
    return out if missing_topics or groups else {}


def describe_left_behind(marker: FailoverMarker) -> list[str]:
    """One line per topic and group failover left behind (for stderr and the report)."""
    lines = [f"Topic {t['topic']} has no mirror on {marker.target}: its records are not "
             f"there" + (f" (read by {', '.join(t['groups'])})" if t["groups"] else "")
             + "; failback names it." for t in marker.left_behind.get("topics", [])]
    lines += [f"Group {g['group']}: {g['reason']}." for g in marker.left_behind.get("groups", [])]
    return lines


def settled_by_last_return(store: MarkerStore, source: str, target: str) -> dict[str, Any]:
    """Where the flow's returns to protection last started forward copying, per source and
    mirror partition (each topic's from the latest return that covered it: applications
    return apart from the whole flow): below it an earlier incident settled every record.
    `by_topic` names the incident per source topic, `incident` the latest."""
    returned = store.returned(source, target)
    if not returned:
        return {}
    out: dict[str, Any] = {"incident": returned[-1].incident, "source": {}, "target": {},
                           "by_topic": {}}
    for m in returned:
        cut = m.steps["reprotect:cut-over"].result
        out["source"].update(cut.get("forward_starts", {}))
        out["target"].update(cut.get("target_ends", {}))
        out["by_topic"].update(dict.fromkeys(cut.get("forward_starts", {}), m.incident))
    return out

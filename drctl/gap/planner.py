"""Pins every bound of a gap analysis to numeric offsets, on the driver, before Spark starts
(Spark would resolve `latest` late, and a report must be reproducible)."""

from __future__ import annotations

import functools
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec, ResourceType

from drctl.config import ReplicationSettings
from drctl.context import OpsContext
from drctl.errors import CheckFailed, Unreachable, UsageError
from drctl.gap.alignment import (
    DEFAULT_MARGIN,
    Alignment,
    full_alignment,
    identity_tail,
    prove_tails,
)
from drctl.gap.kafka_options import deadline_options, java_settings_for
from drctl.gap.plan import DIFF, IDENTITY, GapPlan, GapScope, PartitionOffsets, TopicPlan
from drctl.kafka.causes import kafka_cause
from drctl.kafka.clients import (
    ClusterClients,
    ClusterRefused,
    cluster_metadata,
    describe_with_retry,
)
from drctl.kafka.offsets import list_offsets
from drctl.kafka.retriable import transient
from drctl.kafka.topics import is_internal_topic
from drctl.replication.base import ReplicationKind
from drctl.state import FailoverMarker

TopicOffsets = Mapping[str, Mapping[int, int]]
_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Window:
    """Where the compared range starts: the first offset whose timestamp is at or after
    `start_ms` on each side (None: the low watermark)."""

    start_ms: int | None = None


def window_from(since_ms: int | None, lookback_ms: int | None,
                failover_time_ms: int | None, now_ms: int | None = None) -> Window:
    if since_ms is not None and lookback_ms is not None:
        raise UsageError("--since and --lookback both set the window start.",
                         "Give one of them.")
    if since_ms is not None:
        return Window(since_ms)
    if lookback_ms is not None:
        anchor = failover_time_ms if failover_time_ms is not None else (
            now_ms if now_ms is not None else int(time.time() * 1000))
        return Window(anchor - lookback_ms)
    return Window(None)


def plan_gap_analysis(
    ctx: OpsContext,
    topics: Sequence[str] | None = None,
    *,
    target_end: TopicOffsets | None = None,
    post_failover_start: TopicOffsets | None = None,
    source_end: TopicOffsets | None = None,
    window: Window = Window(),
    check_order: bool = False,
    out_dir: Path | None = None,
    scope: GapScope = GapScope.TAIL,
    margin: int = DEFAULT_MARGIN,
    late_runs: Mapping[str, Mapping[int, list[list[int]]]] | None = None,
    settled: Mapping[str, Any] | None = None,
    deadline_s: float = 30.0,
) -> GapPlan:
    """Bounds for every topic: source `[start, end)`, target `[start', F)`.

    The starts come from `scope` (gap/alignment.py: a proven tail, or every retained record),
    narrowed by `window` when the operator gave one.

    `target_end` is the failover point keyed by *mirror* topic (as the failover marker records
    it); without it the target's current end is used and the plan says so.
    `post_failover_start` is keyed by *failover* topic; when names are kept it defaults to F.
    `source_end` (keyed by source topic) defaults to the source's last stable offset now.
    `settled` (a failover marker's): below its source and target offsets the flow's last
    return to protection settled every record, so no comparison starts lower.
    Each cluster is retried for `deadline_s` before it is unreachable (exit 4).
    """
    config, rep = ctx.config, ctx.rep
    if config.spark.remote:
        from drctl.gap import remote

        remote.import_client_early()  # it loads while the plan reads Kafka
    # Before any network: a setting the Java client cannot take is a config error (exit 2).
    src_java, dst_java = (java_settings_for(config, rep.source),
                          java_settings_for(config, rep.target))
    src, dst = ctx.source, ctx.target
    policy = config.retry.with_deadline(deadline_s)
    for clients in (src, dst):
        describe_with_retry(clients, policy, notify=ctx.notify)
    src_admin, dst_admin = src.admin(), dst.admin()
    src_parts = _partitions(src)
    dst_parts = _partitions(dst)
    for topic in topics or ():
        if topic not in src_parts:  # hidden from drctl's principal, or not there
            _refused_topic(src_admin, rep.source, topic)
    chosen = _choose_topics(rep, topics, src_parts, dst_parts)
    notes: list[str] = [*src_java.warnings, *dst_java.warnings]
    replication = ctx.require_kind()
    kind = gap_kind(replication)
    upto = functools.cache(lambda: replication.replicated_upto(ctx))
    plans = []
    for topic in chosen:
        mirror = rep.mirror_topic(topic)
        if mirror not in dst_parts:
            _refused_topic(dst_admin, rep.target, mirror)
            raise CheckFailed(f"The mirror topic '{mirror}' of '{topic}' does not exist on "
                              f"'{rep.target}'.",
                              "Check replication.rename in the config, or whether the topic "
                              "was ever replicated.")
        plans.append(_topic_plan(
            rep, topic, mirror, sorted(src_parts[topic]), set(dst_parts[mirror]), dst_parts,
            _Sides(src, dst, src_admin, dst_admin, scope, margin, upto), window, kind,
            check_order,
            None if target_end is None else target_end.get(mirror),
            None if source_end is None else source_end.get(topic),
            None if post_failover_start is None
            else post_failover_start.get(rep.failover_topic(topic)),
            notes, _floors(settled, topic, mirror)))
        plans[-1].late_runs = {p: [list(r) for r in runs]
                               for p, runs in (late_runs or {}).get(mirror, {}).items() if runs}
    if target_end is None:
        notes.append("No failover point given: the target was compared up to its current end.")
    directory = out_dir or Path(tempfile.mkdtemp(prefix="drctl-gap-"))
    return GapPlan(
        kind=kind, replication_kind=rep.kind, source_cluster=rep.source,
        target_cluster=rep.target,
        source_kafka={**src_java.spark_options(), "kafka.isolation.level": "read_committed"},
        target_kafka={**dst_java.spark_options(), "kafka.isolation.level": "read_committed"},
        topics=plans, out_dir=str(Path(directory).resolve()), temporary_out=out_dir is None,
        check_order=check_order,
        window_start_ms=window.start_ms, scope=str(scope),
        created_at_ms=int(time.time() * 1000), notes=notes,
        waits=deadline_options(deadline_s))


@dataclass(frozen=True)
class _Floors:
    incident: str
    source: Mapping[int, int]
    target: Mapping[int, int]


def _floors(settled: Mapping[str, Any] | None, topic: str, mirror: str) -> _Floors | None:
    if not settled:
        return None
    return _Floors(str(settled.get("by_topic", {}).get(topic, settled.get("incident", ""))),
                   {int(p): int(o) for p, o in settled.get("source", {}).get(topic, {}).items()},
                   {int(p): int(o) for p, o in settled.get("target", {}).get(mirror, {}).items()})


def bounds_from_marker(marker: FailoverMarker) -> dict[str, Any]:
    """What a failover marker pins for a gap analysis: F, where the post-failover writes
    begin (prefixed names), the replicator's late copies, and what the flow's last return to
    protection settled. The one way failback and `gap-analysis` read a marker."""
    return {"target_end": marker.failover_point,
            "post_failover_start": marker.failover_topics_end or None,
            "late_runs": {t: {int(p): part.get("runs", []) for p, part in parts.items()}
                          for t, parts in (marker.late_copies.get("partitions") or {}).items()},
            "settled": marker.settled or None}


def gap_kind(replication: ReplicationKind) -> str:
    """The gap job's kind: with offsets preserved the gap is [F, source end), no diff needed."""
    return IDENTITY if replication.offsets_preserved else DIFF


@dataclass(frozen=True)
class _Sides:
    src: ClusterClients
    dst: ClusterClients
    src_admin: AdminClient
    dst_admin: AdminClient
    scope: GapScope
    margin: int
    # Per source partition, where forward replication had copied up to (its own stored
    # position), asked only when retention may have deleted records before a comparison.
    replicated_upto: Callable[[], Mapping[tuple[str, int], int] | None] = lambda: None


def _topic_plan(rep: ReplicationSettings, topic: str, mirror: str, partitions: list[int],
                mirror_parts: set[int], dst_parts: Mapping[str, list[int]],
                sides: _Sides, window: Window, kind: str,
                check_order: bool, target_end: Mapping[int, int] | None,
                source_end: Mapping[int, int] | None,
                post_start: Mapping[int, int] | None, notes: list[str],
                floors: _Floors | None = None) -> TopicPlan:
    src_admin, dst_admin = sides.src_admin, sides.dst_admin
    src_name, dst_name = sides.src.name, sides.dst.name
    s_low = _list(src_admin, src_name, topic, partitions, OffsetSpec.earliest())
    s_high = _list(src_admin, src_name, topic, partitions, OffsetSpec.latest())
    t_parts = [p for p in partitions if p in mirror_parts]
    missing_parts = sorted(set(partitions) - mirror_parts)
    if missing_parts:
        notes.append(f"{mirror} lacks partitions {missing_parts}: all of their source records "
                     "count as unreplicated.")
    t_low = {**dict.fromkeys(missing_parts, 0), **_list(dst_admin, dst_name, mirror, t_parts,
                                                        OffsetSpec.earliest())}
    t_high = {**dict.fromkeys(missing_parts, 0), **_list(dst_admin, dst_name, mirror, t_parts,
                                                         OffsetSpec.latest())}

    s_end = _explicit(source_end, partitions, s_high, f"source end of {topic}")
    f_point = _explicit(target_end, partitions, t_high, f"failover point of {mirror}")
    for p in partitions:
        if f_point[p] > t_high[p]:
            notes.append(f"{mirror}[{p}]: the failover point {f_point[p]} is past the "
                         f"target's end {t_high[p]}; using {t_high[p]}.")
            f_point[p] = t_high[p]
    for p in missing_parts:
        f_point[p] = 0

    aligned = _alignments(sides, topic, mirror, partitions, t_parts, s_low, s_high, t_low,
                          t_high, f_point, kind)
    lost = {p: loss for p in partitions
            if (loss := _lost_to_retention(sides, topic, p, s_low[p], t_low[p], f_point[p],
                                           aligned[p], kind)) is not None}
    s_start = {p: aligned[p].source_start for p in partitions}
    t_start = {p: aligned[p].target_start for p in partitions}
    before_window: dict[int, int] = {}
    if window.start_ms is not None:
        by_time = _by_time(src_admin, src_name, topic, partitions, window.start_ms, s_end)
        t_by_time = {**dict.fromkeys(missing_parts, 0),
                     **_by_time(dst_admin, dst_name, mirror, t_parts, window.start_ms,
                                f_point)}
        if kind == IDENTITY:
            # Offsets are equal on both sides: one window start for both.
            by_time = {p: max(by_time[p], t_by_time.get(p, 0)) for p in partitions}
            t_by_time = dict(by_time)
        for p in partitions:
            # Offsets, not records: compaction or transactions may make them fewer.
            before_window[p] = max(0, min(by_time[p], s_end[p]) - s_start[p])
            s_start[p] = max(s_start[p], by_time[p])
            t_start[p] = max(t_start[p], t_by_time[p])
    settled_by: dict[int, str] = {}
    if floors is not None:
        for p in partitions:
            fs, ft = floors.source.get(p), floors.target.get(p)
            if fs is not None and ft is not None and (s_start[p] < fs or t_start[p] < ft):
                s_start[p], t_start[p] = max(s_start[p], fs), max(t_start[p], ft)
                settled_by[p] = floors.incident
    s_start = {p: min(max(s_start[p], s_low[p]), s_end[p]) for p in partitions}
    t_start = {p: min(max(t_start[p], t_low[p]), f_point[p]) for p in partitions}

    plan = TopicPlan(source_topic=topic, target_topic=mirror, partitions=partitions,
                     source_start=s_start, source_end=s_end, target_start=t_start,
                     target_end=f_point,
                     compare_timestamps=(_timestamp_type(src_admin, topic) == "CreateTime"
                                         and _timestamp_type(dst_admin, mirror) == "CreateTime"),
                     alignment={p: {**aligned[p].as_dict(), "source_start": s_start[p],
                                    "before_window": before_window.get(p, 0),
                                    **({"settled_by": settled_by[p]} if p in settled_by
                                       else {}),
                                    **({"lost": lost[p]} if p in lost else {})}
                                for p in partitions},
                     compacted=_compacted(src_admin, topic) or _compacted(dst_admin, mirror))
    if check_order:
        failover = rep.failover_topic(topic)
        plan.failover_topic = failover
        fo_parts = dst_parts.get(failover, [])
        if post_start is None:
            if failover != mirror:
                raise UsageError(
                    f"--check-order needs where the post-failover writes to '{failover}' "
                    "begin (its end offsets when replication stopped).",
                    "The failover marker records them; or pass --failover-start.")
            post_start = f_point
        fo_high = _list(dst_admin, sides.dst.name, failover, fo_parts, OffsetSpec.latest())
        plan.post_start = {p: min(int(post_start.get(p, 0)), fo_high[p]) for p in fo_parts}
        plan.post_end = dict(fo_high)
    return plan


def _lost_to_retention(sides: _Sides, topic: str, p: int, s_low: int, t_low: int,
                       f_point: int, aligned: Alignment, kind: str) -> dict[str, Any] | None:
    """What retention deleted from the source before it was replicated — records nothing can
    bring back, named rather than silently left out. Only asked when the source no longer
    starts at 0 and no record it still holds proves where replication stopped; None when
    nothing can have been lost (or a proof stands)."""
    if s_low == 0 or aligned.source_aligned is not None:
        return None
    if kind == IDENTITY:
        # Offsets are equal: the target holds [.., F); the source lost [F, log start).
        count = max(0, s_low - f_point)
        return {"from": f_point, "to": s_low, "count": count,
                "proof": "offsets are preserved: the target holds the source's offsets "
                         f"below {f_point}"} if count else None
    if f_point <= t_low:
        upto = None  # nothing on the target before F to anchor on
    else:
        upto = (sides.replicated_upto() or {}).get((topic, p))
    if upto is None:
        return {"from": None, "to": s_low, "count": None,
                "proof": f"the source's log starts at {s_low} and neither a record it still "
                         "holds nor the replicator's stored position says how far replication "
                         "had copied: records before the log start that never reached the "
                         "target cannot be counted"}
    count = max(0, s_low - upto)
    proof = (f"the replicator's stored position: it had copied up to source offset {upto}; "
             f"the source's log starts at {s_low}")
    return {"from": upto, "to": s_low, "count": count, "proof": proof}


def _alignments(sides: _Sides, topic: str, mirror: str, partitions: list[int],
                t_parts: list[int], s_low: Mapping[int, int], s_high: Mapping[int, int],
                t_low: Mapping[int, int], t_high: Mapping[int, int],
                f_point: Mapping[int, int], kind: str) -> dict[int, Alignment]:
    """Where each partition's comparison starts: see gap/alignment.py."""
    if kind == IDENTITY:
        # Offsets are equal on both sides: one start for both.
        if sides.scope == GapScope.FULL:
            return {p: full_alignment(max(s_low[p], t_low[p]), max(s_low[p], t_low[p]))
                    for p in partitions}
        return {p: identity_tail(max(s_low[p], t_low[p]), f_point[p], sides.margin)
                for p in partitions}
    if sides.scope == GapScope.FULL:
        return {p: full_alignment(s_low[p], t_low[p]) for p in partitions}
    out = {p: full_alignment(s_low[p], 0, f"{mirror} lacks partition {p}")
           for p in partitions if p not in t_parts}
    out.update(prove_tails(
        sides.src, sides.dst, sides.src_admin, sides.dst_admin, topic, mirror, t_parts,
        source_marks={p: (s_low[p], s_high[p]) for p in t_parts},
        target_marks={p: (t_low[p], t_high[p]) for p in t_parts},
        f_point=f_point, margin=sides.margin))
    return out


def flow_topics(ctx: OpsContext, regex: str, deadline_s: float = 30.0) -> list[str]:
    """`--topics REGEX`: the flow's topics (replication.topics, with a mirror on the target,
    as when none is named) whose whole name matches; none is a usage error."""
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        raise UsageError(f"--topics is not a valid regex: {exc}") from exc
    policy = ctx.config.retry.with_deadline(deadline_s)
    for clients in (ctx.source, ctx.target):
        describe_with_retry(clients, policy, notify=ctx.notify)
    rep = ctx.rep
    try:
        flow = _choose_topics(rep, None, _partitions(ctx.source), _partitions(ctx.target))
    except UsageError:
        flow = []  # said below, after a topic named alone is asked for
    chosen = [t for t in flow if pattern.fullmatch(t)]
    if not chosen and _TOPIC_NAME.fullmatch(regex):  # one topic, named: hidden, or not there
        _refused_topic(ctx.source.admin(), rep.source, regex)
    if not chosen:
        raise UsageError(f"No topic of the flow {rep.source} -> {rep.target} matches --topics "
                         f"{regex!r}.", "The flow's topics are those replication.topics "
                         "covers that have a mirror on the target.")
    return chosen


# What a Kafka topic's name may hold: a --topics "regex" of only these names one topic.
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]+")


def _partitions(clients: ClusterClients) -> dict[str, list[int]]:
    md = cluster_metadata(clients, timeout_s=_TIMEOUT_S)
    return {name: sorted(t.partitions) for name, t in md.topics.items() if t.error is None}


def _refused_topic(admin: AdminClient, cluster: str, topic: str) -> None:
    """A topic missing from the cluster's metadata is either not there or hidden from drctl's
    principal (a Metadata answer leaves out the topics it may not describe). Asked by name:
    not authorized is ClusterRefused (exit 4 at once, with the cause), never "no such
    topic"; not there returns."""
    try:
        [future] = admin.describe_topics(TopicCollection([topic]),
                                         request_timeout=_TIMEOUT_S).values()
        future.result(timeout=_TIMEOUT_S)
    except KafkaException as exc:
        err = exc.args[0]
        if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise ClusterRefused(f"'{cluster}' does not let drctl's principal describe {topic}: "
                                 f"{kafka_cause(err)} ({err.name()}).",
                                 _REFUSED_HINT[err.code()], detail=err.str()) from None


def _choose_topics(rep: ReplicationSettings, topics: Sequence[str] | None,
                   src_parts: Mapping[str, list[int]],
                   dst_parts: Mapping[str, list[int]]) -> list[str]:
    """The topics named, or every source topic matching replication.topics that has a mirror
    on the target."""
    if topics:
        unknown = [t for t in topics if t not in src_parts]
        if unknown:
            raise UsageError(f"No topic {', '.join(repr(t) for t in unknown)} on the source "
                             f"cluster '{rep.source}'.", "Check --topics.")
        return list(dict.fromkeys(topics))
    chosen = sorted(t for t in src_parts
                    if not is_internal_topic(t, rep.separator) and rep.replicates(t)
                    and rep.mirror_topic(t) in dst_parts)
    if not chosen:
        raise UsageError(f"No topic on '{rep.source}' matches replication.topics and has a "
                         f"mirror on '{rep.target}'.", "Check replication.topics in the "
                         "config.")
    return chosen


def _list(admin: AdminClient, cluster: str, topic: str, partitions: Iterable[int],
          spec: OffsetSpec) -> dict[int, int]:
    try:
        # Retried while a leader is elected (a broker restarting, a topic just created).
        found = list_offsets(admin, {(topic, p): spec for p in partitions},
                             timeout_s=_TIMEOUT_S)
    except KafkaException as exc:
        if not transient(exc):
            # Refused (not authorized, no such topic): no wait changes it — at once.
            err = exc.args[0]
            raise ClusterRefused(f"Listing offsets of {topic} on '{cluster}' was refused: "
                                 f"{kafka_cause(err)} ({err.name()}).",
                                 _REFUSED_HINT.get(err.code(), "Run it again with --debug "
                                                   "for the broker's answer."),
                                 detail=err.str()) from exc
        # A failed read is "unknown" (exit 4), never a finding: a partition without a leader
        # is a broker that dropped (failback waits for it within --deadline, rerun.py).
        raise Unreachable(f"Listing offsets of {topic} on '{cluster}' failed: {exc}.",
                          "Check that all its partitions have a leader (a broker that "
                          "stopped answering), then run it again.") from exc
    return {p: offset for (_, p), offset in found.items()}


_REFUSED_HINT = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "Grant drctl's principal DESCRIBE and READ on the "
                                           "topic (docs/operations.md lists the ACLs).",
    KafkaError.UNKNOWN_TOPIC_OR_PART: "Check the topic and the replication settings "
                                      "(`drctl check` compares the topics of both clusters).",
}


def _by_time(admin: AdminClient, cluster: str, topic: str, partitions: list[int],
             start_ms: int, end: Mapping[int, int]) -> dict[int, int]:
    """First offset whose timestamp is >= start_ms; the end when there is none (-1)."""
    found = _list(admin, cluster, topic, partitions, OffsetSpec.for_timestamp(start_ms))
    return {p: end[p] if o < 0 else min(o, end[p]) for p, o in found.items()}


def _explicit(given: Mapping[int, int] | None, partitions: list[int], default: Mapping[int, int],
              what: str) -> dict[int, int]:
    if given is None:
        return {p: default[p] for p in partitions}
    missing = [p for p in partitions if p not in given]
    if missing:
        raise UsageError(f"The {what} names no offset for partition(s) {missing}.",
                         "Give every partition an offset.")
    return {p: int(given[p]) for p in partitions}


def _timestamp_type(admin: AdminClient, topic: str) -> str:
    return _topic_config(admin, topic, "message.timestamp.type", "CreateTime")


def _compacted(admin: AdminClient, topic: str) -> bool:
    """Whether the topic's cleanup.policy includes compact ("compact" or "compact,delete")."""
    policy = _topic_config(admin, topic, "cleanup.policy", "delete")
    return "compact" in (p.strip() for p in policy.split(","))


def _topic_config(admin: AdminClient, topic: str, name: str, default: str) -> str:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource])[resource].result(timeout=_TIMEOUT_S)
    except KafkaException as exc:
        if transient(exc):  # a broker restarting: failback waits for it (rerun.py)
            raise Unreachable(f"Reading the configuration of {topic} failed: {exc}.",
                              "Check that the brokers answer, then run it again.") from exc
        err = exc.args[0]
        raise ClusterRefused(f"Reading the configuration of {topic} was refused: "
                             f"{kafka_cause(err)} ({err.name()}).",
                             "Grant drctl's principal DESCRIBE_CONFIGS on the topic "
                             "(docs/operations.md lists the ACLs).", detail=err.str()) from exc
    entry = entries.get(name)
    return str(entry.value) if entry is not None and entry.value is not None else default


# -- option parsing ---------------------------------------------------------------------------

_PAIR = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


def parse_offsets(text: str, topics: Sequence[str], option: str) -> dict[str, PartitionOffsets]:
    """`--source-end`/`--target-end`/`--failover-start`: JSON `{"topic": {"0": 12}}`, or for a
    single topic JSON `{"0": 12}` or `0:12,1:40`. Keys are the topics the option is about."""
    text = text.strip()
    if text.startswith("{"):
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{option}: not valid JSON ({exc.msg}).") from exc
        if not isinstance(raw, dict):
            raise UsageError(f"{option}: expected a JSON object.")
        if raw and all(isinstance(v, dict) for v in raw.values()):
            return {str(t): _int_map(v, option) for t, v in raw.items()}
        return _single(topics, _int_map(raw, option), option)
    pairs = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        m = _PAIR.match(item)
        if not m:
            raise UsageError(f"{option}: '{item}' is not PARTITION:OFFSET.",
                             'Use e.g. 0:120,1:98 or JSON {"topic": {"0": 120}}.')
        pairs[int(m.group(1))] = int(m.group(2))
    return _single(topics, pairs, option)


def _int_map(raw: Mapping[str, object], option: str) -> PartitionOffsets:
    try:
        return {int(p): int(str(o)) for p, o in raw.items()}
    except ValueError as exc:
        raise UsageError(f"{option}: partitions and offsets must be integers.") from exc


def _single(topics: Sequence[str], offsets: PartitionOffsets,
            option: str) -> dict[str, PartitionOffsets]:
    if len(topics) != 1:
        raise UsageError(f"{option}: offsets without a topic name need exactly one topic.",
                         'Name the topics: {"orders": {"0": 120}}.')
    return {topics[0]: offsets}


def rekey(offsets: Mapping[str, PartitionOffsets] | None, topics: Sequence[str],
          rep: ReplicationSettings, to: str) -> dict[str, PartitionOffsets] | None:
    """Option offsets named by source topic, re-keyed by the mirror topic (`to="mirror"`) or
    the failover topic (`to="failover"`) the planner expects; other names stay as given."""
    if offsets is None:
        return None
    rename = rep.mirror_topic if to == "mirror" else rep.failover_topic
    return {rename(name) if name in topics else name: parts for name, parts in offsets.items()}

"""The return to protection's cut-over (docs/design.md §6): per source partition, where forward
replication starts copying again — taken only once every post-failover write is on the source.

Decided here, in one place:

- **The failover topics' ends E** when the cut is taken. Every post-failover write below E is on
  the source before forward replication starts: the reverse flow carried it, or drctl copies
  what the source lacks now (`carry_post_failover_writes`, idempotent by content). A write at
  or after E was made by a producer still on the target: the return looks for those before
  it resumes forward replication (`writes_since`) and after (the verification).
- **Names kept**: the walk over the source from where failback compared pairs its records with
  the post-failover writes (a multiset of fingerprints, the k-th copy with the k-th write); the
  cut follows the last copy. A record written natively on the source among the copies (a
  producer that moved back early) is a stray: forward replication would never copy it, so
  drctl does, tagged — unless, on a compacted topic, a later record of the same key follows it
  on the source: the target holds or will hold that newer value, and appending the older one
  after it would make a stale value current.
- **Prefixed names**: the reverse copies live in other topics; the cut is where failback's
  comparison ended.
- **Retention**: every read that starts below a log start starts there (kafka/records.py) and
  the offsets it lost are counted. Where the target's retention removed post-failover writes
  after the reverse flow copied them, their copies on the source (the first unpaired records
  before the first paired one) are not strays; where the source's removed copies, those copies
  are not missing; records that may exist on neither cluster any more are named (`lost`).
- **Compaction**: on a compacted topic a copy compaction removed from the source (its key has a
  later record there or among the writes, or it was a tombstone) is not missing.

The plan is recorded in the marker before anything is copied (`reprotect:cut-over`, status
`copying`), so a run killed while copying finds its copies by their tags from the recorded
ends and never copies a stray twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import ConfigResource, ResourceType

from drctl.context import OpsContext
from drctl.errors import UsageError
from drctl.fingerprint import RECONCILED_HEADER, is_reconciled
from drctl.kafka.copy import RerunTag, copy_records
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import Record, header_values, stream_ranges
from drctl.kafka.topics import TP
from drctl.ops.one_way.copies import copy_fingerprint, timestamps_kept
from drctl.ops.one_way.reverse import carry_to_source, failover_starts, late_copy_offsets
from drctl.state import FailoverMarker, Offsets

CUT_OVER_STEP = "reprotect:cut-over"


def compared_ends(marker: FailoverMarker) -> dict[TP, int]:
    """Per source partition, where failback's gap analysis stopped comparing: records up to
    there are on the target (replicated, reconciled) or deliberately held back (quarantined)."""
    gap = marker.steps["failback:gap"].result if "failback:gap" in marker.steps else {}
    return {(v["topic"], int(v["partition"])): int(v["source_end"])
            for v in gap.get("verified", []) if v.get("source_end") is not None}


def failover_topic_ends(ctx: OpsContext, marker: FailoverMarker) -> dict[TP, int]:
    """The target's failover topics' ends now (last stable offsets)."""
    starts = failover_starts(ctx.rep, marker)
    tps = [(t, p) for t, parts in starts.items() for p in parts]
    return {tp: end for tp, (_, end) in watermarks(ctx.target.admin(), tps).items()} if tps \
        else {}


def carry_post_failover_writes(ctx: OpsContext, marker: FailoverMarker,
                               ends: Mapping[TP, int]) -> dict[str, Any]:
    """Copy to the source every post-failover write below `ends` it does not hold yet (the
    reverse flow carried the others): never drctl's reconciled copies nor the replicator's
    late copies. Idempotent by content."""
    starts = failover_starts(ctx.rep, marker)
    ranges = {tp: (starts[tp[0]][tp[1]], end) for tp, end in ends.items()
              if end > starts[tp[0]][tp[1]]}
    if not ranges:
        return {"copied": 0, "skipped": 0}
    source_start = _offsets(marker.steps["failback:reverse-source-start"].result["offsets"]) \
        if "failback:reverse-source-start" in marker.steps else {}
    carried = carry_to_source(ctx, ranges, source_start, skip=late_copy_offsets(marker),
                              timestamps=timestamps_kept(ctx, marker))
    if carried["copied"]:
        ctx.notify(f"Copied {carried['copied']} post-failover write(s) {ctx.rep.source} did "
                   "not hold yet")
    return carried


def writes_since(ctx: OpsContext, ends: Mapping[TP, int]) -> dict[TP, int]:
    """Per failover topic partition, the records written at or after `ends` by someone other
    than drctl (its tagged copies are not writes), counting what an open transaction holds
    there: producers still on the target."""
    if not ends:
        return {}
    admin = ctx.target.admin()
    stable = watermarks(admin, list(ends))
    high = watermarks(admin, list(ends), read_committed=False)
    ranges = {tp: (ends[tp], stable[tp][1]) for tp in ends if stable[tp][1] > ends[tp]}
    out: Counter[TP] = Counter()
    for rec in stream_ranges(ctx.target, ranges):
        if not is_reconciled(rec.headers):
            out[(rec.topic, rec.partition)] += 1
    for tp in ends:  # what sits in a transaction still open: not readable yet
        pending = high[tp][1] - max(stable[tp][1], ends[tp])
        if pending > 0:
            out[tp] += pending
    return dict(out)


@dataclass(frozen=True)
class ExpectedCopy:
    """A post-failover write whose copy the source should hold."""

    fingerprint: bytes
    key: bytes | None = None  # kept on compacted topics only
    tombstone: bool = False


@dataclass
class Walked:
    """One source partition's walk (see `walk_copies`)."""

    last_copy: int | None = None
    strays: list[int] = field(default_factory=list)  # copy them to the target
    # Unpaired records a later record of their key supersedes (compacted topics).
    superseded: list[int] = field(default_factory=list)
    # Unpaired records before the first copy, taken for copies of post-failover writes the
    # target's retention removed (the walk cannot pair them).
    removed_on_target: int = 0
    missing: int = 0  # copies never met, unexplained
    compacted_away: int = 0  # copies never met that compaction removed on the source
    removed_on_source: int = 0  # copies never met that retention removed on the source
    others: list[int] = field(default_factory=list)  # unpaired records after the cut


def walk_copies(records: Iterable[Record], expected: Mapping[TP, Sequence[ExpectedCopy]],
                partitions: Collection[TP] = (), timestamps: bool = True, *,
                compacted: Collection[str] = (),
                removed_on_target: Mapping[TP, int] | None = None,
                removed_on_source: Mapping[TP, int] | None = None) -> dict[TP, Walked]:
    """Per partition, records in offset order: which are the copies of post-failover writes
    (the offset of the last one), which are strays, and which expected copies were never met
    — with the retention and compaction rules of the module docstring. Copies are counted as
    a multiset: of identical records, the first ones met are the copies."""
    removed_t, removed_s = removed_on_target or {}, removed_on_source or {}
    remaining = {tp: Counter(e.fingerprint for e in exp) for tp, exp in expected.items()}
    first: dict[TP, int] = {}
    last: dict[TP, int] = {}
    unpaired: dict[TP, list[tuple[int, bytes | None]]] = {}
    key_last: dict[TP, dict[bytes | None, int]] = {}  # compacted: a key's last offset
    for rec in records:
        tp = (rec.topic, rec.partition)
        if rec.topic in compacted:
            key_last.setdefault(tp, {})[rec.key] = rec.offset
        fp = copy_fingerprint(rec, timestamps)
        left = remaining.get(tp)
        if left is not None and left[fp] > 0:
            left[fp] -= 1
            first.setdefault(tp, rec.offset)
            last[tp] = rec.offset
        else:
            unpaired.setdefault(tp, []).append((rec.offset, rec.key))
    out: dict[TP, Walked] = {}
    for tp in set(partitions) | set(expected) | set(last) | set(unpaired):
        w = Walked(last_copy=last.get(tp))
        budget = removed_t.get(tp, 0)
        later = key_last.get(tp, {})
        for offset, key in unpaired.get(tp, []):
            if w.last_copy is None or offset > w.last_copy:
                w.others.append(offset)
            elif budget and offset < first.get(tp, offset + 1):
                budget -= 1
                w.removed_on_target += 1
            elif tp[0] in compacted and later.get(key, offset) > offset:
                w.superseded.append(offset)
            else:
                w.strays.append(offset)
        never = remaining.get(tp, Counter())
        if never.total():
            w.compacted_away = _compacted_away(never, expected.get(tp, ()), later) \
                if tp[0] in compacted else 0
            rest = never.total() - w.compacted_away
            w.removed_on_source = min(rest, removed_s.get(tp, 0))
            w.missing = rest - w.removed_on_source
        out[tp] = w
    return out


def _compacted_away(never: Counter[bytes], expected: Sequence[ExpectedCopy],
                    source_keys: Mapping[bytes | None, int]) -> int:
    """How many of the copies never met compaction explains: a tombstone, or a key with a
    later write on the target, or a key the source still holds a record of."""
    last_of_key: dict[bytes | None, int] = {}
    for i, e in enumerate(expected):
        last_of_key[e.key] = i
    explained = 0
    left = Counter(never)
    for i, e in enumerate(expected):
        if left[e.fingerprint] <= 0:
            continue
        if e.tombstone or last_of_key[e.key] > i or e.key in source_keys:
            left[e.fingerprint] -= 1
            explained += 1
    return explained


def compacted_topics(ctx: OpsContext, topics: Collection[str]) -> set[str]:
    """The source topics among `topics` whose cleanup.policy compacts."""
    if not topics:
        return set()
    admin = ctx.source.admin()
    out = set()
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t)
                                      for t in sorted(topics)], request_timeout=30)
    for resource, future in futures.items():
        entry = future.result(timeout=30).get("cleanup.policy")
        if entry is not None and "compact" in str(entry.value):
            out.add(resource.name)
    return out


def expected_back(ctx: OpsContext, marker: FailoverMarker, ends: Mapping[TP, int],
                  timestamps: bool, compacted: Collection[str],
                  removed: dict[TP, int]) -> dict[TP, list[ExpectedCopy]]:
    """Per source (reverse) partition, in the target's order: the post-failover writes below
    `ends` that belong there — without drctl's reconciled copies and the replicator's late
    copies. `removed` gets, per source partition, the offsets the target's retention took."""
    rep = ctx.rep
    starts = failover_starts(rep, marker)
    late = late_copy_offsets(marker)
    ranges = {tp: (starts[tp[0]][tp[1]], end) for tp, end in ends.items()
              if end > starts[tp[0]][tp[1]]}
    gone: dict[TP, int] = {}
    out: dict[TP, list[ExpectedCopy]] = {}
    for rec in stream_ranges(ctx.target, ranges, below_log_start=gone):
        if rec.offset in late.get((rec.topic, rec.partition), ()) or is_reconciled(rec.headers):
            continue
        back = (rep.reverse_topic(rec.topic), rec.partition)
        keyed = back[0] in compacted
        out.setdefault(back, []).append(ExpectedCopy(copy_fingerprint(rec, timestamps),
                                                     rec.key if keyed else None,
                                                     keyed and rec.value is None))
    removed.update({(rep.reverse_topic(t), p): n for (t, p), n in gone.items()})
    return out


def plan_cut_over(ctx: OpsContext, marker: FailoverMarker,
                  ends: Mapping[TP, int]) -> dict[str, Any]:
    """Per source topic partition: the first offset forward replication copies, and the
    target positions its copies will follow; with names kept also the records written on the
    source before that point that the target lacks (strays). `ends`: the failover topics' ends
    below which every post-failover write is on the source."""
    rep = ctx.rep
    src, dst = ctx.source, ctx.target
    compared = compared_ends(marker)
    source_tps = [(t, p) for t, mirror in sorted(marker.topics.items())
                  for p in sorted(marker.failover_point.get(mirror, {}))]
    missing_proof = [tp for tp in source_tps if tp not in compared]
    if missing_proof:
        raise UsageError(
            "The failback recorded no comparison end for "
            + ", ".join(f"{t}[{p}]" for t, p in missing_proof[:5])
            + ": drctl cannot prove where forward copying must start.",
            "Set the forward flow's positions by hand (the source's ends when producers "
            "moved back), or fail back with this drctl version.")
    src_marks = watermarks(src.admin(), source_tps)
    starts: dict[TP, int] = {}
    how: dict[str, str] = {}
    walked: dict[TP, Walked] = {}
    # Offsets retention took before they were read, per source partition.
    gone_source: dict[TP, int] = {tp: min(src_marks[tp][0], src_marks[tp][1]) - compared[tp]
                                  for tp in source_tps if src_marks[tp][0] > compared[tp]}
    gone_target: dict[TP, int] = {}
    if not rep.names_kept:
        # Reverse copies land in other topics (<target alias>.<topic>): everything the
        # source topic received after failback compared it is new to the target.
        for tp in source_tps:
            starts[tp] = max(compared[tp], src_marks[tp][0])
            how[f"{tp[0]}[{tp[1]}]"] = "where failback's comparison ended"
    else:
        keep = timestamps_kept(ctx, marker)
        compacted = compacted_topics(ctx, {t for t, _ in source_tps})
        expected = expected_back(ctx, marker, ends, keep, compacted, gone_target)
        scan = {tp: (compared[tp], src_marks[tp][1]) for tp in source_tps
                if src_marks[tp][1] > compared[tp]}
        walked = walk_copies(stream_ranges(src, scan), expected, set(scan), keep,
                             compacted=compacted, removed_on_target=gone_target,
                             removed_on_source=gone_source)
        for tp in source_tps:
            w = walked.get(tp, Walked())
            start = max(compared[tp], src_marks[tp][0])
            starts[tp] = start if w.last_copy is None else max(start, w.last_copy + 1)
            how[f"{tp[0]}[{tp[1]}]"] = ("after the source's copy of the last post-failover "
                                        "write" if w.last_copy is not None else
                                        "where failback's comparison ended (no "
                                        "post-failover write)")
    mirrors = [(marker.topics[t], p) for t, p in source_tps]
    target_ends = {tp: end for tp, (_, end) in watermarks(dst.admin(), mirrors).items()}
    strays = {tp: w.strays for tp, w in walked.items() if w.strays}
    if strays:
        ctx.notify(f"{sum(len(v) for v in strays.values())} record(s) were written on "
                   f"{rep.source} among the reverse copies (a producer moved back early): "
                   f"drctl copies them to {rep.target}, forward replication would not")
    return {"forward_starts": _by_topic(starts), "how": how,
            "failover_ends": _by_topic(ends), "target_ends": _by_topic(target_ends),
            "strays": {_name(tp): len(v) for tp, v in strays.items()},
            "stray_offsets": {_name(tp): v for tp, v in strays.items()},
            "missing": {_name(tp): w.missing for tp, w in walked.items() if w.missing},
            "superseded": {_name(tp): len(w.superseded) for tp, w in walked.items()
                           if w.superseded},
            "compacted_away": {_name(tp): w.compacted_away for tp, w in walked.items()
                               if w.compacted_away},
            "retention": _retention(walked, gone_source, gone_target, rep.names_kept)}


def _retention(walked: Mapping[TP, Walked], gone_source: Mapping[TP, int],
               gone_target: Mapping[TP, int], names_kept: bool) -> dict[str, Any]:
    """What retention took before the cut-over read it, per source partition, and what of it
    may now exist on neither cluster (`lost`, an upper bound: transaction markers take
    offsets too)."""
    lost: dict[str, int] = {}
    for tp, n in gone_target.items():
        unpaired = walked.get(tp, Walked()).removed_on_target
        if n > unpaired:  # writes removed on the target before the source held a copy
            lost[_name(tp)] = n - unpaired
    for tp, n in gone_source.items():
        explained = walked.get(tp, Walked()).removed_on_source
        if not names_kept or n > explained:
            # Prefixed: records written on the source after failback, removed before forward
            # replication copied them; names kept: beside the copies, records that may have
            # been written there natively (strays) and never reached the target.
            lost[_name(tp)] = lost.get(_name(tp), 0) + (n if not names_kept else n - explained)
    return {"source": {_name(tp): n for tp, n in gone_source.items()},
            "target": {_name(tp): n for tp, n in gone_target.items()}, "lost": lost}


def copy_strays(ctx: OpsContext, marker: FailoverMarker, cut: Mapping[str, Any]) -> int:
    """Copy the strays to their mirror topics, tagged like reconciled copies. What an earlier
    run of the same cut already copied is found by its tag from the target ends the cut
    recorded before copying: none is copied twice. Returns how many were copied now."""
    offsets = {_tp(k): set(v) for k, v in cut.get("stray_offsets", {}).items()}
    if not offsets:
        return 0
    rep = ctx.rep
    src, dst = ctx.source, ctx.target
    records = sorted((r for r in stream_ranges(src, {tp: (min(v), max(v) + 1)
                                               for tp, v in offsets.items()})
                      if r.offset in offsets[(r.topic, r.partition)]),
                     key=lambda r: (r.topic, r.partition, r.offset))
    mirrors = sorted({marker.topics[t] for t, _ in offsets})
    ends = watermarks(dst.admin(), [(m, p) for m in mirrors
                                    for p in marker.failover_point.get(m, {})])
    since = _offsets(cut["target_ends"])
    done = header_values(dst, {tp: (since.get(tp[0], {}).get(tp[1], 0), end)
                               for tp, (_, end) in ends.items()}, RECONCILED_HEADER)
    tag = RerunTag(RECONCILED_HEADER,
                   lambda r: f"{marker.incident}:{r.topic}:{r.partition}:{r.offset}".encode())
    sent = copy_records(dst, records, lambda r: (marker.topics[r.topic], r.partition),
                        topics=mirrors, tag=tag, done=done, what="records written on the "
                        "source among the reverse copies")
    copied = sum(sent.values())
    if copied:
        ctx.notify(f"Copied {copied} record(s) written on {rep.source} before the cut-over to "
                   f"{rep.target}")
    return copied


def _name(tp: TP) -> str:
    return f"{tp[0]}[{tp[1]}]"


def _tp(text: str) -> TP:
    topic, _, part = text.rpartition("[")
    return topic, int(part.rstrip("]"))


def tp_offsets(raw: Mapping[str, Any]) -> dict[TP, int]:
    """`{"topic": {"partition": offset}}` (the marker's shape) per (topic, partition)."""
    return {(t, int(p)): int(o) for t, parts in raw.items() for p, o in parts.items()}


def _offsets(raw: Mapping[str, Mapping[Any, Any]]) -> Offsets:
    return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}


def _by_topic(ends: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p), end in sorted(ends.items()):
        out.setdefault(t, {})[str(p)] = end
    return out

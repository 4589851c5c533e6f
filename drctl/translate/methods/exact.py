"""`exact` (and `timestamp`, its coarser sibling): the last record a group read, found on the
target by content (docs/design.md §3, translate/locate.py), the position right after its copy.

A group provably ahead of replication is placed at the target's end with what it read that
the target lacks counted. One whose last record is not on the target as it was on the source
(compacted away, or its timestamp rewritten) is placed at the first surviving copy of a record
it has not read (translate/boundary.py) — never at the end, past records it has not read — or,
when that cannot be proven, left unplaced and named. On a compacted copy a match among
identical records is proven the same way: the cleaner may have removed the very copy the count
of identical records relies on.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from drctl.fingerprint import same_record
from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import Record
from drctl.kafka.topics import TP, compacted_topics
from drctl.translate.boundary import Boundary, Position, find_boundaries
from drctl.translate.locate import MatchQuery, Side, last_records, match_records, same_content
from drctl.translate.methods import Placing
from drctl.translate.model import Confidence, PartitionResult
from drctl.translate.reader import RangeRequest


def place(placing: Placing, todo: list[PartitionResult]) -> None:
    by_exact(placing.src, placing.dst, todo, placing.dst_marks, timestamp_only=False,
             max_scan=placing.max_scan, own_copy_header=placing.own_copy_header)


def by_exact(src: ClusterClients, dst: ClusterClients, todo: list[PartitionResult],
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
    # end: place it between the copies that survive.
    unproven = [k for k in ahead if not _provably_ahead(missing.get(k), around[k][0])]
    twins = [] if timestamp_only else _twinned(a, b, matches, around, target_of, src_admin,
                                               dst_admin)
    bracketed = [(k, last) for k in unproven + twins if (last := around[k][0]) is not None]
    boundaries = dict(zip([k for k, _ in bracketed], find_boundaries(
        a, b, [Position((t, q), (target_of[(t, q)], q), o, last)
               for (t, q, o), last in bracketed], max_scan=max_scan,
        skip=own_copy if own_copy_header else None), strict=True))
    duplicates = _next_is_consumed(a, b, matches, around, max_scan)

    for p in todo:
        tp_src, tp_dst = (p.topic, p.partition), (p.target_topic, p.partition)
        key = (p.topic, p.partition, min(p.source_offset, src_marks[tp_src][1]))
        low, end = dst_marks[tp_dst]
        last, successor = around[key]
        if last is None:
            # Nothing consumed that still exists: start where the target starts.
            p.target_offset = low
            p.confidence = Confidence.EXACT if src_marks[tp_src][0] == 0 and low == 0 else "start"
            continue
        m = matches[key]
        if key in boundaries:
            _place_between(p, boundaries[key])
            continue
        if m.reason == "end":
            p.target_offset = end
            p.confidence = Confidence.CLAMPED
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
            p.confidence = Confidence.SCAN_BOUND
            p.note = f"no match within {max_scan} records; positioned at the timestamp"
            continue
        exact_offset = m.offset + 1
        if timestamp_only:
            anchor = max(low, m.anchor_b if m.anchor_b is not None else low)
            shared = sum(r.timestamp_ms == last.timestamp_ms for r in m.scanned)
            p.target_offset = anchor
            p.redelivered = sum(1 for r in m.scanned if r.offset < exact_offset)
            p.confidence = Confidence.EXACT if p.redelivered == 0 else f"ambiguous:{shared}"
            continue
        p.target_offset = exact_offset
        p.confidence = Confidence.EXACT
        p.proof = {"last_read": last.offset, "copy": m.offset,
                   "fingerprint": a.fingerprint(last).hex()}
        if key in duplicates:
            p.confidence = Confidence.UNVERIFIED
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
                     or not same_content(around[k][1], m.after)
                     or not same_record(around[k][1], m.after))]
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


def _twinned(a: Side, b: Side, matches: dict, around: dict, target_of: dict,
             src_admin: object, dst_admin: object) -> list:
    """Matched positions on compacted copies whose last read record has an identical twin
    (an identical record before it since its timestamp, or right after it, unread): the
    cleaner may have removed one twin's copy, and the k-th copy counted is then another's."""
    candidates = []
    for k, m in matches.items():
        if m.offset is None:
            continue
        last, successor = around[k]
        with_ts = not (k[0] in a.log_append or target_of[(k[0], k[1])] in b.log_append)
        if m.occurrence > 1 or (successor is not None and same_content(successor, last)
                                and same_record(successor, last, with_ts)):
            candidates.append(k)
    if not candidates:
        return []
    compacted = compacted_topics(src_admin, {k[0] for k in candidates}) | compacted_topics(
        dst_admin, {target_of[(k[0], k[1])] for k in candidates})
    return [k for k in candidates
            if k[0] in compacted or target_of[(k[0], k[1])] in compacted]


def _place_between(p: PartitionResult, found: Boundary) -> None:
    """A position from translate/boundary.py, with its proof or the reason it has none."""
    if found.offset is None:
        p.target_offset = None
        p.confidence = Confidence.UNPROVEN
        p.note = ("the record the group read last is not on the target as it is on the source "
                  f"(compacted away, or its timestamp rewritten), and {found.reason}: not "
                  "placed")
        return
    p.target_offset = found.offset
    p.max_redelivered = found.between
    p.confidence = Confidence.EXACT if not found.between else \
        Confidence.WALKED_BACK.of(found.between)
    p.proof = {"last_read": None if found.read is None else found.read.source,
               "copy": None if found.read is None else found.read.target,
               "first_unread": None if found.unread is None else found.unread.source,
               "first_unread_copy": None if found.unread is None else found.unread.target}
    held = ("no record it read is on the target" if found.read is None else
            f"the last record it read that the target holds is source offset "
            f"{found.read.source} (target {found.read.target})")
    unread = ("none it has not read is there" if found.unread is None else
              f"the first it has not read is source offset {found.unread.source} (target "
              f"{found.unread.target})")
    p.note = ("the record the group read last is not on the target as it is on the source: "
              f"{held}; {unread}")
    if found.between:
        p.note += (f"; {found.between} record(s) between could not be told read or unread: "
                   f"placed before them, at most {found.between} re-delivered")


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
            occurrence = sum(1 for r in recs if r.offset <= last.offset
                             and same_content(r, last) and same_record(r, last, ts))
        m = located.get(key)
        out[key] = _Ahead(len(recs), occurrence,
                          is_anchored and last is not None and occurrence > 0,
                          m.offset if m is not None else None)
    return out

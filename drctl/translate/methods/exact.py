"""`exact` (and `timestamp`, its coarser sibling): the last record a group read, found on the
target by content (docs/design.md §3, translate/locate.py), the position right after its copy.

A group provably ahead of replication is placed at the target's end with what it read that
the target lacks counted; one whose last record is not on the target as it was on the source
(compacted away, or its timestamp rewritten) is placed after the last record before it that
the target holds — never at the end, past records it has not read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import Record
from drctl.kafka.topics import TP
from drctl.translate.locate import MatchQuery, Side, last_records, match_records
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
            p.confidence = Confidence.EXACT if src_marks[tp_src][0] == 0 and low == 0 else "start"
            continue
        m = matches[key]
        if key in walked or key in unproven:
            found = walked.get(key)
            if found is None:
                p.target_offset = None
                p.confidence = Confidence.UNPROVEN
                p.note = ("the record the group read last is not on the target as it is on "
                          "the source (compacted away, or its timestamp rewritten) and no "
                          f"earlier one within {max_scan} records was found: not placed")
                continue
            copy, unmatched = found
            p.target_offset = copy + 1
            p.confidence = Confidence.EXACT if unmatched == 0 else f"walked-back:{unmatched}"
            p.max_redelivered = unmatched
            p.note = (f"the group's last {unmatched + 1} record(s) read are not on the target "
                      "as they are on the source (compacted away, or timestamps rewritten): "
                      "placed after the last one it holds; at most "
                      f"{unmatched} record(s) re-delivered")
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

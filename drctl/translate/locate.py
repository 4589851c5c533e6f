"""Exact positions: where a record of one cluster sits on the other (docs/design.md §3, `exact`).

To find record R of side A on side B: take R's timestamp T; on both sides ListOffsets(T) gives
the first offset whose timestamp is >= T. Both land on the same record, because replication
keeps partition order, and every copy of R (same fingerprint, so same T) lies at or after it.
Count the copies of R on A from there up to R (k), then scan B forward from its anchor to the
k-th copy. Identical timestamps and repeated payloads therefore never cause a skip or a
duplicate; non-monotonic timestamps only lengthen the scan. The scan is bounded and batched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient, OffsetSpec

from drctl.fingerprint import record_fingerprint, same_record
from drctl.kafka.clients import ClusterClients
from drctl.kafka.offsets import list_offsets_many
from drctl.kafka.records import Record
from drctl.kafka.topics import TP, log_append_time_topics
from drctl.translate.reader import MERGE_GAP, BatchReader, RangeRequest

FIRST_CHUNK = 256


# Load a partition whole when reading it costs no more than this many records per query on it
# (at least MERGE_GAP records: those reads merge into whole-partition segments anyway), and
# keep at most LOAD_BUDGET records in memory per side.
RECORDS_PER_QUERY = 1_000
LOAD_BUDGET = 1_000_000


# How far before a record's timestamp the copy may sit on a topic whose broker stamps
# records on append: the copy is appended after the record was created, unless the clocks
# of the source's producers run ahead of the target broker's by more than this.
LOG_APPEND_SLACK_MS = 5 * 60 * 1000


@dataclass
class Side:
    """One cluster as the locator sees it."""

    reader: BatchReader
    admin: AdminClient
    marks: dict[TP, tuple[int, int]]  # (low, end) per partition
    # Topics whose broker stamps records on append (LogAppendTime): a record and its copy
    # there never share a timestamp, so they compare without it.
    log_append: frozenset[str] = frozenset()
    # Digests of this cluster's records: the look-ups of one translation overlap, and a
    # partition with many groups on it has nearly every record digested more than once.
    _digests: dict[tuple[str, int, int, bool], bytes] = field(default_factory=dict)

    @classmethod
    def of(cls, clients: ClusterClients, admin: AdminClient, marks: dict[TP, tuple[int, int]],
           log_append: frozenset[str] | None = None) -> Side:
        """A side over `marks`, its append-stamped topics read from the cluster unless
        given (a wait loop reads them once)."""
        if log_append is None:
            log_append = log_append_time_topics(admin, {t for t, _ in marks})
        return cls(BatchReader(clients), admin, marks, log_append)

    def fingerprint(self, rec: Record, with_timestamp: bool | None = None) -> bytes:
        """`record_fingerprint`, computed once per record of this cluster."""
        if with_timestamp is None:
            with_timestamp = rec.timestamp_type == 1
        key = (rec.topic, rec.partition, rec.offset, with_timestamp)
        fp = self._digests.get(key)
        if fp is None:
            fp = self._digests[key] = record_fingerprint(rec, with_timestamp)
        return fp

    def load_busy_partitions(self, queries_per_partition: Mapping[TP, int]) -> None:
        """Load the partitions that so many queries touch that reading them whole is cheaper
        than looking each query up (busiest first, within LOAD_BUDGET)."""
        chosen: dict[TP, tuple[int, int]] = {}
        budget = LOAD_BUDGET
        for tp, n in sorted(queries_per_partition.items(), key=lambda kv: -kv[1]):
            if tp not in self.marks:
                continue
            low, end = self.marks[tp]
            size = end - low
            if size <= max(MERGE_GAP, n * RECORDS_PER_QUERY) and size <= budget:
                chosen[tp] = (low, end)
                budget -= size
        self.reader.load(chosen)

    def timestamp_offsets(self, queries: Sequence[tuple[TP, int]]) -> list[int]:
        """ListOffsets(T) per (partition, T): from memory for loaded partitions."""
        local = [self.reader.first_at_or_after(tp, ts) for tp, ts in queries]
        remote = [q for q, hit in zip(queries, local, strict=True) if hit is None]
        answers = iter(timestamp_offsets(self.admin, remote) if remote else [])
        return [hit if hit is not None else next(answers) for hit in local]


def same_content(x: Record, y: Record) -> bool:
    """Whether two records' keys and values are equal: a byte comparison that settles most
    comparisons before a fingerprint is computed (records whose key or value differ never
    share one, and a record and its copy always have equal ones)."""
    return x.value == y.value and x.key == y.key


@dataclass
class MatchQuery:
    record: Record  # on side A
    tp_b: TP


@dataclass
class MatchResult:
    offset: int | None = None  # offset of the matching copy on B
    reason: str = ""  # "" when found, else "end" (not on B yet) or "bound" (scan limit)
    anchor_b: int | None = None  # ListOffsets(T) on B
    scanned: list[Record] = field(default_factory=list)  # B's records from anchor to match
    after: Record | None = None  # B's record right after the match, when read
    # The last copy of R seen on B when fewer than k were there (B lacks re-copies A holds).
    last_copy: int | None = None
    occurrence: int = 0  # k: R is the k-th identical record on A from the timestamp anchor


def timestamp_offsets(admin: AdminClient, queries: Sequence[tuple[TP, int]]) -> list[int]:
    """ListOffsets-by-timestamp for many (partition, ms) pairs; each request may name a
    partition once, so distinct timestamps of one partition go in separate requests — all
    sent before any answer is awaited."""
    rounds: list[dict[TP, int]] = []
    slot: list[tuple[int, TP]] = []
    seen: dict[TP, int] = defaultdict(int)
    index: dict[tuple[TP, int], tuple[int, TP]] = {}
    for tp, ts in queries:
        if (tp, ts) in index:
            slot.append(index[(tp, ts)])
            continue
        r = seen[tp]
        seen[tp] += 1
        while len(rounds) <= r:
            rounds.append({})
        rounds[r][tp] = ts
        index[(tp, ts)] = (r, tp)
        slot.append((r, tp))
    answers = list_offsets_many(admin, [{tp: OffsetSpec.for_timestamp(ts)
                                         for tp, ts in rnd.items()} for rnd in rounds])
    return [answers[r][tp] for r, tp in slot]


def match_records(a: Side, b: Side, queries: Sequence[MatchQuery], *,
                  max_scan: int = 100_000) -> list[MatchResult]:
    """Find each query's record of side A on side B (see the module docstring)."""
    results = [MatchResult() for _ in queries]
    if not queries:
        return results
    stamps = [(q.record.topic, q.record.partition) for q in queries]
    ts = [q.record.timestamp_ms for q in queries]
    # The copy keeps R's timestamp unless either side stamps on append.
    ts_not_kept = [q.record.timestamp_type != 1 or q.record.topic in a.log_append
                   or q.tp_b[0] in b.log_append for q in queries]
    anchors_a = a.timestamp_offsets(list(zip(stamps, ts, strict=True)))
    # On an append-stamped B the copy's timestamp is when it arrived: anchor earlier (an
    # earlier anchor only lengthens the scan and can only count a copy too many, never skip).
    anchors_b = b.timestamp_offsets([
        (q.tp_b, t - LOG_APPEND_SLACK_MS if q.tp_b[0] in b.log_append else t)
        for q, t in zip(queries, ts, strict=True)])

    # k: how many copies of R lie on A between the anchor and R itself.
    count_reqs: list[RangeRequest] = []
    for q, anchor in zip(queries, anchors_a, strict=True):
        start = anchor if 0 <= anchor <= q.record.offset else q.record.offset
        count_reqs.append(RangeRequest(stamps[len(count_reqs)],
                                       max(start, q.record.offset - max_scan),
                                       q.record.offset + 1))
    # A copy carries R's timestamp (it is part of the fingerprint) and R's key and value:
    # compare those first, then what else the fingerprint covers (no digest needed).
    copies_needed = [sum(1 for r in recs
                         if (loose or r.timestamp_ms == t) and same_content(r, q.record)
                         and same_record(r, q.record, not loose))
                     for recs, t, loose, q in zip(a.reader.read(count_reqs), ts,
                                                  ts_not_kept, queries, strict=True)]

    # Scan B in growing chunks until the k-th copy shows up.
    state = {}
    for i, q in enumerate(queries):
        results[i].anchor_b = anchors_b[i]
        results[i].occurrence = copies_needed[i]
        low, end = b.marks[q.tp_b]
        if anchors_b[i] < 0 or anchors_b[i] >= end:
            results[i].reason = "end"  # nothing on B at or after T: R never arrived
            continue
        state[i] = [max(anchors_b[i], low), FIRST_CHUNK, 0]  # next offset, chunk, copies
    while state:
        reqs, order = [], []
        for i, (nxt, chunk, _) in state.items():
            end = b.marks[queries[i].tp_b][1]
            reqs.append(RangeRequest(queries[i].tp_b, nxt, min(end, nxt + chunk)))
            order.append(i)
        for i, recs in zip(order, b.reader.read(reqs), strict=True):
            nxt, chunk, seen = state[i]
            res = results[i]
            for rec in recs:
                if res.offset is not None:
                    res.after = rec
                    break
                res.scanned.append(rec)
                if (ts_not_kept[i] or rec.timestamp_ms == ts[i]) and \
                        same_content(rec, queries[i].record) and \
                        same_record(rec, queries[i].record, not ts_not_kept[i]):
                    seen += 1
                    res.last_copy = rec.offset
                    if seen == max(1, copies_needed[i]):
                        res.offset = rec.offset
            end = b.marks[queries[i].tp_b][1]
            scanned_to = min(end, nxt + chunk)
            if res.offset is not None:
                if res.after is not None or scanned_to >= end:
                    del state[i]
                else:
                    state[i] = [scanned_to, 64, seen]  # only the record after the match
            elif scanned_to >= end:
                res.reason = "end"
                del state[i]
            elif scanned_to - (res.anchor_b or 0) >= max_scan:
                res.reason = "bound"
                del state[i]
            else:
                state[i] = [scanned_to, chunk * 4, seen]
            if res.offset is None and i not in state:
                res.scanned = []
    return results


def last_records(side: Side, positions: Sequence[tuple[TP, int]], window: int = 64,
                 skip: Callable[[Record], bool] | None = None,
                 ) -> list[tuple[Record | None, Record | None]]:
    """For each (partition, offset): the last visible record before it and the first at or
    after it. Windows widen until found or the partition's bounds are reached. Records for
    which `skip` holds (copies drctl made itself, which replicate nothing) are stepped over
    when looking back."""
    out: list[tuple[Record | None, Record | None]] = [(None, None)] * len(positions)
    pending = {}
    for i, (tp, off) in enumerate(positions):
        loaded = side.reader.around(tp, off, skip)  # a partition read whole: no window
        if loaded is None:
            pending[i] = (window, 8)
        else:
            out[i] = loaded
    while pending:
        reqs, order = [], []
        for i, (back, fwd) in pending.items():
            tp, off = positions[i]
            low, end = side.marks[tp]
            start = max(low, off - back) if back else off
            reqs.append(RangeRequest(tp, start, min(end, off + fwd)))
            order.append(i)
        for i, recs in zip(order, side.reader.read(reqs), strict=True):
            tp, off = positions[i]
            low, end = side.marks[tp]
            back, fwd = pending.pop(i)
            before = [r for r in recs if r.offset < off and not (skip and skip(r))]
            after = [r for r in recs if r.offset >= off]
            last = before[-1] if before else out[i][0]
            nxt = after[0] if after else out[i][1]
            out[i] = (last, nxt)
            need_back = last is None and off - back > low
            need_fwd = nxt is None and fwd > 0 and off + fwd < end
            if need_back or need_fwd:
                pending[i] = (back * 16 if need_back else 0, fwd * 16 if need_fwd else 0)
    return out

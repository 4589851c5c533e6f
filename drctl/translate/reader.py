"""Many small offset ranges on many partitions, read in few rounds with one consumer.

Ranges on the same partition that lie close together are read as one segment; each round
reads at most one segment per partition, so a thousand groups on sixteen partitions cost a
handful of rounds, not sixteen thousand reads.

Partitions that many queries touch can be *loaded*: read whole once and kept in memory. Every
later range on them is a slice, and "first record at or after timestamp T" is a bisection
instead of a ListOffsets request — a partition can be named once per request, so a thousand
timestamps on one partition would otherwise cost a thousand round trips.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from drctl.kafka.clients import ClusterClients
from drctl.kafka.records import Record, read_ranges
from drctl.kafka.topics import TP

MERGE_GAP = 20_000  # offsets: closer ranges are read as one


@dataclass(frozen=True)
class RangeRequest:
    tp: TP
    start: int
    end: int  # exclusive


class _LoadedPartition:
    """The visible records of [start, end) of one partition, with a running maximum of
    their timestamps for timestamp look-ups."""

    def __init__(self, start: int, end: int, records: list[Record]) -> None:
        self.start, self.end = start, end
        self.records = records
        self.offsets = [r.offset for r in records]
        self.max_ts = list(accumulate((r.timestamp_ms for r in records), max))

    def covers(self, start: int, end: int) -> bool:
        return self.start <= start and end <= self.end

    def slice(self, start: int, end: int) -> list[Record]:
        return self.records[bisect_left(self.offsets, start):bisect_left(self.offsets, end)]

    def around(self, offset: int, skip: Callable[[Record], bool] | None
               ) -> tuple[Record | None, Record | None]:
        """The last visible record before `offset` (stepping over those `skip` holds for)
        and the first at or after it: the partition is loaded whole, so a record not here is
        not in it."""
        i = bisect_left(self.offsets, offset)
        j = i - 1
        while j >= 0 and skip is not None and skip(self.records[j]):
            j -= 1
        return (self.records[j] if j >= 0 else None,
                self.records[i] if i < len(self.records) else None)

    def first_at_or_after(self, timestamp_ms: int) -> int:
        """Offset of the first visible record whose timestamp is >= T, -1 when none (what
        ListOffsets answers, except that records a read_committed reader never sees are
        skipped — they have no copies on the other cluster either)."""
        i = bisect_left(self.max_ts, timestamp_ms)
        return self.offsets[i] if i < len(self.offsets) else -1


class BatchReader:
    def __init__(self, clients: ClusterClients, *, timeout_s: float = 120.0) -> None:
        self.clients = clients
        self.timeout_s = timeout_s
        self.records_read = 0
        self._loaded: dict[TP, _LoadedPartition] = {}

    def load(self, ranges: Mapping[TP, tuple[int, int]]) -> None:
        """Read these partition ranges whole, in one round, and serve later reads and
        timestamp look-ups inside them from memory. Only load a partition whose whole log
        (from its low watermark) is in the range, or timestamp look-ups would miss records."""
        todo = [RangeRequest(tp, start, end) for tp, (start, end) in ranges.items()
                if tp not in self._loaded]
        for req, recs in zip(todo, self._read_from_cluster(todo), strict=True):
            self._loaded[req.tp] = _LoadedPartition(req.start, req.end, recs)

    def around(self, tp: TP, offset: int, skip: Callable[[Record], bool] | None = None
               ) -> tuple[Record | None, Record | None] | None:
        """The records either side of `offset` of a loaded partition (`_LoadedPartition`);
        None when the partition is not loaded."""
        part = self._loaded.get(tp)
        return None if part is None else part.around(offset, skip)

    def first_at_or_after(self, tp: TP, timestamp_ms: int) -> int | None:
        """The loaded answer to ListOffsets(T); None when the partition is not loaded."""
        part = self._loaded.get(tp)
        return None if part is None else part.first_at_or_after(timestamp_ms)

    def read(self, requests: Sequence[RangeRequest]) -> list[list[Record]]:
        """Records of each request, in offset order, same order as `requests`."""
        results: list[list[Record]] = [[] for _ in requests]
        remote: list[int] = []
        for i, req in enumerate(requests):
            part = self._loaded.get(req.tp)
            if part is not None and part.covers(req.start, req.end):
                results[i] = part.slice(req.start, req.end)
            else:
                remote.append(i)
        fetched = self._read_from_cluster([requests[i] for i in remote])
        for i, recs in zip(remote, fetched, strict=True):
            results[i] = recs
        return results

    def _read_from_cluster(self, requests: Sequence[RangeRequest]) -> list[list[Record]]:
        results: list[list[Record]] = [[] for _ in requests]
        by_tp: dict[TP, list[int]] = defaultdict(list)
        for i, req in enumerate(requests):
            if req.end > req.start:
                by_tp[req.tp].append(i)
        if not by_tp:
            return results
        # Per partition: merge overlapping/near requests into segments.
        segments: dict[TP, list[tuple[int, int, list[int]]]] = {}
        for tp, idxs in by_tp.items():
            idxs.sort(key=lambda i: requests[i].start)
            segs: list[tuple[int, int, list[int]]] = []
            for i in idxs:
                req = requests[i]
                if segs and req.start <= segs[-1][1] + MERGE_GAP:
                    start, end, members = segs[-1]
                    segs[-1] = (start, max(end, req.end), [*members, i])
                else:
                    segs.append((req.start, req.end, [i]))
            segments[tp] = segs
        # We know exactly which offsets we want: do not let the broker wait for more data.
        consumer = self.clients.consumer(**{"enable.partition.eof": "true",
                                            "fetch.wait.max.ms": "10",
                                            "fetch.max.bytes": "52428800",
                                            "max.partition.fetch.bytes": "4194304"})
        try:
            round_no = 0
            while True:
                batch = {tp: segs[round_no] for tp, segs in segments.items()
                         if round_no < len(segs)}
                if not batch:
                    break
                ranges = {tp: (start, end) for tp, (start, end, _) in batch.items()}
                got: dict[TP, list[Record]] = defaultdict(list)
                for rec in read_ranges(consumer, ranges, timeout_s=self.timeout_s):
                    got[(rec.topic, rec.partition)].append(rec)
                # Hand each request its slice: a segment can serve a thousand requests.
                for tp, (_, _, members) in batch.items():
                    recs = got.get(tp, [])
                    self.records_read += len(recs)
                    if len(members) == 1:
                        results[members[0]] = recs
                        continue
                    offsets = [r.offset for r in recs]
                    for i in members:
                        lo = bisect_left(offsets, requests[i].start)
                        hi = bisect_left(offsets, requests[i].end)
                        results[i] = recs[lo:hi]
                round_no += 1
        finally:
            consumer.close()
        return results

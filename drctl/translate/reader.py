"""Many small offset ranges on many partitions, read in few rounds with one consumer.

Ranges on the same partition that lie close together are read as one segment; each round
reads at most one segment per partition, so a thousand groups on sixteen partitions cost a
handful of rounds, not sixteen thousand reads.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from drctl.kafka.clients import ClusterClients
from drctl.kafka.records import Record, read_ranges

TP = tuple[str, int]
MERGE_GAP = 20_000  # offsets: closer ranges are read as one


@dataclass(frozen=True)
class RangeRequest:
    tp: TP
    start: int
    end: int  # exclusive


class BatchReader:
    def __init__(self, clients: ClusterClients, *, timeout_s: float = 120.0) -> None:
        self.clients = clients
        self.timeout_s = timeout_s
        self.records_read = 0

    def read(self, requests: Sequence[RangeRequest]) -> list[list[Record]]:
        """Records of each request, in offset order, same order as `requests`."""
        results: list[list[Record]] = [[] for _ in requests]
        by_tp: dict[TP, list[int]] = defaultdict(list)
        for i, req in enumerate(requests):
            if req.end > req.start:
                by_tp[req.tp].append(i)
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
                    offsets = [r.offset for r in recs]
                    for i in members:
                        lo = bisect_left(offsets, requests[i].start)
                        hi = bisect_left(offsets, requests[i].end)
                        results[i] = recs[lo:hi]
                round_no += 1
        finally:
            consumer.close()
        return results

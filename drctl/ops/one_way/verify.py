"""Failback's end-state check: a success message is a measured fact (docs/design.md §6).

After reverse replication caught up, per failover-topic partition drctl compares, as
multisets of record fingerprints (partition, key, value, headers, timestamp):

- expected — the post-failover writes: the failover topic on the target from its reverse start
  point to its end, without drctl's reconciled copies (they are the source's own records) and
  without late copies of the replicator (source records that arrived after F);
- found — what reverse replication appended to the source: the reverse topic from its end
  when reverse replication started;
- originals — the source's own records in the range the gap analysis compared.

A post-failover write missing from `found` is missing; a record in `found` that is not
expected is extra; a record in `found` equal to one of the source's originals is there twice
(a late copy carried back, say). Any of them fails failback with the numbers (exit 3).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from drctl.context import OpsContext
from drctl.errors import CheckFailed
from drctl.fingerprint import is_reconciled
from drctl.kafka.clients import ClusterClients, cluster_metadata
from drctl.kafka.offsets import watermarks
from drctl.kafka.records import read_ranges
from drctl.kafka.topics import TP
from drctl.ops.one_way.copies import copy_fingerprint, timestamps_kept
from drctl.ops.one_way.reverse import failover_starts, late_copy_offsets
from drctl.state import FailoverMarker, Offsets


@dataclass
class PartitionCheck:
    topic: str  # the failover topic on the target
    reverse_topic: str  # where its records land on the source
    partition: int
    expected: int = 0
    found: int = 0
    missing: int = 0
    extra: int = 0
    twice: int = 0

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.twice)


@dataclass
class EndState:
    partitions: list[PartitionCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.partitions)

    def totals(self) -> dict[str, int]:
        out = dict.fromkeys(("expected", "found", "missing", "extra", "twice"), 0)
        for p in self.partitions:
            for name in out:
                out[name] += getattr(p, name)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "totals": self.totals(), "notes": list(self.notes),
                "partitions": [asdict(p) for p in self.partitions if not p.ok]
                or [asdict(p) for p in self.partitions][:50]}

    def failure(self) -> CheckFailed:
        bad = [p for p in self.partitions if not p.ok]
        lines = "; ".join(f"{p.reverse_topic}[{p.partition}]: {p.missing} missing, "
                          f"{p.extra} unexpected, {p.twice} twice" for p in bad[:10])
        more = f" (+{len(bad) - 10} more partitions)" if len(bad) > 10 else ""
        t = self.totals()
        return CheckFailed(
            f"Failback's end-state check failed: of {t['expected']:,} post-failover writes "
            f"{t['missing']:,} are missing on the source, {t['extra']:,} records there were "
            f"not expected and {t['twice']:,} are there twice — {lines}{more}.",
            "The incident stays open. Inspect the listed partitions (the JSON output and the "
            "report name them); fix the source by hand, then run failback again.")


def reverse_source_start(ctx: OpsContext, marker: FailoverMarker) -> Offsets:
    """The reverse topics' ends on the source right before reverse replication starts (0 for
    a topic that does not exist yet): where `found` begins."""
    rep = ctx.rep
    admin = ctx.source.admin()
    existing = cluster_metadata(ctx.source).topics
    out: Offsets = {}
    tps = []
    for topic, parts in failover_starts(rep, marker).items():
        rtopic = rep.reverse_topic(topic)
        out[rtopic] = dict.fromkeys(parts, 0)
        if rtopic in existing:
            tps += [(rtopic, p) for p in parts]
    for (topic, p), (_, end) in watermarks(admin, tps).items():
        out[topic][p] = end
    return out


def verify_end_state(ctx: OpsContext, marker: FailoverMarker, source_start: Offsets, *,
                     originals_from: Mapping[TP, int] | None = None,
                     late_copies: Mapping[TP, Collection[int]] | None = None,
                     carried: Mapping[str, Sequence[int]] | None = None) -> EndState:
    """Compare what the source holds with what it should hold (see the module docstring).

    `source_start`: `reverse_source_start` as recorded before reverse replication started.
    `originals_from`: per source (topic, partition), where the source's own records were
    compared by the gap analysis; `late_copies`: per target (topic, partition), offsets of
    records the replicator copied after F (default: the marker's); `carried`: per failover
    topic partition (`topic[p]`), [target end, source end] when reverse replication had
    caught up — both sides are compared up to there, so writes still in flight count as
    neither missing nor unexpected."""
    rep, src, dst = ctx.rep, ctx.source, ctx.target
    starts = failover_starts(rep, marker)
    if late_copies is None:
        late_copies = late_copy_offsets(marker)
    state = EndState()
    target_ranges: dict[TP, tuple[int, int]] = {}
    found_ranges: dict[TP, tuple[int, int]] = {}
    origin_ranges: dict[TP, tuple[int, int]] = {}
    source_of = {rep.failover_topic(s): s for s in marker.topics}
    tgt_marks = watermarks(dst.admin(), [(t, p) for t, parts in starts.items() for p in parts])
    src_tps = [(rep.reverse_topic(t), p) for t, parts in starts.items() for p in parts]
    existing = cluster_metadata(src).topics
    src_marks = watermarks(src.admin(), [tp for tp in src_tps if tp[0] in existing])
    for topic, parts in sorted(starts.items()):
        rtopic = rep.reverse_topic(topic)
        for p, start in sorted(parts.items()):
            check = PartitionCheck(topic, rtopic, p)
            state.partitions.append(check)
            upto = (carried or {}).get(f"{topic}[{p}]")
            target_ranges[(topic, p)] = (start, tgt_marks[(topic, p)][1] if upto is None
                                         else min(int(upto[0]), tgt_marks[(topic, p)][1]))
            begin = source_start.get(rtopic, {}).get(p)
            if begin is None:
                state.notes.append(f"{rtopic}[{p}]: no recorded reverse start; not checked.")
                continue
            src_end = src_marks.get((rtopic, p), (0, 0))[1]
            found_ranges[(rtopic, p)] = (begin, src_end if upto is None
                                         else min(int(upto[1]), src_end))
            origin = source_of.get(topic)
            if originals_from and origin is not None and (origin, p) in originals_from:
                origin_ranges[(origin, p)] = (originals_from[(origin, p)], begin)

    keep = timestamps_kept(ctx, marker)
    expected = _counts(dst, target_ranges, keep, skip=late_copies or {}, drop_reconciled=True)
    found = _counts(src, found_ranges, keep)
    originals = _counts(src, origin_ranges, keep)
    for check in state.partitions:
        want = expected.get((check.topic, check.partition), Counter())
        got = found.get((check.reverse_topic, check.partition), Counter())
        origin = source_of.get(check.topic)
        mine = originals.get((origin, check.partition), Counter()) if origin else Counter()
        check.expected, check.found = want.total(), got.total()
        check.missing = (want - got).total()
        unexpected = got - want
        twice = unexpected & mine
        check.twice = twice.total()
        check.extra = (unexpected - twice).total()
    return state


def _counts(clients: ClusterClients, ranges: Mapping[TP, tuple[int, int]], keep: bool, *,
            skip: Mapping[TP, Collection[int]] | None = None,
            drop_reconciled: bool = False) -> dict[TP, Counter[bytes]]:
    """Fingerprint multisets of each range, streamed (a digest per record in memory)."""
    out: dict[TP, Counter[bytes]] = {tp: Counter() for tp in ranges}
    todo = {tp: r for tp, r in ranges.items() if r[1] > r[0]}
    if not todo:
        return out
    consumer = clients.consumer(**{"enable.partition.eof": "true"})
    try:
        for rec in read_ranges(consumer, todo):
            tp = (rec.topic, rec.partition)
            if skip and rec.offset in skip.get(tp, ()):
                continue
            if drop_reconciled and is_reconciled(rec.headers):
                continue
            out[tp][copy_fingerprint(rec, keep)] += 1
    finally:
        consumer.close()
    return out

"""Tail scope against full scope on real clusters (docs/design.md §5).

The target side is written by the test itself (topics named `*.replica` are never touched by
the lab's MirrorMaker 2), so each partition holds exactly the case it is about: a re-copied
duplicate straddling the alignment point, a burst of identical records across it, nothing
ever replicated, a record missing in the middle, and a gap that began hours ago.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from drctl.gap.result import GapResult
from drctl.kafka.clients import ClusterClients
from drctl.lab.workload import create_topics
from tests.conftest import RunningLab
from tests.lab.test_gap_e2e import gap_cli

pytestmark = [pytest.mark.lab, pytest.mark.spark]

Rec = tuple[bytes | None, bytes | None, int, tuple[tuple[str, bytes], ...]]
N = 200
MARGIN = "5"


def produce(clients: ClusterClients, topic: str, parts: dict[int, list[Rec]]) -> None:
    producer = clients.producer()
    for p, recs in parts.items():
        for key, value, ts, headers in recs:
            producer.produce(topic, key=key, value=value, partition=p, timestamp=ts,
                             headers=list(headers))
    assert producer.flush(30) == 0


def build(now: int) -> tuple[dict[int, list[Rec]], dict[int, list[Rec]], dict[int, list[int]],
                             dict[int, list[int]]]:
    """Source and target contents per partition, and the source offsets each scope must
    report (tail, full)."""
    def rec(p: int, i: int, ts: int | None = None) -> Rec:
        return (b"k%d-%d" % (p, i % 17), b"v%d-%d" % (p, i), now - 10_000 + i if ts is None
                else ts, (("i", b"%d" % i),) if i % 3 == 0 else ())

    src: dict[int, list[Rec]] = {}
    dst: dict[int, list[Rec]] = {}
    # p0: r0..r154 copied, then r145..r149 copied again (a replicator restart); the target's
    # last record is a re-copy that sits after copies of later records.
    src[0] = [rec(0, i) for i in range(N)]
    dst[0] = src[0][:155] + src[0][145:150]
    # p1: ten identical records at 100..109, the first five copied.
    twin: Rec = (b"twin", b"same", now - 9_000, (("n", b"x"),))
    src[1] = [rec(1, i) for i in range(100)] + [twin] * 10 + [rec(1, i) for i in range(110, N)]
    dst[1] = src[1][:105]
    # p2: nothing ever replicated.
    src[2] = [rec(2, i) for i in range(N)]
    dst[2] = []
    # p3: r50 lost in the middle (an unclean election), r180.. never copied.
    src[3] = [rec(3, i) for i in range(N)]
    dst[3] = src[3][:50] + src[3][51:180]
    # p4: replication broke three hours before the failover: r150.. carry old CreateTimes.
    old = now - 3 * 3_600_000
    src[4] = [rec(4, i, old - 10_000 + i) for i in range(N)]
    dst[4] = src[4][:150]
    tail = {0: list(range(155, N)), 1: list(range(105, N)), 2: list(range(N)),
            3: list(range(180, N)), 4: list(range(150, N))}
    full = {**tail, 3: [50, *range(180, N)]}
    return src, dst, tail, full


def offsets(out: Path) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for r in GapResult.load(out).iter_records():
        found.setdefault(r.partition, []).append(r.offset)
    return {p: sorted(o) for p, o in found.items()}


def classes(out: Path) -> dict[tuple[int, int], str]:
    return {(r.partition, r.offset): r.classification or ""
            for r in GapResult.load(out).iter_records()}


# Written on the target after F: keys of gap records in p0 (i % 17 == 3: 156, 173, 190) and
# p3 (i % 17 == 16: r50, lost in the middle, and 186), so copying those would reorder them.
POST_FAILOVER = {0: [(b"k0-3", b"post-0", 0, ())], 3: [(b"k3-16", b"post-3", 0, ())]}
CONFLICTS_TAIL = {(0, 156), (0, 173), (0, 190), (3, 186)}


def test_tail_and_full_scope(lab: RunningLab, ns: str, tmp_path: Path) -> None:
    topic = f"{ns}-scope.replica"  # excluded from the lab's MirrorMaker 2
    for clients in (lab.primary, lab.secondary):
        create_topics(clients, (topic,), 5)
    src, dst, want_tail, want_full = build(int(time.time() * 1000))
    produce(lab.primary, topic, src)
    produce(lab.secondary, topic, dst)
    f_point = json.dumps({topic: {str(p): len(dst[p]) for p in dst}})
    now = int(time.time() * 1000)
    produce(lab.secondary, topic, {p: [(k, v, now, h) for k, v, _, h in recs]
                                   for p, recs in POST_FAILOVER.items()})

    runs = {}
    for scope in ("tail", "full"):
        out = tmp_path / scope
        code, stdout, stderr = gap_cli(lab, ["--topics", topic, "--target-end", f_point,
                                             "--scope", scope, "--margin", MARGIN,
                                             "--check-order", "--report-dir", str(out)])
        assert code == 3, stderr  # order conflicts exist
        runs[scope] = (json.loads(stdout), offsets(out), classes(out))
    tail_data, tail_found, tail_classes = runs["tail"]
    full_data, full_found, full_classes = runs["full"]
    assert tail_found == {p: o for p, o in want_tail.items() if o}
    assert full_found == {p: o for p, o in want_full.items() if o}
    assert tail_data["scope"] == "tail" and full_data["scope"] == "full"
    # The same class for every record both scopes report; the conflicts are the keys written
    # after F, and full scope adds the one in the middle only it compares.
    assert tail_classes == {k: c for k, c in full_classes.items() if k in tail_classes}
    assert {k for k, c in tail_classes.items() if c == "conflict"} == CONFLICTS_TAIL
    assert {k for k, c in full_classes.items() if c == "conflict"} == CONFLICTS_TAIL | {(3, 50)}
    assert set(tail_classes.values()) == {"safe", "conflict"}

    rows = {r["partition"]: r for r in tail_data["partitions"]}
    # p0: the proof lands on r149's copy (its re-copy is the target's last record).
    assert rows[0]["scope"] == "tail"
    assert rows[0]["proof"] == {"source_offset": 149, "target_offset": 159, "reason": ""}
    assert rows[0]["verified_from"] == 150 - int(MARGIN)
    # p1: the fifth identical copy on the target is the fifth on the source.
    assert rows[1]["proof"]["source_offset"] == 104
    assert rows[1]["verified_from"] == 105 - int(MARGIN)
    # p2: no proof possible — compared in full, and the summary says why.
    assert rows[2]["scope"] == "full" and rows[2]["verified_from"] == 0
    assert "no record before the failover point" in rows[2]["proof"]["reason"]
    # p3: the lost record in the middle lies before the verified range; tail says so.
    assert rows[3]["verified_from"] == 180 - int(MARGIN) > 50
    assert rows[3]["unreplicated"] == N - 180
    # p4: found however old its CreateTimes are.
    assert rows[4]["unreplicated"] == N - 150
    assert all(r["scope"] == "full" for r in full_data["partitions"])
    assert all(r["verified_from"] == 0 for r in full_data["partitions"])
    # Tail scope read only the tails: far fewer source records than full scope.
    assert tail_data["totals"]["source_records"] < full_data["totals"]["source_records"]
    assert full_data["totals"]["source_records"] == 5 * N

    # A window narrows either scope and says how much it left out: the old gap of p4 is not
    # compared with --lookback 1h.
    code, stdout, stderr = gap_cli(lab, ["--topics", topic, "--target-end", f_point,
                                         "--scope", "full", "--lookback", "1h"])
    assert code == 0, stderr
    windowed = {r["partition"]: r for r in json.loads(stdout)["partitions"]}
    assert windowed[4]["unreplicated"] == 0
    assert windowed[4]["before_window"] == N
    assert windowed[0]["before_window"] == 0

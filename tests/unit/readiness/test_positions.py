"""Group positions on the target and guard's liveness."""

from __future__ import annotations

from drctl.codecs.mm2 import Checkpoint
from drctl.config import NameFilter, ReplicationSettings
from drctl.findings import Severity
from drctl.readiness.positions import guard_findings, position_findings
from drctl.translate.snapshots import GuardRound, OffsetSnapshot

REP = ReplicationSettings("mirrormaker2", "primary", "secondary", rename="primary.{topic}",
                          topics=NameFilter(include=("orders",)))
NOW = 1_000_000_000


def snap(group: str, offset: int, at_ms: int) -> OffsetSnapshot:
    return OffsetSnapshot(group, "orders", 0, offset, offset, "exact", None, at_ms, at_ms)


def test_a_group_with_no_position_and_a_stale_one_are_named_current_ones_are_not() -> None:
    commits = {"none": {("orders", 0): 5, ("orders", 1): 7},
               "stale": {("orders", 0): 100},
               "idle": {("orders", 0): 40},  # checkpoint equals commit: current however old
               "fresh": {("orders", 0): 90},
               "other": {("payments", 0): 3}}  # not a topic of the flow
    cps = {("stale", "primary.orders", 0): (Checkpoint("stale", "primary.orders", 0, 60, 55),
                                            NOW - 900_000),
           ("idle", "primary.orders", 0): (Checkpoint("idle", "primary.orders", 0, 40, 38),
                                           NOW - 86_400_000),
           ("fresh", "primary.orders", 0): (Checkpoint("fresh", "primary.orders", 0, 80, 75),
                                            NOW - 10_000)}
    # A newer guard snapshot beats an old checkpoint, but is stale too.
    snaps = {("stale", "orders", 0): snap("stale", 70, NOW - 600_000)}
    found, looked = position_findings(REP, commits, cps, snaps, NOW, stale_after_s=300)
    assert looked == 5
    assert [(f.object, f.severity) for f in found] == [("group none", Severity.RISK),
                                                       ("group stale", Severity.RISK)]
    assert "orders-0, orders-1" in found[0].difference
    assert found[1].difference.startswith("newest position on secondary 10m old, 30 record(s)")


def test_guard_never_run_is_a_note_running_is_a_note_stopped_is_a_risk() -> None:
    assert guard_findings(None, NOW, 300, "secondary")[0].severity == Severity.NOTE
    running = GuardRound(NOW - 4_000, 5.0, 10, "dr-host")
    assert guard_findings(running, NOW, 300, "secondary")[0].severity == Severity.NOTE
    stopped = GuardRound(NOW - 3_600_000, 5.0, 10, "dr-host")
    found = guard_findings(stopped, NOW, 300, "secondary")[0]
    assert found.severity == Severity.RISK and "1h ago on dr-host" in found.difference

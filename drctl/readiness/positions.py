"""Group positions on the target: for every group with commits on the flow's topics, a
failover with the source gone starts it at the newest of its MirrorMaker 2 checkpoint and
its guard snapshot. A group with neither is left where `auto.offset.reset` puts it; a group
whose newest one is old re-reads everything since.

Guard's liveness is read from the same topic: its last round's record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from drctl.codecs.mm2 import Checkpoint
from drctl.config import ReplicationSettings
from drctl.findings import Area, Finding, Severity
from drctl.kafka.topics import TP
from drctl.timeparse import format_duration
from drctl.translate.snapshots import GuardRound, OffsetSnapshot


@dataclass
class _GroupGaps:
    none: list[TP] = field(default_factory=list)  # no position at all
    stale: list[tuple[TP, int, float]] = field(default_factory=list)  # behind, age s


def position_findings(rep: ReplicationSettings, commits: Mapping[str, Mapping[TP, int]],
                      checkpoints: Mapping[tuple[str, str, int], tuple[Checkpoint, int]],
                      snapshots: Mapping[tuple[str, str, int], OffsetSnapshot], now_ms: int,
                      stale_after_s: float) -> tuple[list[Finding], int]:
    """One finding per group with a partition that has no position on the target, or whose
    newest position is behind its commit and older than `stale_after_s`; and how many
    committed positions were looked at.

    A position equal to the commit is current however old it is (the group did not move).
    """
    gaps: dict[str, _GroupGaps] = {}
    looked = 0
    for group, offsets in sorted(commits.items()):
        for (topic, partition), committed in sorted(offsets.items()):
            if committed < 0 or not rep.topics.matches(topic):
                continue
            looked += 1
            known: list[tuple[int, int]] = []  # (source offset it stands for, written ms)
            cp = checkpoints.get((group, rep.mirror_topic(topic), partition))
            if cp is not None:
                known.append((cp[0].upstream_offset, cp[1]))
            snap = snapshots.get((group, topic, partition))
            if snap is not None:
                known.append((snap.source_offset, snap.snapshot_ms))
            if not known:
                gaps.setdefault(group, _GroupGaps()).none.append((topic, partition))
                continue
            if any(offset == committed for offset, _ in known):
                continue
            offset, written = max(known)
            age = max(0.0, (now_ms - written) / 1000)
            if age > stale_after_s:
                gaps.setdefault(group, _GroupGaps()).stale.append(
                    ((topic, partition), max(0, committed - offset), age))
    findings = []
    for group, g in sorted(gaps.items()):
        if g.none:
            findings.append(Finding(
                Area.POSITIONS, f"group {group}",
                f"no checkpoint or guard snapshot on {rep.target} for {_parts(g.none)}",
                "a failover with the source gone leaves it there: its consumers start at "
                "auto.offset.reset (skipping or re-reading everything)",
                "run `drctl guard` beside the replicator, or let MirrorMaker 2 checkpoint it "
                "(its groups filter, refresh.groups.interval.seconds)"))
        if g.stale:
            oldest = round(max(age for _, _, age in g.stale))
            behind = sum(b for _, b, _ in g.stale)
            where = _parts([tp for tp, _, _ in g.stale])
            findings.append(Finding(
                Area.POSITIONS, f"group {group}",
                f"newest position on {rep.target} {format_duration(oldest)} old, "
                f"{behind:,} record(s) behind its commits on {where}",
                f"a failover with the source gone re-delivers up to {behind:,} record(s)",
                "run `drctl guard` (exact positions), or check that MirrorMaker 2 still "
                "checkpoints (emit.checkpoints.interval.seconds)"))
    return findings, looked


def guard_findings(last: GuardRound | None, now_ms: int, stale_after_s: float,
                   target: str) -> list[Finding]:
    """Guard running, stopped, or never run against this target."""
    if last is None:
        return [Finding(Area.GUARD, "drctl guard", f"no guard round recorded on {target}",
                        "with the source gone, groups resume at MirrorMaker 2's checkpoints "
                        "(bounded re-delivery), not at exact positions",
                        "run `drctl guard` in the target's datacenter", Severity.NOTE)]
    age = max(0.0, (now_ms - last.round_ms) / 1000)
    # Late after three intervals, or after the staleness bound when that is longer.
    late_after = max(3 * last.interval_s, stale_after_s)
    if age <= late_after:
        return [Finding(Area.GUARD, "drctl guard",
                        f"running (last round {format_duration(round(age))} ago"
                        + (f" on {last.host}" if last.host else "")
                        + f", every {format_duration(last.interval_s)})",
                        "none", "nothing to do", Severity.NOTE)]
    return [Finding(Area.GUARD, "drctl guard",
                    f"last round {format_duration(round(age))} ago"
                    + (f" on {last.host}" if last.host else "")
                    + f" (it runs every {format_duration(last.interval_s)})",
                    "positions moved since then are not kept: a failover with the source "
                    "gone re-delivers what groups read since",
                    "restart `drctl guard` (see its logs for why it stopped)")]


def _parts(tps: list[TP], shown: int = 4) -> str:
    names = [f"{t}-{p}" for t, p in tps]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more

"""Offset snapshots (translate/snapshots.py) and the snapshot method's choice and bound."""

from __future__ import annotations

import time

import pytest

from drctl.codecs.mm2 import Checkpoint
from drctl.fingerprint import record_fingerprint
from drctl.kafka.records import Record
from drctl.translate.methods.snapshot import _by_snapshot
from drctl.translate.model import PartitionResult
from drctl.translate.snapshots import OffsetSnapshot, settle_one


def _snap(source: int, target: int, age_s: float = 3) -> OffsetSnapshot:
    now = int(time.time() * 1000)
    return OffsetSnapshot("g", "orders", 0, source, target, "exact", "ab" * 16,
                          now - int(age_s * 1000), now)


def _part(source_offset: int) -> PartitionResult:
    return PartitionResult("g", "orders", 0, "primary.orders", source_offset, "snapshot", None,
                           "")


def test_a_snapshot_round_trips_and_keys_its_position() -> None:
    snap = _snap(120, 118)
    assert OffsetSnapshot.decode(snap.encode()) == snap
    assert snap.key == b"g\x00orders\x000"


def test_the_later_of_snapshot_and_checkpoint_wins_with_a_bound() -> None:
    marks = {("primary.orders", 0): (0, 500)}
    # The checkpoint is older (and coarse): the snapshot's exact position wins.
    p = _part(120)
    _by_snapshot([p], {("g", "orders", 0): _snap(120, 118)},
                 {("g", "primary.orders", 0): Checkpoint("g", "primary.orders", 0, 100, 90)},
                 marks)
    assert (p.target_offset, p.confidence, p.max_redelivered) == (118, "snapshot", 382)
    assert p.age_s is not None and 2 <= p.age_s <= 10
    # The group moved on after the snapshot and MM2 checkpointed it further on.
    p = _part(300)
    _by_snapshot([p], {("g", "orders", 0): _snap(120, 118)},
                 {("g", "primary.orders", 0): Checkpoint("g", "primary.orders", 0, 300, 260)},
                 marks)
    assert (p.target_offset, p.confidence, p.max_redelivered) == (260, "checkpoint", 240)
    # Never past the target's end; nothing known: said so, no position.
    p = _part(900)
    _by_snapshot([p], {("g", "orders", 0): _snap(900, 880)}, {}, marks)
    assert (p.target_offset, p.max_redelivered) == (500, 0)
    p = _part(5)
    _by_snapshot([p], {}, {}, marks)
    assert (p.target_offset, p.confidence) == (None, "no-snapshot")


def test_mirrormaker_settings_say_what_a_source_down_failover_costs() -> None:
    from drctl.replication.mirrormaker2 import checkpoint_costs

    defaults = checkpoint_costs({}, {})
    assert (defaults["checkpoint_interval_s"], defaults["group_refresh_s"],
            defaults["topic_refresh_s"], defaults["offset_lag_max"]) == (60, 600, 600, 100)
    assert "up to 60 s of its reading again" in defaults["lines"][0]
    assert any("younger than that has no checkpoint" in line for line in defaults["lines"])
    lab = checkpoint_costs({"refresh.topics.interval.seconds": "2", "offset.lag.max": "10"},
                           {"emit.checkpoints.interval.seconds": "1", "groups": "orders-.*",
                            "refresh.groups.interval.seconds": "bogus"})
    assert (lab["checkpoint_interval_s"], lab["topic_refresh_s"], lab["offset_lag_max"],
            lab["group_refresh_s"]) == (1, 2, 10, 600)
    assert lab["lines"][-1] == "Only groups matching 'orders-.*' are checkpointed."


def test_the_inventory_round_trips_with_its_unread_groups() -> None:
    from drctl.translate.snapshots import SourceInventory

    inv = SourceInventory({"orders": 4}, {"billing": ["orders"]}, 1_700_000_000_000, ["new"])
    assert SourceInventory.decode(inv.encode()) == inv
    # One written before `unread` existed reads as having none.
    assert SourceInventory.decode(b'{"topics": {}, "groups": {}, "written_ms": 5}').unread == []


def test_the_inventory_reads_new_groups_first_then_the_stalest_within_a_bound() -> None:
    from drctl.translate.inventory import INVENTORY_MAX_AGE_S, groups_to_read

    now = 10_000_000
    stale = now - int(INVENTORY_MAX_AGE_S * 1000) - 1
    read_ms = {"fresh": now - 1000, "old": stale - 5000, "older": stale - 9000, "edge": stale}
    listed = ["fresh", "old", "older", "edge", "b-new", "a-new"]
    assert groups_to_read(listed, read_ms, now) == ["a-new", "b-new", "older", "old", "edge"]
    # Thousands of groups: a bounded number per call, the never-read ones first.
    assert groups_to_read(listed, read_ms, now, limit=3) == ["a-new", "b-new", "older"]
    assert groups_to_read(["fresh"], read_ms, now) == []


def test_config_check_says_what_mirrormaker_settings_cost(
        capsys: pytest.CaptureFixture[str]) -> None:
    from drctl.cli.config_cmd import report_translation_costs
    from drctl.replication.mirrormaker2 import checkpoint_costs
    from drctl.terminal import Terminal

    report_translation_costs(Terminal(), checkpoint_costs(
        {"refresh.topics.interval.seconds": "30"},
        {"emit.checkpoints.interval.seconds": "60", "groups": "orders-.*"}))
    err = " ".join(capsys.readouterr().err.split())
    assert "cost a failover with the source gone" in err
    assert "! Checkpoints every 60 s" in err
    assert "! New groups are found every 600 s" in err  # the default, unset
    assert "! New topics are found every 30 s" in err
    assert "! Only groups matching 'orders-.*' are checkpointed." in err
    assert "Run `drctl guard`" in err


def test_guard_paces_failed_rounds_with_the_retry_policy_and_says_when_it_recovers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from drctl.config import parse_config
    from drctl.ops.guard import Guard, RoundResult, run_guard

    config = parse_config({
        "clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "a", "target": "b"},
        "retry": {"initial_s": 0.01, "max_s": 0.02}})
    rounds = iter([RoundResult(error="no answer"), RoundResult(error="no answer"),
                   RoundResult(error="no answer"), RoundResult(groups=1)])
    stop = threading.Event()

    def next_round(self: Guard) -> RoundResult:
        result = next(rounds)
        if result.error is None:
            stop.set()
        return result

    monkeypatch.setattr(Guard, "run_round", next_round)
    notes: list[str] = []
    run_guard(config, interval_s=0.001, stop=stop, notify=notes.append)
    # Doubling from the policy's first wait up to its cap, then back to the interval.
    assert [n.split("; ")[1] for n in notes[:3]] == [
        "attempt 1, retrying in 0.01s", "attempt 2, retrying in 0.02s",
        "attempt 3, retrying in 0.02s"]
    assert notes[3] == "guard: recovered after 3 failed round(s)"
    assert notes[4].startswith("guard: 0 positions of 1 groups")


def _rec(offset: int, value: bytes, ts: int = 1_700_000_000_000) -> Record:
    return Record("primary.orders", 0, offset, b"k", value, ts, 1, ())


def _ahead(target: int, ahead: int, last: Record, occurrence: int = 1) -> OffsetSnapshot:
    now = int(time.time() * 1000)
    return OffsetSnapshot("g", "orders", 0, 500, target, "clamped",
                          record_fingerprint(last).hex(), now, now, ahead=ahead,
                          occurrence=occurrence)


def test_a_snapshot_ahead_of_replication_settles_on_the_copy_that_arrived_since() -> None:
    last = _rec(0, b"v-last")  # the last record the group read, as guard saw it on the source
    target = [_rec(100 + i, b"v%d" % i) for i in range(4)] + [_rec(104, b"v-last"),
                                                             _rec(105, b"after")]
    assert settle_one(_ahead(100, 5, last), target, 0, 106)[0] == 105  # type: ignore[index]
    # The 2nd identical record since the snapshot: the 2nd copy, not the first.
    twin = target[:2] + [_rec(102, b"v-last")] + target[3:]
    assert settle_one(_ahead(100, 5, last, occurrence=2), twin, 0, 106)[0] == 105  # type: ignore[index]
    assert settle_one(_ahead(100, 5, last, occurrence=1), twin, 0, 106)[0] == 103  # type: ignore[index]


def test_a_snapshot_ahead_of_replication_never_settles_past_what_the_target_proves() -> None:
    last = _rec(0, b"v-last")
    partial = [_rec(100 + i, b"v%d" % i) for i in range(3)]
    # The copy never arrived and the target holds no more than the group had read: its end.
    assert settle_one(_ahead(100, 5, last), partial, 0, 103) == (
        103, "the target's end (the rest of what it read was never copied)")
    # More records than the group could have read, yet no copy: not settled (offset stands).
    longer = [_rec(100 + i, b"v%d" % i) for i in range(8)]
    assert settle_one(_ahead(100, 5, last), longer, 0, 108) is None
    # Retention took the snapshot's offset: copies may be gone, so nothing is counted.
    assert settle_one(_ahead(100, 5, last), partial, 101, 103) is None
    # An exact snapshot has nothing to settle.
    exact = _snap(120, 118)
    assert settle_one(exact, partial, 0, 103) is None


def test_the_snapshot_method_uses_a_settled_position_and_bounds_it() -> None:
    marks = {("primary.orders", 0): (0, 500)}
    p = _part(300)
    _by_snapshot([p], {("g", "orders", 0): _snap(300, 200)},
                 {("g", "primary.orders", 0): Checkpoint("g", "primary.orders", 0, 250, 240)},
                 marks, {("g", "orders", 0): (290, "the copy of the last record it read")})
    assert (p.target_offset, p.confidence, p.max_redelivered) == (290, "snapshot", 210)
    assert p.note is not None and "settled on the target" in p.note

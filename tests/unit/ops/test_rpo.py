"""RPO in seconds (ops/steps/rpo.py): from the oldest record the target lacks (source up), bounded
by the newest heartbeat copied from the source (source down), unknown — never 0 — when
neither can be read; and failover's choice between them (ops/one_way/failover.py `measure_rpo`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from drctl.codecs.mm2 import Heartbeat, encode_heartbeat
from drctl.kafka.records import Record
from drctl.ops.one_way import failover
from drctl.ops.steps import rpo
from drctl.ops.steps.rpo import (
    Rpo,
    RpoMethod,
    newest_copied_heartbeat,
    rpo_from_heartbeat,
    rpo_from_records,
    unknown_rpo,
)
from drctl.state import FailoverMarker
from tests.unit.ops.support import FakeAdmin, FakeClients, _config, _context

F = 1_714_564_800_000  # 2024-05-01T12:00:00Z, the failover point's time


def test_source_up_the_oldest_record_the_target_lacked_sets_the_rpo() -> None:
    measured = rpo_from_records({("orders", 0): F - 42_000, ("orders", 1): None,
                                 ("payments", 2): F - 7_500}, F)
    assert measured.method == RpoMethod.records and measured.seconds == 42.0
    assert measured.sentence() == ("records after 2024-05-01T11:59:18Z were not replicated: "
                                   "up to 42s of data")
    assert [(r["topic"], r["partition"], r["seconds"]) for r in measured.lagging] == [
        ("orders", 0, 42.0), ("payments", 2, 7.5)]
    data = measured.as_dict()
    assert (data["method"], data["seconds"], data["since"]) == ("records", 42.0,
                                                                "2024-05-01T11:59:18Z")
    assert Rpo.from_dict(data) == measured


def test_source_up_and_nothing_lacking_is_a_measured_zero() -> None:
    for nothing in ({}, {("orders", 0): None}):
        measured = rpo_from_records(nothing, F)
        assert measured.seconds == 0.0 and measured.method == RpoMethod.records
        assert "no data lost (0 s)" in measured.sentence()


def test_status_passes_the_oldest_unreplicated_record_per_topic() -> None:
    """`drctl status` has it per topic (kafka/lag.py `mm2_replication_lag`)."""
    lag = [{"topic": "orders", "oldest_unreplicated_ms": F - 90_000},
           {"topic": "payments", "oldest_unreplicated_ms": None}]
    measured = rpo_from_records({r["topic"]: r["oldest_unreplicated_ms"] for r in lag}, F)
    assert measured.seconds == 90.0 and measured.lagging[0]["partition"] is None
    assert "up to 1m30s (90 s) of data" in measured.sentence()


def test_source_down_the_newest_copied_heartbeat_bounds_the_rpo() -> None:
    measured = rpo_from_heartbeat(F - 12_000, F, "primary.heartbeats")
    assert measured.method == RpoMethod.heartbeats and measured.seconds == 12.0
    assert measured.sentence() == ("the target last heard from the source at "
                                   "2024-05-01T11:59:48Z: up to 12s of data may be missing")
    assert measured.as_dict()["source"] == "primary.heartbeats"
    # A heartbeat stamped after the failover point (a clock ahead) never makes it negative.
    assert rpo_from_heartbeat(F + 5_000, F, "primary.heartbeats").seconds == 0.0


def test_neither_readable_is_unknown_never_zero() -> None:
    for measured in (rpo_from_heartbeat(None, F, "primary.heartbeats"),
                     unknown_rpo(F, "no heartbeats")):
        assert measured.method == RpoMethod.unknown and measured.seconds is None
        assert measured.sentence().startswith("RPO unknown: ")
        assert measured.as_dict()["seconds"] is None
    assert "primary.heartbeats on the target holds no heartbeat" in \
        rpo_from_heartbeat(None, F, "primary.heartbeats").sentence()


def _heartbeat_target(topics: dict[str, int]) -> FakeClients:
    """A target cluster holding `topics` with the given records (through monkeypatched
    reads)."""
    return FakeClients("secondary", FakeAdmin(True, topics))


def _beat(offset: int, ts: int, source: str = "secondary", target: str = "primary") -> Record:
    key, value = encode_heartbeat(Heartbeat(source, target, ts))
    return Record("primary.heartbeats", 0, offset, key, value, ts, 1, ())


@pytest.fixture
def heartbeats(monkeypatch: pytest.MonkeyPatch) -> list[Record]:
    records: list[Record] = []

    def marks(_admin: Any, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        return {tp: (0, len(records)) for tp in tps}

    def stream(_clients: Any, ranges: Mapping[tuple[str, int], tuple[int, int]],
               timeout_s: float = 0) -> Iterator[Record]:
        for (_, _), (start, end) in ranges.items():
            yield from records[start:end]

    monkeypatch.setattr(rpo, "watermarks", marks)
    monkeypatch.setattr(rpo, "stream_ranges", stream)
    return records


def test_the_newest_copied_heartbeat_is_read_from_the_sources_copy(
        heartbeats: list[Record]) -> None:
    heartbeats += [_beat(0, F - 30_000), _beat(1, F - 10_000),
                   Record("primary.heartbeats", 0, 2, b"junk", b"junk", F - 5_000, 1, ()),
                   _beat(3, F + 60_000)]  # after the failover point: not before F
    target: Any = _heartbeat_target({"primary.heartbeats": 1, "heartbeats": 1})
    assert newest_copied_heartbeat(target, "primary") == F + 60_000
    assert newest_copied_heartbeat(target, "primary", until_ms=F) == F - 10_000
    # The worker's own heartbeats on the target prove nothing about the source: not read.
    only_local: Any = _heartbeat_target({"heartbeats": 1})
    assert newest_copied_heartbeat(only_local, "primary") is None


def test_a_heartbeat_that_cannot_be_read_is_none(heartbeats: list[Record]) -> None:
    class Broken:
        def admin(self) -> Any:
            raise RuntimeError("connection refused")

    broken: Any = Broken()
    empty: Any = _heartbeat_target({"primary.heartbeats": 1})
    assert newest_copied_heartbeat(broken, "primary") is None
    assert newest_copied_heartbeat(empty, "primary") is None


def _failover_ctx() -> Any:
    return _context(_config(), {"dc1": FakeAdmin(False, {}), "dc2": FakeAdmin(True, {})})


def _marker() -> FailoverMarker:
    marker = FailoverMarker.new("dc1", "dc2", "mirrormaker2", planned=False)
    marker.failover_time_ms = F
    return marker


def test_failover_measures_from_the_records_when_the_source_answers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []

    def oldest(_source: Any, ranges: Mapping[tuple[str, int], tuple[int, int]]
               ) -> dict[tuple[str, int], int]:
        asked.append(dict(ranges))
        return {("orders", 1): F - 3_000}

    monkeypatch.setattr(failover, "oldest_records", oldest)
    monkeypatch.setattr(failover, "newest_copied_heartbeat",
                        lambda *a, **k: pytest.fail("the source answered"))
    measured = failover.measure_rpo(_failover_ctx(), _marker(),
                                    {("orders", 0): (10, 10), ("orders", 1): (4, 9)})
    assert asked == [{("orders", 1): (4, 9)}]  # only partitions the target lacked records of
    assert (measured.method, measured.seconds) == (RpoMethod.records, 3.0)


def test_failover_falls_back_to_heartbeats_then_unknown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[SimpleNamespace] = []

    def newest(_target: Any, alias: str, *, until_ms: int | None = None) -> int | None:
        seen.append(SimpleNamespace(alias=alias, until_ms=until_ms))
        return F - 20_000

    monkeypatch.setattr(failover, "newest_copied_heartbeat", newest)
    measured = failover.measure_rpo(_failover_ctx(), _marker(), None)
    assert (measured.method, measured.seconds, measured.source) == (
        RpoMethod.heartbeats, 20.0, "dc1.heartbeats")
    assert (seen[0].alias, seen[0].until_ms) == ("dc1", F)

    def broken(_source: Any, _ranges: Any) -> dict[tuple[str, int], int]:
        raise RuntimeError("source died")

    monkeypatch.setattr(failover, "oldest_records", broken)
    monkeypatch.setattr(failover, "newest_copied_heartbeat", lambda *a, **k: None)
    measured = failover.measure_rpo(_failover_ctx(), _marker(), {("orders", 0): (0, 5)})
    assert measured.method == RpoMethod.unknown and measured.seconds is None

"""Which groups the source inventory reads next (drctl/translate/inventory.py)."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from drctl.config import Config, parse_config


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


class _Source:
    """A source cluster's group requests answered in this process: its ListGroups leaves
    out `unlisted` every time (a __consumer_offsets partition moving for longer than the
    lists), its OffsetFetch answers `commits`."""

    def __init__(self, commits: dict[str, dict[tuple[str, int], int]],
                 unlisted: set[str]) -> None:
        from drctl.kafka.coordinator import InProcess

        self.name, self.bootstrap = "dc1", "dc1:9092"
        self.properties = {"bootstrap.servers": self.bootstrap}
        self.deadline_s = 1.0
        self.notify = None
        self.commits = commits
        self.listed = [g for g in commits if g not in unlisted] + [""]
        self.lists = 0  # ListGroups requests answered
        self.fetched: list[str] = []
        self._coordinator = InProcess(self)

    def coordinator(self) -> Any:
        return self._coordinator

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        self.lists += 1
        return _done(SimpleNamespace(valid=[SimpleNamespace(group_id=g) for g in self.listed],
                                     errors=[]))

    def list_consumer_group_offsets(self, requests: list[Any], request_timeout: float
                                    ) -> dict[str, Future[Any]]:
        group = requests[0].group_id
        self.fetched.append(group)
        return {group: _done(SimpleNamespace(topic_partitions=[
            SimpleNamespace(topic=t, partition=p, offset=o, error=None)
            for (t, p), o in self.commits.get(group, {}).items()]))}


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


def _flow(tmp_path: Path) -> Config:
    return parse_config({
        "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"},
        "state": {"dir": str(tmp_path / "state")}})


def test_a_group_the_list_leaves_out_but_the_inventory_knows_is_taken_in_and_named(
        tmp_path: Path) -> None:
    """ListGroups answered without `billing-7`, twice alike, with no error: it was neither
    translated nor named (exit 0). The inventory knew it; it still commits: taken in. A
    group the inventory knew that no longer commits is gone: nothing of it to move."""
    from drctl.kafka.groups import UNNAMEABLE
    from drctl.translate import inventory

    config = _flow(tmp_path)
    inventory._save(inventory._cache_path(config, "dc1", "dc2"), {
        "groups": {"billing-7": {"topics": ["orders"], "read_ms": 1},
                   "deleted": {"topics": ["orders"], "read_ms": 1}},
        "unread": ["orders-app"]})
    source = _Source({"orders-app": {("orders", 0): 5}, "billing-7": {("orders", 1): 9},
                      "deleted": {}}, unlisted={"billing-7", "deleted"})
    found = inventory.source_groups(config, source, lambda g: True)
    assert found.commits == {"orders-app": {("orders", 0): 5}, "billing-7": {("orders", 1): 9}}
    assert found.unlisted == {"billing-7": inventory.IN_INVENTORY}
    assert found.skipped == {"": UNNAMEABLE[""]}
    assert "" not in source.fetched  # never asked: the client cannot name it
    assert found.notes() == [
        f"dc1: {UNNAMEABLE['']}; skipped",
        "dc1's group list (ListGroups) left out 1 group(s) with commits there, known from "
        "drctl's inventory of the source and taken in: billing-7"]


def test_a_group_only_the_checkpoints_name_is_taken_in_when_it_commits_on_the_source(
        tmp_path: Path) -> None:
    from drctl.translate import inventory

    source = _Source({"a": {("orders", 0): 1}, "late": {("orders", 0): 3}, "gone": {}},
                     unlisted={"late", "gone"})
    found = inventory.source_groups(_flow(tmp_path), source, lambda g: True)
    assert set(found.commits) == {"a"}  # no inventory kept here yet
    added = found.also(source, {"late": inventory.IN_CHECKPOINTS,
                                "gone": inventory.IN_CHECKPOINTS, "a": inventory.IN_CHECKPOINTS,
                                "": inventory.IN_CHECKPOINTS, "other": inventory.IN_CHECKPOINTS},
                       lambda g: g != "other")
    assert added == {"late": {("orders", 0): 3}}
    assert found.unlisted == {"late": inventory.IN_CHECKPOINTS}
    assert sorted(source.fetched) == ["a", "gone", "late"]  # "a" once; "", "other" never


def test_the_inventory_takes_the_listing_its_caller_just_took(
        tmp_path: Path, monkeypatch: Any) -> None:
    """A guard round lists the source for its snapshots, then keeps the inventory: with the
    round's listing given, the source is not listed again (a listing waits a pause between
    the two answers it compares); without one, the inventory lists it itself."""
    from drctl.translate import inventory

    monkeypatch.setattr(inventory, "source_topics_in_scope", lambda config, clients: {
        "orders": 2})
    written: list[Any] = []
    monkeypatch.setattr(inventory, "ensure_snapshot_topic", lambda clients, topic: None)
    monkeypatch.setattr(inventory, "write_snapshots",
                        lambda clients, topic, snapshots, inv: written.append(inv))
    config = _flow(tmp_path)
    source = _Source({"orders-app": {("orders", 0): 5}, "billing": {("orders", 1): 9}}, set())
    found = inventory.source_groups(config, source, lambda g: True)
    assert source.lists == 2  # two answers alike
    kept = inventory.keep_inventory(config, source, None, known=found.commits,
                                    listing=found.listing)
    assert kept.error is None, kept.error
    assert source.lists == 2
    assert written[-1].groups == {"billing": ["orders"], "orders-app": ["orders"]}
    # Without a listing, it lists the source itself.
    assert inventory.keep_inventory(config, source, None,
                                    now_ms=written[-1].written_ms + 1).error is None
    assert source.lists == 4

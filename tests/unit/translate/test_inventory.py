"""Which groups the source inventory reads next (drctl/translate/inventory.py)."""

from __future__ import annotations


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

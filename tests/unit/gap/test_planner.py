"""gap-analysis option parsing (drctl/gap/planner.py): offsets in every form, the
window start, offsets named by mirror or failover topic."""

from __future__ import annotations

import pytest

from drctl.config import ReplicationSettings
from drctl.errors import UsageError
from drctl.gap.planner import Window, parse_offsets, rekey, window_from


def test_offsets_in_every_accepted_form() -> None:
    assert parse_offsets('{"a": {"0": 5, "1": 7}, "b": {"0": 1}}', [], "--x") == {
        "a": {0: 5, 1: 7}, "b": {0: 1}}
    assert parse_offsets('{"0": 5, "2": 9}', ["a"], "--x") == {"a": {0: 5, 2: 9}}
    assert parse_offsets("0:5, 2:9", ["a"], "--x") == {"a": {0: 5, 2: 9}}


@pytest.mark.parametrize("text,topics", [("0:5", ["a", "b"]), ("0=5", ["a"]),
                                         ('{"0": "x"}', ["a"]), ("{nope", ["a"])])
def test_offsets_that_cannot_be_read(text: str, topics: list[str]) -> None:
    with pytest.raises(UsageError):
        parse_offsets(text, topics, "--target-end")


def test_window_start() -> None:
    assert window_from(None, None, None) == Window(None)
    assert window_from(5, None, 100) == Window(5)
    assert window_from(None, 60_000, 1_000_000) == Window(940_000)  # before the failover
    assert window_from(None, 1_000, None, now_ms=5_000) == Window(4_000)
    with pytest.raises(UsageError):
        window_from(1, 1, None)


def test_rekey_names_option_offsets_by_mirror_or_failover_topic() -> None:
    rep = ReplicationSettings("mirrormaker2", "p", "s", rename="primary.{topic}")
    offsets = {"orders": {0: 1}, "primary.pay": {0: 2}}
    assert rekey(offsets, ["orders", "pay"], rep, "mirror") == {
        "primary.orders": {0: 1}, "primary.pay": {0: 2}}
    assert rekey(offsets, ["orders"], rep, "failover") == {"orders": {0: 1},
                                                          "primary.pay": {0: 2}}
    assert rekey(None, ["orders"], rep, "mirror") is None

"""gap-analysis option parsing (drctl/gap/planner.py): offsets in every form, the
window start, offsets named by mirror or failover topic."""

from __future__ import annotations

from typing import Any

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


def _sides(upto: dict[tuple[str, int], int] | None) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(replicated_upto=lambda: upto)


def test_retention_losses_are_counted_from_the_replicators_own_position() -> None:
    from drctl.gap.alignment import full_alignment
    from drctl.gap.planner import _lost_to_retention

    unproven = full_alignment(40, 0, "no record before F found on the source")
    # The replicator had copied up to 30; the source's log now starts at 40: 10 lost.
    lost = _lost_to_retention(_sides({("t", 0): 30}), "t", 0, 40, 0, 25, unproven, "mm2")
    assert lost is not None and (lost["from"], lost["to"], lost["count"]) == (30, 40, 10)
    assert "stored position" in lost["proof"]
    # Retention deleted only what was copied (the replicator was past the log start): no loss
    # is claimed, and the proof still says why.
    fine = _lost_to_retention(_sides({("t", 0): 55}), "t", 0, 40, 0, 25, unproven, "mm2")
    assert fine is not None and fine["count"] == 0
    # Without the replicator's position the loss cannot be counted: named as unknown.
    unknown = _lost_to_retention(_sides(None), "t", 0, 40, 0, 25, unproven, "mm2")
    assert unknown is not None and unknown["count"] is None and unknown["from"] is None
    # A source that still starts at 0, or a proven tail: nothing can have been lost.
    assert _lost_to_retention(_sides(None), "t", 0, 0, 0, 25, unproven, "mm2") is None
    proven = full_alignment(40, 0)
    proven = type(proven)(**{**proven.as_dict(), "source_aligned": 41, "target_aligned": 20})
    assert _lost_to_retention(_sides(None), "t", 0, 40, 0, 25, proven, "mm2") is None
    # Offsets preserved: the target holds [.., F), so [F, log start) is what was lost.
    same = _lost_to_retention(_sides(None), "t", 0, 40, 0, 25, unproven, "identity")
    assert same is not None and (same["from"], same["to"], same["count"]) == (25, 40, 15)


class _ListingAdmin:
    """ListOffsets answered with `code` every time; counts the requests."""

    def __init__(self, code: int) -> None:
        self.code = code
        self.asked = 0

    def list_offsets(self, requests: dict[Any, Any], **_: Any) -> dict[Any, Any]:
        from concurrent.futures import Future

        from confluent_kafka import KafkaError, KafkaException

        self.asked += 1
        out = {}
        for tp in requests:
            failed: Future[Any] = Future()
            failed.set_exception(KafkaException(KafkaError(self.code)))
            out[tp] = failed
        return out

    def list_topics(self, **_: Any) -> Any:
        return None  # the refresh a stale leader asks for


def test_a_refused_listoffsets_ends_planning_at_once_with_the_cause() -> None:
    """Issue 43: authorization is permanent — exit 4 at once naming it, never a wait for
    partition leaders."""
    from confluent_kafka import KafkaError

    from drctl.errors import ExitStatus
    from drctl.gap.planner import _list
    from drctl.kafka.retriable import transient

    admin = _ListingAdmin(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(Exception) as caught:
        _list(admin, "primary", "orders", [0, 1], None)  # type: ignore[arg-type]
    error: Any = caught.value
    assert admin.asked == 1
    assert error.exit_status == ExitStatus.UNREACHABLE and not transient(error)
    assert error.message == ("Listing offsets of orders on 'primary' was refused: not "
                             "authorized (TOPIC_AUTHORIZATION_FAILED).")
    assert "Grant drctl's principal DESCRIBE" in error.hint


def test_a_leader_moving_in_listoffsets_is_unreachable_for_failback_to_wait_out() -> None:
    from confluent_kafka import KafkaError

    from drctl.gap.planner import _list
    from drctl.kafka.retriable import transient

    admin = _ListingAdmin(KafkaError.NOT_LEADER_FOR_PARTITION)
    with pytest.raises(Exception) as caught:
        _list(admin, "primary", "orders", [0], None)  # type: ignore[arg-type]
    assert admin.asked > 1  # asked again while the leader moves
    assert transient(caught.value)  # failback waits for the cluster, then runs again

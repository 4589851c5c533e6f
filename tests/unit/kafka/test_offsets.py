"""ListOffsets answers: a partition answered with no offset is asked again, never used."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from drctl.kafka.offsets import _answered, list_offsets
from drctl.kafka.retriable import is_retriable


class FakeAdmin:
    """ListOffsets answered from `answer` per partition, one future each; counts its calls."""

    calls = 0

    def answer(self, tp: TopicPartition, future: Future[Any]) -> None:
        raise NotImplementedError

    def list_offsets(self, requests: dict[TopicPartition, Any], isolation_level: Any,
                     request_timeout: float) -> dict[TopicPartition, Future[Any]]:
        self.calls += 1
        out: dict[TopicPartition, Future[Any]] = {}
        for tp in requests:
            out[tp] = Future()
            self.answer(tp, out[tp])
        return out


class RestartingAdmin(FakeAdmin):
    """Answers OFFSET_INVALID without an error first (what librdkafka 2.16 hands back for a
    broker that was restarting), then the partition's real offsets."""

    def __init__(self, offsets: dict[tuple[str, int], int], invalid_answers: int) -> None:
        self.offsets = offsets
        self.invalid_answers = invalid_answers

    def answer(self, tp: TopicPartition, future: Future[Any]) -> None:
        offset = OFFSET_INVALID if self.calls <= self.invalid_answers \
            else self.offsets[(tp.topic, tp.partition)]
        future.set_result(SimpleNamespace(offset=offset))

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(topics={})  # the metadata refresh before a retry


def test_an_offset_answered_as_invalid_is_asked_again() -> None:
    admin = RestartingAdmin({("orders", 0): 0, ("orders", 1): 40}, invalid_answers=1)
    got = list_offsets(admin, {("orders", 0): OffsetSpec.earliest(),  # type: ignore[arg-type]
                               ("orders", 1): OffsetSpec.earliest()})
    assert got == {("orders", 0): 0, ("orders", 1): 40}
    assert admin.calls == 2


def test_no_offset_is_a_retriable_error_naming_the_partition() -> None:
    with pytest.raises(KafkaException) as caught:
        _answered(TopicPartition("orders", 2), OFFSET_INVALID)
    assert is_retriable(caught.value)
    assert "orders[2]" in str(caught.value)


def test_minus_one_is_an_answer() -> None:
    # ListOffsets by timestamp: -1 is "no record at or after that time", not a failure.
    assert _answered(TopicPartition("orders", 0), -1) == -1


class GrownTopicAdmin(FakeAdmin):
    """An admin client whose metadata knew `orders` with 2 partitions: partition 2, added
    since, is `Local: Unknown partition` until its metadata of the topic is read again."""

    def __init__(self) -> None:
        self.refreshed = False

    def answer(self, tp: TopicPartition, future: Future[Any]) -> None:
        from confluent_kafka import KafkaError

        if tp.partition == 2 and not self.refreshed:
            future.set_exception(KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION)))
        else:
            future.set_result(SimpleNamespace(offset=10 * tp.partition))

    def list_topics(self, topic: str, timeout: float) -> Any:
        self.refreshed = True
        return SimpleNamespace(topics={})


def test_a_partition_added_a_moment_ago_is_asked_again_after_a_metadata_refresh() -> None:
    """A fresh-clone run: failback grew a topic during the outage's repair, then its quiet
    check read the ends and ended exit 1 'unexpected KafkaException _UNKNOWN_PARTITION'."""
    admin = GrownTopicAdmin()
    got = list_offsets(admin, {("orders", p): OffsetSpec.latest()  # type: ignore[arg-type]
                               for p in range(3)})
    assert got == {("orders", 0): 0, ("orders", 1): 10, ("orders", 2): 20}
    assert admin.refreshed and admin.calls == 2

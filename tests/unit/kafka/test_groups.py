"""Group admin requests go out IN_FLIGHT at a time, and a coordinator that leaves some
unanswered is a clear Unreachable (exit 4) with the count, not a raw KafkaException.

The admin client here is a recorder of requests (what a broker answers is tested on the lab);
it counts how many requests are outstanding when each is sent."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from drctl.errors import ExitStatus, Unreachable
from drctl.kafka.groups import alter_offsets_many, committed_offsets, group_states, list_groups
from drctl.kafka.inflight import IN_FLIGHT
from drctl.retry import RetryPolicy


class Outstanding:
    """Futures that count as outstanding until their result is read."""

    def __init__(self, timed_out: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.open = 0
        self.most = 0
        self.timed_out = timed_out

    def future(self, group: str, value: Any, error: int | None = None) -> Future[Any]:
        self.open += 1
        self.most = max(self.most, self.open)
        fut: Future[Any] = Future()
        if error is not None:
            fut.set_exception(KafkaException(KafkaError(error)))
        elif group in self.timed_out:
            fut.set_exception(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
        else:
            fut.set_result(value)
        original = fut.result

        def result(timeout: float | None = None) -> Any:
            self.open -= 1
            return original(timeout)
        fut.result = result  # type: ignore[method-assign]
        return fut


class RecordingAdmin:
    def __init__(self, outstanding: Outstanding,
                 describe_errors: dict[str, list[int]] | None = None) -> None:
        self.out = outstanding
        self.sent = 0
        self.fetched: list[str] = []
        # per group, the errors its next DescribeGroups answers are, in turn
        self.describe_errors = describe_errors or {}
        self.unready_fetches: list[str] = []

    def list_consumer_group_offsets(self, requests: list[Any], request_timeout: float
                                    ) -> dict[str, Future[Any]]:
        self.sent += 1
        group = requests[0].group_id
        self.fetched.append(group)
        if self.describe_errors.get(group):  # its coordinator has not served it yet
            self.unready_fetches.append(group)
        tp = SimpleNamespace(topic="t", partition=0, offset=7)
        return {group: self.out.future(group, SimpleNamespace(topic_partitions=[tp]))}

    def alter_consumer_group_offsets(self, requests: list[Any], request_timeout: float
                                     ) -> dict[str, Future[Any]]:
        group = requests[0].group_id
        return {group: self.out.future(group, SimpleNamespace(topic_partitions=[]))}

    def describe_consumer_groups(self, groups: list[str], request_timeout: float
                                 ) -> dict[str, Future[Any]]:
        answers = {}
        for g in groups:
            errors = self.describe_errors.get(g) or []
            error = errors.pop(0) if errors else None
            answers[g] = self.out.future(g, SimpleNamespace(state="EMPTY", members=[]), error)
        return answers


FAST = RetryPolicy(initial_s=0.001, max_s=0.001, attempts=5)
GROUPS = [f"g{i:05d}" for i in range(3 * IN_FLIGHT + 17)]


def test_offset_reads_commits_and_describes_keep_at_most_in_flight_outstanding() -> None:
    out = Outstanding()
    admin = RecordingAdmin(out)
    offsets = committed_offsets(admin, GROUPS)  # type: ignore[arg-type]
    assert set(offsets) == set(GROUPS) and offsets["g00000"] == {("t", 0): 7}
    assert alter_offsets_many(admin, {g: {("t", 0): 1} for g in GROUPS}) == {}  # type: ignore[arg-type]
    assert len(group_states(admin, GROUPS)) == len(GROUPS)  # type: ignore[arg-type]
    assert out.open == 0
    assert out.most == IN_FLIGHT


def test_unanswered_offset_reads_are_unreachable_with_the_count() -> None:
    out = Outstanding(timed_out={"g00003", "g00007", "g01200"})
    admin = RecordingAdmin(out)
    with pytest.raises(Unreachable) as caught:
        committed_offsets(admin, GROUPS, timeout_s=5)  # type: ignore[arg-type]
    assert caught.value.exit_status == ExitStatus.UNREACHABLE
    # The coordinators are asked to describe the groups first (see the next tests).
    assert f"did not answer 2 of {IN_FLIGHT} DescribeGroups" in caught.value.message
    assert "within 5 s" in caught.value.message
    # It stops after the window that went unanswered: no further window waits as long.
    assert out.open == 0 and out.most == IN_FLIGHT
    assert admin.sent == 0


def test_an_offset_read_our_own_wait_gave_up_on_is_unreachable_too() -> None:
    """librdkafka's request timeout and the wait for its future are the same length; when
    the wait ends first the read is as unanswered, not a bare TimeoutError."""

    class Silent(RecordingAdmin):
        def list_consumer_group_offsets(self, requests: list[Any], request_timeout: float
                                        ) -> dict[str, Future[Any]]:
            self.sent += 1
            return {requests[0].group_id: Future()}  # never answered

    with pytest.raises(Unreachable) as caught:
        committed_offsets(Silent(Outstanding()), ["g1"], timeout_s=0.05)  # type: ignore[arg-type]
    assert "did not answer 1 of 1 OffsetFetch" in caught.value.message


def test_an_offset_read_waits_until_the_coordinator_serves_the_group() -> None:
    """librdkafka#5040: an admin client's OffsetFetch answered NOT_COORDINATOR or
    COORDINATOR_NOT_AVAILABLE crashes the process. A group's OffsetFetch is sent only after
    its DescribeGroups was answered by a coordinator serving it; an answer that says the
    group does not exist is still an answer."""
    admin = RecordingAdmin(Outstanding(), describe_errors={
        "g1": [KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
               KafkaError.COORDINATOR_NOT_AVAILABLE],
        "g2": [KafkaError.GROUP_ID_NOT_FOUND]})
    offsets = committed_offsets(admin, ["g1", "g2"], policy=FAST)  # type: ignore[arg-type]
    assert offsets == {"g1": {("t", 0): 7}, "g2": {("t", 0): 7}}
    assert admin.unready_fetches == []
    assert admin.fetched == ["g1", "g2"]  # one OffsetFetch each, after the coordinator served


def test_a_coordinator_that_never_serves_the_group_is_reported_not_asked() -> None:
    admin = RecordingAdmin(Outstanding(), describe_errors={
        "g1": [KafkaError.NOT_COORDINATOR] * 100})
    with pytest.raises(KafkaException) as caught:
        committed_offsets(admin, ["g1"], policy=FAST)  # type: ignore[arg-type]
    assert caught.value.args[0].code() == KafkaError.NOT_COORDINATOR
    assert admin.fetched == []


class ListingAdmin:
    """ListGroups answered per attempt: the groups listed, and the brokers that failed."""

    def __init__(self, answers: list[tuple[list[str], list[KafkaException]]]) -> None:
        self.answers = answers
        self.asked = 0

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        groups, errors = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        fut: Future[Any] = Future()
        fut.set_result(SimpleNamespace(
            valid=[SimpleNamespace(group_id=g) for g in groups], errors=errors))
        return fut


def _failed_broker() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TRANSPORT, "broker 2: connection refused"))


def test_a_broker_that_failed_its_listgroups_is_asked_again_never_left_out() -> None:
    """librdkafka returns the groups of the brokers that answered beside those that failed:
    a short list is not "no group there". Asked again, the whole list."""
    admin = ListingAdmin([(["a"], [_failed_broker()]), (["a", "b"], [])])
    assert list_groups(admin, policy=RetryPolicy(initial_s=0, max_s=0, attempts=3)) == [
        "a", "b"]
    assert admin.asked == 2


def test_a_broker_that_never_lists_its_groups_is_unreachable_exit_4() -> None:
    admin = ListingAdmin([([], [_failed_broker()])])
    with pytest.raises(Unreachable) as caught:
        list_groups(admin, policy=RetryPolicy(initial_s=0, max_s=0, attempts=3))
    assert caught.value.exit_status == ExitStatus.UNREACHABLE
    assert "did not list its consumer groups" in caught.value.message
    assert admin.asked == 3

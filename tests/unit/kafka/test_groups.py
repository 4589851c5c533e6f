"""What kafka/groups.py makes of the answers: requests go out IN_FLIGHT at a time; a transient
failure is asked again for the items it concerns until the deadline, then a clear exit 4
naming the cluster, what it did not answer and the cause; a permanent one ends a read at once
and is reported per group by a commit.

The admin client here is a recorder of requests answered in this process (drctl's child
process, and librdkafka's own answers, are tested against its mock cluster in
test_group_answers.py); it counts how many requests are outstanding when each is sent."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from drctl.errors import ExitStatus, Unreachable
from drctl.kafka import groups
from drctl.kafka.coordinator import InProcess
from drctl.kafka.groups import alter_offsets_many, committed_offsets, group_states, list_groups
from drctl.kafka.inflight import IN_FLIGHT
from drctl.kafka.retriable import transient
from tests.unit.support import FakeClock


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
        # per group, the errors its next commits are answered with, in turn
        self.commit_errors: dict[str, list[int]] = {}

    def list_consumer_group_offsets(self, requests: list[Any], request_timeout: float
                                    ) -> dict[str, Future[Any]]:
        self.sent += 1
        group = requests[0].group_id
        self.fetched.append(group)
        tp = SimpleNamespace(topic="t", partition=0, offset=7, error=None)
        return {group: self.out.future(group, SimpleNamespace(topic_partitions=[tp]))}

    def alter_consumer_group_offsets(self, requests: list[Any], request_timeout: float
                                     ) -> dict[str, Future[Any]]:
        group = requests[0].group_id
        errors = self.commit_errors.get(group) or []
        error = errors.pop(0) if errors else None
        tp = SimpleNamespace(topic="t", partition=0, offset=1,
                             error=None if error is None else KafkaError(error))
        return {group: self.out.future(group, SimpleNamespace(topic_partitions=[tp]))}

    def describe_consumer_groups(self, groups: list[str], request_timeout: float
                                 ) -> dict[str, Future[Any]]:
        answers = {}
        for g in groups:
            errors = self.describe_errors.get(g) or []
            error = errors.pop(0) if errors else None
            answers[g] = self.out.future(g, SimpleNamespace(state="EMPTY", members=[]), error)
        return answers


class Clients:
    """A cluster's clients whose group requests are answered in this process by `admin`."""

    def __init__(self, admin: Any, deadline_s: float = 1.0) -> None:
        self.name, self.bootstrap = "dc1", "dc1:9092"
        self.properties = {"bootstrap.servers": self.bootstrap}
        self.deadline_s = deadline_s
        self.said: list[str] = []
        self.notify = self.said.append
        self._admin = admin

    def coordinator(self) -> InProcess:
        return InProcess(self._admin)


GROUPS = [f"g{i:05d}" for i in range(3 * IN_FLIGHT + 17)]


def test_offset_reads_commits_and_describes_keep_at_most_in_flight_outstanding() -> None:
    out = Outstanding()
    clients = Clients(RecordingAdmin(out))
    offsets = committed_offsets(clients, GROUPS)
    assert set(offsets) == set(GROUPS) and offsets["g00000"] == {("t", 0): 7}
    assert alter_offsets_many(clients, {g: {("t", 0): 1} for g in GROUPS}) == {}
    assert len(group_states(clients, GROUPS)) == len(GROUPS)
    assert out.open == 0
    assert out.most == IN_FLIGHT
    assert clients.said == []  # nothing failed, nothing asked again


def test_unanswered_offset_reads_are_asked_again_then_exit_4_with_the_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # On the test's clock: with the machine's, a run under load (a test-matrix beside a
    # drill) ran out its 0.5 s between two answers and named 1,019 groups unanswered, not 3.
    clock = FakeClock()
    monkeypatch.setattr(groups, "time", SimpleNamespace(monotonic=clock, sleep=clock.sleep))
    out = Outstanding(timed_out={"g00003", "g00007", "g01200"})
    admin = RecordingAdmin(out)
    clients = Clients(admin, deadline_s=0.5)
    with pytest.raises(Unreachable) as caught:
        committed_offsets(clients, GROUPS)
    assert caught.value.exit_status == ExitStatus.UNREACHABLE
    assert caught.value.message.startswith(
        f"cluster 'dc1' at dc1:9092 did not answer the committed offsets (OffsetFetch) of 3 "
        f"of {len(GROUPS):,} group(s) for ")
    assert caught.value.message.endswith(": timed out.")
    # The window with unanswered requests stopped the next ones (they would only wait as
    # long); those were asked again with the three.
    assert admin.fetched[:IN_FLIGHT] == GROUPS[:IN_FLIGHT]
    assert admin.fetched[IN_FLIGHT:IN_FLIGHT + 2] == ["g00003", "g00007"]
    assert clients.said[0] == ("dc1 (dc1:9092): timed out; the committed offsets (OffsetFetch) "
                               f"of {len(GROUPS) - IN_FLIGHT + 2:,} group(s) asked again in "
                               "0.2s")
    assert out.open == 0


def test_an_offset_read_our_own_wait_gave_up_on_is_unanswered_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka's request timeout and the wait for its future are the same length; when
    the wait ends first the read is as unanswered, not a bare TimeoutError."""
    monkeypatch.setattr(groups, "_MIN_REQUEST_S", 0.05)

    class Silent(RecordingAdmin):
        def list_consumer_group_offsets(self, requests: list[Any], request_timeout: float
                                        ) -> dict[str, Future[Any]]:
            self.sent += 1
            return {requests[0].group_id: Future()}  # never answered

    admin = Silent(Outstanding())
    with pytest.raises(Unreachable) as caught:
        committed_offsets(Clients(admin, deadline_s=0.1), ["g1"])
    assert "did not answer the committed offsets (OffsetFetch) of 1 of 1 group(s)" \
        in caught.value.message
    assert "timed out" in caught.value.message


def test_a_coordinator_moving_is_asked_again_and_a_refusal_ends_a_read_at_once() -> None:
    admin = RecordingAdmin(Outstanding(), describe_errors={
        "g1": [KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR],
        "g2": [KafkaError.GROUP_AUTHORIZATION_FAILED]})
    clients = Clients(admin)
    assert group_states(clients, ["g1"])["g1"].state == "EMPTY"
    assert len(clients.said) == 2
    assert "the group coordinator is moving or still loading (COORDINATOR_LOAD_IN_PROGRESS)" \
        in clients.said[0]
    with pytest.raises(Unreachable) as caught:
        group_states(clients, ["g2"])
    assert not transient(caught.value)  # permanent: nothing waits for it
    assert caught.value.message == ("cluster 'dc1' at dc1:9092 refused the states "
                                    "(DescribeGroups): not authorized.")
    assert caught.value.hint and "grant it DESCRIBE" in caught.value.hint
    assert len(clients.said) == 2  # not asked again


def test_a_commit_moving_coordinator_is_retried_and_a_refused_group_is_reported() -> None:
    admin = RecordingAdmin(Outstanding())
    admin.commit_errors = {"g1": [KafkaError.NOT_COORDINATOR],
                           "g2": [KafkaError.GROUP_AUTHORIZATION_FAILED]}
    clients = Clients(admin)
    refused = alter_offsets_many(clients, {g: {("t", 0): 1} for g in ("g1", "g2", "g3")})
    assert list(refused) == ["g2"]
    assert refused["g2"].args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert clients.said == ["dc1 (dc1:9092): the group coordinator is moving or still loading "
                            "(NOT_COORDINATOR); the offset commits (OffsetCommit) of 1 group(s) "
                            "asked again in 0.2s"]


class ListingAdmin:
    """ListGroups answered per attempt: the groups listed, and the brokers that failed. With
    `moves` (on `clock`), each `(groups, start, end)` is a __consumer_offsets partition handed
    over from `start` to `end`: its groups are left out with no error, as Kafka's group
    coordinators do."""

    def __init__(self, answers: list[tuple[list[str], list[KafkaException]]],
                 clock: FakeClock | None = None,
                 moves: list[tuple[set[str], float, float]] | None = None) -> None:
        self.answers = answers
        self.asked = 0
        self.clock = clock or FakeClock()
        self.moves = moves or []
        self.asked_at: list[float] = []

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        groups, errors = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        now = self.clock()
        self.asked_at.append(now)
        hidden = {g for moved, start, end in self.moves if start <= now < end for g in moved}
        fut: Future[Any] = Future()
        fut.set_result(SimpleNamespace(
            valid=[SimpleNamespace(group_id=g) for g in groups if g not in hidden],
            errors=errors))
        return fut


def _listed(admin: ListingAdmin, clients: Clients | None = None) -> list[str]:
    """list_groups on the admin's fake clock: its pauses are counted, never slept."""
    return list_groups(clients or Clients(admin), clock=admin.clock, sleep=admin.clock.sleep)


def _failed_broker() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TRANSPORT, "broker 2: connection refused"))


def test_a_broker_that_failed_its_listgroups_is_asked_again_never_left_out() -> None:
    """librdkafka returns the groups of the brokers that answered beside those that failed:
    a short list is not "no group there". Asked again, the whole list."""
    admin = ListingAdmin([(["a"], [_failed_broker()]), (["a", "b"], [])])
    assert _listed(admin) == ["a", "b"]
    assert admin.asked == 3  # the failed answer, then two a pause apart that agree


def test_a_short_list_answered_without_an_error_is_listed_again_until_none_is_left_out(
        ) -> None:
    """Kafka's group coordinators leave out the groups of a __consumer_offsets partition
    being handed over, with no error: one answer is not the list. Every group an answer named
    is kept (a group gone meanwhile has no commits, which is harmless)."""
    admin = ListingAdmin([(["a"], []), (["a", "b"], []), (["a", "b"], [])])
    clients = Clients(admin)
    assert _listed(admin, clients) == ["a", "b"]
    assert admin.asked == 2  # the second left out nothing the first named
    assert clients.said == []
    # A group gone between two answers stays in the union, and a third answer is asked.
    gone = ListingAdmin([(["a", "b"], []), (["a"], []), (["a"], [])])
    assert _listed(gone) == ["a", "b"]
    assert gone.asked == 3


@pytest.mark.parametrize("move_s", [0.001, 0.5, 0.9])
def test_answers_compared_are_a_pause_apart_so_one_hand_over_cannot_hide_a_group(
        move_s: float) -> None:
    """Issue 58, finding 12: two answers asked back to back (0.03 ms apart) both came from
    inside one move of a __consumer_offsets partition, agreed, and the group stayed missing.
    The answers compared are LIST_PAUSE_S apart, longer than a hand-over."""
    clock = FakeClock()
    admin = ListingAdmin([(["a", "b"], [])], clock, moves=[({"b"}, 0.0, move_s)])
    assert _listed(admin) == ["a", "b"]
    assert admin.asked_at == [0.0, groups.LIST_PAUSE_S]
    assert clock.slept == [groups.LIST_PAUSE_S]


def test_a_move_after_the_first_answer_is_listed_again_a_pause_later() -> None:
    """Two partitions handed over in turn (a broker restarted, then another): the second
    answer leaves out a group the first named, so a third is asked, a pause later."""
    clock = FakeClock()
    admin = ListingAdmin([(["a", "b", "c"], [])], clock,
                         moves=[({"b"}, 0.0, 0.5), ({"c"}, 0.8, 1.3)])
    assert _listed(admin) == ["a", "b", "c"]
    assert admin.asked_at == [0.0, groups.LIST_PAUSE_S, 2 * groups.LIST_PAUSE_S]


def test_once_asks_for_one_answer_and_never_pauses() -> None:
    """A best-effort caller (the test suite's cleanup) takes one answer, with no pause."""
    clock = FakeClock()
    admin = ListingAdmin([(["a", "b"], [])], clock)
    assert list_groups(Clients(admin), once=True, clock=clock, sleep=clock.sleep) == ["a", "b"]
    assert admin.asked == 1 and clock.slept == []


def test_the_group_with_no_name_is_left_out_and_said() -> None:
    """Kafka keeps the offsets old consumers without a group.id committed under the group "";
    no request of drctl's client can name it."""
    admin = ListingAdmin([(["", "a"], [])])
    clients = Clients(admin)
    listing = groups.group_listing(clients, clock=admin.clock, sleep=admin.clock.sleep)
    assert listing.groups == ["a"] and list(listing.skipped) == [""]
    assert _listed(admin, clients) == ["a"]
    assert clients.said == [f"dc1: {groups.UNNAMEABLE['']}; skipped"]


def test_a_broker_that_never_lists_its_groups_is_unreachable_exit_4() -> None:
    admin = ListingAdmin([([], [_failed_broker()])])
    with pytest.raises(Unreachable) as caught:
        list_groups(Clients(admin, deadline_s=0.5))
    assert caught.value.exit_status == ExitStatus.UNREACHABLE
    assert caught.value.message.startswith(
        "cluster 'dc1' at dc1:9092 did not answer the list of consumer groups (ListGroups) "
        "for ")
    assert caught.value.message.endswith(": connection refused.")
    assert admin.asked >= 2


class RefusingAdmin(RecordingAdmin):
    """librdkafka's Python client as it is: a request naming the group "" raises at once
    (ValueError), before any future exists."""

    def list_consumer_group_offsets(self, requests: list[Any], request_timeout: float
                                    ) -> dict[str, Future[Any]]:
        if requests[0].group_id == "":
            raise ValueError("'group_id' cannot be empty")
        return super().list_consumer_group_offsets(requests, request_timeout)

    def describe_consumer_groups(self, groups: list[str], request_timeout: float
                                 ) -> dict[str, Future[Any]]:
        if "" in groups:
            raise ValueError("'group_id' cannot be empty")
        return super().describe_consumer_groups(groups, request_timeout)


def test_an_item_the_client_refuses_at_once_is_that_items_answer_not_the_lanes_end() -> None:
    """A synchronous refusal stopped the lane of the child's request that met it: the other
    groups of its windows were never answered, and every command asking the cluster ended
    exit 4 after the deadline. Now it is the group's own permanent failure."""
    out = Outstanding()
    clients = Clients(RefusingAdmin(out))
    named = ["", *GROUPS]
    with pytest.raises(Unreachable) as caught:  # a read of a refused group: refused at once
        _finished(lambda: committed_offsets(clients, named))
    assert "refused the committed offsets (OffsetFetch)" in caught.value.message
    assert clients.said == []  # not asked again: permanent
    refused: dict[str, KafkaException] = {}
    states = _finished(lambda: list(groups._ask(clients, "describe", named, key=lambda g: g,
                                                refused=refused)))
    assert {g for g, _ in states} == set(GROUPS)  # every other group answered
    assert list(refused) == [""]
    assert "client refused it: ValueError: 'group_id' cannot be empty" in str(refused[""])


def _finished(call: Any) -> Any:
    """`call()`'s result (or its error), run in a thread: a request a lane left unanswered
    waits for ever, which must fail the test, not hang it."""
    import threading

    done: list[Any] = []

    def run() -> None:
        try:
            done.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread
            done.append((False, exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert done, "the request was never answered"
    ok, value = done[0]
    if not ok:
        raise value
    return value

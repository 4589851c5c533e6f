"""No answer of a group coordinator kills drctl (issue 43): every error code a restarting or
moving coordinator gives, and a dropped connection, pushed onto the OffsetFetch,
DescribeGroups, ListGroups and OffsetCommit answers of librdkafka's own mock cluster
(mock_cluster.py), through drctl's group reads and commits (kafka/groups.py). Once: the
request is asked again and answers. For good: exit 4 naming the cluster, what it did not
answer and the cause. A refusal: at once. The process never dies — librdkafka's admin client
runs in a child process (kafka/coordinator.py), and the first test shows why it must."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from drctl.errors import ExitStatus, Unreachable
from drctl.kafka.clients import ClusterClients
from drctl.kafka.groups import alter_offsets_many, committed_offsets, group_states, list_groups
from drctl.kafka.retriable import transient
from tests.unit.kafka.mock_cluster import (
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    GroupApis,
    MockCluster,
)

# An OffsetFetch answered with one of these kills librdkafka 2.16's admin client (#5040).
CRASHING = [KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
            KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
            KafkaError.BROKER_NOT_AVAILABLE, KafkaError.REPLICA_NOT_AVAILABLE,
            KafkaError.KAFKA_STORAGE_ERROR]
# Transient too, answered as errors: loading, timed out; and a dropped connection.
TRANSIENT = [*CRASHING, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.REQUEST_TIMED_OUT,
             KafkaError._TRANSPORT]
APIS = {OFFSET_FETCH: "OffsetFetch", OFFSET_COMMIT: "OffsetCommit",
        DESCRIBE_GROUPS: "DescribeGroups", LIST_GROUPS: "ListGroups"}
GROUPS = ["g1", "g2"]


class Mock:
    def __init__(self) -> None:
        self.cluster = MockCluster()
        self.cluster.create_topic("t", 2)
        self.apis = GroupApis(self.cluster, GROUPS)

    def push(self, api: int, *codes: int) -> None:
        (self.apis if api in (DESCRIBE_GROUPS, LIST_GROUPS) else self.cluster).push(api, *codes)

    def clear(self) -> None:
        for api in (OFFSET_FETCH, OFFSET_COMMIT):
            self.cluster.clear(api)
        self.apis.clear()

    def committed(self, group: str) -> list[int]:
        """The group's commits on t, read as its own consumer would (explicit partitions:
        the mock answers no OffsetFetch for all of a group's partitions)."""
        consumer = Consumer({"bootstrap.servers": self.apis.bootstrap, "group.id": group})
        try:
            return [tp.offset for tp in consumer.committed(
                [TopicPartition("t", 0), TopicPartition("t", 1)], timeout=10)]
        finally:
            consumer.close()


@pytest.fixture(scope="module")
def mock() -> Iterator[Mock]:
    running = Mock()
    yield running
    running.apis.close()
    running.cluster.close()


@pytest.fixture
def clients(mock: Mock) -> Iterator[ClusterClients]:
    said: list[str] = []
    made = ClusterClients("mock", {"bootstrap.servers": mock.apis.bootstrap}, deadline_s=10,
                          notify=said.append)
    made.said = said  # type: ignore[attr-defined]
    yield made
    made.close()
    mock.clear()


def _call(api: int, clients: ClusterClients) -> Callable[[], Any]:
    """drctl's group read or commit that sends `api`."""
    return {
        OFFSET_FETCH: lambda: committed_offsets(clients, GROUPS),
        OFFSET_COMMIT: lambda: alter_offsets_many(
            clients, {g: {("t", 0): 5, ("t", 1): 7} for g in GROUPS}),
        DESCRIBE_GROUPS: lambda: group_states(clients, GROUPS),
        LIST_GROUPS: lambda: list_groups(clients),
    }[api]


def test_the_raw_admin_call_dies_on_a_crashing_answer_so_drctl_keeps_it_in_a_child(
        mock: Mock, clients: ClusterClients) -> None:
    """librdkafka#5040 as it is: the admin client's process dies of SIGSEGV. The same read
    through drctl is asked again in a new child and answers."""
    script = textwrap.dedent(f"""
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({{"bootstrap.servers": "{mock.apis.bootstrap}"}})
        [future] = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("g1")], request_timeout=10).values()
        future.result(15)
        print("answered")
    """)
    mock.push(OFFSET_FETCH, KafkaError.NOT_COORDINATOR)
    raw = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert raw.returncode == -signal.SIGSEGV, (raw.returncode, raw.stdout, raw.stderr[-2000:])
    assert "answered" not in raw.stdout

    mock.push(OFFSET_FETCH, KafkaError.NOT_COORDINATOR)
    assert committed_offsets(clients, ["g1"]) == {"g1": {}}
    assert clients.coordinator().started == 2  # the first child died, the second answered
    assert clients.said == [  # type: ignore[attr-defined]
        f"mock ({mock.apis.bootstrap}): the Kafka client stopped on an error answer from the "
        "group coordinator (SIGSEGV; librdkafka#5040); the committed offsets (OffsetFetch) of "
        "1 group(s) asked again in 0.2s"]


@pytest.mark.parametrize("api", list(APIS), ids=list(APIS.values()))
@pytest.mark.parametrize("code", TRANSIENT, ids=lambda c: KafkaError(c).name())
def test_an_error_answer_once_is_asked_again_and_answers(
        mock: Mock, clients: ClusterClients, api: int, code: int) -> None:
    if api == OFFSET_COMMIT:  # a commit of other offsets first: the retried one must land
        assert alter_offsets_many(clients, {g: {("t", 0): 1, ("t", 1): 1} for g in GROUPS}) \
            == {}
    mock.push(api, code)
    answer = _call(api, clients)()
    if api == OFFSET_FETCH:
        assert answer == {g: {} for g in GROUPS}
    elif api == OFFSET_COMMIT:
        assert answer == {}  # no group refused
        assert [mock.committed(g) for g in GROUPS] == [[5, 7], [5, 7]]
    elif api == DESCRIBE_GROUPS:
        assert {g: (s.state, s.members) for g, s in answer.items()} == {
            g: ("EMPTY", 0) for g in GROUPS}
    else:
        assert answer == GROUPS
    said = clients.said  # type: ignore[attr-defined]
    # A dropped connection can leave the other requests on it unanswered until their
    # timeout, and the next attempt may meet the connection still down: asked again more
    # than once, then answered.
    assert len(said) == 1 or (code == KafkaError._TRANSPORT and said), said
    assert all(line.startswith(f"mock ({mock.apis.bootstrap}): ") for line in said), said
    assert "asked again in 0.2s" in said[0]
    crashed = api == OFFSET_FETCH and code in CRASHING
    assert clients.coordinator().started == (2 if crashed else 1)
    if crashed:
        assert "the Kafka client stopped on an error answer from the group coordinator " \
               "(SIGSEGV; librdkafka#5040)" in said[0]


@pytest.mark.parametrize("api", list(APIS), ids=list(APIS.values()))
@pytest.mark.parametrize("code", TRANSIENT, ids=lambda c: KafkaError(c).name())
def test_an_error_answer_that_lasts_is_exit_4_naming_the_cluster_and_the_cause(
        mock: Mock, clients: ClusterClients, api: int, code: int) -> None:
    crashed = api == OFFSET_FETCH and code in CRASHING
    # The deadline bounds every wait (a child's start-up aside): a crash is named when one
    # came within it, which on a loaded machine takes more than a second.
    clients.deadline_s = 3.0 if crashed else 1.0
    mock.push(api, *[code] * 100)
    with pytest.raises(Unreachable) as caught:
        _call(api, clients)()
    assert caught.value.exit_status == ExitStatus.UNREACHABLE
    message = caught.value.message
    assert message.startswith(f"cluster 'mock' at {mock.apis.bootstrap} did not answer "), \
        message
    assert f"({APIS[api]})" in message
    if crashed:
        assert message.endswith("the Kafka client stopped on an error answer from the group "
                                "coordinator (SIGSEGV; librdkafka#5040).")
    elif code == KafkaError._TRANSPORT:  # or the requests left hanging on it, timed out
        assert message.endswith((": connection lost.", ": timed out.")), message
    else:
        assert KafkaError(code).name() in message or "timed out" in message, message
    # It waited out the deadline, as drctl measured its wait, and no longer than the
    # attempt under way (a child's start, one request): never judged by the wall clock.
    waited, under = caught.value.waited_s, caught.value.deadline_s
    assert under == clients.deadline_s and waited is not None, caught.value
    assert under - 0.5 <= waited <= under + 6, (waited, under)


@pytest.mark.parametrize("api", list(APIS), ids=list(APIS.values()))
def test_a_refusal_ends_a_read_at_once_and_is_reported_for_a_commit(
        mock: Mock, clients: ClusterClients, api: int) -> None:
    mock.push(api, KafkaError.GROUP_AUTHORIZATION_FAILED)
    if api == OFFSET_COMMIT:
        refused = _call(api, clients)()
        assert set(refused) <= set(GROUPS) and refused
        assert {e.args[0].code() for e in refused.values()} == {
            KafkaError.GROUP_AUTHORIZATION_FAILED}
    else:
        with pytest.raises(Unreachable) as caught:
            _call(api, clients)()
        assert not transient(caught.value)
        assert caught.value.message.startswith(
            f"cluster 'mock' at {mock.apis.bootstrap} refused the ")
        assert caught.value.message.endswith(": not authorized.")
        assert caught.value.hint and "grant it DESCRIBE" in caught.value.hint
    assert clients.said == []  # type: ignore[attr-defined]  # never asked again


def test_a_broker_down_is_waited_for_within_the_deadline_and_read_once_back(
        mock: Mock, clients: ClusterClients) -> None:
    assert committed_offsets(clients, GROUPS) == {g: {} for g in GROUPS}
    mock.cluster.broker_down()
    clients.deadline_s = 1.0
    try:
        with pytest.raises(Unreachable) as caught:
            committed_offsets(clients, GROUPS)
        assert "did not answer the committed offsets (OffsetFetch) of 2 of 2 group(s)" \
            in caught.value.message
    finally:
        mock.cluster.broker_up()
    clients.deadline_s = 10.0
    assert committed_offsets(clients, GROUPS) == {g: {} for g in GROUPS}


def test_the_child_ends_with_drctl_even_when_drctl_is_killed(mock: Mock) -> None:
    """SIGKILL leaves the child's stdin closed: it exits. The configuration went over that
    pipe: neither its command line nor its environment holds a secret."""
    script = textwrap.dedent(f"""
        import time
        from drctl.kafka.clients import ClusterClients
        from drctl.kafka.groups import list_groups
        clients = ClusterClients("mock", {{"bootstrap.servers": "{mock.apis.bootstrap}",
                                          "client.id": "not-a-secret",
                                          "ssl.key.password": "s3cret-pass"}})
        list_groups(clients)
        print(clients.coordinator()._proc.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              text=True, cwd=os.getcwd())
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        with open(f"/proc/{child}/cmdline", "rb") as f:
            assert b"s3cret" not in f.read()
        with open(f"/proc/{child}/environ", "rb") as f:
            assert b"s3cret" not in f.read()
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
    end = time.monotonic() + 10
    while time.monotonic() < end and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()  # a zombie has ended
    except FileNotFoundError:
        return False


def test_a_child_that_stops_answering_is_killed_and_asked_again_in_a_new_one(
        mock: Mock, clients: ClusterClients, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child stuck (librdkafka hung, not crashed) is not waited for forever: once it is
    silent past its request's timeout it is killed, and a new one answers."""
    from drctl.kafka import coordinator

    monkeypatch.setattr(coordinator, "_STUCK_AFTER_S", 0.5)
    assert committed_offsets(clients, GROUPS) == {g: {} for g in GROUPS}
    stuck = clients.coordinator()._proc
    assert stuck is not None
    os.kill(stuck.pid, signal.SIGSTOP)
    assert committed_offsets(clients, GROUPS) == {g: {} for g in GROUPS}
    assert clients.coordinator().started == 2
    assert stuck.wait(10) == -signal.SIGKILL
    assert clients.said == [  # type: ignore[attr-defined]
        f"mock ({mock.apis.bootstrap}): the Kafka client for the group coordinators stopped "
        "answering; the committed offsets (OffsetFetch) of 2 group(s) asked again in 0.2s"]

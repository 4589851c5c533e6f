"""A procedure runs again when a cluster drops mid-way (drctl/rerun.py), and only then: the
clusters are waited for within --deadline (never --timeout), then it runs again."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from drctl import rerun
from drctl.config import parse_config
from drctl.context import OpsContext
from drctl.errors import CheckFailed, ExitStatus, Unreachable
from drctl.kafka.clients import ClusterClients
from drctl.kafka.records import ReadTimeout
from tests.unit.support import FakeClock

CONFIG = parse_config({
    "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
    "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"},
    "retry": {"initial_s": 1, "max_s": 4, "attempts": 4}})


def _ctx(notify: Any = lambda _: None) -> OpsContext:
    return OpsContext(CONFIG, lambda name: None, lambda cluster: None,  # type: ignore[arg-type]
                      None, notify)


def test_a_read_timeout_waits_for_the_clusters_then_runs_it_again() -> None:
    calls: list[int] = []
    said: list[str] = []
    waits: list[int] = []
    clock = FakeClock()

    def run() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ReadTimeout("reading 2 partition range(s) timed out after 60 s")
        return "done"

    def back() -> None:  # the broker is back after 12 s
        waits.append(1)
        clock.now += 12

    assert rerun.rerun_while_dropped(run, _ctx(said.append), ("dc1", "dc2"), 30, "failback",
                                     await_back=back, sleep=clock.sleep, clock=clock) == "done"
    assert len(calls) == 2 and waits == [1]
    assert said[0] == ("Failback stopped at a step: a read timed out (reading 2 partition "
                       "range(s) timed out after 60 s); waiting up to 30s for dc1 and dc2 "
                       "to answer")
    assert said[1] == "Running failback again: it continues after the last step recorded (run 2)"
    assert clock.now == 12  # no backoff on top of a wait that saw the outage


def test_a_cluster_silent_past_the_deadline_ends_it_with_exit_4() -> None:
    """The waiting itself, against a loopback port nothing listens on: retried within the
    deadline (each retry a line naming the cluster and its address), then exit 4."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = parse_config({
        "clusters": {"dc1": {"bootstrap.servers": f"127.0.0.1:{port}"},
                     "dc2": {"bootstrap.servers": f"127.0.0.1:{port}"}},
        "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"},
        "retry": {"initial_s": 0.2}})
    said: list[str] = []
    ctx = OpsContext(config, notify=said.append)
    calls: list[int] = []

    def run() -> None:
        calls.append(1)
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused"))

    with pytest.raises(Unreachable) as info:
        rerun.rerun_while_dropped(run, ctx, ("dc1", "dc2"), 1.0, "failback")
    assert calls == [1]
    assert info.value.exit_status == ExitStatus.UNREACHABLE
    assert info.value.message.startswith(
        f"Failback stopped: cluster 'dc1' at 127.0.0.1:{port} did not answer: connection "
        "refused")
    assert info.value.hint == ("Bring 'dc1' back, then run it again: it continues after the "
                               "last step recorded.")
    retries = [line for line in said if line.startswith(f"dc1 (127.0.0.1:{port}): ")]
    assert retries and all("connection refused; attempt" in line for line in retries)


def test_a_step_that_keeps_failing_with_the_clusters_up_stops_after_the_attempts() -> None:
    clock = FakeClock()
    calls: list[int] = []

    def run() -> None:
        calls.append(1)
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Timed out"))

    with pytest.raises(Unreachable) as info:
        rerun.rerun_while_dropped(run, _ctx(), ("dc1", "dc2"), 30, "failback",
                                  await_back=lambda: None, sleep=clock.sleep, clock=clock)
    assert len(calls) == 4  # the policy's attempts
    assert clock.now == 1 + 2 + 4  # its backoff between runs: the clusters answered at once
    assert "a step failed 4 times with the clusters answering again" in info.value.message
    assert info.value.detail and "Timed out" in info.value.detail


@pytest.mark.parametrize("error", [CheckFailed("producers write"), ValueError("a bug")])
def test_other_failures_end_it_at_once(error: Exception) -> None:
    calls: list[int] = []

    def run() -> Any:
        calls.append(1)
        raise error

    with pytest.raises(type(error)):
        rerun.rerun_while_dropped(run, _ctx(), ("dc1", "dc2"), 30, "failback",
                                  await_back=lambda: None, sleep=lambda _: None)
    assert calls == [1]


def test_a_cluster_down_before_it_got_going_is_not_waited_for() -> None:
    calls: list[int] = []

    def run() -> None:
        calls.append(1)
        raise Unreachable("Cluster 'dc1' is unreachable. Failback needs both clusters.")

    def back() -> None:
        raise AssertionError("not waited for")

    with pytest.raises(Unreachable, match="needs both clusters"):
        rerun.rerun_while_dropped(run, _ctx(), ("dc1", "dc2"), 30, "failback",
                                  started=lambda: False, await_back=back,
                                  sleep=lambda _: None)
    assert calls == [1]


@pytest.mark.parametrize("code", [KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
                                  KafkaError._TRANSPORT, KafkaError.NOT_COORDINATOR])
def test_a_restarted_broker_s_answers_run_it_again(code: int) -> None:
    """A broker back from a restart answers with leader epochs the client's metadata does not
    know yet: the procedure runs again (with new clients), it does not end as unexpected."""
    calls: list[int] = []

    def run() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise KafkaException(KafkaError(code))
        return "done"

    clock = FakeClock()
    assert rerun.rerun_while_dropped(run, _ctx(), ("dc1", "dc2"), 30, "failback",
                                     await_back=lambda: None, sleep=clock.sleep,
                                     clock=clock) == "done"
    assert len(calls) == 2


def test_clients_are_built_afresh_for_the_run_again() -> None:
    built: list[str] = []

    def clients(name: str) -> ClusterClients:
        built.append(name)
        return ClusterClients(name, {"bootstrap.servers": "x"})

    ctx = OpsContext(CONFIG, clients)
    calls: list[int] = []

    def run() -> str:
        ctx.clients("dc1")
        calls.append(1)
        if len(calls) == 1:
            raise ReadTimeout("timed out")
        return "done"

    assert rerun.rerun_while_dropped(run, ctx, ("dc1", "dc2"), 30, "failback",
                                     await_back=lambda: None, sleep=lambda _: None) == "done"
    assert built == ["dc1", "dc1"]


def test_a_step_that_waited_the_deadline_for_a_cluster_ends_it_without_a_second_wait() -> None:
    from drctl.kafka.causes import Cause
    from drctl.kafka.clients import ClusterUnreachable

    def run() -> None:
        raise ClusterUnreachable("dc2", "b:9092", Cause.REFUSED,
                                 "cluster 'dc2' at b:9092 did not answer: connection refused "
                                 "(16 attempt(s) over 30 s).", detail="Connect to ipv4#…")

    def back() -> None:
        raise AssertionError("waited twice")

    with pytest.raises(Unreachable) as info:
        rerun.rerun_while_dropped(run, _ctx(), ("dc1", "dc2"), 30, "failback",
                                  await_back=back, sleep=lambda _: None)
    assert info.value.message == ("Failback stopped: cluster 'dc2' at b:9092 did not answer: "
                                  "connection refused (16 attempt(s) over 30 s).")
    assert info.value.hint == ("Bring 'dc2' back, then run it again: it continues after the "
                               "last step recorded.")
    assert info.value.detail == "Connect to ipv4#…"


def test_a_connect_worker_silent_for_the_deadline_ends_it_at_once_naming_connect() -> None:
    """Issue 43: Connect is not a Kafka cluster. Its client waited for it for the deadline
    already; failback is not run again (it was, up to the policy's 16 runs, each waiting the
    deadline again, while the Kafka clusters answered)."""
    from drctl.kafka.connect_rest import ConnectUnreachable

    calls: list[int] = []
    waits: list[int] = []

    def run() -> None:
        calls.append(1)
        raise ConnectUnreachable("http://connect:8083", "Kafka Connect at http://connect:8083 "
                                 "did not answer: connection refused (12 attempt(s) over 30 s).",
                                 "Check that the Connect worker runs.")

    with pytest.raises(Unreachable) as info:
        rerun.rerun_while_dropped(run, _ctx(), ("dc1", "dc2"), 30, "failback",
                                  await_back=lambda: waits.append(1))
    assert calls == [1] and waits == []
    assert info.value.exit_status == ExitStatus.UNREACHABLE
    assert info.value.message == ("Failback stopped: Kafka Connect at http://connect:8083 did "
                                  "not answer: connection refused (12 attempt(s) over 30 s).")
    assert info.value.hint == ("Bring the Kafka Connect worker (http://connect:8083) back, then "
                               "run it again: it continues after the last step recorded.")


def test_a_refusal_is_not_waited_for() -> None:
    from drctl.kafka.clients import ClusterRefused

    calls: list[int] = []

    def run() -> None:
        calls.append(1)
        raise ClusterRefused("Listing offsets of orders on 'dc1' was refused: not authorized "
                             "(TOPIC_AUTHORIZATION_FAILED).")

    with pytest.raises(ClusterRefused):
        rerun.rerun_while_dropped(run, _ctx(), ("dc1", "dc2"), 30, "failback",
                                  await_back=lambda: None)
    assert calls == [1]

"""The guard (drctl/ops/steps/guard.py) paces failed rounds with the retry policy."""

from __future__ import annotations

import re

import pytest

from drctl.context import OpsContext


def test_guard_paces_failed_rounds_with_the_retry_policy_and_says_when_it_recovers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from drctl.config import parse_config
    from drctl.ops.steps.guard import Guard, RoundResult, run_guard

    config = parse_config({
        "clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "a", "target": "b"},
        "retry": {"initial_s": 0.01, "max_s": 0.02}})
    rounds = iter([RoundResult(error="no answer"), RoundResult(error="no answer"),
                   RoundResult(error="no answer"), RoundResult(groups=1)])
    stop = threading.Event()

    def next_round(self: Guard) -> RoundResult:
        result = next(rounds)
        if result.error is None:
            stop.set()
        return result

    monkeypatch.setattr(Guard, "run_round", next_round)
    notes: list[str] = []
    run_guard(OpsContext.from_config(config, notes.append), interval_s=0.001, stop=stop)
    # Doubling from the policy's first wait up to its cap, then back to the interval.
    assert [n.split("; ")[1] for n in notes[:3]] == [
        "attempt 1, retrying in 0.01s", "attempt 2, retrying in 0.02s",
        "attempt 3, retrying in 0.02s"]
    assert notes[3] == "guard: recovered after 3 failed round(s)"
    assert notes[4].startswith("guard: 0 positions of 1 groups")


def test_a_failed_round_names_the_cluster_and_its_address() -> None:
    """A cluster that does not answer: each retry and the failed round's line say which
    cluster, at which address, and why."""
    from drctl.config import parse_config
    from drctl.ops.steps.guard import run_guard

    config = parse_config({
        # Port 9 on loopback: nothing listens there.
        "clusters": {"a": {"bootstrap.servers": "127.0.0.1:9"},
                     "b": {"bootstrap.servers": "127.0.0.1:9"}},
        "replication": {"kind": "mirrormaker2", "source": "a", "target": "b"},
        "retry": {"initial_s": 0.2}})
    notes: list[str] = []
    (result,) = run_guard(OpsContext.from_config(config, notes.append), once=True,
                          deadline_s=1.0)
    assert result.error is not None
    assert result.error.startswith("cluster 'a' at 127.0.0.1:9 did not answer: connection "
                                   "refused (")
    assert "a (127.0.0.1:9): connection refused; attempt 1, retrying in 0.2s" in notes
    # --once: one round, and nothing follows it — no "retrying" that never happens.
    assert notes[-1].startswith("guard: the round failed (cluster 'a' at 127.0.0.1:9 ")
    assert "retrying" not in notes[-1]


def test_a_client_error_mid_round_names_the_cluster_it_came_from() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from drctl.config import parse_config
    from drctl.ops.steps.guard import Guard

    config = parse_config({
        "clusters": {"a": {"bootstrap.servers": "src:9092"},
                     "b": {"bootstrap.servers": "dst:9092"}},
        "replication": {"kind": "mirrormaker2", "source": "a", "target": "b"}})

    class Clients:
        def __init__(self, name: str) -> None:
            self.name, self.bootstrap = name, f"{'src' if name == 'a' else 'dst'}:9092"

        def coordinator(self) -> object:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT,
                                            "src:9092/1: Disconnected"))

    ctx = OpsContext(config, Clients)  # type: ignore[arg-type]
    # Both clusters answered in an earlier round.
    guard = Guard(ctx, topic_ready=True, connected=True)
    first = ctx.source
    result = guard.run_round()
    assert result.error == "a (src:9092): connection lost"  # the cause in words
    # The next round starts afresh: new clients, both clusters asked again.
    assert not guard.connected and ctx.source is not first


def test_a_round_waits_on_a_cluster_no_longer_than_the_guard_deadline() -> None:
    """A round's group listing is retried for the guard's --deadline: a source that stops
    answering fails the round then (the next round tries again), not after 30 s."""
    from concurrent.futures import Future

    from drctl.config import parse_config
    from drctl.kafka.coordinator import InProcess
    from drctl.ops.steps.guard import Guard

    config = parse_config({
        "clusters": {"a": {"bootstrap.servers": "src:9092"},
                     "b": {"bootstrap.servers": "dst:9092"}},
        "replication": {"kind": "mirrormaker2", "source": "a", "target": "b"}})
    asked: list[float] = []

    class Admin:
        def list_consumer_groups(self, request_timeout: float) -> Future[object]:
            asked.append(request_timeout)
            failed: Future[object] = Future()
            failed.set_exception(TimeoutError("no answer"))
            return failed

    class Clients:
        def __init__(self, name: str) -> None:
            self.name, self.bootstrap = name, f"{name}:9092"
            self.properties = {"bootstrap.servers": self.bootstrap}
            self.deadline_s, self.notify = 30.0, None

        def coordinator(self) -> InProcess:
            return InProcess(Admin())

    # Both clusters answered in an earlier round.
    guard = Guard(OpsContext(config, Clients), deadline_s=1.0,  # type: ignore[arg-type]
                  topic_ready=True, connected=True)
    result = guard.run_round()
    assert len(asked) > 1  # asked again within it
    # The error says how long drctl waited, as it measured it: the guard's 1 s deadline (a
    # loaded machine's last wait may end a little after it), not the clients' 30 s.
    assert result.error is not None
    said = re.fullmatch(r"cluster 'a' at a:9092 did not answer the list of consumer groups "
                        r"\(ListGroups\) for ([0-9.]+)s: timed out\.", result.error)
    assert said is not None, result.error
    assert 1.0 <= float(said.group(1)) < 30.0

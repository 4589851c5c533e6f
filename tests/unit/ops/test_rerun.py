"""A procedure runs again when a cluster drops mid-way (ops/rerun.py), and only then."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from drctl.config import parse_config
from drctl.context import OpsContext
from drctl.errors import CheckFailed, Unreachable
from drctl.kafka.records import ReadTimeout
from drctl.ops import rerun

CONFIG = parse_config({
    "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
    "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"},
    "retry": {"initial_s": 1, "max_s": 4, "attempts": 10}})
def _ctx(notify: Any = lambda _: None) -> OpsContext:
    return OpsContext(CONFIG, lambda name: None, lambda cluster: None,  # type: ignore[arg-type]
                      None, notify)


@pytest.fixture
def silent(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """What `silent_clusters` answers, one list per call."""
    answers: list[list[str]] = []
    monkeypatch.setattr(rerun, "silent_clusters",
                        lambda ctx, clusters: answers.pop(0) if answers else [])
    return answers


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_read_timeout_runs_it_again_and_says_who_dropped(silent: list[list[str]]) -> None:
    calls: list[int] = []
    said: list[str] = []
    silent.append(["dc2"])

    def run() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ReadTimeout("reading 2 partition range(s) timed out after 60 s")
        return "done"

    clock = Clock()
    assert rerun.rerun_while_dropped(run, _ctx(said.append), ("dc1", "dc2"), 600, "failback",
                                     sleep=clock.sleep, clock=clock) == "done"
    assert len(calls) == 2
    assert said[0].startswith("'dc2' stopped answering (reading 2 partition range(s)")
    assert "running failback again in 1s" in said[0]


def test_it_gives_up_at_the_timeout_naming_the_cluster(silent: list[list[str]]) -> None:
    silent.extend([["dc1"]] * 100)
    clock = Clock()

    def run() -> None:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Connection refused"))

    with pytest.raises(Unreachable) as info:
        rerun.rerun_while_dropped(run, _ctx(), ("dc1", "dc2"), 10, "failback",
                                  sleep=clock.sleep, clock=clock)
    assert "Failback stopped: 'dc1' did not answer" in info.value.message
    assert clock.now <= 10
    assert "continues after the last step recorded" in (info.value.hint or "")


@pytest.mark.parametrize("error", [CheckFailed("producers write"), ValueError("a bug")])
def test_other_failures_end_it_at_once(error: Exception, silent: list[list[str]]) -> None:
    calls: list[int] = []

    def run() -> Any:
        calls.append(1)
        raise error

    with pytest.raises(type(error)):
        rerun.rerun_while_dropped(run, _ctx(), ("dc1", "dc2"), 600, "failback",
                                  sleep=lambda _: None)
    assert calls == [1]


def test_a_cluster_down_before_it_got_going_is_not_waited_for(silent: list[list[str]]) -> None:
    calls: list[int] = []

    def run() -> None:
        calls.append(1)
        raise Unreachable("Cluster 'dc1' is unreachable. Failback needs both clusters.")

    with pytest.raises(Unreachable, match="needs both clusters"):
        rerun.rerun_while_dropped(run, _ctx(), ("dc1", "dc2"), 600, "failback",
                                  started=lambda: False, sleep=lambda _: None)
    assert calls == [1]


@pytest.mark.parametrize("code", [KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
                                  KafkaError._TRANSPORT, KafkaError.NOT_COORDINATOR])
def test_a_restarted_broker_s_answers_run_it_again(code: int, silent: list[list[str]]) -> None:
    """A broker back from a restart answers with leader epochs the client's metadata does not
    know yet: the procedure runs again (with new clients), it does not end as unexpected."""
    calls: list[int] = []

    def run() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise KafkaException(KafkaError(code))
        return "done"

    clock = Clock()
    assert rerun.rerun_while_dropped(run, _ctx(), ("dc1", "dc2"), 600, "failback",
                                     sleep=clock.sleep, clock=clock) == "done"
    assert len(calls) == 2

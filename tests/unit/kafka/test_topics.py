"""Topics drctl grows are used at once (a failback copies gap records into the new
partitions): grow_topics returns only when the broker serves them. A config drctl sets is
relied on at once (the flow's lock topic stamped by its broker): set_topic_config returns
once a describe shows it."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from drctl.kafka.topics import grow_topics, set_topic_config


class LaggingBroker:
    """An admin client on a cluster whose broker serves a grown topic's new partition count
    only `lag` metadata answers after the controller answered CreatePartitions."""

    def __init__(self, partitions: int, lag: int) -> None:
        self.served = self.committed = partitions
        self.lag = lag

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        if self.served < self.committed:
            self.lag -= 1
            if self.lag < 0:
                self.served = self.committed
        leader = SimpleNamespace(leader=1)
        return SimpleNamespace(topics={"orders": SimpleNamespace(
            partitions=dict.fromkeys(range(self.served), leader), error=None)})

    def create_partitions(self, new: list[Any], request_timeout: float = -1
                          ) -> dict[str, Future[Any]]:
        self.committed = new[0].new_total_count
        done: Future[Any] = Future()
        done.set_result(None)
        return {new[0].topic: done}


def _clients(broker: LaggingBroker) -> Any:
    return SimpleNamespace(name="primary", admin=lambda **_: broker, deadline_s=30.0,
                           notify=None)


def test_grow_returns_once_the_broker_serves_the_new_partitions() -> None:
    broker = LaggingBroker(partitions=2, lag=2)
    assert grow_topics(_clients(broker), {"orders": 3}) == {"orders": 2}
    assert broker.served == 3  # not while the metadata still showed two


def test_a_topic_with_enough_partitions_is_left_alone() -> None:
    broker = LaggingBroker(partitions=3, lag=2)
    assert grow_topics(_clients(broker), {"orders": 3}) == {}
    assert broker.committed == 3


class LaggingConfigs:
    """An admin client whose describe shows a topic's altered config only `lag` answers
    after the controller answered IncrementalAlterConfigs (a broker's metadata behind)."""

    def __init__(self, lag: int) -> None:
        self.shown = {"message.timestamp.type": "CreateTime"}
        self.committed = dict(self.shown)
        self.lag = lag
        self.describes = 0

    def incremental_alter_configs(self, resources: list[Any], request_timeout: float = -1
                                  ) -> dict[Any, Future[Any]]:
        for entry in resources[0].incremental_configs:
            self.committed[entry.name] = entry.value
        done: Future[Any] = Future()
        done.set_result(None)
        return {resources[0]: done}

    def describe_configs(self, resources: list[Any], request_timeout: float = -1
                         ) -> dict[Any, Future[Any]]:
        self.describes += 1
        if self.lag <= 0:
            self.shown = dict(self.committed)
        self.lag -= 1
        answer: Future[Any] = Future()
        answer.set_result({k: SimpleNamespace(value=v) for k, v in self.shown.items()})
        return {resources[0]: answer}


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_config_set_is_read_back_until_the_broker_shows_it() -> None:
    admin, clock = LaggingConfigs(lag=3), FakeClock()
    assert set_topic_config(admin, "lock", {"message.timestamp.type": "LogAppendTime"},
                            clock=clock, sleep=clock.sleep)
    assert admin.describes == 4  # the three stale answers, then the one that shows it
    assert admin.shown["message.timestamp.type"] == "LogAppendTime"


def test_a_config_that_never_shows_is_said_after_the_wait() -> None:
    admin, clock = LaggingConfigs(lag=10**6), FakeClock()
    assert not set_topic_config(admin, "lock", {"message.timestamp.type": "LogAppendTime"},
                                shows_s=5, clock=clock, sleep=clock.sleep)
    assert 5 <= clock.now < 5.5

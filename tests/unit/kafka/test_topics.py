"""Topics drctl grows are used at once (a failback copies gap records into the new
partitions): grow_topics returns only when the broker serves them."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from drctl.kafka.topics import grow_topics


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

"""A stop whose status write Kafka Connect lost (drctl/replication/connect.py
`wait_connector_state`): the connector is stopped and its status still says RUNNING, and
another stop changes nothing; a restart of the connector alone makes the worker write its
status again. Found in a drill under faults: a reprotect's retirement of the reverse
connector failed five runs in a row on "RUNNING, not STOPPED, after 60 s". The lab's test
(tests/lab/test_connect_status.py) shows the same on a real worker; here the timing, on a
fake clock."""

from __future__ import annotations

from typing import ClassVar

import pytest

from drctl.errors import DrctlError
from drctl.kafka.connect_rest import ConnectClient
from drctl.replication.connect import (
    STATUS_REWRITE_AFTER_S,
    STATUS_REWRITE_EVERY_S,
    wait_connector_state,
)
from drctl.retry import RetryPolicy
from tests.unit.support import FakeClock, JsonHandler, http_server


class Worker(JsonHandler):
    """One connector, `rev`, stopped, whose status says `shown` until it is restarted
    (`heals`: whether a restart writes STOPPED, as Connect does, or changes nothing)."""

    shown: ClassVar[str] = "RUNNING"
    heals: ClassVar[bool] = True
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.send_json(200, {"name": "rev", "connector": {"state": Worker.shown}, "tasks": []})

    def do_PUT(self) -> None:
        Worker.requests.append(f"PUT {self.path}")
        self.send_json(204, {})

    def do_POST(self) -> None:
        Worker.requests.append(f"POST {self.path}")
        if Worker.heals:
            Worker.shown = "STOPPED"
        self.send_json(204, {})


@pytest.fixture
def worker() -> type[Worker]:
    Worker.shown, Worker.heals, Worker.requests = "RUNNING", True, []
    return Worker


def _client(url: str) -> ConnectClient:
    return ConnectClient(url, policy=RetryPolicy(initial_s=0.01, deadline_s=10))


def test_a_lost_stopped_status_is_written_again_by_a_restart(worker: type[Worker]) -> None:
    clock, said = FakeClock(), []
    with http_server(worker) as url:
        wait_connector_state(_client(url), "rev", "STOPPED", notify=said.append,
                             clock=clock, sleep=clock.sleep)
    assert worker.requests == ["POST /connectors/rev/restart"]  # the connector alone
    assert STATUS_REWRITE_AFTER_S <= clock.now < STATUS_REWRITE_AFTER_S + 1
    assert len(said) == 1 and "still says RUNNING" in said[0] and "restarting" in said[0]


def test_a_status_already_there_asks_nothing(worker: type[Worker]) -> None:
    worker.shown = "STOPPED"
    clock = FakeClock()
    with http_server(worker) as url:
        wait_connector_state(_client(url), "rev", "STOPPED", clock=clock, sleep=clock.sleep)
    assert worker.requests == [] and clock.now == 0


def test_a_restart_that_does_not_help_is_asked_again_then_the_wait_ends_naming_the_state(
        worker: type[Worker]) -> None:
    worker.heals = False
    clock = FakeClock()
    with http_server(worker) as url, pytest.raises(DrctlError) as err:
        wait_connector_state(_client(url), "rev", "STOPPED", deadline_s=60, clock=clock,
                             sleep=clock.sleep)
    assert "is RUNNING, not STOPPED, after 60 s" in err.value.message
    # At 10 s, then every 15 s: 10, 25, 40, 55.
    expected = 1 + int((60 - STATUS_REWRITE_AFTER_S) // STATUS_REWRITE_EVERY_S)
    assert worker.requests == ["POST /connectors/rev/restart"] * expected


def test_a_running_wanted_is_never_restarted(worker: type[Worker]) -> None:
    worker.shown = "PAUSED"
    clock = FakeClock()
    with http_server(worker) as url, pytest.raises(DrctlError):
        wait_connector_state(_client(url), "rev", "RUNNING", deadline_s=30, clock=clock,
                             sleep=clock.sleep)
    assert worker.requests == []

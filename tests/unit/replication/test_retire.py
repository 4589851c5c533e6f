"""Retiring a connector (drctl/replication/connect.py `retire_connector`) against Kafka
Connect's REST API over HTTP: a DELETE the worker applied but whose answer was lost is done,
not a failure (a reprotect under a broker restart failed on it: its retry met 404)."""

from __future__ import annotations

from typing import ClassVar

import pytest

from drctl.kafka.connect_rest import ConnectClient, ConnectorMissing
from drctl.replication.connect import retire_connector
from drctl.retry import RetryPolicy
from tests.unit.support import JsonHandler, http_server

OFFSETS = {"offsets": [{"partition": {"p": 0}, "offset": {"o": 7}}]}


class Worker(JsonHandler):
    """One connector, `rev`. Its DELETE removes it and then, `lost` times, answers 500 as
    Connect does when its config topic's write outlives the request; a request for a
    connector that is gone answers Connect's own 404 document."""

    exists: ClassVar[bool] = True
    lost: ClassVar[int] = 0
    deletes: ClassVar[int] = 0

    def _missing(self) -> None:
        self.send_json(404, {"error_code": 404, "message": "Connector rev not found"})

    def do_GET(self) -> None:
        if not Worker.exists:
            return self._missing()
        if self.path.endswith("/offsets"):
            return self.send_json(200, OFFSETS)
        return self.send_json(200, {"name": "rev", "connector": {"state": "STOPPED"},
                                  "tasks": []})

    def do_PUT(self) -> None:
        if not Worker.exists:
            return self._missing()
        self.send_json(202, {})

    def do_DELETE(self) -> None:
        Worker.deletes += 1
        if not Worker.exists:
            return self._missing()
        Worker.exists = False
        if Worker.lost:
            Worker.lost -= 1
            return self.send_json(500, {"error_code": 500, "message": "Request timed out"})
        self.send_json(204, {})


@pytest.fixture
def worker() -> type[Worker]:
    Worker.exists, Worker.lost, Worker.deletes = True, 0, 0
    return Worker


def _client(url: str) -> ConnectClient:
    return ConnectClient(url, policy=RetryPolicy(initial_s=0.01, deadline_s=10))


@pytest.mark.parametrize("lost", [0, 1])
def test_a_delete_whose_answer_was_lost_is_a_connector_deleted(worker: type[Worker],
                                                               lost: int) -> None:
    worker.lost = lost
    with http_server(worker) as url:
        done = retire_connector(_client(url), "rev", lambda _m: None)
    assert done == {"connector": "rev", "state": "deleted", "offsets": OFFSETS["offsets"]}
    assert worker.deletes == 1 + lost  # asked again after the 500, and that answer was 404
    assert not worker.exists


def test_a_connector_already_gone_is_absent(worker: type[Worker]) -> None:
    worker.exists = False
    with http_server(worker) as url:
        done = retire_connector(_client(url), "rev", lambda _m: None)
        with pytest.raises(ConnectorMissing):  # the client still says 404 as it is
            _client(url).delete("rev")
    assert done == {"connector": "rev", "state": "absent"}

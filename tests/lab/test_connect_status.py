"""Kafka Connect's status of a connector, as its worker writes it to its status topic: a
write Connect lost (it drops one that fails across its group's rebalance, the Kafka cluster
under it restarting) leaves a stopped connector saying RUNNING, and another stop changes
nothing. Found in a drill under faults (a reprotect's retired reverse connector: five runs
of "RUNNING, not STOPPED, after 60 s"). Here the lost write is made on cue on the lab's real
worker: its last status record written again as RUNNING, as the write before the stop had
left it; drctl's wait restarts the connector alone and the worker writes STOPPED."""

from __future__ import annotations

import json
import time

import pytest

from drctl.errors import DrctlError
from drctl.kafka.records import read_all
from drctl.replication.connect import (
    STATUS_REWRITE_AFTER_S,
    retire_connector,
    wait_connector_state,
)
from tests.conftest import RunningLab
from tests.lab.support import produce

pytestmark = [pytest.mark.lab]
STATUS_TOPIC = "connect-status.internal"  # the lab worker's status.storage.topic


def _last_status(lab: RunningLab, key: bytes) -> dict[str, object]:
    """The last record of `key` in the worker's status topic (the lab keeps Connect's
    internal topics on the secondary)."""
    found: dict[str, object] = {}
    for record in read_all(lab.secondary, STATUS_TOPIC):
        if record.key == key and record.value:
            found = json.loads(record.value)
    return found


def test_a_stop_whose_status_write_was_lost_is_written_again(lab: RunningLab, ns: str) -> None:
    connect = lab.lab.connect_client(lab.state, deadline_s=30)
    source = lab.lab.flow(lab.state).connector_names()["source"]
    name = f"{ns}-stale"
    # A connector that never runs: the lab's source connector's config for a topic no one
    # writes, created stopped (Connect 3.5+).
    config = {**connect.config(source), "name": name, "topics": f"{ns}-nothing"}
    connect.create(name, config, initial_state="STOPPED")
    wait_connector_state(connect, name, "STOPPED")
    key = f"status-connector-{name}".encode()
    written = _last_status(lab, key)
    assert written.get("state") == "STOPPED", written

    # The write lost: the worker's last word on it is the RUNNING it wrote before.
    produce(lab.secondary, STATUS_TOPIC,
            [(0, key, json.dumps({**written, "state": "RUNNING"}).encode())])
    deadline = time.monotonic() + 30
    while connect.connector_state(name)[0] != "RUNNING":
        assert time.monotonic() < deadline, connect.connector_state(name)
        time.sleep(0.2)

    # Another stop changes nothing, and a wait without the restart ends on it: what the
    # drill met.
    connect.stop(name)
    with pytest.raises(DrctlError, match="is RUNNING, not STOPPED"):
        wait_connector_state(connect, name, "STOPPED", deadline_s=STATUS_REWRITE_AFTER_S - 2)

    said: list[str] = []
    done = retire_connector(connect, name, said.append)
    assert done["state"] == "deleted", done
    assert any("restarting the connector alone" in line for line in said), said
    assert name not in connect.connectors()
    # It never copied: no task was ever started for it.
    assert _last_status(lab, f"status-task-{name}-0".encode()) == {}

"""Connector states as Kafka Connect's `GET /connectors/<name>/status` reports them, sorted into
what they mean for a stopped forward flow: confirmed stopped, copying, or copying nothing
without being confirmed stopped (the state a restart of the worker's Kafka leaves)."""

from __future__ import annotations

from typing import Any

import pytest

from drctl.replication.connect import flow_state_of
from drctl.replication.control import ConnectorActivity, ConnectorReading


def status(state: str, *tasks: str) -> dict[str, Any]:
    """The JSON shape of Kafka Connect 4.x's status endpoint."""
    return {"name": "mm2-source", "type": "source",
            "connector": {"state": state, "worker_id": "127.0.0.1:8083"},
            "tasks": [{"id": i, "state": t, "worker_id": "127.0.0.1:8083"}
                      for i, t in enumerate(tasks)]}


@pytest.mark.parametrize("reply,activity,words", [
    (status("STOPPED"), ConnectorActivity.STOPPED, "STOPPED"),
    (status("PAUSED", "PAUSED"), ConnectorActivity.PAUSED, "PAUSED with tasks PAUSED"),
    (status("RUNNING", "RUNNING"), ConnectorActivity.COPYING, "RUNNING with tasks RUNNING"),
    (status("RUNNING", "FAILED", "RUNNING"), ConnectorActivity.COPYING,
     "RUNNING with tasks FAILED, RUNNING"),
    (status("UNASSIGNED", "RESTARTING"), ConnectorActivity.COPYING,
     "UNASSIGNED with tasks RESTARTING"),
    # After the Kafka cluster holding the worker's topics restarts: not stopped, not copying.
    (status("UNASSIGNED"), ConnectorActivity.IDLE, "UNASSIGNED with no tasks"),
    (status("RUNNING"), ConnectorActivity.IDLE, "RUNNING with no tasks"),
    (status("RUNNING", "UNASSIGNED", "FAILED"), ConnectorActivity.IDLE,
     "RUNNING with tasks UNASSIGNED, FAILED"),
    (status("FAILED"), ConnectorActivity.IDLE, "FAILED with no tasks"),
    # Stopped a moment ago: Connect lists the task it is shutting down (it may still copy).
    (status("STOPPED", "RUNNING"), ConnectorActivity.STOPPING, "STOPPED with tasks RUNNING"),
    (status("STOPPED", "UNASSIGNED"), ConnectorActivity.STOPPED, "STOPPED with tasks UNASSIGNED"),
])
def test_status_reply_classified(reply: dict[str, Any], activity: ConnectorActivity,
                                 words: str) -> None:
    reading = ConnectorReading.from_status("mm2-source", reply)
    assert reading.activity is activity
    assert reading.describe() == words
    assert reading.confirmed_stopped == (activity in (ConnectorActivity.STOPPED,
                                                      ConnectorActivity.PAUSED))


def test_status_without_tasks_key_is_a_connector_without_tasks() -> None:
    reading = ConnectorReading.from_status("c", {"connector": {"state": "UNASSIGNED"}})
    assert (reading.tasks, reading.activity) == ((), ConnectorActivity.IDLE)


def test_forward_state_groups_connectors_by_what_they_do() -> None:
    readings = [ConnectorReading.from_status("src", status("UNASSIGNED")),
                ConnectorReading.from_status("cp", status("STOPPED")),
                ConnectorReading.from_status("hb", status("RUNNING", "RUNNING")),
                ConnectorReading("gone", "MISSING", ())]
    state = flow_state_of(readings, restopped=["src"])
    assert state.copying == ("hb",)
    assert state.unconfirmed == ("src",)
    assert not state.confirmed
    assert state.describe(state.unconfirmed) == "src is UNASSIGNED with no tasks"
    assert state.as_dict() == {
        "components": {"src": "UNASSIGNED with no tasks", "cp": "STOPPED",
                       "hb": "RUNNING with tasks RUNNING", "gone": "MISSING"},
        "copying": ["hb"], "unconfirmed": ["src"], "restopped": ["src"]}
    assert "restart the Connect worker" in state.unconfirmed_remedy


def test_a_connector_stopping_counts_as_copying_until_its_tasks_are_down() -> None:
    state = flow_state_of([ConnectorReading.from_status("src", status("STOPPED", "RUNNING")),
                           ConnectorReading.from_status("cp", status("RUNNING", "RUNNING"))])
    assert (state.copying, state.stopping) == (("cp", "src"), ("src",))
    assert not state.confirmed
    assert not ConnectorReading.from_status("src", status("STOPPED", "RUNNING")).stop_held


def test_every_connector_stopped_or_missing_is_confirmed() -> None:
    state = flow_state_of([ConnectorReading.from_status("src", status("STOPPED")),
                              ConnectorReading("gone", "MISSING", ())])
    assert state.confirmed and state.readable
